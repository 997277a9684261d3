package executor

import (
	"context"

	"github.com/perkey/perkey/internal/mailbox"
)

// next returns the innermost running task of e marked in ctx (nil if none)
// and the context to go on from for the task it is nested in.
func (e *Executor[K]) next(ctx context.Context) (*taskCtx[K], context.Context) {
	for {
		m, _ := ctx.Value(markKey{}).(marker)
		if m == nil {
			return nil, nil
		}
		ctx = m.callerCtx()
		if c, ok := m.(*taskCtx[K]); ok && c.exec() == e {
			return c, ctx
		}
	}
}

// innermost returns the innermost running task of e marked in ctx.
func (e *Executor[K]) innermost(ctx context.Context) *taskCtx[K] {
	c, _ := e.next(ctx)
	return c
}

// held reports whether a running task of e marked in ctx holds key.
func (e *Executor[K]) held(ctx context.Context, key K) bool {
	for c, rest := e.next(ctx); c != nil; c, rest = e.next(rest) {
		if c.holds(key) {
			return true
		}
	}
	return false
}

// waitsOnCaller reports whether a blocking nested call made with ctx, if
// queued on m (locked) now, would wait behind a multi-key task needing a key
// the caller's chain holds: that task cannot run before the caller returns,
// nor the call before that task (a DoMany holds each key it reaches the head
// of while it waits for the others). Every task ahead of the call is in m's
// queue or holds m, and none arriving later gets ahead of it. Cycles through
// other tasks' nested calls are found as the call is about to wait
// (deadlock.go). The walk is made only where a multi-key task may be queued.
func (e *Executor[K]) waitsOnCaller(ctx context.Context, m *mailbox.Mailbox) bool {
	found := false
	m.EachManyAhead(nil, func(t *mailbox.Turn) { found = found || e.needsHeld(ctx, t) })
	return found
}

// queuedBehindCaller is waitsOnCaller for a Wait made with ctx on a queued
// task: whether a multi-key task holding its mailbox or ahead of it needs a
// key the waiting task holds.
func (e *Executor[K]) queuedBehindCaller(ctx context.Context, on waitee[K]) bool {
	found := false
	f := func(o *mailbox.Turn) { found = found || e.needsHeld(ctx, o) }
	if on.p != nil {
		e.plainAhead(on.p, f)
	} else {
		on.t.EachManyAhead(f)
	}
	return found
}

// needsHeld reports whether t, queued or holding a mailbox (so not
// recycled), is a multi-key task needing a key the chain of ctx holds.
func (e *Executor[K]) needsHeld(ctx context.Context, t *mailbox.Turn) bool {
	j := jobOf[K](t)
	if j.multi == nil {
		return false
	}
	for _, k := range *j.multi {
		if e.held(ctx, k) {
			return true
		}
	}
	return false
}

// A task blocked in a nested call lends its execution slot to the work it
// waits for, so nesting never exhausts the pool. Its job marks the slot lent
// (lentBit); only the nested call that set the mark owns the slot, and the
// job stays the task's meanwhile. A nil outer (outside any task) lends nothing.

// slot says where an inline run's execution slot came from.
type slot uint8

const (
	noSlot    slot = iota
	ownSlot        // acquired from the runner
	outerSlot      // borrowed from the task this nested call runs in
)

// lendSlot marks j's slot lent; false if a nested call has it already.
func (j *core[K]) lendSlot() bool { return j.bits.Or(lentBit)&lentBit == 0 }

// fresh clears a lent mark a task left on its core as it ended (a nested
// call from a goroutine it started may still hold the slot, and its unlent
// leaves an ended task's core alone): else the core's next task could not
// lend its slot, and its nested calls on a full pool would wait forever.
func (j *core[K]) fresh() {
	if j.bits.Load()&lentBit != 0 {
		j.bits.And(^lentBit)
	}
}

// takeSlot finds a slot for an inline run: the blocked caller's, else a free one.
func (outer *taskCtx[K]) takeSlot(r *mailbox.Runner) slot {
	if j := outer.live(); j != nil && j.lendSlot() {
		return outerSlot
	}
	if r.TryAcquire() {
		return ownSlot
	}
	return noSlot
}

// giveSlot gives back what takeSlot took.
func (outer *taskCtx[K]) giveSlot(r *mailbox.Runner, s slot) {
	switch s {
	case outerSlot:
		outer.unlent()
	case ownSlot:
		r.Release()
	}
}

// lend gives the calling task's slot to other work while a nested call
// waits, and reports whether it did. Under leanDo a reservation, taken before
// the slot is given up and dropped once unlend has it back, covers it, so
// Close's drain, which counts slots and reservations, never sees the task gone.
func (outer *taskCtx[K]) lend(r *mailbox.Runner) bool {
	j := outer.live()
	if j == nil || !j.lendSlot() {
		return false
	}
	if j.e.leanDo {
		j.e.pending.Add(1)
	}
	r.Release()
	return true
}

// unlend takes back the slot lend lent, if it did; it may wait for a free
// slot behind the work already ready.
func (outer *taskCtx[K]) unlend(r *mailbox.Runner, lent bool) {
	if lent {
		r.Acquire()
		outer.unlent()
		if e := outer.job().e; e.leanDo && e.pending.Add(-1) == 0 {
			e.drainIfDone()
		}
	}
}

// unlent marks the calling task's slot as its own again.
func (outer *taskCtx[K]) unlent() {
	if j := outer.live(); j != nil {
		j.bits.And(^lentBit)
	}
}
