package executor

import (
	"context"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/internal/mailbox"
	"go.uber.org/zap"
)

// Do runs fn holding key and returns fn's error. Tasks of one key run one
// at a time, in the order their submissions were accepted; tasks of
// different keys run in parallel, within WithWorkers.
//
// fn receives a context derived from ctx, canceled when ctx is and when a
// giving-up Close cancels running tasks. If ctx ends before fn starts, fn
// never runs and Do returns an error satisfying errors.Is(err, ctx.Err()),
// giving the task's place back at once; once fn has started, Do waits for it.
// A panic in fn is recovered and returned as a *PanicError.
//
// When the key is idle and a slot is free, fn runs on the caller's
// goroutine; otherwise the caller waits while a pool worker runs it. A
// rejected submission returns a *backpressure.BusyError (errors.Is ErrBusy).
//
// Called from inside a task with that task's ctx (or one derived from it),
// Do is a nested call: on a key the task holds it returns ErrReentrant (or,
// with WithReentrant, runs fn inline at once), and so it does behind a
// DoMany that waits for a key the task holds; on any other key it lends the
// task's execution slot while it waits, so nesting never deadlocks the
// bounded pool. A nested Do that would wait in a cycle of tasks waiting for
// each other's keys returns ErrDeadlock at once (see "Deadlocks" in the
// package doc).
func (e *Executor[K]) Do(ctx context.Context, key K, fn func(context.Context) error) error {
	return e.doOne(ctx, key, fn, false)
}

// DoShared runs fn holding key in shared mode, like a read lock: shared
// tasks that are next to each other in the key's queue run together, and a
// shared task joins a running shared group when nothing exclusive is queued
// ahead of it. An exclusive task (Do, Submit, DoMany) waits for the shared
// group before it and holds back the shared tasks after it, so neither
// readers nor writers starve. Everything else is as for Do.
func (e *Executor[K]) DoShared(ctx context.Context, key K, fn func(context.Context) error) error {
	return e.doOne(ctx, key, fn, true)
}

func (e *Executor[K]) doOne(ctx context.Context, key K, fn func(context.Context) error, shared bool) error {
	if err := e.check(ctx, fn); err != nil {
		return err
	}
	if err := e.validate(key); err != nil {
		return err
	}
	return e.doValid(ctx, key, fn, shared)
}

// doValid is doOne for a key already validated.
func (e *Executor[K]) doValid(ctx context.Context, key K, fn func(context.Context) error, shared bool) error {
	outer := e.innermost(ctx)
	if outer != nil && e.held(ctx, key) {
		if e.cfg.reentrant {
			return e.inline(ctx, fn, zap.Any("key", key))
		}
		return ErrReentrant
	}
	if !shared && !e.router.Striped() {
		return e.doPlain(ctx, key, fn, outer)
	}
	j := e.syncJob(ctx, fn, key, nil)
	j.turn.Init(j, shared)
	p, err := e.enter(ctx, j, outer, true)
	switch {
	case err != nil:
		e.reuse(j) // never accepted: nothing refers to it
		return err
	case p == ranInline:
		// Nothing else ever saw j (it was in no queue): reuse it even
		// while Close may be giving up, or in striped mode.
		err := j.err
		e.reuse(j)
		return err
	}
	return e.wait(ctx, j, outer, p == queuedLent)
}

// placement is how enter placed an accepted job.
type placement uint8

const (
	// queued: in its key's queue.
	queued placement = iota
	// ranInline: run on the caller's goroutine, and settled; read j.err.
	ranInline
	// queuedLent: queued after waiting for room, with the calling task's slot
	// still lent; the caller unlends once it waits for the job (Do), or once
	// the job is queued (Go, Submit).
	queuedLent
)

// enter admits a single-key job and queues it or, if inline is allowed,
// the key is idle and a slot is free, runs it on the caller's goroutine
// (ranInline): an uncontended Do's fast path, since the caller would block
// anyway. The inline run obeys every rule of a pooled one: it takes a slot
// (its task's own if nested), holds the mailbox as a drive loop would
// (later submissions queue behind it) and goes through Run. An error means
// the job was never accepted.
//
// A nested call that waited for room is admitted with its task's slot
// still lent (queuedLent; see park): the caller unlends only once it has
// made sure the task ends if ctx does (as wait does), or the queued task
// would be deaf to ctx while every slot is busy.
func (e *Executor[K]) enter(ctx context.Context, j *job[K], outer *taskCtx[K], inline bool) (placement, error) {
	m, wait, err := e.admit(ctx, j.ctx.key, j.watched(), outer)
	if err != nil {
		return queued, err
	}
	if inline && !wait && m.CanHold(j.turn.Shared()) {
		if slot := outer.takeSlot(e.runner); slot != noSlot {
			m.Hold(&j.turn)
			e.countAccepted(j)
			m.Release()
			e.runInline(j, outer, slot)
			return ranInline, nil
		}
	}
	return e.queueJob(ctx, j, m, wait, outer)
}

// queueJob queues j, admitted on its key's mailbox m (locked by admit), or
// parks it for room if admit said wait (see waitRoom).
func (e *Executor[K]) queueJob(ctx context.Context, j *job[K], m *mailbox.Mailbox, wait bool, outer *taskCtx[K]) (placement, error) {
	if wait {
		return e.waitRoom(ctx, j, m, outer)
	}
	e.countAccepted(j)
	e.launch(m, m.Enqueue(j.turn.Entry()))
	return queued, nil
}

// admit reserves a submission on key and asks about its key's room: it
// returns key's mailbox locked and whether the submission must wait for
// room (waitRoom), or an error with nothing held. A nested call (outer is
// its task) is also refused when the key's queue waits for a DoMany that
// waits for its task. own is ctx if asynchronous, else nil (reserveTurn).
func (e *Executor[K]) admit(ctx context.Context, key K, own context.Context, outer *taskCtx[K]) (m *mailbox.Mailbox, wait bool, err error) {
	handed, err := e.reserveTurn(ctx, key, false, own)
	if err != nil {
		return nil, false, err
	}
	if handed != nil {
		// Let in from the global waiting room: its transit ends, and the
		// next waiter on key may be let in, once this call is refused or
		// returns with m locked, its place in key's queue decided (see room).
		defer e.room.handOn(handed, e.takeRoom)
	}
	if e.reserved != nil {
		e.reserved(key) // a test's, between the reservation and the lock
	}
	for swept := false; ; swept = true {
		m = e.router.Acquire(key)
		if outer != nil && e.waitsOnCaller(ctx, m) {
			m.Release()
			e.unreserve()
			return nil, false, errWaitsOnCaller
		}
		v, err := e.askKeyHeld(m, key, true)
		if v != backpressure.Admit && !swept && e.sweepReserved(func() bool { return e.capSweep(m) }) {
			continue // tasks whose ctx ended held room: ask again
		}
		if v == backpressure.Reject {
			m.Release()
			e.unreserve()
			return nil, false, e.reject(err)
		}
		if own != nil && !e.batchRelease {
			// m locked, so that sweepAll's walk finds this submission or
			// sees the flag set after its clear.
			if own != background && !e.cancelable.Load() {
				e.cancelable.Store(true)
			}
			e.watchLate(key, own)
		}
		return m, v == backpressure.Wait, nil
	}
}

// launch unlocks m after a task was queued, starts m's drive loop if the
// enqueue said so, then tells the Observer (the task may have started).
func (e *Executor[K]) launch(m *mailbox.Mailbox, dispatch bool) {
	if dispatch {
		e.dispatching.Add(1) // under m's lock: before the task can end
	}
	m.Release()
	if dispatch {
		m.Dispatch()
		e.dispatching.Done()
	}
	e.observeAccepted()
}

// waitRoom parks j, reserved and refused room at its key's cap with a
// waiting policy, in the waiting room of its mailbox m (locked), and waits
// as enter does; outer is the calling task, if enter knows it.
func (e *Executor[K]) waitRoom(ctx context.Context, j *job[K], m *mailbox.Mailbox, outer *taskCtx[K]) (placement, error) {
	if outer == nil {
		outer = e.innermost(ctx) // a Submit passes none
	}
	if outer != nil && e.held(ctx, j.ctx.key) {
		// A nested Submit on a key its task holds: the room it would
		// wait for is given back only once that task ends.
		be := e.keyBusy(m, j.ctx.key)
		m.Release()
		e.unreserve()
		return queued, e.reject(be)
	}
	if j.done == nil {
		j.done = make(chan struct{}, 1) // an asynchronous job's, for park
	}
	m.Park(j.turn.Entry())
	m.Release()
	if lent, err := e.park(ctx, j, m, outer); err != nil || !lent {
		return queued, err
	}
	return queuedLent, nil
}

// runInline runs j, accepted and held inline (see enter), with slot s. Its
// hold, the slot and its reservation are given back in a deferred call, so
// a runtime.Goexit (in fn or a callback) leaves nothing behind: j is
// accounted for by then (see Run; if TaskAccepted exits, j never runs and
// counts as canceled) and left to the GC. Else the caller reads j.err and
// reuses j.
func (e *Executor[K]) runInline(j *job[K], outer *taskCtx[K], s slot) {
	defer func() {
		j.turn.Vacate()
		outer.giveSlot(e.runner, s)
		e.unreserve()
	}()
	if e.obs != nil {
		e.tellAccepted(func() { e.abandon(j, ErrGoexit) })
	}
	j.Run()
}

// inline runs the fn of a nested call on keys its task already holds
// (WithReentrant) at once, on the caller's goroutine. A panic becomes a
// *PanicError logged with the key, so it never unwinds through the calling
// task. The call is part of that task, with no Stats of its own.
func (e *Executor[K]) inline(ctx context.Context, fn func(context.Context) error, key zap.Field) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = e.recovered(v, key)
		}
	}()
	return fn(ctx)
}

// Submit queues fn on key and returns at once; the returned Task reports
// its end (Task.Wait, Task.Done). Ordering and panics are as for Do.
//
// ctx must last until fn starts, not only until Submit returns: if ctx ends
// while the task is queued, fn never runs, the task gives its place back,
// and Wait returns ctx's error. A Wait in progress notices at once; with
// nobody waiting, the executor notices when the task reaches the head of
// its key's queue, or when a cap is reached (a cap first drops the queued
// tasks whose ctx has ended, so they never cause a refusal, and calls that
// wait for room at the key's cap watch the tasks ahead of them), and Stats
// count it as queued until then. A cap holding over 256 tasks drops them at
// most once a millisecond, so that a refusal costs no walk of its queue: a
// ctx that ended within that millisecond may cause a refusal, or a wait,
// until then. Watching ctx costs nothing per task. For
// work a request's handler does not wait for, pass
// context.WithoutCancel(r.Context()): the request's ctx ends when the
// handler returns. Once fn runs, its ctx ends when ctx does.
//
// Submitted from inside a task with the task's ctx, the new task inherits
// the task's marks while that task runs (Wait on it from there returns
// ErrReentrant if it waits on a key the task holds), and it is withdrawn if
// it has not started when the task's fn returns, since that ctx ends then;
// detached work should use a fresh ctx.
func (e *Executor[K]) Submit(ctx context.Context, key K, fn func(context.Context) error) (*Task, error) {
	if err := e.check(ctx, fn); err != nil {
		return nil, err
	}
	if err := e.validate(key); err != nil {
		return nil, err
	}
	return e.submitPlain(ctx, key, fn)
}

// Go queues fn on key and returns at once, like Submit, but gives the caller
// nothing to wait on: fn's error, its panic (a *PanicError) or why it never
// ran goes to the error handler (see WithErrorHandler; by default it is
// logged at error level with the key Go was called with). Admission, caps,
// policies, order and the nesting rules are those of Submit, and so are
// Stats. Use it for work whose outcome the caller would only log.
//
// ctx must last until fn starts, not only until Go returns: if ctx ends
// while the task is queued, the task is withdrawn and fn never runs (the
// error handler hears ctx's error, and Stats count it as canceled). The
// executor notices when the task reaches the head of its key's queue or a
// cap is reached (and at once while a call waits for room at the key's
// cap); until then Stats count it as queued. A request's ctx ends
// when its handler returns, so from an HTTP handler pass
// context.WithoutCancel(r.Context()), which keeps the request's values.
// From inside a task pass a fresh ctx, not the task's, which ends when the
// task's fn returns. Once fn runs, its ctx ends when ctx does.
func (e *Executor[K]) Go(ctx context.Context, key K, fn func(context.Context) error) error {
	if err := e.check(ctx, fn); err != nil {
		return err
	}
	if err := e.validate(key); err != nil {
		return err
	}
	return e.goPlain(ctx, key, fn)
}

// wait blocks until the synchronous job j ends; if ctx ends first and j has
// not started, j is withdrawn at once. It recycles j. A nested call lends
// its task's slot meanwhile, unless it already has (lent, see enter).
func (e *Executor[K]) wait(ctx context.Context, j *job[K], outer *taskCtx[K], lent bool) error {
	var b *blocker[K]
	if outer != nil {
		var err error
		if b, err = e.block(ctx, waitee[K]{t: &j.turn}); err != nil && e.withdraw(j, err, nil, outer, lent) {
			// Withdrawn: the task's keys go to the others of the cycle
			// once its caller returns.
			<-j.done
			outer.unlend(e.runner, lent)
			return err
		}
		// (If it could not be withdrawn, it started meanwhile: it waits
		// for nothing, and neither does this call.)
	}
	if !lent {
		lent = outer.lend(e.runner)
	}
	if done := ctx.Done(); done == nil {
		<-j.done // ctx never ends: a plain receive is cheaper than a select
	} else {
		select {
		case <-j.done:
		case <-done:
			e.withdraw(j, ctx.Err(), b, outer, lent)
			<-j.done
		}
	}
	// No longer waiting for j: unfiled before taking the slot back, which
	// waits only for a worker, never for a task (see deadlock.go).
	e.unblock(b)
	outer.unlend(e.runner, lent)
	err := j.err
	e.recycle(j)
	return err
}

// withdraw cancels j for wait, which is filed as b (nil: not filed) and
// lent its task's slot if lent. If a callback calls runtime.Goexit as j is
// withdrawn, the call is unfiled and the slot taken back as the goroutine
// exits (j settles anyway: see cancel).
//
// The guard is here, not in wait: a deferred call there enlarges the frame
// every waiting Do blocks in, and with a thousand callers waiting
// (BenchmarkReferenceWorkload) their stacks grew (copystack went from 7 %
// to 22 % of the CPU profile) and the workload took 7 % longer.
func (e *Executor[K]) withdraw(j *job[K], err error, b *blocker[K], outer *taskCtx[K], lent bool) bool {
	returned := false
	defer func() {
		if !returned {
			e.unblock(b)
			outer.unlend(e.runner, lent)
		}
	}()
	ok := e.cancel(j, err)
	returned = true
	return ok
}
