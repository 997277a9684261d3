package executor

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// room is the executor's waiting room for executor-wide room (WithMaxPending
// under a policy that waits): a FIFO semaphore over a count it does not own,
// the pending reservations, which Close's drain reads too. No barging: while
// anyone waits, new submissions line up behind them (see reserveTurn).
//
// A waiter handed a unit holds a reservation and is in transit, counted as
// waiting, until placed in its key's queue or refused (handOn). Units go in
// arrival order, several in transit at once (room freed by many tasks lets
// many in together) but only on different keys (lanes): a waiter whose lane
// is in transit waits until that one is placed, so calls on one key enter
// its queue in the order they waited.
type room struct {
	mu      sync.Mutex
	waiters []*roomWaiter // guarded by mu; oldest first
	transit []uint64      // guarded by mu; the lanes of the waiters in transit
	placed  chan struct{} // guarded by mu; made on demand, closed as transit empties
	waiting atomic.Int32  // live entries in waiters, and those in transit; readable without mu
}

// roomWaiter is a submission waiting in the room.
type roomWaiter struct {
	ch   chan struct{} // closed when a unit is handed over
	lane uint64        // its key's hash; 0 (a DoMany's): every lane
	gone bool          // gave up; guarded by room.mu
}

// busy reports whether anyone waits or is in transit.
func (r *room) busy() bool { return r.waiting.Load() > 0 }

// wait waits in line on lane until handed a unit (it returns the waiter, in
// transit, which calls handOn once placed), or until ctx ends or closing
// closes (nil; a unit handed meanwhile is passed on with giveBack, so none
// is lost). If after fires first, it calls late and waits on.
func (r *room) wait(ctx context.Context, lane uint64, closing <-chan struct{}, take func() bool, giveBack func(),
	after <-chan time.Time, late func()) *roomWaiter {
	w := &roomWaiter{ch: make(chan struct{}), lane: lane}
	r.mu.Lock()
	r.waiters = append(r.waiters, w)
	r.waiting.Add(1)
	r.handLocked(take) // room may have appeared before w was listed
	r.mu.Unlock()
wait:
	select {
	case <-w.ch:
		return w
	case <-ctx.Done():
	case <-closing:
	case <-after:
		after = nil
		late()
		goto wait
	}
	r.mu.Lock()
	select {
	case <-w.ch: // handed a unit meanwhile: w is in transit
		r.mu.Unlock()
		r.handOn(w, take)
		giveBack()
	default:
		w.gone = true
		r.waiting.Add(-1)
		r.mu.Unlock()
	}
	return nil
}

// hand gives units to the oldest waiters, in order, while take finds room,
// up to the first whose lane is in transit.
func (r *room) hand(take func() bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handLocked(take)
}

// handLocked is hand with r.mu held.
func (r *room) handLocked(take func() bool) {
	for len(r.waiters) > 0 {
		w := r.waiters[0]
		if !w.gone {
			if r.inTransit(w.lane) || !take() {
				return
			}
			r.transit = append(r.transit, w.lane)
			close(w.ch)
		}
		r.waiters[0] = nil
		r.waiters = r.waiters[1:]
	}
}

// inTransit reports whether a waiter on lane must wait for one in transit.
func (r *room) inTransit(lane uint64) bool {
	for _, l := range r.transit {
		if l == lane || l == 0 || lane == 0 {
			return true
		}
	}
	return false
}

// handOn ends w's transit (placed or refused) and hands units on if there is room.
func (r *room) handOn(w *roomWaiter, take func() bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := slices.Index(r.transit, w.lane)
	r.transit = slices.Delete(r.transit, i, i+1)
	if len(r.transit) == 0 && r.placed != nil {
		close(r.placed)
		r.placed = nil
	}
	r.waiting.Add(-1)
	r.handLocked(take)
}

// awaitEntering is for a caller that may not wait in line but finds the
// room busy: if only waiters in transit are there, it waits until they are
// placed. It reports whether the caller may look for room again and whether
// it stopped as ctx ended or closing closed (with others in line, neither).
func (r *room) awaitEntering(ctx context.Context, closing <-chan struct{}) (again, ended bool) {
	r.mu.Lock()
	switch n := int(r.waiting.Load()); {
	case n == 0:
		r.mu.Unlock()
		return true, false
	case len(r.transit) == 0 || n > len(r.transit):
		r.mu.Unlock()
		return false, false
	}
	if r.placed == nil {
		r.placed = make(chan struct{})
	}
	placed := r.placed
	r.mu.Unlock()
	select {
	case <-placed:
		return true, false
	case <-ctx.Done():
	case <-closing:
	}
	return false, true
}

// parkGlobal waits in the room for executor-wide room until ctx ends or the
// executor closes, watching what holds room after watchAfter (watchGlobal;
// many: a DoMany, with no key). On success the caller holds a reservation
// and is in transit (handed) until room.handOn, once placed or refused.
func (e *Executor[K]) parkGlobal(ctx context.Context, key K, many bool, own context.Context) (handed *roomWaiter, err error) {
	late := lateWatch[K]{e: e, key: key, own: own, global: true}
	defer late.stop()
	var lane uint64 // every lane
	if !many {
		lane = max(e.router.Hash(key), 1)
	}
	if w := e.room.wait(ctx, lane, e.closing, e.takeRoom, e.unreserve, late.arm(), late.watch); w != nil {
		if e.closed.Load() {
			e.room.handOn(w, e.takeRoom)
			e.unreserve()
			return nil, e.reject(ErrClosed)
		}
		return w, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, e.reject(ErrClosed)
}

// takeRoom takes a reservation if the executor-wide cap has room; room.hand
// calls it under its lock, so takes are ordered.
func (e *Executor[K]) takeRoom() bool {
	if e.pending.Load() >= int64(e.cfg.maxPending) {
		return false
	}
	e.pending.Add(1)
	return true
}
