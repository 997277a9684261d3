package executor

import (
	"context"
	"sync"
	"sync/atomic"
)

// room is the executor's waiting room for executor-wide room (WithMaxPending
// under a policy that waits): a FIFO semaphore over a count it does not
// own, the pending reservations, which Close's drain reads too; a waiter
// handed a unit holds a reservation. No barging: while anyone waits, new
// submissions line up behind them (see reserveTurn).
//
// A waiter handed a unit must still take its place in its key's queue. So
// that waiters enter in the order they waited, the one handed a unit has
// the turn, and counts as waiting, until it has taken its place or was
// refused; only then does it hand the turn on (handOn), and the next
// waiter its unit. A waiter that leaves with a unit handed meanwhile gives
// back both, so neither is lost.
type room struct {
	mu      sync.Mutex
	waiters []*roomWaiter // guarded by mu; oldest first
	turn    *roomWaiter   // guarded by mu; handed a unit, not yet in its queue
	waiting atomic.Int32  // live entries in waiters, and turn; readable without mu
}

// roomWaiter is a submission waiting in the room.
type roomWaiter struct {
	ch     chan struct{} // closed when a unit is handed over
	gone   bool          // gave up; guarded by room.mu
	placed chan struct{} // made on demand, closed as it hands the turn on; guarded by room.mu
}

// busy reports whether anyone waits, or was let in and has not yet taken
// its place.
func (r *room) busy() bool { return r.waiting.Load() > 0 }

// wait waits in line until a unit is handed over (true: the caller has the
// turn, and hands it on with handOn once it has taken its place), or until
// ctx ends or closing is closed (false). A unit handed over while it was
// leaving is passed on with giveBack, so none is lost.
func (r *room) wait(ctx context.Context, closing <-chan struct{}, take func() bool, giveBack func()) bool {
	w := &roomWaiter{ch: make(chan struct{})}
	r.mu.Lock()
	r.waiters = append(r.waiters, w)
	r.waiting.Add(1)
	r.mu.Unlock()
	r.hand(take) // room may have appeared before w was listed
	select {
	case <-w.ch:
		return true
	case <-ctx.Done():
	case <-closing:
	}
	r.mu.Lock()
	select {
	case <-w.ch: // handed a unit meanwhile: w has the turn
		r.mu.Unlock()
		r.handOn(take)
		giveBack()
	default:
		w.gone = true
		r.waiting.Add(-1)
		r.mu.Unlock()
	}
	return false
}

// hand gives a unit to the oldest waiter if take finds room and nobody has
// the turn; that waiter then has it.
func (r *room) hand(take func() bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handLocked(take)
}

// handLocked is hand with r.mu held.
func (r *room) handLocked(take func() bool) {
	for r.turn == nil && len(r.waiters) > 0 {
		w := r.waiters[0]
		if !w.gone {
			if !take() {
				return
			}
			r.turn = w
			close(w.ch)
		}
		r.waiters[0] = nil
		r.waiters = r.waiters[1:]
	}
}

// handOn, called by the waiter with the turn once placed in its key's
// queue or refused, gives the next waiter the turn, and a unit if there is
// room.
func (r *room) handOn(take func() bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.turn; w.placed != nil {
		close(w.placed)
	}
	r.turn = nil
	r.waiting.Add(-1)
	r.handLocked(take)
}

// awaitEntering is for a caller that may not wait in line but finds the
// room busy: if the only one there is the waiter with the turn, it waits
// until that one hands it on. It reports whether the caller may look for
// room again (nobody waits, or the turn's holder is placed), and whether
// it stopped because ctx ended or closing closed; with others in line,
// neither.
func (r *room) awaitEntering(ctx context.Context, closing <-chan struct{}) (again, ended bool) {
	r.mu.Lock()
	w := r.turn
	switch {
	case r.waiting.Load() == 0:
		r.mu.Unlock()
		return true, false
	case w == nil || r.waiting.Load() > 1:
		r.mu.Unlock()
		return false, false
	}
	if w.placed == nil {
		w.placed = make(chan struct{})
	}
	placed := w.placed
	r.mu.Unlock()
	select {
	case <-placed:
		return true, false
	case <-ctx.Done():
	case <-closing:
	}
	return false, true
}

// parkGlobal waits in the room for executor-wide room until ctx ends or
// the executor closes, watching meanwhile the ctxs of the tasks that hold
// room (watchGlobal: key and own are the submission's). On success the
// caller holds a reservation and the room's turn (handed), which it hands
// on (room.handOn) once placed in its key's queue or refused.
func (e *Executor[K]) parkGlobal(ctx context.Context, key K, own context.Context) (handed bool, err error) {
	e.watchGlobal(key, own)
	defer e.leaveGlobal()
	if e.room.wait(ctx, e.closing, e.takeRoom, e.unreserve) {
		if e.closed.Load() {
			e.room.handOn(e.takeRoom)
			e.unreserve()
			return false, e.reject(ErrClosed)
		}
		return true, nil
	}
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	return false, e.reject(ErrClosed)
}

// takeRoom takes a reservation if the executor-wide cap has room (called
// by room.hand, under its lock, so takes are ordered).
func (e *Executor[K]) takeRoom() bool {
	if e.pending.Load() >= int64(e.cfg.maxPending) {
		return false
	}
	e.pending.Add(1)
	return true
}
