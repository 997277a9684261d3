package executor

import (
	"context"
	"time"

	"github.com/perkey/perkey/internal/mailbox"
)

// Plain tasks.
//
// A Go or a Submit whose ctx never ends (its Done is nil, as
// context.Background's is) cannot be canceled, and on an executor without
// stripes nothing needs its Turn: it is queued as a plain slot of its key's
// mailbox (see mailbox.Plain), which the mailbox reuses, instead of as a
// job with a queue node of its own. Such a task allocates one object: fn's
// ctx for Go; fn's ctx and the caller's Task together for Submit
// (plainSub). The ctx's core is the mailbox's, which the mailbox's plain
// tasks use one after another (plainCore).
//
// Admission is enter's. A key at its cap under a waiting policy parks the
// task as a job of its own (waitPlain), like any other, since a parked task
// needs a Turn.

// goPlain is Go for a plain task.
func (e *Executor[K]) goPlain(ctx context.Context, key K, fn func(context.Context) error) error {
	c := &taskCtx[K]{parent: ctx, key: key}
	m, wait, err := e.admit(ctx, key, nil)
	switch {
	case err != nil:
		return err
	case wait:
		j := &job[K]{core: core[K]{e: e, unread: true}}
		return e.waitPlain(ctx, m, fn, j, c, j)
	}
	e.queuePlain(m, c, fn, c)
	return nil
}

// plainSub is what a plain Submit allocates, in one object: fn's ctx and
// the caller's Task (96 bytes with a string key).
type plainSub[K comparable] struct {
	ctx  taskCtx[K]
	task Task
	err  error // fn's, or why it never ran; written before the Task ends

	// pos is the task's position in its mailbox's plain ring (see
	// mailbox.PlainTail): a Wait from inside a task finds it there to check
	// the wait for a cycle (plainAhead).
	pos uint32
}

// submitPlain is Submit for a plain task.
func (e *Executor[K]) submitPlain(ctx context.Context, key K, fn func(context.Context) error) (*Task, error) {
	s := &plainSub[K]{ctx: taskCtx[K]{parent: ctx, key: key}}
	s.task.call = s
	m, wait, err := e.admit(ctx, key, nil)
	switch {
	case err != nil:
		return nil, err
	case wait:
		sub := &submission[K]{job: job[K]{core: core[K]{e: e}}}
		sub.task.call = sub
		sub.ctx.parent, sub.ctx.key = ctx, key
		if err := e.waitPlain(ctx, m, fn, &sub.job, &sub.ctx, sub); err != nil {
			return nil, err
		}
		return &sub.task, nil
	}
	s.pos = m.PlainTail()
	e.queuePlain(m, &s.ctx, fn, s)
	return &s.task, nil
}

// queuePlain queues fn, run by p with context c, as a plain task on m
// (locked by admit), and unlocks m.
func (e *Executor[K]) queuePlain(m *mailbox.Mailbox, c *taskCtx[K], fn func(context.Context) error, p mailbox.Plain) {
	c.j = e.plainCore(m)
	e.submitted.Add(1)
	var at int64
	if e.ages {
		at = monotime() // under m's lock, as stamp does for a job
	}
	e.launch(m, m.EnqueuePlain(fn, p, at))
}

// waitPlain parks a plain task that admit sent to the waiting room of m
// (locked) as the asynchronous job j of fn, with context c (nobody's yet)
// and Work w, and waits for room as any Go or Submit does.
func (e *Executor[K]) waitPlain(ctx context.Context, m *mailbox.Mailbox, fn func(context.Context) error,
	j *job[K], c *taskCtx[K], w mailbox.Work) error {
	j.async = true
	e.bind(j, ctx, fn, c)
	j.turn.Init(w, false)
	p, err := e.waitRoom(ctx, j, m, nil)
	if err == nil && p == queuedLent {
		e.innermost(ctx).unlend(e.runner, true) // ctx never ends: nothing to watch first
	}
	return err
}

// plainCore returns the core that the plain tasks of m share, made on the
// first (locked). It stays with the mailbox when it is reused for another
// key: the core names only the executor.
func (e *Executor[K]) plainCore(m *mailbox.Mailbox) *core[K] {
	if c, ok := m.Aux().(*core[K]); ok {
		return c
	}
	c := &core[K]{e: e}
	m.SetAux(c)
	return c
}

// RunPlain runs a plain Go's fn with context c (mailbox.Plain), as
// job.Run runs a job's; it then gives back the task's reservation, since
// no Settle follows a plain task. Its ctx never ends: only a giving-up
// Close keeps it from running.
func (c *taskCtx[K]) RunPlain(fn func(context.Context) error, stamp int64) {
	e := c.j.e
	if e.force.Err() != nil {
		e.abandonedPlain(c, true, ErrClosed)
		return
	}
	start := e.begin(stamp)
	outcome, err := e.invoke(c, nil, fn, func() { e.plainEnded(c, true, ErrGoexit, Failed, start) })
	e.plainEnded(c, true, err, outcome, start)
}

// RunPlain runs a plain Submit's fn (mailbox.Plain), as the Go's does, and
// then ends its Task.
func (s *plainSub[K]) RunPlain(fn func(context.Context) error, stamp int64) {
	c := &s.ctx
	e := c.j.e
	if e.force.Err() != nil {
		s.abandon(ErrClosed)
		return
	}
	start := e.begin(stamp)
	outcome, err := e.invoke(c, nil, fn, func() { s.ended(ErrGoexit, Failed, start) })
	s.ended(err, outcome, start)
}

// ended accounts for a plain Submit whose fn ended with err.
func (s *plainSub[K]) ended(err error, outcome Outcome, start time.Time) {
	s.err = err
	s.ctx.j.e.plainEnded(&s.ctx, false, err, outcome, start)
}

// abandon accounts for a plain Submit that will never run, because of err.
func (s *plainSub[K]) abandon(err error) {
	s.err = err
	s.ctx.j.e.abandonedPlain(&s.ctx, false, err)
}

// SettlePlain ends the Task once the task's place in its mailbox is free
// (mailbox.Plain): by then the result is written, Stats account for it and
// the key has room for the next, as after a job's Settle.
func (s *plainSub[K]) SettlePlain() { s.task.end() }

// SettlePlain does nothing for a plain Go (mailbox.Plain): nobody waits.
func (c *taskCtx[K]) SettlePlain() {}

func (s *plainSub[K]) result() error { return s.err }

// plainEnded accounts for a plain task (with context c) whose fn ended
// with err, and gives back its reservation; unread: a failure goes to the
// error handler (Go).
func (e *Executor[K]) plainEnded(c *taskCtx[K], unread bool, err error, outcome Outcome, start time.Time) {
	e.finished(c, nil, unread, err, outcome, start)
	e.releasePlain()
}

// abandonedPlain accounts for a plain task (with context c) that will
// never run, because of err, and gives back its reservation.
func (e *Executor[K]) abandonedPlain(c *taskCtx[K], unread bool, err error) {
	e.abandoned(c, nil, unread, err)
	e.releasePlain()
}

// releasePlain gives back an ended plain task's reservation, unless the
// drive loop gives back its batch's at once (see job.release).
func (e *Executor[K]) releasePlain() {
	if !e.batchRelease {
		e.unreserve()
	}
}

// endTaken ends a plain task that a giving-up Close took out of its
// mailbox m's queue (mailbox.TakePlain) with ErrClosed, as it would have
// ended when its turn came.
func (e *Executor[K]) endTaken(m *mailbox.Mailbox, p mailbox.Plain) {
	switch p := p.(type) {
	case *taskCtx[K]:
		e.abandoned(p, nil, true, ErrClosed)
	case *plainSub[K]:
		p.err = ErrClosed
		e.abandoned(&p.ctx, nil, false, ErrClosed)
	}
	m.DonePlain()
	e.unreserve()
	p.SettlePlain()
}

// beforeWait implements taskCall's, as a submission's does: a wait from
// inside a task on a plain Submit that has not ended is refused on a key
// the waiting task holds, behind a DoMany that waits for such a key, and
// when it would close a cycle.
func (s *plainSub[K]) beforeWait(ctx context.Context) (func(), error) {
	c := &s.ctx
	if c.ended() {
		return noop, nil
	}
	e := c.j.e // a plain core: it names the executor for good
	outer := e.innermost(ctx)
	if outer == nil {
		return noop, nil
	}
	if e.held(ctx, c.key) {
		return nil, ErrReentrant
	}
	found := false
	e.plainAhead(s, func(o *mailbox.Turn) { found = found || e.needsHeld(ctx, o) })
	if found {
		return nil, errWaitsOnCaller
	}
	b, err := e.block(ctx, waitee[K]{p: s})
	if err != nil {
		return nil, err
	}
	lent := outer.lend(e.runner)
	return func() { e.unblock(b); outer.unlend(e.runner, lent) }, nil
}

// plainAhead finds the plain Submit s in its mailbox: it reports whether s
// has not ended (live) and whether it still waits in the queue (queued);
// if so it calls f, with the mailbox locked, for each multi-key task that
// holds the mailbox or is queued ahead of s (see Turn.EachManyAhead).
//
// While s has not ended, its key's mailbox is the one s is queued in (a
// mailbox with a task pending is never retired). s ends before its
// mailbox can retire, and a check under the mailbox's lock sees that.
func (e *Executor[K]) plainAhead(s *plainSub[K], f func(o *mailbox.Turn)) (live, queued bool) {
	m := e.router.Find(s.ctx.key)
	if m == nil {
		return false, false
	}
	defer m.Release()
	if s.ctx.ended() {
		return false, false
	}
	if !m.PlainQueued(s.pos) {
		return true, false
	}
	m.EachManyAheadPlain(s.pos, f)
	return true, true
}
