package executor

import (
	"context"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/internal/mailbox"
)

// Plain tasks: every Go and Submit is queued as a plain slot of its key's
// mailbox (mailbox.Plain), not as a job, and parks with a Turn only at a
// key's cap (waitPlain). A Submit allocates one plainSub, a waiting Go
// nothing: its ctx is carved as it runs, on the core that reads it (goCtx).
// An ended ctx is noticed lazily ("Lazy cancellation" in admit.go).

func (e *Executor[K]) goPlain(ctx context.Context, key K, fn func(context.Context) error) error {
	m, wait, err := e.admitPlain(ctx, key)
	switch {
	case err != nil:
		return err
	case wait:
		c := newTaskCtx(ctx, key)
		return e.waitPlain(m, fn, c, c)
	}
	// goCtx gives fn's ctx the mailbox's key, which may not be key when
	// striped or when K may hold a float or an interface (+0.0 == -0.0): then
	// make it now, as for a nested Go, whose task's ctx plainArg would take
	// for this task's.
	var arg any // nil, not a nil context.Context: see plainArg
	if _, nested := ctx.(*taskCtx[K]); nested || e.checkKeys || e.router.Striped() {
		c := newTaskCtx(ctx, key)
		arg = c
	} else if ctx != background {
		arg = ctx
	}
	e.queuePlain(m, fn, arg, nil)
	return nil
}

// background is what a caller's ctx is compared with. The comparison reads
// the dynamic types first, so it never calls the == of a caller's ctx type.
var background = context.Background()

// plainArg decodes a plain task's slot arg: a Submit's plainSub, or a Go's
// ctx made as it was queued; nil for a Go whose ctx is made as it runs.
func plainArg[K comparable](arg any) (*taskCtx[K], *Task) {
	switch a := arg.(type) {
	case *plainSub[K]:
		return &a.ctx, &a.task
	case *taskCtx[K]:
		return a, nil
	}
	return nil, nil
}

// plainCaller is the caller's ctx of a plain task (nil: Background).
func plainCaller[K comparable](arg any) context.Context {
	if c, _ := plainArg[K](arg); c != nil {
		return c.caller()
	}
	ctx, _ := arg.(context.Context)
	return ctx
}

// doPlain is an exclusive Do without stripes from inside task outer (nil:
// none) on a key it does not hold. On an idle key with a free slot fn runs
// on the caller's goroutine, holding m with no Turn (it allocates only its
// ctx); else it waits as a job.
func (e *Executor[K]) doPlain(ctx context.Context, key K, fn func(context.Context) error, outer *taskCtx[K]) error {
	var (
		m        *mailbox.Mailbox
		wait     bool
		slot     = noSlot
		reserved = true // false: the slot stands for the reservation (leanSlot)
	)
	if outer == nil && e.leanDo {
		var err error
		if m, slot, err = e.leanSlot(ctx, key); err != nil {
			return err
		}
		reserved = slot == noSlot
	} else {
		var err error
		if m, wait, err = e.admit(ctx, key, nil, outer); err != nil {
			return err
		}
	}
	if slot == noSlot && !wait && m.CanHold(false) {
		slot = outer.takeSlot(e.runner)
	}
	if slot != noSlot {
		c := e.newCtx(m, ctx)
		c.key, c.st = key, unsafe.Pointer(&e.plainCore(m).core)
		m.HoldPlain()
		if slot == ownSlot && e.obs == nil && !e.ages {
			m.Release()
			return e.runLean(m, c, fn, reserved)
		}
		e.submitted.Add(1)
		var at int64
		if e.ages {
			at = monotime() // under m's lock, as stamp does for a job
		}
		m.Release()
		return e.runHeld(m, c, fn, at, outer, slot)
	}
	j := e.syncJob(ctx, fn, key, nil)
	j.turn.Init(j, false)
	p, err := e.queueJob(ctx, j, m, wait, outer)
	if err != nil {
		e.reuse(j) // never accepted: nothing refers to it
		return err
	}
	return e.wait(ctx, j, outer, p == queuedLent)
}

// leanSlot is admit for a Do outside any task when only Close needs a
// reservation (leanDo); it returns key's mailbox locked. On an idle key a
// free slot (ownSlot) stands for it, as Close's drain waits for slots too,
// and closed is read after taking one (as in reserveTurn); else it reserves.
func (e *Executor[K]) leanSlot(ctx context.Context, key K) (*mailbox.Mailbox, slot, error) {
	m := e.router.Acquire(key)
	if m.CanHold(false) && e.runner.TryAcquire() {
		if e.closed.Load() {
			m.Release()
			e.runner.Release() // Released: the drain may be waiting for this slot
			return nil, noSlot, e.reject(ErrClosed)
		}
		return m, ownSlot, nil
	}
	if err := e.reserve(ctx, key); err != nil {
		m.Release()
		return nil, noSlot, err
	}
	return m, noSlot, nil
}

// runHeld runs fn with context c on the caller's goroutine, which holds m
// (HoldPlain) and slot s, and gives them back as runInline does for a job.
func (e *Executor[K]) runHeld(m *mailbox.Mailbox, c *taskCtx[K], fn func(context.Context) error, stamp int64,
	outer *taskCtx[K], s slot) (err error) {
	defer func() {
		m.UnholdPlain()
		outer.giveSlot(e.runner, s)
		e.unreserve()
	}()
	if e.obs != nil {
		e.tellAccepted(func() { e.abandoned(c, nil, false, ErrGoexit) })
	}
	if err = e.startErr(c.caller().Err()); err != nil {
		e.abandoned(c, nil, false, err)
		return err
	}
	n := c.job().counts
	outcome, start, err := e.invoke(c, n, nil, fn, stamp, func(start time.Time) { e.finished(c, n, nil, false, ErrGoexit, Failed, start) })
	e.finished(c, n, nil, false, err, outcome, start)
	return err
}

// runLean is runHeld in one frame for an own slot, no Observer and no ages.
// It counts the task submitted and started at once (held: nothing else can
// start it); leanEnded ends it if fn panics or exits; unholdLean runs last.
func (e *Executor[K]) runLean(m *mailbox.Mailbox, c *taskCtx[K], fn func(context.Context) error, reserved bool) (err error) {
	returned := false
	defer func() {
		defer e.unholdLean(m, reserved)
		if !returned {
			err = e.leanEnded(c, recover())
		}
	}()
	if err = e.startErr(c.caller().Err()); err != nil {
		e.submitted.Add(1)
		returned = true
		e.abandoned(c, nil, false, err)
		return err
	}
	j := (*core[K])(c.st) // the caller's own: nothing else has seen c
	j.fresh()
	e.ranAtOnce.Add(1)
	err = fn(c)
	returned = true
	n := j.counts // before end: the core is m's for good, but c stops reading it
	c.end()
	n.completed.Add(1)
	return err
}

// leanEnded accounts for a lean task whose fn panicked with v or exited (nil
// v), before the logger can exit; for a panic it returns the *PanicError.
func (e *Executor[K]) leanEnded(c *taskCtx[K], v any) error {
	n := c.job().counts
	c.end()
	n.completed.Add(1)
	if v == nil { // a Goexit: see invoke
		return ErrGoexit
	}
	e.panicked.Add(1)
	return e.recovered(v, keyField(c, nil))
}

func (e *Executor[K]) unholdLean(m *mailbox.Mailbox, reserved bool) {
	m.UnholdPlain()
	e.runner.Release()
	if reserved {
		e.unreserve()
	}
}

// plainSub is a plain Submit's one allocation; it keeps no result (see
// Task.fail). at (m's lock) finds it in O(1) (withdrawPlain, plainAhead),
// zero for a Submit let in from the waiting room: a walk finds that one.
type plainSub[K comparable] struct {
	task Task
	ctx  taskCtx[K]
	at   mailbox.Place
}

func newPlainSub[K comparable](ctx context.Context) *plainSub[K] {
	return &plainSub[K]{ctx: taskCtx[K]{parent: ctx}}
}

func plainOf[K comparable](t *Task) *plainSub[K] {
	return outerOf[plainSub[K]](t, unsafe.Offsetof(plainSub[K]{}.task))
}

// plainOps are a plainSub's taskOps, holding e: a queued Submit's ctx has
// no core to reach it by.
func plainOps[K comparable](e *Executor[K]) taskOps {
	return taskOps{
		result: func(t *Task) error { return t.w.Load().err }, // nil for ended
		beforeWait: func(t *Task, ctx context.Context) (func(), error) {
			s := plainOf[K](t)
			return e.checkWait(ctx, &s.ctx, waitee[K]{p: s})
		},
		submitter: func(t *Task) context.Context { return plainOf[K](t).ctx.caller() },
		withdraw:  func(t *Task, _ error) { e.withdrawPlain(plainOf[K](t)) },
	}
}

func (e *Executor[K]) submitPlain(ctx context.Context, key K, fn func(context.Context) error) (*Task, error) {
	s := newPlainSub[K](ctx)
	s.task.ops, s.ctx.key = &e.plainOps, key
	m, wait, err := e.admitPlain(ctx, key)
	switch {
	case err != nil:
		return nil, err
	case wait:
		if err := e.waitPlain(m, fn, &s.ctx, s); err != nil {
			return nil, err
		}
		return &s.task, nil
	}
	e.queuePlain(m, fn, s, &s.at)
	return &s.task, nil
}

// admitPlain is admit for a plain task. Without a global cap (batchRelease) a
// task queued at once takes no reservation, writing no word every submitter
// writes: its shard's counts hold it for Close's drain until its batch ends
// (settled). It reads closed under the shard's lock, which Close's seal takes
// after setting closed: it sees closed, or the drain sees it.
func (e *Executor[K]) admitPlain(ctx context.Context, key K) (m *mailbox.Mailbox, wait bool, err error) {
	if !e.batchRelease {
		return e.admit(ctx, key, ctx, nil)
	}
	if e.closed.Load() {
		return nil, false, e.reject(ErrClosed) // before the Policy is asked
	}
	m = e.router.Acquire(key)
	v, err := e.askKeyHeld(m, key, false)
	if v != backpressure.Admit && e.capSweep(m) {
		m = e.router.Acquire(key) // swept tasks held room (see sweep): ask again
		v, err = e.askKeyHeld(m, key, false)
	}
	switch {
	case v == backpressure.Reject:
		m.Release()
		return nil, false, e.reject(err)
	case e.closed.Load(): // under the lock: see above
		m.Release()
		return nil, false, e.reject(ErrClosed)
	case v == backpressure.Wait:
		e.pending.Add(1) // seen by Close as the task is: under the lock
		return m, true, nil
	}
	return m, false, nil
}

// queuePlain queues fn on m, locked by admitPlain, and unlocks m.
func (e *Executor[K]) queuePlain(m *mailbox.Mailbox, fn func(context.Context) error, arg any, at *mailbox.Place) {
	where, dispatch := m.EnqueuePlain(fn, arg, e.countPlain(m))
	if at != nil {
		*at = where
	}
	e.launch(m, dispatch)
}

// countPlain counts a task entering m's queue (locked); it returns its stamp.
func (e *Executor[K]) countPlain(m *mailbox.Mailbox) (stamp int64) {
	if m.Count().Add(1) == 1 {
		e.shardLocal(m) // the shard's first: Stats and the drain count it from now on
	}
	if e.ages {
		return monotime() // under m's lock, as stamp does for a job
	}
	return 0
}

// waitPlain parks a plain task at m's cap (m locked) and waits for room.
func (e *Executor[K]) waitPlain(m *mailbox.Mailbox, fn func(context.Context) error, c *taskCtx[K], arg any) error {
	p := &parkedPlain[K]{job: job[K]{core: core[K]{e: e, async: true}, fn: fn, ctx: c}, m: m, arg: arg}
	p.turn.Init(p, false)
	ctx := c.caller()
	placed, err := e.waitRoom(ctx, &p.job, m, nil)
	if err == nil && placed == queuedLent {
		e.innermost(ctx).unlend(e.runner, true) // queued: the task may go on
	}
	return err
}

// parkedPlain is a Go or Submit in its key's waiting room, queued as a
// plain slot once let in; its ctx gets its core as it runs (taskCtx.st).
type parkedPlain[K comparable] struct {
	job[K]
	m     *mailbox.Mailbox
	arg   any
	stamp int64 // set by Promote
}

// Promote lets the task in (mailbox.Work), locked, unless closed, counting
// it as queuePlain does. Without a global cap its reservation moves to its
// shard's counts, added there first, so Close's drain always sees it.
func (p *parkedPlain[K]) Promote() bool {
	e := p.e
	if e.closed.Load() {
		return false
	}
	p.stamp = e.countPlain(p.m)
	if e.batchRelease {
		e.pending.Add(-1)
	}
	p.done <- struct{}{}
	return true
}

// Slot is the plain slot the task enters its queue as (mailbox.PlainWork).
func (p *parkedPlain[K]) Slot() (func(context.Context) error, any, int64) {
	return p.fn, p.arg, p.stamp
}

// plainCore returns m's plain core, made on first need (locked) or with
// m's first batch (NewAux): a key whose tasks only wait pays for none.
// Never changed, it is read unlocked by m's plain tasks and doPlain's, each
// ctx only until its task ends. It names only e: m keeps it across keys.
func (e *Executor[K]) plainCore(m *mailbox.Mailbox) *plainCoreOf[K] {
	if a := m.Aux(); a != nil {
		return a.V.(*plainCoreOf[K])
	}
	p := e.newPlainCore(m)
	m.SetAux(&p.aux)
	return p
}

// plainCoreIn is plainCore, unlocked, for a task of m's batch or taken out.
func plainCoreIn[K comparable](m *mailbox.Mailbox) *plainCoreOf[K] {
	return m.Aux().V.(*plainCoreOf[K])
}

// plainCoreOf is a mailbox's plain core. A free block that Submits left
// unused keeps its ended ctxs until the key's next Gos use it up.
type plainCoreOf[K comparable] struct {
	core[K]              // its counts are its shard's
	free    []taskCtx[K] // for the Gos' ctxs: see goCtx
	aux     mailbox.Aux  // what the mailbox keeps: V is this plainCoreOf
	sweptAt atomic.Int64 // monotime of the mailbox's last large sweep at its cap (capSweep)
}

// newPlainCore makes m's plain core (locked), with its shard's counts.
func (e *Executor[K]) newPlainCore(m *mailbox.Mailbox) *plainCoreOf[K] {
	p := &plainCoreOf[K]{core: core[K]{e: e, counts: &e.shardLocal(m).counts.taskCounts}}
	p.aux.V = p
	return p
}

// ctxBlock is how many task contexts newCtx carves out of one allocation.
const ctxBlock = 8

// shardLocal is a router shard's mailboxes' Local, guarded by its lock but
// for the counts the drive loops write (see shardCounts).
type shardLocal[K comparable] struct {
	free   []taskCtx[K]
	counts shardCounts
}

// shardLocal returns m's shard's shardLocal, made on first need (locked).
func (e *Executor[K]) shardLocal(m *mailbox.Mailbox) *shardLocal[K] {
	l := m.Local()
	s, _ := (*l).(*shardLocal[K])
	if s == nil {
		s = &shardLocal[K]{counts: shardCounts{submitted: m.Count()}}
		e.shardsMu.Lock()
		e.shards = append(e.shards, &s.counts)
		e.shardsMu.Unlock()
		*l = s
	}
	return s
}

// newCtx returns a Do's context from m's (locked) shard's block, never reused:
// one that fn keeps speaks for no later task, but keeps its block alive; the
// block being carved keeps ended ones (TestEndedContextsReleased).
func (e *Executor[K]) newCtx(m *mailbox.Mailbox, ctx context.Context) *taskCtx[K] {
	c := carve(&e.shardLocal(m).free, ctxBlock)
	c.parent = ctx
	return c
}

// carve returns the next item of the block *free, made of n when used up,
// and drops the block with its last item, lest an empty slice keep it alive.
func carve[T any](free *[]T, n int) *T {
	if len(*free) == 0 {
		*free = make([]T, n)
	}
	c := &(*free)[0]
	if *free = (*free)[1:]; len(*free) == 0 {
		*free = nil
	}
	return c
}

// plainRunner is the executor as its runner's mailbox.Plain.
type plainRunner[K comparable] Executor[K]

// RunPlain runs a plain task (mailbox.Plain); left: see plainTask.
func (p *plainRunner[K]) RunPlain(m *mailbox.Mailbox, fn func(context.Context) error, arg any, stamp int64, left int) {
	e := (*Executor[K])(p)
	c, t := e.plainTask(m, arg, left)
	e.runPlain(c, t, fn, stamp)
}

// NewAux makes a mailbox's plain core (mailbox.Plain; see plainCore).
func (p *plainRunner[K]) NewAux(m *mailbox.Mailbox) *mailbox.Aux {
	return &(*Executor[K])(p).newPlainCore(m).aux
}

// SettlePlain gives back a plain task's reservation and ends a Submit's
// Task once its place is free (mailbox.Plain), as Settle does: by then
// Stats count its result, and whoever the reservation lets in finds room.
func (p *plainRunner[K]) SettlePlain(arg any) {
	(*Executor[K])(p).releasePlain()
	if _, t := plainArg[K](arg); t != nil {
		t.end()
	}
}

// plainTask returns the ctx, bound to m's plain core, and the Task of the
// plain task queued on m with arg, as it runs (left: its batch's tasks yet
// to run, this one included) or a giving-up Close ends it (left 0).
func (e *Executor[K]) plainTask(m *mailbox.Mailbox, arg any, left int) (*taskCtx[K], *Task) {
	if c, t := plainArg[K](arg); c != nil {
		// Before fn sees the ctx; a Wait on a Submit's Task may be reading it.
		atomic.StorePointer(&c.st, unsafe.Pointer(&plainCoreIn[K](m).core))
		return c, t
	}
	caller := background
	if ctx, ok := arg.(context.Context); ok {
		caller = ctx
	}
	return e.goCtx(m, left, caller), nil
}

// goCtx makes a Go's ctx, with m's key and plain core, carved in a batch
// from the core's free block, sized for the batch's tasks yet to run; one a
// giving-up Close ends (left 0) may run beside a batch, so gets its own.
func (e *Executor[K]) goCtx(m *mailbox.Mailbox, left int, caller context.Context) *taskCtx[K] {
	p := plainCoreIn[K](m)
	var c *taskCtx[K]
	if left > 0 && (len(p.free) > 0 || left > 1) {
		c = carve(&p.free, min(left, ctxBlock))
	} else {
		c = new(taskCtx[K])
	}
	c.parent, c.key, c.st = caller, e.router.KeyOf(m), unsafe.Pointer(&p.core)
	return c
}

// runPlain runs a plain task as job.Run runs a job; a Submit's Task t gets
// fn's error, and a Go's (nil t) failure goes to the error handler.
func (e *Executor[K]) runPlain(c *taskCtx[K], t *Task, fn func(context.Context) error, stamp int64) {
	if err := e.startErr(ctxErr(c.caller())); err != nil {
		e.plainAbandoned(c, t, err)
		return
	}
	outcome, start, err := e.invoke(c, c.job().counts, nil, fn, stamp, func(start time.Time) { e.plainEnded(c, t, ErrGoexit, Failed, start) })
	e.plainEnded(c, t, err, outcome, start)
}

// plainEnded accounts for a plain task (see runPlain) whose fn ended.
func (e *Executor[K]) plainEnded(c *taskCtx[K], t *Task, err error, outcome Outcome, start time.Time) {
	if t != nil {
		t.fail(err) // before the callbacks: one may never return
	}
	e.finished(c, c.job().counts, nil, t == nil, err, outcome, start)
}

// plainAbandoned accounts for a plain task that will never run, because of err.
func (e *Executor[K]) plainAbandoned(c *taskCtx[K], t *Task, err error) {
	if t != nil {
		t.fail(err)
	}
	e.abandoned(c, nil, t == nil, err)
}

// releasePlain is job.release for a plain task.
func (e *Executor[K]) releasePlain() {
	if !e.batchRelease {
		e.unreserve()
	}
}

// takenPlain holds the args of the plain tasks TakePlain took out of m.
type takenPlain struct {
	m  *mailbox.Mailbox
	ps []any
}

// takePlain takes out m's (locked) unstarted plain tasks drop selects, for
// endTaken once m is unlocked.
func (e *Executor[K]) takePlain(m *mailbox.Mailbox, drop func(arg any) bool, out []takenPlain) []takenPlain {
	if ps := m.TakePlain(drop); ps != nil {
		e.plainCore(m) // for their contexts (plainTask, goCtx), made locked
		out = append(out, takenPlain{m, ps})
	}
	return out
}

// ctxEnded reports whether a plain task's ctx has ended (nil never does).
func ctxEnded[K comparable](arg any) bool {
	ctx := plainCaller[K](arg)
	return ctx != nil && ctxErr(ctx) != nil
}

// takeAll is TakePlain's drop for a giving-up Close: every task.
func takeAll(any) bool { return true }

// endTakenAll ends every task taken out (endTaken), each even on a Goexit.
func (e *Executor[K]) endTakenAll(taken []takenPlain, why error) {
	forEach(0, len(taken), func(i int) {
		t := taken[i]
		forEach(0, len(t.ps), func(k int) { e.endTaken(t.m, t.ps[k], why) })
	})
}

// endTaken ends a plain task taken out of m's queue as runPlain would have:
// with why (ErrClosed) or, if why is nil, its ctx's error. Its place,
// reservation and Task go back after the callbacks, even on a Goexit.
func (e *Executor[K]) endTaken(m *mailbox.Mailbox, arg any, why error) {
	defer func() {
		m.DonePlain()
		if e.batchRelease {
			e.settled(m, 0, 1)
		}
		(*plainRunner[K])(e).SettlePlain(arg) // the reservation, without batchRelease
	}()
	c, t := e.plainTask(m, arg, 0)
	if why == nil {
		why = sweptErr(c.caller())
	}
	e.plainAbandoned(c, t, why)
}

// withdrawPlain takes the plain Submit s out of its queue in O(1) (at) once
// a Wait saw its ctx end, and ends it with that error, unless it started or
// its loop claimed it: then it ends as it runs.
func (e *Executor[K]) withdrawPlain(s *plainSub[K]) {
	m := e.router.Find(s.ctx.key) // while s has not ended: see plainAhead
	if m == nil {
		return
	}
	if s.ctx.ended() || !m.TakePlainOf(s, s.at) {
		m.Release()
		return
	}
	e.plainCore(m) // for its context (plainTask), made locked
	m.Release()
	e.endTaken(m, s, nil)
}

// plainAhead reports whether the plain Submit s has not ended (live) and is
// still queued; if so it calls f, m locked, for each multi-key task holding
// m or ahead of s. m cannot retire before a check under its lock sees s end.
func (e *Executor[K]) plainAhead(s *plainSub[K], f func(o *mailbox.Turn)) (live, queued bool) {
	m := e.router.Find(s.ctx.key)
	if m == nil {
		return false, false
	}
	defer m.Release()
	if s.ctx.ended() {
		return false, false
	}
	pos, queued := m.PlainPos(s, s.at)
	if !queued {
		return true, false
	}
	m.EachManyAheadPlain(pos, f)
	return true, true
}
