package executor

import (
	"context"
	"sync"
	"sync/atomic"
)

// room is the executor's waiting room for executor-wide room (WithMaxPending
// under a policy that waits): a FIFO semaphore over a count it does not own.
// The count is the executor's pending reservations, which Close's drain
// reads too, so room only hands out units of it: take adds one if there is
// room, and a waiter that is handed one holds a reservation. No barging:
// while anyone waits, new submissions line up behind them (see reserve).
type room struct {
	mu      sync.Mutex
	waiters []*roomWaiter // guarded by mu; oldest first
	waiting atomic.Int32  // live entries in waiters, readable without mu
}

// roomWaiter is a submission waiting in the room.
type roomWaiter struct {
	ch   chan struct{} // closed when a unit is handed over
	gone bool          // gave up; guarded by room.mu
}

// busy reports whether anyone waits.
func (r *room) busy() bool { return r.waiting.Load() > 0 }

// wait waits in line until a unit is handed over (true), or until ctx ends
// or closing is closed (false). A unit handed over while it was leaving is
// passed on with giveBack, so none is lost.
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
	case <-w.ch: // handed a unit meanwhile
		r.mu.Unlock()
		giveBack()
	default:
		w.gone = true
		r.waiting.Add(-1)
		r.mu.Unlock()
	}
	return false
}

// hand gives units to waiters, oldest first, while take finds room.
func (r *room) hand(take func() bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.waiters) > 0 {
		w := r.waiters[0]
		if !w.gone {
			if !take() {
				return
			}
			r.waiting.Add(-1)
			close(w.ch)
		}
		r.waiters[0] = nil
		r.waiters = r.waiters[1:]
	}
}

// parkGlobal waits in the room for executor-wide room until ctx ends or the
// executor closes. On success the caller holds a reservation.
func (e *Executor[K]) parkGlobal(ctx context.Context) error {
	if e.room.wait(ctx, e.closing, e.takeRoom, e.unreserve) {
		if e.closed.Load() {
			e.unreserve()
			return e.reject(ErrClosed)
		}
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return e.reject(ErrClosed)
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
