package executor

import (
	"context"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/internal/mailbox"
)

// Plain tasks.
//
// Every Go and Submit, whatever its ctx and in striped mode too, is queued
// as a plain slot of its key's mailbox (see mailbox.Plain), which the
// mailbox reuses, not as a job with a queue node: nothing needs its Turn.
// A Submit allocates one object, its ctx and Task (plainSub). A Go queues
// fn and its caller's ctx alone (nothing for context.Background()), and
// its ctx is made as it runs, by the goroutine that runs it, carved from a
// block (goCtx): a waiting Go costs a slot (8 bytes, or 24 with a ctx), no
// allocation of its own, and its ctx is written on the core that reads it.
//
// A plain task whose ctx ends while it waits is noticed lazily (see "Lazy
// cancellation" in admit.go): a sweep takes it out of the ring, even from
// a running batch (mailbox.TakePlain), and ends it (endTaken). At a key's
// cap under a waiting policy it parks with a Turn of its own (waitPlain).

// goPlain is Go for a plain task.
func (e *Executor[K]) goPlain(ctx context.Context, key K, fn func(context.Context) error) error {
	m, wait, err := e.admitPlain(ctx, key)
	switch {
	case err != nil:
		return err
	case wait:
		c := newTaskCtx[K](ctx)
		c.key = key
		return e.waitPlain(m, fn, c, c)
	}
	// fn's ctx is made as the task runs (goCtx), with the mailbox's key, only
	// where that is the key submitted: without stripes (a stripe's mailbox is
	// many keys') and where equal keys are identical (checkNone; +0.0 and
	// -0.0 are equal, and so are interfaces holding them). The slot keeps
	// the caller's ctx (nil for context.Background()), unless it is a task's
	// own, which plainArg would take for the task's (a nested Go).
	var arg any // nil, not a nil context.Context: see plainArg
	if _, nested := ctx.(*taskCtx[K]); nested || e.keyCheck != checkNone || e.router.Striped() {
		c := newTaskCtx[K](ctx)
		c.key = key
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

// plainArg decodes a plain task's slot arg (see mailbox.Plain): a Submit's
// plainSub, or a Go's ctx, made as it was queued. A Go whose ctx is made as
// it runs (goCtx) has none yet: its slot keeps its caller's ctx, or nil for
// context.Background(), which plainCaller reads.
func plainArg[K comparable](arg any) (*taskCtx[K], *Task) {
	switch a := arg.(type) {
	case *plainSub[K]:
		return &a.ctx, &a.task
	case *taskCtx[K]:
		return a, nil
	}
	return nil, nil
}

// plainCaller is the caller's ctx of the plain task queued with arg, nil
// for a Go with context.Background() whose ctx is made as it runs.
func plainCaller[K comparable](arg any) context.Context {
	if c, _ := plainArg[K](arg); c != nil {
		return c.caller()
	}
	ctx, _ := arg.(context.Context)
	return ctx
}

// doPlain is an exclusive Do without stripes from inside the task outer
// (nil: outside any task) on a key it does not hold. If the key is idle and
// a slot is free, fn runs on the caller's goroutine as a plain task: a hold
// with no Turn (HoldPlain), its ctx reading the plain core, so the call
// allocates only that ctx. Otherwise it waits as a job.
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

// leanSlot is admit for a Do from outside any task when only Close needs a
// reservation (leanDo); it returns key's mailbox locked. On an idle key it
// takes a free slot (ownSlot) instead of a reservation: Close's drain waits
// for slots too, and it reads closed after taking the slot, as reserve does
// after counting, so it sees Close or Close sees its slot. Otherwise it
// reserves (with no global cap, that asks nobody) and returns noSlot.
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
// (HoldPlain) and the slot s, as job.Run runs an inline job. The hold, the
// slot and the reservation are given back in a deferred call, so that a
// runtime.Goexit (in fn or a callback) leaves nothing behind: the task is
// accounted for by then (see invoke; if TaskAccepted exits, the task never
// runs and counts as canceled).
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
	if err = c.caller().Err(); err == nil && e.force.Err() != nil {
		err = ErrClosed
	}
	if err != nil {
		e.abandoned(c, nil, false, err)
		return err
	}
	n := c.job().counts
	outcome, start, err := e.invoke(c, n, nil, fn, stamp, func(start time.Time) { e.finished(c, n, nil, false, ErrGoexit, Failed, start) })
	e.finished(c, n, nil, false, err, outcome, start)
	return err
}

// runLean is runHeld in one frame for the common case: a slot of its own,
// no Observer and no ages, so only fn and the logger call back. It counts
// the task submitted and started in one step (held: nothing else can start
// it), once sure it starts. If fn panics or calls runtime.Goexit, leanEnded
// ends the task; either way the hold, the slot and the reservation, if it
// took one (reserved), are given back last.
func (e *Executor[K]) runLean(m *mailbox.Mailbox, c *taskCtx[K], fn func(context.Context) error, reserved bool) (err error) {
	returned := false
	defer func() {
		defer e.unholdLean(m, reserved)
		if !returned {
			err = e.leanEnded(c, recover())
		}
	}()
	if err = c.caller().Err(); err == nil && e.force.Err() != nil {
		err = ErrClosed
	}
	if err != nil {
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

// leanEnded accounts for a lean task whose fn panicked with v or, if v is
// nil, called runtime.Goexit. For a panic it returns the *PanicError, once
// logged; the task is accounted for (as panicked) first, in case the
// logger calls runtime.Goexit.
func (e *Executor[K]) leanEnded(c *taskCtx[K], v any) error {
	n := c.job().counts
	c.end()
	n.completed.Add(1)
	if v == nil { // Since Go 1.21 panic(nil) is a *runtime.PanicNilError
		return ErrGoexit
	}
	e.panicked.Add(1)
	return e.recovered(v, keyField(c, nil))
}

// unholdLean gives back a lean task's key, slot and, if reserved, reservation.
func (e *Executor[K]) unholdLean(m *mailbox.Mailbox, reserved bool) {
	m.UnholdPlain()
	e.runner.Release()
	if reserved {
		e.unreserve()
	}
}

// plainSub is a plain Submit's one allocation: the caller's Task, fn's
// ctx, and where it was queued (64 bytes with a string key). It keeps no
// result (see Task.fail). at finds it in its queue in O(1) (mailbox.Place)
// for a Wait that withdraws it (withdrawPlain) or checks it for a deadlock
// (plainAhead); written and read under its mailbox's lock, it stays zero
// for a Submit let in from its key's waiting room, which is then found by
// a walk of its queue.
type plainSub[K comparable] struct {
	task Task
	ctx  taskCtx[K]
	at   mailbox.Place
}

// newPlainSub makes the plainSub of a Submit with ctx.
func newPlainSub[K comparable](ctx context.Context) *plainSub[K] {
	return &plainSub[K]{ctx: taskCtx[K]{parent: ctx}}
}

// plainOf returns the plainSub whose Task t is.
func plainOf[K comparable](t *Task) *plainSub[K] {
	return outerOf[plainSub[K]](t, unsafe.Offsetof(plainSub[K]{}.task))
}

// plainOps are a plainSub's taskOps, for the executor e. A queued plain
// Submit's ctx names no core yet (it gets its mailbox's as it runs: see
// plainTask), so a Wait reaches e through the ops.
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

// submitPlain is Submit for a plain task.
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

// admitPlain is admit for a plain task: it returns key's mailbox locked,
// and whether the task must wait for room there (waitPlain).
//
// Without a global cap (batchRelease), a task queued at once takes no
// reservation: its shard's counts hold it for Close's drain, from
// queuePlain, under the shard's lock, to its batch's end (settled), so
// it writes no word that every submitter writes. It reads closed under that
// lock, and Close sets closed, then takes every shard's lock (seal) before
// its drain counts: the task sees closed, or the drain sees it.
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
		// Tasks whose ctx ended held room (see sweep): ask again, once.
		m = e.router.Acquire(key)
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

// queuePlain queues fn as a plain task on m (locked by admitPlain), counts
// it submitted in its shard's counts, stores where it was queued in *at
// unless at is nil, and unlocks m. m gets its plain core with its first
// batch (NewAux): a key whose tasks only wait pays for none.
func (e *Executor[K]) queuePlain(m *mailbox.Mailbox, fn func(context.Context) error, arg any, at *mailbox.Place) {
	where, dispatch := m.EnqueuePlain(fn, arg, e.countPlain(m))
	if at != nil {
		*at = where
	}
	e.launch(m, dispatch)
}

// countPlain counts a plain task entering m's queue (locked) in its
// shard's counts, and returns its stamp.
func (e *Executor[K]) countPlain(m *mailbox.Mailbox) (stamp int64) {
	if m.Count().Add(1) == 1 {
		e.shardLocal(m) // the shard's first: Stats and the drain count it from now on
	}
	if e.ages {
		return monotime() // under m's lock, as stamp does for a job
	}
	return 0
}

// waitPlain parks a plain task that admitPlain sent to m's waiting room (m
// locked) and waits for room (waitRoom). A parked task needs a Turn, which
// parkedPlain is; once let in, the task is queued as a plain slot.
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

// parkedPlain is a Go or Submit waiting in its key's waiting room. Its job
// serves only the room: its ctx is not bound to it, and gets its core as
// it runs, as any plain task's (see taskCtx.st).
type parkedPlain[K comparable] struct {
	job[K]
	m     *mailbox.Mailbox
	arg   any
	stamp int64 // set by Promote
}

// Promote lets the task in (mailbox.Work), locked, unless the executor is
// closed, counting it as queuePlain does. Without a global cap its
// reservation moves from pending to its shard's counts (see admitPlain):
// counted there first, so that Close's drain never sees it in neither.
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

// plainCore returns m's plain core, made on first need (locked). m's plain
// tasks and a Do run on its caller's goroutine (doPlain) share it: they
// hold m exclusively, one at a time, and a task's ctx stops reading it as
// the task ends. It names only the executor, so it stays with m when m is
// reused for another key. Made by the time a batch is cut (NewAux) and
// never changed, it is read unlocked as the batch runs (goCtx).
func (e *Executor[K]) plainCore(m *mailbox.Mailbox) *plainCoreOf[K] {
	if a := m.Aux(); a != nil {
		return a.V.(*plainCoreOf[K])
	}
	p := e.newPlainCore(m)
	m.SetAux(&p.aux)
	return p
}

// plainCoreIn returns m's plain core, made by then (see plainCore):
// unlocked, by a task of m's running batch, or by one taken out.
func plainCoreIn[K comparable](m *mailbox.Mailbox) *plainCoreOf[K] {
	return m.Aux().V.(*plainCoreOf[K])
}

// plainCoreOf is a mailbox's plain core with the counts of its router
// shard (or stripe), where its tasks count as started and completed.
//
// free is the block the running batch carves its Gos' ctxs from (goCtx),
// made for at most its tasks yet to run, so a batch of Gos alone uses it
// up. It keeps alive what newCtx's blocks do; a block that plain Submits
// left unused also keeps its ended ctxs until the key's next Gos use it up.
type plainCoreOf[K comparable] struct {
	core[K]              // its counts are its shard's
	free    []taskCtx[K] // for the Gos' ctxs: see goCtx
	aux     mailbox.Aux  // what the mailbox keeps: V is this plainCoreOf
	sweptAt atomic.Int64 // monotime of the mailbox's last large sweep at its cap (capSweep)
}

// newPlainCore makes m's plain core (locked), with the counts of m's
// router shard.
func (e *Executor[K]) newPlainCore(m *mailbox.Mailbox) *plainCoreOf[K] {
	p := &plainCoreOf[K]{core: core[K]{e: e, counts: &e.shardLocal(m).counts.taskCounts}}
	p.aux.V = p
	return p
}

// ctxBlock is how many task contexts newCtx carves out of one allocation.
const ctxBlock = 8

// shardLocal is what the executor keeps per router shard (or stripe), as
// its mailboxes' Local: newCtx's block and the counts of the shard's plain
// tasks. All is written under the shard's lock but the counts the drive
// loops write, on lines of their own (see shardCounts).
type shardLocal[K comparable] struct {
	free   []taskCtx[K]
	counts shardCounts
}

// shardLocal returns m's shard's shardLocal, made on the first need
// (locked), its counts registered for Stats.
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

// newCtx returns a context for a Do of m (locked), carved from a block of
// ctxBlock made for m's router shard (40 bytes each with a string key).
// Each is a task's own, never reused: one that fn keeps
// never speaks for a later task, but keeps its block alive, with the
// others' callers' ctxs; and the block being carved keeps the shard's
// ended contexts until it is used up (TestEndedContextsReleased).
func (e *Executor[K]) newCtx(m *mailbox.Mailbox, ctx context.Context) *taskCtx[K] {
	c := carve(&e.shardLocal(m).free, ctxBlock)
	c.parent = ctx
	return c
}

// carve returns the next item of the block *free, first making a block of
// n if it is used up. It drops the block with its last item: an empty
// slice of it would keep it alive, and the ended contexts carved from it.
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

// plainRunner is the executor as its runner's mailbox.Plain: it runs the
// plain tasks that queuePlain queued, given their args.
type plainRunner[K comparable] Executor[K]

// RunPlain runs a plain task's fn (mailbox.Plain), left tasks of its batch
// yet to run, this one included.
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
// Task once the task's place is free (mailbox.Plain), as a job's Settle
// does: the result is written and Stats account for it by then, and a
// submission that the reservation lets in finds the key's room.
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

// goCtx makes the ctx of a Go queued with its caller's ctx alone (see
// goPlain), with m's key (router.KeyOf) and plain core. In a batch (left:
// its tasks yet to run, this one included) it is carved from the core's
// block (plainCoreOf.free); a Go that a giving-up Close ends (left 0) may
// run beside a batch, so it allocates its own.
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

// runPlain runs a plain task's fn with context c, as job.Run runs a job's
// (SettlePlain follows). A Submit's Task t gets fn's error; for a Go (nil
// t) a failure goes to the error handler. A task whose ctx ended, or that a
// giving-up Close abandoned, is not run and counts as canceled.
func (e *Executor[K]) runPlain(c *taskCtx[K], t *Task, fn func(context.Context) error, stamp int64) {
	err := ctxErr(c.caller())
	if err == nil && e.force.Err() != nil {
		err = ErrClosed
	}
	if err != nil {
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

// releasePlain gives back an ended plain task's reservation, unless the
// drive loop gives back its batch's at once (see job.release).
func (e *Executor[K]) releasePlain() {
	if !e.batchRelease {
		e.unreserve()
	}
}

// takenPlain is what TakePlain took out of one mailbox: the args of the
// plain tasks to end (see plainArg).
type takenPlain struct {
	m  *mailbox.Mailbox
	ps []any
}

// takePlain takes m's (locked) unstarted plain tasks for which drop holds out
// of its queue (mailbox.TakePlain), for endTaken to end once m is unlocked.
func (e *Executor[K]) takePlain(m *mailbox.Mailbox, drop func(arg any) bool, out []takenPlain) []takenPlain {
	if ps := m.TakePlain(drop); ps != nil {
		e.plainCore(m) // for their contexts (plainTask, goCtx), made locked
		out = append(out, takenPlain{m, ps})
	}
	return out
}

// ctxEnded reports whether the ctx of the plain task queued with arg (see
// plainArg) has ended; a Go with context.Background() has none to end.
func ctxEnded[K comparable](arg any) bool {
	ctx := plainCaller[K](arg)
	return ctx != nil && ctxErr(ctx) != nil
}

// takeAll is TakePlain's drop for a giving-up Close: every task.
func takeAll(any) bool { return true }

// endTakenAll ends every plain task taken out (see endTaken), each even
// if a callback calls runtime.Goexit while an earlier one ends.
func (e *Executor[K]) endTakenAll(taken []takenPlain, why error) {
	forEach(0, len(taken), func(i int) {
		t := taken[i]
		forEach(0, len(t.ps), func(k int) { e.endTaken(t.m, t.ps[k], why) })
	})
}

// endTaken ends a plain task taken out of m's queue (mailbox.TakePlain) as
// runPlain would have when its turn came: with why (ErrClosed) or, if why
// is nil, its ctx's error. Its place, its reservation and its Task are
// given back after the callbacks, even if one calls runtime.Goexit.
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

// withdrawPlain takes the plain Submit s out of its queue once a Wait saw
// its ctx end (see Task.Wait), and ends it with its ctx's error, unless it
// has started or the drive loop has claimed it: then it ends as it runs,
// or as it starts. It finds s where it was queued (plainSub.at), so it
// costs the same behind 10 queued tasks as behind 10,000; other tasks
// whose ctx ended are left to the lazy rules (see "Lazy cancellation").
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

// plainAhead reports whether the plain Submit s has not ended (live) and
// still waits in its queue (queued); if so it calls f, with the mailbox
// locked, for each multi-key task holding the mailbox or queued ahead of s
// (see Turn.EachManyAhead). While s has not ended its key's mailbox is the
// one it is queued in (a mailbox with a task pending never retires), and a
// check under the mailbox's lock sees s end before its mailbox can retire.
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
