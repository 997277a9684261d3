package executor

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/internal/mailbox"
)

func (e *Executor[K]) check(ctx context.Context, fn func(context.Context) error) error {
	switch {
	case e.unmade():
		return ErrNilExecutor
	case ctx == nil:
		return ErrNilContext
	case fn == nil:
		return ErrNilFunc
	}
	// A call whose ctx already ended is refused before it is accepted.
	return ctx.Err()
}

// reserve is reserveTurn for a caller on an executor without a global
// cap (leanSlot): nobody waits in the room there, so it is never let in
// from it and has no turn to hand on.
func (e *Executor[K]) reserve(ctx context.Context, key K) error {
	handed, err := e.reserveTurn(ctx, key, false, nil)
	if handed != nil {
		e.room.handOn(handed, e.takeRoom)
	}
	return err
}

// reserveTurn counts a submission against the global cap and against
// Close: either it sees closed, or Close sees it pending (both sides write,
// then read the other's word). At the cap the policy decides: reject, or
// wait in the executor's FIFO waiting room; one let in from it is in
// transit (handed: see room) until it ends that with room.handOn. Before the cap refuses anyone or makes
// anyone wait, tasks whose ctx has ended are dropped from every queue
// (sweepAll), once. A waiting submission is on key, or on several (many:
// a DoMany); own is its ctx if it is asynchronous, else nil (see
// watchGlobal).
func (e *Executor[K]) reserveTurn(ctx context.Context, key K, many bool, own context.Context) (handed *roomWaiter, err error) {
	n := e.pending.Add(1)
	if e.closed.Load() {
		e.unreserve()
		return nil, e.reject(ErrClosed)
	}
	limit := e.cfg.maxPending
	if limit == 0 || (n <= int64(limit) && !e.room.busy()) {
		return nil, nil
	}
	e.unreserve()
	nested := e.innermost(ctx) != nil
	for retry := e.sweepAll(); ; retry = true {
		if retry {
			if n = e.pending.Add(1); n <= int64(limit) && !e.room.busy() {
				return nil, nil
			}
			e.unreserve()
		}
		// A nested call may not wait for room (see below), but if there is room
		// and the only one ahead is a waiter let in that has not taken its
		// place yet, it waits for that one: it is on its way, and needs nothing
		// of the caller.
		if !nested || n > int64(limit) {
			break
		}
		again, ended := e.room.awaitEntering(ctx, e.closing)
		if ended {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return nil, e.reject(ErrClosed)
		}
		if !again {
			break
		}
	}
	// Over the cap, or others wait ahead (no barging): the load is full.
	load := backpressure.Load{TotalPending: max(int(n-1), limit), TotalLimit: limit}
	v, err := e.decide(load, backpressure.ScopeGlobal)
	if err != nil {
		return nil, e.reject(err)
	}
	if v == backpressure.Wait && !nested {
		return e.parkGlobal(ctx, key, many, own)
	}
	// A nested call is refused rather than made to wait: its own task (and
	// any it is nested in, and the tasks queued behind them) hold room that
	// is given back only once it returns. With every reservation held so,
	// it would wait forever.
	return nil, e.reject(&backpressure.BusyError{Scope: backpressure.ScopeGlobal, Pending: int(n - 1), Limit: limit})
}

// park waits, after the mailbox parked j, until j is admitted, ctx ends or
// the executor closes (then j leaves the room, never accepted). A nested
// call (outer is its task) lends the task's slot meanwhile, as the tasks it
// waits for may need it; admitted with it lent, park reports lent and
// leaves it lent (see enter), else it takes it back before returning. A
// wait that lasts watchAfter watches the ctxs of what holds the room from
// then on (see watch.go).
func (e *Executor[K]) park(ctx context.Context, j *job[K], m *mailbox.Mailbox, outer *taskCtx[K]) (lent bool, err error) {
	late := lateWatch[K]{e: e, key: j.ctx.key, own: j.watched()}
	defer late.stop()
	var b *blocker[K]
	if outer != nil {
		// A nested call waiting for room waits for the key's queue to
		// move: it takes part in deadlock detection like a queued one.
		if b, err = e.block(ctx, waitee[K]{t: &j.turn}); err != nil {
			if m.Unpark(j.turn.Entry()) {
				e.unreserve()
				return false, err // never accepted
			}
			<-j.done // admitted meanwhile: no longer waiting for room
			e.observeAccepted()
			return false, nil
		}
	}
	lent = outer.lend(e.runner)
	after := late.arm()
wait:
	select {
	case <-j.done:
		e.unblock(b)
		e.observeLent(outer, lent)
		return lent, nil
	case <-ctx.Done():
	case <-e.closing:
	case <-after:
		after = nil
		late.watch()
		goto wait
	}
	e.unblock(b) // no longer waiting for room, whatever follows
	if !m.Unpark(j.turn.Entry()) {
		<-j.done                   // admitted meanwhile (Promote has sent)
		e.observeLent(outer, lent) // the caller's wait sees ctx
		return lent, nil
	}
	e.unreserve()
	// The outcome is what sent the call away, decided now: taking the slot
	// back may wait, and a giving-up Close may end ctx meanwhile. The
	// Observer hears of a refusal once the slot is back.
	err = ctx.Err()
	outer.unlend(e.runner, lent)
	if err == nil {
		err = e.reject(ErrClosed)
	}
	return false, err
}

// pause sleeps d unless ctx ends or the executor closes first; it reports
// ErrClosed whenever Close has begun, even if its timer fired at the same
// time (as for a call in a waiting room, once Close has begun none enters).
// A nested call (outer is its task) lends the task's slot meanwhile.
func (e *Executor[K]) pause(ctx context.Context, d time.Duration, outer *taskCtx[K]) error {
	lent := outer.lend(e.runner)
	defer outer.unlend(e.runner, lent)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		if e.closed.Load() {
			return ErrClosed
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-e.closing:
		return ErrClosed
	}
}

// asksKey reports whether a submission's key is put to the Policy (askKey):
// only under a per-key cap, or for a policy that reads queue age.
func (e *Executor[K]) asksKey() bool { return e.cfg.maxPerKey != 0 || e.needsAge }

// askKeyHeld is askKey for a submission that holds m's lock and, if
// reserved, a reservation (admitPlain takes none first). If the Policy
// calls runtime.Goexit, it gives both back as the goroutine exits: the
// submission was never accepted, and nothing is left held.
func (e *Executor[K]) askKeyHeld(m *mailbox.Mailbox, key K, reserved bool) (backpressure.Verdict, error) {
	if !e.asksKey() {
		return backpressure.Admit, nil
	}
	asking := true
	defer func() {
		if asking {
			m.Release()
			if reserved {
				e.unreserve()
			}
		}
	}()
	v, err := e.askKey(m, key)
	asking = false
	return v, err
}

// askKey asks the policy about one key, with m locked. A Wait verdict is
// honoured only at the key's cap (there is nothing else to wait for), and
// Admit only below it.
func (e *Executor[K]) askKey(m *mailbox.Mailbox, key K) (backpressure.Verdict, error) {
	if !e.asksKey() {
		return backpressure.Admit, nil
	}
	limit := e.cfg.maxPerKey
	// The global cap was settled by reserve; this load is about the key.
	load := backpressure.Load{
		Pending: m.Pending() + m.Parked(), // parked ones are ahead: no barging
		Limit:   limit,
	}
	if e.needsAge {
		if at, ok := m.OldestStamp(); ok {
			load.OldestWait = since(at)
		}
	}
	v, err := e.decide(load, backpressure.ScopeKey)
	if err != nil {
		return backpressure.Reject, err
	}
	full := load.Full() == backpressure.ScopeKey
	switch {
	case v == backpressure.Wait && full:
		return backpressure.Wait, nil
	case v != backpressure.Reject && !full:
		return backpressure.Admit, nil
	}
	be := e.keyBusy(m, key)
	if !full {
		be.Scope, be.Wait = backpressure.ScopeDelay, load.OldestWait
	}
	return backpressure.Reject, be
}

// keyBusy describes key's mailbox m at its cap (locked).
func (e *Executor[K]) keyBusy(m *mailbox.Mailbox, key K) *backpressure.BusyError {
	return &backpressure.BusyError{Key: key, Scope: backpressure.ScopeKey,
		Pending: m.Pending() + m.Parked(), Limit: e.cfg.maxPerKey, Retry: m.ServiceTime()}
}

// cancel withdraws a queued task whose ctx ended; false if it already
// started. The task settles (its waiter wakes, its reservation is given
// back) after the callbacks have heard of it, even if one calls
// runtime.Goexit.
func (e *Executor[K]) cancel(j *job[K], err error) bool {
	if !j.turn.Cancel() {
		return false
	}
	defer j.turn.Work().Settle()
	e.abandon(j, err)
	return true
}

// Lazy cancellation.
//
// Nothing watches a queued task's ctx: a watch costs a registration per
// task (context.AfterFunc: about 1 µs and 500 B, and on the one ctx a
// consumer loop or a server passes to every task, a mutex that every
// producer and worker meets). The end of a queued task's ctx is noticed
// where it matters instead:
//
//   - at the head of its key's queue, as it would start (job.Run, and a
//     Batcher's run): it never runs, and the key's next task goes on;
//   - by a caller waiting for it: Do watches its own ctx, Task.Wait the
//     task's as well, and each withdraws its own task alone, in O(1) (a
//     turn's entry, a plain Submit's mailbox.Place);
//   - at a cap: before a per-key or the global cap refuses a submission or
//     makes it wait, tasks whose ctx has ended are dropped (sweep; a large
//     scope at most once per capSweepEvery, see below); and once a
//     submission has waited for room for roomWatchAfter, the ctxs of the
//     tasks holding it are watched, so their end lets it in (watch.go).
//
// A sweep at a cap walks every task of its scope (a key's queue, or every
// queue for the executor's cap) and asks each asynchronous one's ctx Err.
// A full cap stays full while its tasks wait: every submission that comes
// meets it, and with a walk each, a refusal cost O(pending), not O(1), and
// held the scope's shard locks for the walk (0.23 ms at
// WithMaxPending(10,000) with a ctx per task, 0.16 µs since: see
// BenchmarkRefusalAtCap). So a scope holding more than capSweepSmall tasks
// is swept at most once per capSweepEvery (capSweep, sweepAll, sweepDue):
// a ctx that ended since the last sweep may cause a refusal, or a wait, for
// at most that long, as a wait's watch may (watch.go). A smaller scope is
// swept at every refusal: its walk costs what a few allocations do.
const (
	capSweepSmall = 256
	capSweepEvery = time.Millisecond
)

// capSweep is sweep for a submission at m's cap (m locked), limited as
// above; the time of m's last large sweep is kept in its plain core.
func (e *Executor[K]) capSweep(m *mailbox.Mailbox) bool {
	if m.Pending() > capSweepSmall && !e.sweepDue(&e.plainCore(m).sweptAt) {
		return false
	}
	return e.sweep(m)
}

// sweepDue reports whether a large scope whose last sweep at its cap was at
// *last (a monotime; 0: never) may be swept now, and if so records now:
// once per sweepEvery, by one of concurrent callers.
func (e *Executor[K]) sweepDue(last *atomic.Int64) bool {
	if e.sweepEvery <= 0 {
		return true
	}
	at, now := last.Load(), monotime()
	return (at == 0 || now-at >= int64(e.sweepEvery)) && last.CompareAndSwap(at, now)
}

// sweep drops m's (locked) tasks that have not started and whose ctx has
// ended, those a running batch has taken included. If none, it reports
// false with m still locked; else it unlocks m (which may retire: look the
// key up again), ends them as canceled and reports true.
func (e *Executor[K]) sweep(m *mailbox.Mailbox) bool {
	ended := e.ended(m, nil)
	taken := e.takePlain(m, ctxEnded[K], nil)
	if len(ended) == 0 && len(taken) == 0 {
		return false
	}
	m.Release()
	e.endSwept(ended, taken)
	return true
}

// endSwept ends what a sweep found, unlocked: jobs, then plain tasks, each
// even if a callback calls runtime.Goexit while an earlier one ends.
func (e *Executor[K]) endSwept(ended []*job[K], taken []takenPlain) {
	forEach(0, 2, func(kind int) {
		if kind == 0 {
			e.cancelEnded(ended)
		} else {
			e.endTakenAll(taken, nil)
		}
	})
}

// sweepReserved runs a sweep for a submission that holds a reservation:
// if a callback calls runtime.Goexit as a swept task ends, the reservation
// is given back as the goroutine exits, and nothing is left held.
func (e *Executor[K]) sweepReserved(sweep func() bool) (swept bool) {
	returned := false
	defer func() {
		if !returned {
			e.unreserve()
		}
	}()
	swept = sweep()
	returned = true
	return swept
}

// sweepAll is sweep over every live mailbox, one shard lock at a time, for
// the global cap. It walks only if an asynchronous task whose ctx can end
// may be queued (Executor.cancelable): with only context.Background() and
// synchronous callers, a submission at the cap takes no shard lock here.
//
// The flag is cleared before the walk and set again if the walk leaves
// such a task queued, or parked at its key's cap (it is let in later
// without admit). A submission that sets it (admit, with its key's mailbox
// locked) either does so after this clear, or is queued or parked before
// the walk takes its shard's lock, and the walk finds it.
func (e *Executor[K]) sweepAll() bool {
	if !e.cancelable.Load() {
		return false
	}
	if e.pending.Load() > capSweepSmall && !e.sweepDue(&e.sweptAt) {
		return false // a large executor: see "Lazy cancellation"
	}
	e.cancelable.Store(false)
	var (
		ended []*job[K]
		taken []takenPlain
		left  bool // a task whose ctx can end stays (or may: one swept now counts)
	)
	e.router.Each(func(_ K, m *mailbox.Mailbox) {
		ended = e.ended(m, ended)
		taken = e.takePlain(m, ctxEnded[K], taken)
		if !left { // parked ones included: they are let in without admit
			e.eachAsync(m, func(ctx context.Context) { left = left || ctx != background })
		}
	})
	if left {
		e.cancelable.Store(true)
	}
	e.endSwept(ended, taken)
	return len(ended) > 0 || len(taken) > 0
}

// sweepKeys is capSweep over the mailboxes of keys, for a DoMany refused
// at a key's cap.
func (e *Executor[K]) sweepKeys(keys []K) bool {
	swept := false
	for _, k := range keys {
		m := e.router.Acquire(k)
		if e.capSweep(m) {
			swept = true
		} else {
			m.Release()
		}
	}
	return swept
}

// ended appends to out m's (locked) asynchronous jobs that have not
// started and whose submitter's ctx has ended. Synchronous ones (Do,
// DoShared, DoMany, Batcher.Do) are left to their callers, who withdraw
// them as their ctx ends; one may be recycled as soon as its caller has
// seen it end, so a sweep could not cancel it safely once the lock is
// released. An asynchronous job is never recycled.
func (e *Executor[K]) ended(m *mailbox.Mailbox, out []*job[K]) []*job[K] {
	m.EachWaiting(func(t *mailbox.Turn) {
		if s := t.State(); s != mailbox.Queued && s != mailbox.Granted {
			return
		}
		if j := jobOf[K](t); j.async && ctxErr(j.ctx.caller()) != nil {
			out = append(out, j)
		}
	})
	return out
}

// cancelEnded ends the swept jobs, unlocked, each even if a callback calls
// runtime.Goexit while an earlier one ends (forEach); cancel skips a job
// listed twice (a multi-key task) or started meanwhile.
func (e *Executor[K]) cancelEnded(jobs []*job[K]) {
	forEach(0, len(jobs), func(i int) { e.cancel(jobs[i], sweptErr(jobs[i].ctx.caller())) })
}
