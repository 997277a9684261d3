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
	return ctx.Err() // an ended ctx: refused before it is accepted
}

func (e *Executor[K]) checkOne(ctx context.Context, key K, fn func(context.Context) error) error {
	if err := e.check(ctx, fn); err != nil {
		return err
	}
	return e.validate(key)
}

// reserve is reserveTurn for leanSlot (no global cap: no turn to hand on).
func (e *Executor[K]) reserve(ctx context.Context, key K) error {
	handed, err := e.reserveTurn(ctx, key, false, nil)
	if handed != nil {
		e.room.handOn(handed, e.takeRoom)
	}
	return err
}

// reserveTurn counts a submission against the global cap and Close (each
// writes, then reads the other's word: it sees closed, or Close sees it).
// At the cap, once ended tasks are swept (sweepAll), the policy rejects it
// or parks it in the executor's FIFO room, from which it is in transit
// (handed: see room) until room.handOn. own: its ctx if asynchronous.
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
		// A nested call may not wait for room (below), but with room free it
		// waits for a waiter let in, which needs nothing of the caller.
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
	// A nested call is refused, not parked: it might wait for room its task holds.
	return nil, e.reject(&backpressure.BusyError{Scope: backpressure.ScopeGlobal, Pending: int(n - 1), Limit: limit})
}

// park waits, after the mailbox parked j, until j is admitted, ctx ends or
// the executor closes (then j leaves the room, never accepted). A nested
// call lends its task's slot meanwhile, left lent if admitted (see enter):
// the tasks it waits for may need it. After watchAfter it watches (watch.go).
func (e *Executor[K]) park(ctx context.Context, j *job[K], m *mailbox.Mailbox, outer *taskCtx[K]) (lent bool, err error) {
	late := lateWatch[K]{e: e, key: j.ctx.key, own: j.watched()}
	defer late.stop()
	var b *blocker[K]
	if outer != nil {
		// Waiting for the key's queue, it joins deadlock detection.
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
	// Decided before taking the slot back, which may wait while a giving-up
	// Close ends ctx; the Observer hears of a refusal once it is back.
	err = ctx.Err()
	outer.unlend(e.runner, lent)
	if err == nil {
		err = e.reject(ErrClosed)
	}
	return false, err
}

// pause sleeps d, lending a nested call's slot, unless ctx ends or Close
// begins: from then on it reports ErrClosed, as a waiting room would.
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

// asksKey reports whether askKey asks: a per-key cap, or a policy reading age.
func (e *Executor[K]) asksKey() bool { return e.cfg.maxPerKey != 0 || e.needsAge }

// askKeyHeld is askKey for a submission holding m's lock and, if reserved,
// a reservation, both given back if the Policy calls runtime.Goexit.
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

// askKey asks the policy about key, m locked. Wait is honoured only at the
// key's cap (there is nothing else to wait for), Admit only below it.
func (e *Executor[K]) askKey(m *mailbox.Mailbox, key K) (backpressure.Verdict, error) {
	if !e.asksKey() {
		return backpressure.Admit, nil
	}
	limit := e.cfg.maxPerKey // the global cap was settled by reserve
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

// cancel withdraws a queued task whose ctx ended; false if it started. It
// settles after the callbacks heard of it, even if one calls Goexit.
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
// Nothing watches a queued task's ctx: that costs a registration per task
// and, on a ctx all tasks share, a mutex every producer and worker meets
// (ARCHITECTURE.md, "Cancellation"). Its end is noticed where it matters:
//
//   - at the head of its key's queue (job.Run, a Batcher's run): the task
//     never runs, and the key's next task goes on;
//   - by a caller waiting for it (Do, Task.Wait), which withdraws it in O(1);
//   - at a cap, which drops ended tasks (sweep) before refusing or parking
//     anyone, and by a submission waiting roomWatchAfter for room (watch.go).
//
// A full cap stays full while its tasks wait, so a walk per refusal would
// make each cost O(pending) under shard locks (BENCHMARKS.md, "Refusals at
// a cap"): a scope holding over capSweepSmall tasks is swept at most once
// per capSweepEvery (sweepDue), and a ctx that ended since may cause a
// refusal, or a wait, for that long, as a wait's watch may.
const (
	capSweepSmall = 256
	capSweepEvery = time.Millisecond
)

// capSweep is sweep for a submission at m's cap (m locked), limited as above.
func (e *Executor[K]) capSweep(m *mailbox.Mailbox) bool {
	if m.Pending() > capSweepSmall && !e.sweepDue(&e.plainCore(m).sweptAt) {
		return false
	}
	return e.sweep(m)
}

// sweepDue reports whether a large scope last swept at *last (monotime; 0:
// never) may be swept now; if so, one of concurrent callers records now.
func (e *Executor[K]) sweepDue(last *atomic.Int64) bool {
	if e.sweepEvery <= 0 {
		return true
	}
	at, now := last.Load(), monotime()
	return (at == 0 || now-at >= int64(e.sweepEvery)) && last.CompareAndSwap(at, now)
}

// sweep drops m's (locked) unstarted tasks whose ctx ended, a running
// batch's included; if any, it unlocks m (which may retire: look the key
// up again), ends them and reports true, else m stays locked.
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

// endSwept ends what a sweep found, unlocked, each even on a Goexit.
func (e *Executor[K]) endSwept(ended []*job[K], taken []takenPlain) {
	forEach(0, 2, func(kind int) {
		if kind == 0 {
			e.cancelEnded(ended)
		} else {
			e.endTakenAll(taken, nil)
		}
	})
}

// sweepReserved runs sweep, giving back the caller's reservation on a Goexit.
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

// sweepAll is sweep over every mailbox, a shard lock at a time, for the
// global cap, while a task whose ctx can end may be queued (cancelable:
// cleared before the walk, set again if it leaves one). admit sets it under
// the key's lock: after the clear, or the walk, locking later, finds it.
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

// sweepKeys is capSweep over keys' mailboxes, for a DoMany at a key's cap.
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

// ended appends m's (locked) unstarted asynchronous jobs whose ctx ended; a
// synchronous one may be recycled once unlocked, so its caller withdraws it.
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

// cancelEnded ends the swept jobs, unlocked, each even if a callback exits
// (forEach); cancel skips one listed twice (multi-key) or started since.
func (e *Executor[K]) cancelEnded(jobs []*job[K]) {
	forEach(0, len(jobs), func(i int) { e.cancel(jobs[i], sweptErr(jobs[i].ctx.caller())) })
}
