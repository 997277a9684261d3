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
// Every Go and Submit is a plain task, whatever its ctx and in striped
// mode too: nothing needs its Turn, so it is queued as a plain
// slot of its key's mailbox (see mailbox.Plain), which the mailbox reuses,
// instead of as a job with a queue node of its own. Such a task allocates
// one object. For a Submit it is fn's ctx and the caller's Task together
// (plainSub), made by the caller, who keeps the Task. For a Go it is fn's
// ctx alone (a taskCtx). A Go whose ctx is context.Background() itself,
// the common plain Go, queues nothing but fn (its slot's arg is nil: see
// plainArg), and its ctx is made only as the task runs, by the goroutine
// that runs it (plainRunner), the key being the mailbox's: a waiting Go
// then costs no ctx and an 8-byte slot, one pointer for the collector to
// scan, and the ctx's memory is written on the core that reads it, rather
// than by the caller for a worker on another core to fetch. A Go with any
// other ctx has its ctx made by the caller, with a home for the caller's
// ctx (newTaskCtx). Either way the ctx's core is the mailbox's, which the
// mailbox's plain tasks use one after another (plainCore).
//
// A plain task whose ctx ends while it waits is noticed lazily, as any
// queued task's (see "Lazy cancellation" in admit.go): as it would start
// (runPlain), by a sweep at a cap, or by a Wait on its Task, which sweeps
// its key (withdrawPlain); the sweep takes it out of the ring with
// mailbox.TakePlain, even from a running batch, and ends it (endTaken).
//
// Admission is admitPlain's. A key at its cap under a waiting policy parks
// the task with a Turn of its own (waitPlain), since a parked task needs
// one; when it gets room it enters the queue as a plain slot all the same.

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
	// With context.Background() the ctx is made as the task runs (goCtx),
	// with the mailbox's key: only for a key type whose equal keys are
	// identical (checkNone), and without stripes. Equal keys of other types
	// may still differ (+0.0 and -0.0, interfaces holding them), a stripe's
	// mailbox is many keys', and a task reports the key it was submitted
	// with, so their ctx is made here.
	var arg any // nil, not a nil *taskCtx: see plainArg
	if ctx != background || e.keyCheck != checkNone || e.router.Striped() {
		c := newTaskCtx[K](ctx)
		c.key = key
		arg = c
	}
	e.queuePlain(m, fn, arg)
	return nil
}

// background is what a plain Go's ctx is compared with: one equal to it
// queues no ctx (see plainArg). The comparison reads the dynamic types
// first, so it never calls the == of a caller's ctx type.
var background = context.Background()

// plainArg decodes a plain task's arg, as its mailbox slot keeps it (see
// mailbox.Plain): a Submit's is its *plainSub, whose Task it returns with
// its ctx; a Go's its *taskCtx (made by the caller), with no Task; a Go
// whose ctx is context.Background() has none (nil, nil: its ctx is made
// as it runs, see goCtx).
func plainArg[K comparable](arg any) (*taskCtx[K], *Task) {
	switch a := arg.(type) {
	case *plainSub[K]:
		return &a.ctx, &a.task
	case *taskCtx[K]:
		return a, nil
	}
	return nil, nil
}

// doPlain is an exclusive Do on an executor without stripes, made from
// inside the task outer (nil: from outside any task) on a key it does not
// hold. If the key is idle and a slot is free (for a nested call, its
// task's own, lent: see enter), fn runs on the caller's goroutine as a
// plain task: its hold has no Turn (HoldPlain), and fn's ctx reads the
// mailbox's plain core, which the key's exclusive tasks use one after
// another, so the call takes no job and allocates only that ctx. Otherwise
// the call waits as a job, as any Do does.
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

// leanSlot is admit for a Do made outside any task on an executor where
// nothing but Close needs a reservation (leanDo: no global cap, no
// Observer, no ages, no question to the Policy about the key). It returns
// key's mailbox locked. If the key is idle and a slot is free, it takes
// the slot (ownSlot) and no reservation: the slot stands for one, since
// Close's drain waits for every slot as well as every reservation
// (drainIfDone), and it checks closed after taking the slot, as reserve
// does after counting, so either it sees Close or Close sees its slot.
// Otherwise it reserves, as admit would have first (without a global cap
// that reads nothing m's lock guards, and asks nobody), and returns noSlot.
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
// (HoldPlain) and the execution slot s that outer.takeSlot gave it, for an
// accepted task that the Observer has not heard of yet, as job.Run runs an
// inline job: a task whose ctx ended, or that a giving-up Close abandoned,
// is not run and is accounted as canceled. The hold, the slot and the
// reservation are given back in a deferred call, so that a runtime.Goexit
// (in fn or in a callback) leaves nothing behind either: the task is
// accounted for by then (see invoke; if TaskAccepted exits, the task never
// runs and is accounted as canceled), and the caller's goroutine exits, as
// Goexit requires.
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
	n := plainCounts(c.job())
	outcome, start, err := e.invoke(c, n, nil, fn, stamp, func(start time.Time) { e.finished(c, n, nil, false, ErrGoexit, Failed, start) })
	e.finished(c, n, nil, false, err, outcome, start)
	return err
}

// runLean is runHeld for the common case, in one frame: a hold that took
// a slot of its own, on an executor with no Observer and no ages, so that
// nothing but fn and the logger can call back. It counts the task as
// submitted and started in one step (held: nothing else can start it), and
// only once it is sure to start: a task whose ctx ended, or that a
// giving-up Close abandoned, after it was admitted is accounted as
// canceled. A panic in fn becomes a *PanicError, logged with the key; a
// runtime.Goexit in fn, or in the logger reporting its panic, ends the task
// as ErrGoexit. Either way the hold, the slot and the reservation, if it
// took one (reserved; see leanSlot), are given back, last.
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
	n := plainCounts(j) // before end: the core is m's for good, but c stops reading it
	c.end()
	n.completed.Add(1)
	return err
}

// leanEnded accounts for a lean task (runLean) that did not return: fn
// panicked with v, or (v == nil) called runtime.Goexit. For a panic it
// returns the *PanicError, once logged; if the logger exits instead, the
// task has been accounted for (as panicked) before it is called.
func (e *Executor[K]) leanEnded(c *taskCtx[K], v any) error {
	n := plainCounts(c.job())
	c.end()
	n.completed.Add(1)
	if v == nil { // Since Go 1.21 panic(nil) is a *runtime.PanicNilError
		return ErrGoexit
	}
	e.panicked.Add(1)
	return e.recovered(v, keyField(c, nil))
}

// unholdLean gives back what a lean task held: its key, its slot and, if
// reserved, its reservation.
func (e *Executor[K]) unholdLean(m *mailbox.Mailbox, reserved bool) {
	m.UnholdPlain()
	e.runner.Release()
	if reserved {
		e.unreserve()
	}
}

// plainSub is what a plain Submit allocates, in one object: the caller's
// Task and fn's ctx (48 bytes with a string key and context.Background();
// with another ctx, 64, in a plainSubHome); a plain Go with a ctx of its
// own allocates only the ctx (see plainArg). It keeps no result: fn's
// error, or why it never ran, goes to the Task's waiters (Task.fail), made
// only for a task that fails. A Wait from inside a task finds a queued
// plainSub in its mailbox's queue by its address (see plainAhead), so it
// keeps no position of its own.
type plainSub[K comparable] struct {
	task Task
	ctx  taskCtx[K]
}

// plainSubHome is a plainSub with a home for its caller's ctx (setCaller),
// for a ctx other than context.Background().
type plainSubHome[K comparable] struct {
	plainSub[K] // first: a *plainSub is its plainSubHome's address
	caller      context.Context
}

// newPlainSub makes the plainSub of a Submit with ctx.
func newPlainSub[K comparable](ctx context.Context) *plainSub[K] {
	if ctx == background {
		return &plainSub[K]{ctx: taskCtx[K]{parent: &background}}
	}
	h := new(plainSubHome[K])
	h.ctx.setCaller(ctx, &h.caller)
	return &h.plainSub
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
	e.queuePlain(m, fn, s)
	return &s.task, nil
}

// admitPlain is admit for a plain task: it returns key's mailbox locked,
// and whether the task must wait for room there (as a job: see waitPlain).
//
// On an executor with a global cap it is admit. Without one
// (batchRelease), a task that is queued at once takes no reservation of
// its own: its shard's counts hold it for Close's drain, from when
// queuePlain counts it submitted, under the shard's lock, until its
// batch gives back its batch's at once (settlePlain); nothing that every
// submitter writes is touched. This is sound because the task reads
// closed under the same lock: Close sets closed, then takes every shard's
// lock once (seal) before its drain counts anything, so either the task
// sees closed, or Close's drain sees it submitted. A task that waits for
// room is a job, and reserves as any does.
func (e *Executor[K]) admitPlain(ctx context.Context, key K) (m *mailbox.Mailbox, wait bool, err error) {
	if !e.batchRelease {
		return e.admit(ctx, key, ctx, nil)
	}
	if e.closed.Load() {
		return nil, false, e.reject(ErrClosed) // before the Policy is asked
	}
	m = e.router.Acquire(key)
	v, err := e.askKeyHeld(m, key, false)
	if v != backpressure.Admit && e.sweep(m) {
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

// queuePlain queues fn as a plain task on m (locked by admitPlain), with
// arg for plainRunner (see plainArg), and unlocks m. The task is counted
// submitted in its shard's counts (see admitPlain). The task's ctx gets
// the mailbox's plain core as it runs (plainTask), and the mailbox gets
// its core with its first batch (NewAux), so that a key with a task
// waiting does not pay for one.
func (e *Executor[K]) queuePlain(m *mailbox.Mailbox, fn func(context.Context) error, arg any) {
	e.launch(m, m.EnqueuePlain(fn, arg, e.countPlain(m)))
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

// waitPlain parks a plain task of fn, with context c and arg for
// plainRunner, that admitPlain sent to the waiting room of m (locked), and
// waits for room as any submission does (waitRoom). A parked task needs a
// Turn: a parkedPlain is that Turn, and nothing more once it has room,
// where it enters the queue as a plain slot.
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
// is only for the room: c is the plain task's, and is not bound to it (it
// gets its core as it runs, as any plain task's; see taskCtx.st).
type parkedPlain[K comparable] struct {
	job[K]
	m     *mailbox.Mailbox
	arg   any
	stamp int64 // set by Promote
}

// Promote lets the task in (mailbox.Work), locked, unless the executor is
// closed: it is counted as a plain task queued by queuePlain is. Without a
// global cap, its reservation moves from pending to its shard's counts,
// which hold a queued plain task's (see admitPlain): counted there first,
// so that Close's drain never sees it in neither.
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

// plainCore returns the core that the plain tasks of m share, made on the
// first need (locked): the queued ones, and a Do run on its caller's
// goroutine (doPlain). They hold m exclusively, so they run one at a time,
// and each task's ctx stops reading the core once the task ends. The core
// stays with the mailbox when it is reused for another key: it names only
// the executor. A queued task reads it unlocked as it runs (goCtx): it was
// made at the latest as its batch was cut (NewAux), and is never changed.
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
// free is the block that the contexts of the mailbox's plain Gos are
// carved from as they run (goCtx), instead of one allocation per task;
// only the batch running on the mailbox uses it, one task at a time. A
// block is made for at most the batch's tasks yet to run, so a batch of
// Gos alone uses it up by its end. Each context is still a task's own,
// never reused; the cost is in what a block keeps, as for newCtx: a
// context that fn keeps keeps the others of its block, and what they refer
// to (their callers' contexts), until it is dropped; and a block that
// plain Submits in the batch left unused keeps the ended contexts carved
// from it until the key's next Gos use it up, or the mailbox is dropped.
type plainCoreOf[K comparable] struct {
	core[K] // first: a plain core's *core[K] is its plainCoreOf's address
	counts  *shardCounts
	free    []taskCtx[K] // for context.Background(): see setCaller
	aux     mailbox.Aux  // what the mailbox keeps: V is this plainCoreOf
}

// newPlainCore makes m's plain core (locked), with the counts of m's
// router shard.
func (e *Executor[K]) newPlainCore(m *mailbox.Mailbox) *plainCoreOf[K] {
	p := &plainCoreOf[K]{core: core[K]{e: e}, counts: &e.shardLocal(m).counts}
	p.aux.V = p
	return p
}

// plainCounts returns the started and completed counts of a plain core, j
// (a mailbox's Aux): its shard's.
func plainCounts[K comparable](j *core[K]) *taskCounts {
	return &(*plainCoreOf[K])(unsafe.Pointer(j)).counts.taskCounts
}

// ctxBlock is how many task contexts newCtx carves out of one allocation.
const ctxBlock = 8

// shardLocal is what the executor keeps per router shard (or stripe), as
// its mailboxes' Local: the block that newCtx is carving task contexts
// from, and the counts of the shard's plain tasks. Both are written under
// the shard's lock, but for the counts the drive loops write, on lines of
// their own (see shardCounts), and submitted, which the shard keeps
// beside its lock.
type shardLocal[K comparable] struct {
	free   []ctxHome[K]
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

// newCtx returns a context for a Do of m (locked) with the caller's ctx:
// one of a block of ctxBlock, made for the tasks of m's router shard,
// instead of one allocation per task, each with a home for its caller's
// ctx (48 bytes with a string key). One kind of block for every ctx keeps
// the bound below: the shard's next Dos use the block up whatever their
// ctxs. Each context is still a task's own, never reused,
// so one that fn keeps never speaks for a later task. The cost is in what
// a block keeps: a context that fn keeps keeps the up to ctxBlock-1 others
// of its block, and what they refer to (their callers' contexts), until it
// is dropped; and the block being carved keeps those of the shard's tasks
// that have ended, until it is used up (TestEndedContextsReleased).
func (e *Executor[K]) newCtx(m *mailbox.Mailbox, ctx context.Context) *taskCtx[K] {
	h := carve(&e.shardLocal(m).free, ctxBlock)
	h.c.setCaller(ctx, &h.caller)
	return &h.c
}

// carve returns the next context (or ctxHome) of the block *free, first
// making a block of n if it is used up. Once the last one is taken it
// drops the block: an empty slice of it would still keep it, and with it
// the ended contexts carved from it.
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

// RanPlain gives back the reservations of a plain batch's n tasks on m
// (mailbox.Plain), if its shard holds them (see admitPlain); with a global
// cap each gave back its own as it ended (releasePlain).
func (p *plainRunner[K]) RanPlain(m *mailbox.Mailbox, n int) {
	if e := (*Executor[K])(p); e.batchRelease {
		e.settlePlain(m, n)
	}
}

// NewAux makes a mailbox's plain core (mailbox.Plain; see plainCore).
func (p *plainRunner[K]) NewAux(m *mailbox.Mailbox) *mailbox.Aux {
	return &(*Executor[K])(p).newPlainCore(m).aux
}

// SettlePlain gives back a plain task's reservation and ends a plain
// Submit's Task once the task's place in its mailbox is free
// (mailbox.Plain), as a job's Settle does: by then the result is written,
// Stats account for it and the key has room for the next, so that a
// submission let in by the reservation finds that room.
func (p *plainRunner[K]) SettlePlain(arg any) {
	(*Executor[K])(p).releasePlain()
	if _, t := plainArg[K](arg); t != nil {
		t.end()
	}
}

// plainTask returns the ctx and the Task of the plain task that
// queuePlain queued on m with arg, as it runs (left tasks of its batch yet
// to run, this one included) or a giving-up Close ends it (left 0): a
// Submit's are in its plainSub, whose ctx gets m's plain core now; a Go
// has no Task, and its ctx, unless its caller made it, is made now
// (goCtx). Either way m has its core by then (see goCtx).
func (e *Executor[K]) plainTask(m *mailbox.Mailbox, arg any, left int) (*taskCtx[K], *Task) {
	if c, t := plainArg[K](arg); c != nil {
		// Before fn sees the ctx; a Wait on a Submit's Task may be reading it.
		atomic.StorePointer(&c.st, unsafe.Pointer(&plainCoreIn[K](m).core))
		return c, t
	}
	return e.goCtx(m, left), nil
}

// goCtx makes the ctx of a plain Go queued on m with none of its own (its
// caller's ctx was context.Background(): see plainArg): the key is m's
// (router.KeyOf), and the core m's plain core (made by the time its
// batch, or giveUp, reads it). A Go run in a batch, with
// left of the batch's tasks yet to run (this one included), takes its ctx
// from the block its core keeps (see plainCoreOf.free), and makes a block
// of up to ctxBlock when that is used up. One that a giving-up Close ends
// (left 0) may run beside a batch, so it allocates its own.
func (e *Executor[K]) goCtx(m *mailbox.Mailbox, left int) *taskCtx[K] {
	p := plainCoreIn[K](m)
	var c *taskCtx[K]
	if left > 0 && (len(p.free) > 0 || left > 1) {
		c = carve(&p.free, min(left, ctxBlock))
	} else {
		c = new(taskCtx[K])
	}
	c.parent, c.key, c.st = &background, e.router.KeyOf(m), unsafe.Pointer(&p.core)
	return c
}

// runPlain runs a plain task's fn with context c, as job.Run runs a job's
// (SettlePlain follows, once its place is free). The Task t (a Submit's)
// receives fn's error; if it is nil (a Go's), a failure goes to the error
// handler. A task whose ctx ended while it waited, or that a giving-up
// Close abandoned, is not run: it is accounted as canceled, and the key's
// next task goes on at once.
func (e *Executor[K]) runPlain(c *taskCtx[K], t *Task, fn func(context.Context) error, stamp int64) {
	err := c.caller().Err()
	if err == nil && e.force.Err() != nil {
		err = ErrClosed
	}
	if err != nil {
		e.plainAbandoned(c, t, err)
		return
	}
	outcome, start, err := e.invoke(c, plainCounts(c.job()), nil, fn, stamp, func(start time.Time) { e.plainEnded(c, t, ErrGoexit, Failed, start) })
	e.plainEnded(c, t, err, outcome, start)
}

// plainEnded accounts for a plain task (with context c, and Task t as for
// runPlain) whose fn ended with err.
func (e *Executor[K]) plainEnded(c *taskCtx[K], t *Task, err error, outcome Outcome, start time.Time) {
	if t != nil {
		t.fail(err) // before the callbacks: one may never return
	}
	e.finished(c, plainCounts(c.job()), nil, t == nil, err, outcome, start)
}

// plainAbandoned accounts for a plain task (with context c, and Task t as
// for runPlain) that will never run, because of err.
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

// takePlain takes out of m's queue (locked) its plain tasks that have not
// started and for which drop holds (mailbox.TakePlain), and appends them
// to out, for endTaken to end once m is unlocked.
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
	c, _ := plainArg[K](arg)
	return c != nil && c.caller().Err() != nil
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

// endTaken ends a plain task, queued with arg, that was taken out of its
// mailbox m's queue (mailbox.TakePlain) as it would have ended when its
// turn came (runPlain): with why (ErrClosed, for a giving-up Close), or
// if why is nil with its ctx's error. Its place, its reservation and its
// Task are given back after the callbacks, even if one calls
// runtime.Goexit.
func (e *Executor[K]) endTaken(m *mailbox.Mailbox, arg any, why error) {
	defer func() {
		m.DonePlain()
		if e.batchRelease {
			e.settlePlain(m, 1)
		}
		(*plainRunner[K])(e).SettlePlain(arg) // the reservation, without batchRelease
	}()
	c, t := e.plainTask(m, arg, 0)
	if why == nil {
		why = c.caller().Err()
	}
	e.plainAbandoned(c, t, why)
}

// withdrawPlain takes the plain Submit s out of its key's queue, if it
// has not started, once a Wait on it saw its ctx end (see Task.Wait): it
// sweeps s's mailbox, which ends s and every other task there whose ctx
// has ended. If s has started, or is about to (the drive loop has claimed
// it), it is left alone: it ends as it runs, or as it starts (runPlain).
func (e *Executor[K]) withdrawPlain(s *plainSub[K]) {
	m := e.router.Find(s.ctx.key) // while s has not ended: see plainAhead
	if m == nil {
		return
	}
	if s.ctx.ended() || !e.sweep(m) {
		m.Release()
	}
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
	pos, queued := m.PlainPos(s)
	if !queued {
		return true, false
	}
	m.EachManyAheadPlain(pos, f)
	return true, true
}
