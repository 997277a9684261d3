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
// fn's context derives from ctx and is also canceled by a giving-up Close.
// If ctx ends before fn starts, fn never runs, its place is given back at
// once and Do returns an error satisfying errors.Is(err, ctx.Err()); once
// fn has started, Do waits for it. A panic in fn is recovered and returned
// as a *PanicError. On an idle key with a free slot fn runs on the caller's
// goroutine, else on a pool worker. A rejected submission returns a
// *backpressure.BusyError (errors.Is ErrBusy).
//
// Called with a task's ctx (or one derived from it), Do is a nested call.
// On a key the task holds, or behind a DoMany waiting for one, it returns
// ErrReentrant (on a held key with WithReentrant, it runs fn inline at
// once). On another key it lends the task's execution slot while it waits,
// so nesting never deadlocks the bounded pool, and it returns ErrDeadlock
// at once if it would wait in a cycle of tasks waiting for each other's
// keys (see "Deadlocks" in the package doc).
func (e *Executor[K]) Do(ctx context.Context, key K, fn func(context.Context) error) error {
	return e.doOne(ctx, key, fn, false)
}

// DoShared runs fn holding key in shared mode, like a read lock: adjacent
// shared tasks in the key's queue run together, and a shared task joins a
// running shared group if nothing exclusive is queued ahead. An exclusive
// task (Do, Submit, DoMany) waits for the group before it and holds back
// the shared ones after it, so neither side starves. Otherwise as for Do.
func (e *Executor[K]) DoShared(ctx context.Context, key K, fn func(context.Context) error) error {
	return e.doOne(ctx, key, fn, true)
}

func (e *Executor[K]) doOne(ctx context.Context, key K, fn func(context.Context) error, shared bool) error {
	if err := e.checkOne(ctx, key, fn); err != nil {
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
		err := j.err
		e.reuse(j) // in no queue, j was seen by nothing: even if striped or closing
		return err
	}
	return e.wait(ctx, j, outer, p == queuedLent)
}

// placement is how enter placed an accepted job.
type placement uint8

const (
	queued     placement = iota // in its key's queue
	ranInline                   // run on the caller's goroutine and settled: read j.err
	queuedLent                  // queued, the calling task's slot still lent (see enter)
)

// enter admits a single-key job and queues it or, if inline is allowed, the key
// idle and a slot free, runs it on the caller's goroutine (blocked anyway) as a
// worker would, in a slot (its task's own if nested). An error means it was not
// accepted. A nested call that waited for room keeps its task's slot lent
// (queuedLent) until the task will end if ctx does (Do: as it waits; Go,
// Submit: once queued): while every slot is busy it would be deaf to ctx.
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

// queueJob queues j on m (locked by admit), or parks it if admit said wait.
func (e *Executor[K]) queueJob(ctx context.Context, j *job[K], m *mailbox.Mailbox, wait bool, outer *taskCtx[K]) (placement, error) {
	if wait {
		return e.waitRoom(ctx, j, m, outer)
	}
	e.countAccepted(j)
	e.launch(m, m.Enqueue(j.turn.Entry()))
	return queued, nil
}

// admit reserves a submission on key and asks about the key's room: it
// returns key's mailbox locked and whether to wait, or an error with nothing
// held; a nested call is also refused behind a DoMany waiting for its task.
func (e *Executor[K]) admit(ctx context.Context, key K, own context.Context, outer *taskCtx[K]) (m *mailbox.Mailbox, wait bool, err error) {
	handed, err := e.reserveTurn(ctx, key, false, own)
	if err != nil {
		return nil, false, err
	}
	if handed != nil {
		// Let in from the global room: its transit ends, letting key's next
		// waiter in, once this call is refused or holds m (see room).
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
		if own != nil && !e.batchRelease { // m locked: see sweepAll
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

// waitRoom parks j, refused room at its key's cap by a waiting policy, in
// m's (locked) waiting room and waits (park); outer: if enter knows it.
func (e *Executor[K]) waitRoom(ctx context.Context, j *job[K], m *mailbox.Mailbox, outer *taskCtx[K]) (placement, error) {
	if outer == nil {
		outer = e.innermost(ctx) // a Submit passes none
	}
	if outer != nil && e.held(ctx, j.ctx.key) {
		// A nested Submit on a key its task holds would wait for itself.
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

// runInline runs j, held inline (see enter), with slot s. The hold, slot
// and reservation go back in a deferred call, so a runtime.Goexit leaves
// nothing behind: j is accounted for by then (see Run; if TaskAccepted
// exits, j never runs and counts as canceled) and left to the GC.
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

// inline runs a nested call's fn at once, as part of its task, on keys the task
// holds (WithReentrant): no Stats, and a panic becomes a *PanicError.
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
// ctx must last until fn starts, not only until Submit returns, and fn's
// ctx ends when ctx does. If ctx ends while the task is queued, fn never
// runs, the task gives its place back and Wait returns ctx's error. A Wait
// in progress notices at once; else Stats count the task as queued until
// it reaches the head of its key's queue or a cap is reached: a cap first
// drops queued tasks whose ctx has ended (one over 256 tasks at most once a
// millisecond, so an ended ctx may cause a refusal, or a wait, that long),
// and calls waiting for room at the key's cap watch the tasks ahead.
// Watching costs nothing per task. For work a request's handler does not
// wait for, pass context.WithoutCancel(r.Context()): the request's ctx ends
// as the handler returns.
//
// Submitted with a task's ctx, the new task inherits the task's marks while
// that task runs (a Wait on it from there returns ErrReentrant on a key the
// task holds), and is withdrawn if not started when the task's fn returns,
// as that ctx ends; detached work should use a fresh ctx.
func (e *Executor[K]) Submit(ctx context.Context, key K, fn func(context.Context) error) (*Task, error) {
	if err := e.checkOne(ctx, key, fn); err != nil {
		return nil, err
	}
	return e.submitPlain(ctx, key, fn)
}

// Go queues fn on key and returns at once, like Submit, but gives the
// caller nothing to wait on: fn's error, its panic (a *PanicError) or why
// it never ran goes to the error handler (see WithErrorHandler; by default
// logged at error level with the key Go was called with). Use it for work
// whose outcome the caller would only log. Admission, caps, policies,
// order, nesting rules, Stats and ctx's lifetime are those of a Submit
// nobody waits on: if ctx ends while the task is queued, fn never runs, the
// error handler hears ctx's error and Stats count it as canceled. From an
// HTTP handler pass context.WithoutCancel(r.Context()), which keeps the
// request's values; from inside a task, a fresh ctx, not the task's.
func (e *Executor[K]) Go(ctx context.Context, key K, fn func(context.Context) error) error {
	if err := e.checkOne(ctx, key, fn); err != nil {
		return err
	}
	return e.goPlain(ctx, key, fn)
}

// wait blocks until the synchronous job j ends, withdrawing it if ctx ends
// first, then recycles j; a nested call lends its slot unless lent (enter).
func (e *Executor[K]) wait(ctx context.Context, j *job[K], outer *taskCtx[K], lent bool) error {
	var b *blocker[K]
	if outer != nil {
		var err error
		if b, err = e.block(ctx, waitee[K]{t: &j.turn}); err != nil && e.withdraw(j, err, nil, outer, lent) {
			// Withdrawn: its keys go to the cycle's others as its caller returns.
			<-j.done
			outer.unlend(e.runner, lent)
			return err
		}
		// (Else it started meanwhile: it waits for nothing, nor does this call.)
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

// withdraw cancels j for wait, filed as b (nil: not filed) and lent its task's
// slot if lent; on a Goexit it unfiles b and takes the slot back (j settles
// anyway: see cancel). A defer in wait would enlarge every waiting Do's frame.
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
