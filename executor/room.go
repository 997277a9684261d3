package executor

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// room is the executor's waiting room for executor-wide room (WithMaxPending
// under a policy that waits): a FIFO semaphore over a count it does not
// own, the pending reservations, which Close's drain reads too; a waiter
// handed a unit holds a reservation. No barging: while anyone waits, new
// submissions line up behind them (see reserveTurn).
//
// A waiter handed a unit must still take its place in its key's queue; it
// is in transit, and counts as waiting, until it has taken its place or
// was refused, and then says so (handOn). Units go to waiters in the
// order they waited, and several may be in transit at once, so that room
// freed by many tasks lets in many waiters together rather than one wake
// after another; but only waiters on different keys (lanes): one whose
// key a waiter in transit has waits until that one has its place, so calls
// on one key enter its queue in the order they waited. A waiter that
// leaves with a unit handed meanwhile gives back both, so neither is lost.
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

// busy reports whether anyone waits, or was let in and has not yet taken
// its place.
func (r *room) busy() bool { return r.waiting.Load() > 0 }

// wait waits in line on lane until a unit is handed over (the waiter is
// returned, in transit: it calls handOn once it has taken its place), or
// until ctx ends or closing is closed (nil). A unit handed over while it
// was leaving is passed on with giveBack, so none is lost. If after fires
// first, it calls late and waits on.
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

// hand gives units to the oldest waiters while take finds room, in order,
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

// handOn, called by the waiter w in transit once placed in its key's
// queue or refused, ends its transit and hands units on if there is room.
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
// room busy: if the only ones there are waiters in transit, it waits until
// they have taken their places. It reports whether the caller may look for
// room again (nobody waits, or those in transit are placed), and whether
// it stopped because ctx ended or closing closed; with others in line,
// neither.
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

// parkGlobal waits in the room for executor-wide room until ctx ends or
// the executor closes, watching, once it has waited watchAfter, the ctxs
// of the tasks that hold room (watchGlobal: key and own are the
// submission's; a DoMany, many, has no key of its own). On success the
// caller holds a reservation and is in transit (handed), which it ends
// (room.handOn) once placed in its key's queue or refused.
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

// takeRoom takes a reservation if the executor-wide cap has room (called
// by room.hand, under its lock, so takes are ordered).
func (e *Executor[K]) takeRoom() bool {
	if e.pending.Load() >= int64(e.cfg.maxPending) {
		return false
	}
	e.pending.Add(1)
	return true
}
