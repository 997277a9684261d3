package mailbox

import (
	"context"
	"sync/atomic"
)

// Plain runs an owner's plain tasks (EnqueuePlain), one per Runner
// (RunnerOptions.Plain): single-key exclusive tasks nobody finds through a
// Turn while they wait, so they need no node of their own and EachWaiting
// and Holder do not see them (see "The queue"; TakePlain serves Close, and
// PlainPos and EachManyAheadPlain a wait's cycle check). RunPlain makes what
// a task needs (its context, say) of its slot's fn, arg and stamp (0 unless
// tracked); left counts the batch's slots yet to run, this one included.
// Like Work.Run it must not panic and must account for the task's end even
// if fn calls runtime.Goexit. SettlePlain, like Work.Settle, wakes the task's
// waiters once its place is free, after RunPlain returned or not. NewAux
// makes m's Aux if the owner stored none (locked) as m's first batch with a
// plain task is cut, so a key whose tasks only wait does not pay for it.
type Plain interface {
	RunPlain(m *Mailbox, fn func(context.Context) error, arg any, stamp int64, left int)
	SettlePlain(arg any)
	NewAux(m *Mailbox) *Aux
}

// HoldPlain is Hold with no Turn (locked), for a plain task (a Do that
// found its key idle): the caller checked CanHold(false) and calls
// UnholdPlain after the run, unlocked, even if fn called runtime.Goexit.
func (m *Mailbox) HoldPlain() {
	if m.home.r.opt.Clock != nil {
		m.made().heldSince.Store(held(m.home.r.opt.Clock()))
	} else if m.pending.Load() == 0 && m.home.owner.Linger(m) {
		// 0 after CanHold; checked: UnholdPlain's swap expects exactly this hold.
		m.hold = holdFast
		m.pending.Add(1 | fastBit)
		return
	}
	m.hold = holdPlain
	m.pending.Add(1)
}

// UnholdPlain gives back HoldPlain's hold and hands the key on: a fast hold
// nobody claimed in one atomic step, else under m's lock.
func (m *Mailbox) UnholdPlain() {
	if m.hold == holdFast && m.pending.CompareAndSwap(1|fastBit, 0) {
		return // m may be settled, retired and reused from here on
	}
	if unholdLocking != nil {
		unholdLocking()
	}
	m.home.mu.Lock()
	m.hold = holdNone
	m.clearHeld()
	m.giveBack()
}

// Fast holds.
//
// Most Dos find their key idle and leave it idle. A fast hold is given back
// in one CAS if nobody came for the key meanwhile, sparing a lock round trip
// and a retirement the next call undoes:
//
//   - HoldPlain, if Owner.Linger allows (never with a clock: a timed hold
//     ends under the lock), sets holdFast and adds 1|fastBit to pending.
//   - UnholdPlain swaps pending from exactly 1|fastBit to 0, leaving m idle,
//     holdFast and not retired (released); it never touches m again.
//   - Whoever else comes for m calls Claim first, locked, so nothing is
//     queued or parked on m while a fast hold is taken (no batch runs; the
//     driver's unlocked decrement of pending never meets fastBit). Claim
//     revokes a hold still taken (clears fastBit: the swap fails and the
//     holder gives the hold back under the lock) or settles a released one
//     (holdNone). Swap and revocation are CASes on one word: one wins.
//     Then m changes as if there had been no fast hold.
//   - The next unlock (unlockRetire) also settles a released hold and
//     retires m, and the owner settles m (Released, Claim) before it counts,
//     walks or looks up its live mailboxes; it keeps at most one fast hold
//     per lock (Linger), so it knows where to look.

// unholdLocking is a test hook, run as UnholdPlain turns to the lock.
var unholdLocking func()

// fastBit marks pending while a fast hold is taken and not revoked.
const fastBit = 1 << 30

// Claim readies m, just locked, for a caller that may change it ("Fast holds").
func (m *Mailbox) Claim() {
	if m.hold != holdFast {
		return
	}
	for {
		v := m.pending.Load()
		if v&fastBit == 0 {
			if v == 0 {
				m.hold = holdNone // given back: settled
			}
			return // or revoked already: its holder unlocks
		}
		if m.pending.CompareAndSwap(v, v&^fastBit) {
			return // revoked: the holder gives it back under the lock
		}
	}
}

// Released reports whether m's fast hold was given back, not settled (locked).
func (m *Mailbox) Released() bool { return m.hold == holdFast && m.pending.Load() == 0 }

// clearHeld ends the timing of a hold (locked), writing only if a clock set it.
func (m *Mailbox) clearHeld() {
	if x := m.x.Load(); x != nil && x.heldSince.Load() != 0 {
		x.heldSince.Store(0)
	}
}

// Aux is the owner's value for a mailbox (SetAux, Plain.NewAux): a pointer,
// not an interface; embedded in V's value, it costs no allocation of its own.
type Aux struct{ V any }

// Aux returns what SetAux or Plain.NewAux stored, else nil (locked, or
// unlocked by Plain in a batch); once set it never changes, even on reuse.
func (m *Mailbox) Aux() *Aux { return m.aux }

// SetAux stores the owner's value (locked); m must have none yet.
func (m *Mailbox) SetAux(v *Aux) { m.aux = v }

// Local is the user's value per lock, not per key, nil until stored (locked).
func (m *Mailbox) Local() *any { return &m.home.local }

// Count is a counter per lock, on its cache line: added to locked, read any time.
func (m *Mailbox) Count() *atomic.Uint64 { return &m.home.count }

// DonePlain frees the place of a task TakePlain took; the caller settles it.
func (m *Mailbox) DonePlain() {
	m.home.mu.Lock()
	m.giveBack()
}

// giveBack frees the place of a task that left m (locked; it unlocks),
// admits parked submissions and wakes m if its new head can go.
func (m *Mailbox) giveBack() {
	m.pending.Add(-1)
	m.promote()
	wake := m.wake()
	m.unlockRetire()
	if wake {
		m.home.r.Dispatch(m)
	}
}
