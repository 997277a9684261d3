package mailbox

import (
	"context"
	"math/bits"
	"sync/atomic"
	"unsafe"
)

// Plain tasks.
//
// A single-key exclusive task nobody finds through a Turn while it waits
// is queued as a plain slot (fn and an arg) in a ring the mailbox reuses
// (no per-task node: see plainRing). Slots and Entries share one FIFO
// order: an entry records how many slots were queued before it
// (Entry.plainBefore) and goes first once all of those are taken.
// OldestStamp and HeldSince see plain slots; what reads Turns (Each, Head,
// Oldest) does not, so an owner queues plain tasks only where it needs
// none of those (see TakePlain for Close, and PlainPos and
// EachManyAheadPlain to check a wait on one for a cycle).

// Plain runs an owner's plain tasks (EnqueuePlain), one per Runner
// (RunnerOptions.Plain). RunPlain makes of a slot's fn, arg and stamp (0
// unless tracked) what the task needs (its context, say) as it runs; left
// counts the batch's tasks yet to run, this one included. Like Work.Run it
// must not panic and must account for the task's end itself, even if fn
// calls runtime.Goexit (then it does not return; the mailbox ends the task
// and hands the key to a fresh drive loop). SettlePlain, like Work.Settle,
// wakes the task's waiters once its place is free (after RunPlain,
// returned or not). RanPlain is a plain batch's RunnerOptions.Ran: called
// unlocked once all n tasks of a batch on m have settled, even after a
// Goexit. NewAux makes m's shared Aux if the owner stored none, locked, as
// m's first plain batch is cut, so a key whose tasks only wait does not
// pay for it.
type Plain interface {
	RunPlain(m *Mailbox, fn func(context.Context) error, arg any, stamp int64, left int)
	SettlePlain(arg any)
	RanPlain(m *Mailbox, n int)
	NewAux(m *Mailbox) *Aux
}

// plainSlot is a queued plain task's fn; its arg is kept apart (plainRing).
type plainSlot struct {
	fn func(context.Context) error
}

// plainRing is a mailbox's plain slots: the running batch's (cut of them),
// then the queued ones. Its counts are absolute and wrap: tail counts slots
// ever queued, taken those taken into a batch or out (TakePlain);
// tail-taken are queued.
//
// It is inline in the mailbox (a ring of its own would cost a pointer, an
// object and a cache line more per task), its buffer held as the first
// slot's address and the log of its size (9 bytes, not a slice's 24) and
// the batch size in 16 bits, so a mailbox stays at 64 bytes. The buffer is
// made on the first plain task, with one slot, and grows when full (grown).
//
// Args live in a second buffer with the same indexes, made once a non-nil
// arg is queued and dropped by a resize with none queued: a waiting task
// with a nil arg (a plain Go with context.Background()) costs 8 bytes, one
// pointer to scan; a Submit 16. A free index always has a nil arg (drop
// and TakePlain clear it), so push writes only non-nil args. Stamps (for
// OldestStamp) are kept only where the runner tracks the oldest task, in
// the extra, by the same indexes (the st arguments below; nil elsewhere).
type plainRing struct {
	ptr         *plainSlot // the buffer's first slot; nil: no buffer yet
	args        *any       // the args buffer's first (see above); nil: every arg is nil
	head        uint32     // buffer index of the first slot (of the batch, if one runs)
	tail, taken uint32
	cut         uint16 // slots at head in the running batch
	log         uint8  // the buffer holds 1<<log slots, if there is one
}

// maxCut is the most slots a plain batch takes (a bit each in
// extra.plainClaim); a loop with more budget cuts the next batch at once.
const maxCut = 32

// buf returns the ring's buffer, nil if it has none.
func (q *plainRing) buf() []plainSlot {
	if q.ptr == nil {
		return nil
	}
	return unsafe.Slice(q.ptr, 1<<q.log)
}

// argBuf returns the ring's args buffer, nil if it has none.
func (q *plainRing) argBuf() []any {
	if q.args == nil {
		return nil
	}
	return unsafe.Slice(q.args, 1<<q.log)
}

// arg is the arg of the slot at buffer index k.
func (q *plainRing) arg(k int) any {
	if q.args == nil {
		return nil
	}
	return q.argBuf()[k]
}

// len is the buffer's size in slots: 0 or a power of two.
func (q *plainRing) len() int {
	if q.ptr == nil {
		return 0
	}
	return 1 << q.log
}

// setBuf makes buf, nil or of a power of two slots, the ring's buffer.
func (q *plainRing) setBuf(buf []plainSlot) {
	q.ptr, q.log = nil, 0
	if len(buf) > 0 {
		q.ptr, q.log = unsafe.SliceData(buf), uint8(bits.TrailingZeros(uint(len(buf))))
	}
}

// queued is the number of plain slots waiting.
func (q *plainRing) queued() int { return int(q.tail - q.taken) }

func (q *plainRing) size() int { return int(q.cut) + q.queued() }

// at returns the index in buf of the i-th slot from head.
func (q *plainRing) at(i int) int { return (int(q.head) + i) & (q.len() - 1) }

func (q *plainRing) push(fn func(context.Context) error, arg any, stamp int64, st *[]int64) {
	n := q.size()
	if n == q.len() {
		q.resize(q.grown(), arg != nil, st)
	}
	k := q.at(n)
	q.buf()[k] = plainSlot{fn}
	if arg != nil {
		if q.args == nil {
			q.args = unsafe.SliceData(make([]any, q.len()))
		}
		q.argBuf()[k] = arg
	}
	if st != nil {
		(*st)[k] = stamp
	}
	q.tail++
}

// firstStamp is the stamp and position (counted as taken and tail are) of
// the first queued slot that is no tombstone (TakePlain); false if none.
func (q *plainRing) firstStamp(st *[]int64) (at int64, pos uint32, ok bool) {
	buf := q.buf()
	for i := range q.queued() {
		if k := q.at(int(q.cut) + i); buf[k].fn != nil {
			return stampAt(st, k), q.taken + uint32(i), true
		}
	}
	return 0, 0, false
}

// stampAt is the stamp of the slot at buffer index k: 0 unless kept (st).
func stampAt(st *[]int64, k int) int64 {
	if st == nil {
		return 0
	}
	return (*st)[k]
}

// grown is the size a full ring grows to: one slot first (most keys have
// one task waiting), doubling while small, fourfold from bigRing on, where
// so deep a queue is likely a burst outrunning the worker. Each growth
// copies the queue under the key's lock; reaching n slots copies n/3 to
// 4n/3 in all (doubling: n to 2n). A grown ring is a quarter full, so drop
// does not shrink it at once.
func (q *plainRing) grown() int {
	switch n := q.len(); {
	case n == 0:
		return 1
	case n < bigRing:
		return 2 * n
	default:
		return 4 * n
	}
}

// bigRing is the ring size from which a full ring grows fourfold.
const bigRing = 256

// resize moves the slots (with their args and stamps, if kept) to new
// buffers of n slots; the args buffer is kept only if a slot has an arg or
// withArgs (the push that grows the ring has one). A running batch may
// still read the old buffers: its slots are copied, never overwritten.
func (q *plainRing) resize(n int, withArgs bool, st *[]int64) {
	old, oldArgs := q.buf(), q.argBuf()
	for i := 0; !withArgs && oldArgs != nil && i < q.size(); i++ {
		withArgs = oldArgs[q.at(i)] != nil
	}
	buf := make([]plainSlot, n)
	var args []any
	if withArgs {
		args = make([]any, n)
	}
	var stamps []int64
	if st != nil {
		stamps = make([]int64, n)
	}
	for i := range q.size() {
		k := q.at(i)
		buf[i] = old[k]
		if oldArgs != nil && oldArgs[k] != nil {
			args[i] = oldArgs[k]
		}
		if st != nil {
			stamps[i] = (*st)[k]
		}
	}
	q.setBuf(buf)
	q.args = unsafe.SliceData(args)
	q.head = 0
	if st != nil {
		*st = stamps
	}
}

// drop removes the first n slots (a batch that ran, or queued ones taken
// out), clearing them so that what they held can be collected.
func (q *plainRing) drop(n int, st *[]int64) {
	buf, args := q.buf(), q.argBuf()
	for i := range n {
		k := q.at(i)
		buf[k] = plainSlot{}
		if args != nil {
			args[k] = nil
		}
	}
	q.head = uint32(q.at(n))
	if l := len(buf); l > 64 && q.size() <= l/8 {
		// Give back what a burst took (Mailbox.Reset drops all but a small ring).
		q.resize(l/4, false, st)
	}
}

// trim drops the tombstones (TakePlain) at the head of the queue while no
// batch runs (locked): they must never keep the key from holding, retiring,
// or letting a Turn behind them join a shared hold. TakePlain trims those
// it leaves; endPlain those left while its batch ran.
func (q *plainRing) trim(st *[]int64) {
	buf, n := q.buf(), 0
	for n < q.queued() && buf[q.at(n)].fn == nil {
		n++
	}
	if n > 0 {
		q.drop(n, st)
		q.taken += uint32(n)
	}
}

// EnqueuePlain queues fn, with arg for the runner's Plain and the stamp
// OldestStamp reports (as for Turn.SetStamp; 0 if none), at m's tail
// (locked). Like Enqueue it reports whether to call Dispatch after
// unlocking. fn must not be nil (nil marks a slot taken out). The owner
// takes it out with TakePlain and must never need it as a Turn (see Plain).
func (m *Mailbox) EnqueuePlain(fn func(context.Context) error, arg any, stamp int64) (dispatch bool) {
	m.queuePlain(fn, arg, stamp)
	return m.wake()
}

// queuePlain queues a plain slot (locked).
func (m *Mailbox) queuePlain(fn func(context.Context) error, arg any, stamp int64) {
	m.measure()
	m.plain.push(fn, arg, stamp, m.stamps())
	m.pending.Add(1)
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

// PlainPos reports whether the plain task queued with arg (==) still waits
// in m's queue, and if so its position for EachManyAheadPlain (locked); not
// once a drive loop took it into a batch or TakePlain took it out. It scans
// the queue: the owner keeps no position per task.
func (m *Mailbox) PlainPos(arg any) (pos uint32, queued bool) {
	q := &m.plain
	for i := range q.queued() {
		if q.arg(q.at(int(q.cut)+i)) == arg {
			return q.taken + uint32(i), true
		}
	}
	return 0, false
}

// OldestPlain returns the arg of m's oldest plain task, if a plain task is
// the oldest m runs or queues (locked): the running plain batch's first,
// else, unless a batch of Turns runs (its next Turn is older), the first
// queued slot if it goes ahead of every queued Turn; nil otherwise or if
// it has no arg. Slots taken out are skipped. A batch's task may have
// ended: its arg is what the owner queued and may still read (its key, say).
func (m *Mailbox) OldestPlain() any {
	q := &m.plain
	if q.cut == 0 {
		if x := m.x.Load(); x != nil && x.cursor.Load() != nil {
			return nil
		}
		if _, plain := m.front(); !plain {
			return nil
		}
	}
	buf := q.buf()
	for i := range q.size() {
		if k := q.at(i); buf[k].fn != nil {
			return q.arg(k)
		}
	}
	return nil
}

// EachManyAheadPlain is EachManyAhead for the plain task queued at pos,
// which must still wait (PlainPos): it calls f for each multi-key task
// that holds m or is queued ahead of that task (locked).
func (m *Mailbox) EachManyAheadPlain(pos uint32, f func(t *Turn)) {
	// An entry goes ahead of the slot at pos if at most pos slots were
	// queued before it; entries are in FIFO order.
	m.eachManyAhead(func(o *Entry) bool { return int32(o.plainBefore-pos) <= 0 }, f)
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

// TakePlain takes out of m every plain task not yet started that drop
// (given its arg) selects, returning their args in FIFO order for the
// owner to end unrun (locked): a Close that gives up takes all, a sweep
// those whose ctx ended. Each was pending: call DonePlain once per task
// ended, unlocked.
//
// It claims the running batch's unclaimed tasks it takes (claim), so the
// loop skips them. A task taken out leaves a tombstone (nil fn), keeping
// the positions that order slots among entries (Entry.plainBefore) true;
// the loop skips tombstones, and trim drops them at the head of an idle
// queue so they never keep the key from holding or retiring.
func (m *Mailbox) TakePlain(drop func(arg any) bool) []any {
	q := &m.plain
	buf, args := q.buf(), q.argBuf()
	var ps []any
	if x := m.x.Load(); x != nil && q.cut > 1 {
		// A batch of one has nothing behind its slot and may have run
		// without the extra (made since: its claims are not the batch's):
		// leave it; its task, if not started, is noticed as it starts.
		for i := range int(q.cut) {
			k := q.at(i)
			if buf[k].fn != nil && x.plainClaim.Load()&(1<<i) == 0 && drop(argAt(args, k)) && claim(x, i) {
				ps = append(ps, argAt(args, k))
			}
		}
	}
	for i := range q.queued() {
		k := q.at(int(q.cut) + i)
		if buf[k].fn == nil || !drop(argAt(args, k)) {
			continue
		}
		ps = append(ps, argAt(args, k))
		buf[k] = plainSlot{}
		if args != nil {
			args[k] = nil
		}
	}
	if q.cut == 0 {
		q.trim(m.stamps())
	}
	return ps
}

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

// front returns what goes first among the queued: the head entry (plain
// false), a plain slot (nil, true), or nothing (nil, false) (locked).
func (m *Mailbox) front() (*Entry, bool) {
	e := m.head()
	if m.plain.queued() == 0 || (e != nil && m.before(e)) {
		return e, false
	}
	return nil, true
}

// before reports whether the queued entry e goes ahead of every queued
// plain slot: each of those queued before e has been taken.
func (m *Mailbox) before(e *Entry) bool { return int32(e.plainBefore-m.plain.taken) <= 0 }

// runPlain runs a batch of the plain tasks at the queue's head, up to
// budget, as runBatch does (locked on entry and return; done settled once
// unlocked; returns tasks taken). A tombstone (TakePlain) is cut with the
// batch but costs no budget, as a withdrawn Turn is never taken. The slots
// stay in the ring while the batch runs, new ones queuing behind; if the
// ring grows meanwhile, the batch reads the buffer it was cut from: a
// resize copies slots, never overwrites them.
func (m *Mailbox) runPlain(budget int, done *Turn) int {
	q := &m.plain
	limit := min(q.queued(), maxCut)
	if e := m.head(); e != nil {
		limit = min(limit, int(e.plainBefore-q.taken)) // those ahead of the head entry
	}
	buf, args, first := q.buf(), q.argBuf(), int(q.head)
	n, tasks := 0, 0 // slots cut, and tasks among them
	for ; n < limit && tasks < budget; n++ {
		if buf[q.at(n)].fn != nil {
			tasks++
		}
	}
	var stamps []int64 // read with buf, the batch's
	if st := m.stamps(); st != nil {
		stamps = *st
	}
	q.cut, q.taken = uint16(n), q.taken+uint32(n)
	if n > 1 {
		// Each slot is claimed as it starts (see claim): a sweep or a
		// Close that gives up while one runs takes those behind it.
		m.more().plainClaim.Store(0)
	}
	if m.aux == nil {
		m.aux = m.home.r.opt.Plain.NewAux(m) // before the batch reads it unlocked
	}
	m.hold = holdPlain
	m.home.mu.Unlock()
	settle(done)
	m.runPlainFrom(buf, args, stamps, first, n, 0, 0)
	m.home.mu.Lock()
	m.endPlain()
	return tasks
}

// runPlainFrom runs a running plain batch of n, first slot buf[first]
// (args in args, nil if all nil; stamps in stamps, if kept), from its i-th
// on; ran of the earlier ones were tasks, the rest tombstones. If a task
// never returns (fn called runtime.Goexit; RunPlain accounted for it), the
// deferred check frees its place and hands the rest of the batch, the
// mailbox and the slot to a fresh drive loop, as runFrom does.
func (m *Mailbox) runPlainFrom(buf []plainSlot, args []any, stamps []int64, first, n, i, ran int) {
	running := false
	defer func() {
		if running {
			m.ranBatched()
			m.home.r.opt.Plain.SettlePlain(argAt(args, (first+i)&(len(buf)-1)))
			m.home.r.takeOver(func() {
				m.runPlainFrom(buf, args, stamps, first, n, i+1, ran+1)
				m.home.mu.Lock()
				m.endPlain()
				m.home.mu.Unlock()
			}, item{m})
		}
	}()
	mask := len(buf) - 1
	track, clock, p := m.home.r.opt.TrackOldest, m.home.r.opt.Clock, m.home.r.opt.Plain
	x := m.x.Load() // made by runPlain if n > 1, by Init if track or clock
	for ; i < n; i++ {
		k := (first + i) & mask
		s := &buf[k]
		if s.fn == nil || !claim(x, i) {
			continue // taken out (TakePlain), which ends it
		}
		var stamp int64
		if track {
			stamp = stamps[k]
		}
		if clock != nil {
			x.heldSince.Store(held(clock()))
		}
		arg := argAt(args, k)
		running = true
		p.RunPlain(m, s.fn, arg, stamp, n-i)
		running = false
		ran++
		m.ranBatched()
		p.SettlePlain(arg)
	}
	if ran > 0 {
		p.RanPlain(m, ran)
	}
}

// argAt is args[k], or nil if there are no args.
func argAt(args []any, k int) any {
	if args == nil {
		return nil
	}
	return args[k]
}

// ranBatched frees the place of a batch's task (plain or not) that ran and
// admits a parked submission (it queues behind the batch).
func (m *Mailbox) ranBatched() {
	m.pending.Add(-1)
	x := m.x.Load()
	if x == nil {
		return // nothing parked, and the runner measures nothing
	}
	if x.parked.Load() > 0 {
		m.home.mu.Lock()
		m.promote()
		m.home.mu.Unlock()
	}
	if m.home.r.opt.MeasureService {
		x.served.Add(1)
	}
}

// endPlain drops the batch that ran from the ring and ends its hold (locked).
func (m *Mailbox) endPlain() {
	q := &m.plain
	q.drop(int(q.cut), m.stamps())
	q.cut = 0
	q.trim(m.stamps()) // taken out while the batch ran
	if x := m.x.Load(); x != nil {
		x.plainClaim.Store(0)
	}
	m.endBatch()
}

// claim claims slot i of a running plain batch, for the drive loop before
// it starts it or for TakePlain as it takes it out, and reports whether it
// was unclaimed: one atomic OR decides which of the two gets it. A mailbox
// without its extra runs batches of one, which TakePlain leaves alone.
func claim(x *extra, i int) bool {
	return x == nil || x.plainClaim.Or(1<<i)&(1<<i) == 0
}

// plainOldest returns the stamp of the oldest task waiting in the running
// plain batch, if any and tracked (locked): the first slot unclaimed and
// no tombstone. The batch's slots are read only until it ends, which takes
// m's lock, so a slot found unclaimed is the batch's and has not started.
func (m *Mailbox) plainOldest() (int64, bool) {
	q := &m.plain
	x := m.x.Load()
	if q.cut == 0 || x == nil {
		return 0, false // a runner that does not track it has no one to ask
	}
	w, buf := x.plainClaim.Load(), q.buf()
	for i := range int(q.cut) {
		if k := q.at(i); w&(1<<i) == 0 && buf[k].fn != nil {
			return stampAt(m.stamps(), k), true
		}
	}
	return 0, false
}
