package mailbox

import (
	"context"
	"sync/atomic"
)

// Plain tasks.
//
// A single-key exclusive task nobody finds through a Turn while it waits
// is queued as a plain task: fn and an arg in the queue's slot, no node of
// its own (see "The queue"). What reads Turns (EachWaiting, Holder) does
// not see it, so an owner queues plain tasks only where it needs none of
// those (see TakePlain for Close, and PlainPos and EachManyAheadPlain to
// check a wait on one for a cycle).

// Plain runs an owner's plain tasks (EnqueuePlain), one per Runner
// (RunnerOptions.Plain). RunPlain makes of a slot's fn, arg and stamp (0
// unless tracked) what the task needs (its context, say) as it runs; left
// counts the batch's slots yet to run, this one included. Like Work.Run it
// must not panic and must account for the task's end itself, even if fn
// calls runtime.Goexit (then it does not return; the mailbox ends the task
// and hands the key to a fresh drive loop). SettlePlain, like Work.Settle,
// wakes the task's waiters once its place is free (after RunPlain,
// returned or not). NewAux makes m's shared Aux if the owner stored none,
// locked, as m's first batch with a plain task is cut, so a key whose
// tasks only wait does not pay for it.
type Plain interface {
	RunPlain(m *Mailbox, fn func(context.Context) error, arg any, stamp int64, left int)
	SettlePlain(arg any)
	NewAux(m *Mailbox) *Aux
}

// HoldPlain grants the caller an exclusive hold of m at once (locked), with
// no Turn, for a plain task (a Do that found its key idle) it runs on its
// own goroutine, which must own an execution slot. The caller must have
// checked CanHold(false) under the same lock, and calls UnholdPlain after
// the run, unlocked, even if fn called runtime.Goexit.
func (m *Mailbox) HoldPlain() {
	if m.home.r.opt.Clock != nil {
		m.made().heldSince.Store(held(m.home.r.opt.Clock()))
	} else if m.pending.Load() == 0 && m.home.owner.Linger(m) {
		// pending is 0 whenever CanHold holds; checking keeps the
		// give-back's swap, which expects exactly this hold, honest.
		m.hold = holdFast
		m.pending.Add(1 | fastBit)
		return
	}
	m.hold = holdPlain
	m.pending.Add(1)
}

// UnholdPlain gives back a hold taken by HoldPlain, and hands the key to
// what queued behind it: a fast hold that nobody claimed meanwhile in one
// atomic step, else under m's lock.
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
// Most Dos find their key idle and leave it idle (the uncontended Do).
// Giving the hold back under m's lock costs a second lock round trip per
// call, and a retirement the next call undoes; a fast hold is given back
// in one atomic step if nobody came for the key meanwhile:
//
//   - HoldPlain, if the owner allows (Owner.Linger; never with a clock:
//     a timed hold ends under the lock), sets hold to holdFast and adds
//     fastBit to pending with the hold's count.
//   - UnholdPlain swaps pending from exactly 1|fastBit to 0: m is left
//     idle, holdFast and not retired (released), and the holder never
//     touches it again.
//   - Whoever else comes for m, locked, calls Claim first: it revokes a
//     hold still taken (clears fastBit), so the holder's swap fails and it
//     gives the hold back under the lock; or it settles a released one
//     (hold = holdNone). Then m changes as if there had been no fast hold.
//     The swap and the revocation are CASes on one word: one wins.
//   - A released hold is also settled, and m retired, by the next unlock
//     (unlockRetire, reading pending once for both) and by the owner
//     before it counts its live mailboxes (Released); it keeps at most one
//     fast hold per lock (Linger), so it knows where to look.
//
// While a fast hold is taken nothing is queued or parked on m (whoever
// would, claims it first), so no batch runs and the driver's unlocked
// decrement of pending never meets fastBit.

// unholdLocking, if set (by a test), is called as UnholdPlain turns to the
// lock: a test can then order a revocation and what follows it.
var unholdLocking func()

// fastBit marks pending while a fast hold is taken and not revoked.
const fastBit = 1 << 30

// Claim readies m, just locked by its owner, for a caller that will read
// or change it (locked): a fast hold still taken is revoked, one given back
// is settled (see "Fast holds"); otherwise it does nothing.
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

// Released reports whether m's fast hold was given back but not settled
// (locked): m is idle but not retired. Claim settles it; Release retires it.
func (m *Mailbox) Released() bool { return m.hold == holdFast && m.pending.Load() == 0 }

// clearHeld ends the timing of a hold (locked), writing only if a clock set it.
func (m *Mailbox) clearHeld() {
	if x := m.x.Load(); x != nil && x.heldSince.Load() != 0 {
		x.heldSince.Store(0)
	}
}

// Aux is what an owner keeps with a mailbox (SetAux, Plain.NewAux): one
// pointer in the mailbox rather than an interface. The owner embeds it in
// the value V names, so it costs no allocation of its own.
type Aux struct{ V any }

// Aux returns what SetAux stored, or what Plain.NewAux made as the first
// plain batch was cut, else nil (locked, or unlocked by Plain during a
// batch). Once set it never changes, even when m is reused for another key.
func (m *Mailbox) Aux() *Aux { return m.aux }

// SetAux stores a value for the owner, say what the plain tasks of m share
// (locked). m must have none yet (Aux is nil): once set, Aux never changes.
func (m *Mailbox) SetAux(v *Aux) { m.aux = v }

// Local returns a value that every mailbox under m's lock shares, kept by
// m's home (locked): what the user keeps per lock rather than per key
// (Aux), say a stock its tasks draw on. It is nil until stored.
func (m *Mailbox) Local() *any { return &m.home.local }

// Count returns a counter that every mailbox under m's lock shares, added
// to under the lock and read at any time. It sits beside the lock, costing
// no extra cache line (the executor counts its plain tasks submitted).
func (m *Mailbox) Count() *atomic.Uint64 { return &m.home.count }

// DonePlain gives back the place of a plain task taken out by TakePlain;
// the caller then settles the task (as Plain.SettlePlain would).
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
