package mailbox

import (
	"context"
	"math/bits"
	"sync/atomic"
	"unsafe"
)

// Plain tasks.
//
// Most fire-and-forget work is a single-key exclusive task that nobody
// needs to find through a Turn while it is queued: its owner may take it
// out again (TakePlain: its ctx ended, or Close gave up), but needs no
// Turn for that. Such a task is queued as a plain slot, the function and an arg for the
// runner's Plain (which makes of it what the task needs as it runs), in
// a ring that the mailbox keeps and reuses, so it costs no per-task queue
// node. The drive loop reads the slots of a batch one after another, which
// the processor fetches ahead, instead of following a pointer per task to
// a node another core wrote.
//
// Plain slots and Entries share one FIFO order. Each entry records how many
// plain slots had been queued before it (Entry.plainBefore, against the
// ring's tail count): the entry goes first once every one of those has
// been taken. Nothing else about entries changes.
//
// OldestStamp sees plain slots (their stamps are kept beside them on a
// runner that tracks the oldest task: see plainRing), and the running
// one's hold is timed like any (HeldSince); what reads Turns (Each, Head,
// Oldest) does not: an owner queues plain tasks only where it needs none of
// those for them (see TakePlain for Close). An owner that must find one
// again while it waits (to check a wait on it for a cycle) asks PlainPos
// for its position, by its arg, then EachManyAheadPlain.

// Plain runs an owner's plain tasks (EnqueuePlain), one handler per Runner
// (RunnerOptions.Plain): each slot carries only fn, the owner's arg (one
// pointer, or nil) and the stamp (0 unless the runner tracks the oldest
// task), and RunPlain makes
// of them what the task needs (its context, say) on the goroutine that
// runs it; left is how many of its batch's tasks have yet to run, this one
// included, for an owner that makes for a batch at once what its tasks
// need. Like Work.Run, RunPlain must not panic and
// must account for the task's end itself, including when fn calls
// runtime.Goexit: then it does not return, and the mailbox ends the task as
// after a return and hands the key to a fresh drive loop. Like Work.Settle,
// SettlePlain is called once the task's place in the mailbox is free (after
// RunPlain, returned or not), to wake whoever waits for the task: by then
// the key has room again. RanPlain is a plain batch's RunnerOptions.Ran:
// it is called unlocked once the n tasks of a batch on m have settled
// (not before n, even if one called runtime.Goexit), so that work done
// for many tasks at once can be left to it, with the mailbox it was for
// (the executor gives back their reservations in m's router shard).
// NewAux makes the value that m's plain tasks share (Aux), if its owner
// stored none: it is called locked, as the
// mailbox's first plain batch is cut, so that a key whose tasks only wait
// does not pay for it.
type Plain interface {
	RunPlain(m *Mailbox, fn func(context.Context) error, arg any, stamp int64, left int)
	SettlePlain(arg any)
	RanPlain(m *Mailbox, n int)
	NewAux(m *Mailbox) *Aux
}

// plainSlot is a queued plain task's fn: 8 bytes, what a waiting task
// costs its key and what the collector scans for it while it waits, if its
// arg is nil (a Go with no context of its own, for the executor). The args
// are kept beside the slots, in a buffer of the same size made only once a
// task with an arg is queued (see plainRing).
type plainSlot struct {
	fn func(context.Context) error
}

// plainRing is a mailbox's plain slots: first those of the running batch
// (cut of them), then the queued ones. Its counts are absolute and wrap:
// tail counts the slots ever queued, taken those ever taken into a batch or
// out by TakePlain; tail-taken are queued.
//
// The ring is part of the mailbox (32 bytes, where a ring of its own would
// cost a pointer, an object and a cache line more to touch for each task
// queued and each batch taken); its buffer is made on the first plain task
// and kept. The ring keeps the buffer as its first slot's address and the
// log of its size, 9 bytes where a slice takes 24, and the running batch's
// size in 16 bits (a batch takes at most maxCut slots): that keeps the
// mailbox at 64 bytes, a router node with a string key at 80. The buffer
// starts at one slot, since most keys have one task waiting, and grows
// when full (see grown).
//
// The slots' args (the owner's, for Plain) are kept in a second buffer,
// args, with the same size and indexes, made only when a task with an arg
// other than nil is queued, and dropped when the ring is resized with none
// queued: a key whose waiting tasks all have nil args (the executor's plain
// Gos with context.Background()) costs 8 bytes a waiting task, one pointer
// for the collector to scan; a Submit 16. A ring that grows with an arg
// queued (or being pushed) makes its slots and their args as one object,
// the args after the slots, so that a key of Submits grows with one
// allocation a growth (see resize). An index that holds no queued or
// running task always has a nil arg (drop and TakePlain clear it), so push
// writes only the args that are not nil.
//
// The slots' stamps (when the owner accepted each, see OldestStamp) are
// kept only on a runner that tracks the oldest task (TrackOldest), in a
// buffer of the mailbox's extra with the same indexes (the st arguments
// below; nil elsewhere), so that the other keys do without them.
type plainRing struct {
	ptr         *plainSlot // the buffer's first slot; nil: no buffer yet
	args        *any       // the args buffer's first (see above); nil: every arg is nil
	head        uint32     // buffer index of the first slot (of the batch, if one runs)
	tail, taken uint32
	cut         uint16 // slots at head in the running batch
	log         uint8  // the buffer holds 1<<log slots, if there is one
}

// maxCut is the most slots one plain batch takes (plainRing.cut): one
// bit each in extra.plainClaim. A loop with more budget cuts the next
// batch at once, one lock round trip per maxCut tasks.
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

// firstStamp is the stamp and the position (counted as taken and tail
// are) of the first queued slot that is not a tombstone (see TakePlain),
// and false if there is none.
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
// one task waiting), doubling while the ring is small, and growing
// fourfold from bigRing slots on, where a queue that deep is most likely
// a burst that outruns the key's worker: each growth copies every queued
// slot under the key's lock, and the fewer growths the fewer copies: a
// queue that reaches n slots copies between n/3 and 4n/3 of them in all,
// where doubling copies between n and 2n. A ring that grew is a quarter
// full, so drop does not shrink it at once.
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

// resize moves the slots (and their args and stamps, if kept) to new
// buffers of n slots; the args buffer is dropped if no slot has an arg,
// and kept if one has, or if withArgs (the push that grows the ring has
// one). A running batch may still read the old buffers: its slots are copied,
// never overwritten.
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
		// Give back what a burst took: memory follows the work now
		// (and Mailbox.Reset drops all but a small ring).
		q.resize(l/4, false, st)
	}
}

// trim drops the tombstones (see TakePlain) at the head of the queue, while
// no batch runs (locked): they must never keep the key from holding,
// retiring, or letting a Turn behind them join a shared hold. TakePlain
// trims those it leaves; endPlain those left while its batch ran.
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

// EnqueuePlain queues fn, with arg for the runner's Plain, at the tail of m's
// queue (locked), with the stamp OldestStamp reports for it (the owner's clock,
// as for Turn.SetStamp; 0 if it keeps none). Like Enqueue, it reports whether m
// now needs a drive loop; if so the caller must call Dispatch after unlocking.
// fn must not be nil (a nil fn marks a slot taken out: see TakePlain). The
// owner takes a plain task out of the queue with TakePlain, and must never
// need to find it through a Turn (see Plain).
func (m *Mailbox) EnqueuePlain(fn func(context.Context) error, arg any, stamp int64) (dispatch bool) {
	m.measure()
	m.plain.push(fn, arg, stamp, m.stamps())
	m.pending.Add(1)
	return m.wake()
}

// HoldPlain grants the caller an exclusive hold of m at once, for a plain
// task it runs on its own goroutine, which must own an execution slot: a
// Do that found its key idle (locked). The caller must have checked
// CanHold(false) under the same lock. The hold has no Turn: like a drive
// loop's batch it shows as exclusive with no holder (Holder). After the run
// the caller calls UnholdPlain, unlocked, even if fn called
// runtime.Goexit.
func (m *Mailbox) HoldPlain() {
	if m.home.r.opt.Clock != nil {
		m.made().heldSince.Store(held(m.home.r.opt.Clock()))
	} else if m.pending.Load() == 0 && m.home.owner.Linger(m) {
		// (pending is 0 whenever CanHold holds; the check keeps the
		// give-back's swap, which expects exactly this hold, honest.)
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
// Most Dos find their key idle, run fn on the caller's goroutine and leave
// the key idle again (the uncontended Do). Giving such a hold back under
// m's lock costs a second lock round trip per call, and a retirement that
// the next call on the key undoes. A fast hold is given back in one atomic
// step instead, when nobody has come for the key meanwhile:
//
//   - HoldPlain, when the owner allows it (Owner.Linger; never on a runner
//     with a clock, since a hold it times must end under the lock), sets
//     hold to holdFast and adds fastBit to pending with the hold's own
//     count.
//   - UnholdPlain swaps pending from exactly 1|fastBit to 0. That leaves m
//     idle but still hold == holdFast and not retired: released. Nothing
//     else changes, and the holder never touches m again.
//   - Anyone else who comes for m, locked, calls Claim first: it clears
//     fastBit (the revocation) if the hold is still taken, so that the
//     holder's swap fails and it gives the hold back under the lock, as any
//     hold; or it settles a released hold (holder back to nil). Every
//     change to m after Claim is then made as if there had been no fast
//     hold, and the swap and the revocation are one word's two CASes, so
//     exactly one of them wins.
//   - A released hold is settled too, and m then retired, by the next
//     unlock of m (unlockRetire, which reads pending once for both, since
//     the holder's swap may come between two reads), and by the owner
//     before it counts its
//     live mailboxes (Released): the owner keeps at most one mailbox per
//     lock in a fast hold (Linger), so it knows which to look at.
//
// While a fast hold is taken nothing is queued or parked on m (whoever
// would be claimed it first), so no batch runs and the driver's unlocked
// decrement of pending never meets fastBit.

// unholdLocking, if set (by a test), is called as UnholdPlain turns to the
// lock: a test can then order a revocation and what follows it.
var unholdLocking func()

// fastBit marks pending while a fast hold is taken and not revoked.
const fastBit = 1 << 30

// Claim prepares m, just locked by its owner for a caller that will
// inspect or change it, for that caller (locked): a fast hold still taken
// is revoked, one given back is settled (see "Fast holds"). It does
// nothing for a mailbox without a fast hold.
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

// Released reports whether m's fast hold was given back and m not yet
// settled (locked): m is idle then, though nothing retired it. Settle it
// with Claim, and retire it with Release.
func (m *Mailbox) Released() bool { return m.hold == holdFast && m.pending.Load() == 0 }

// clearHeld ends the timing of a hold (locked). A runner without a clock
// never sets heldSince: then it is not written at all.
func (m *Mailbox) clearHeld() {
	if x := m.x.Load(); x != nil && x.heldSince.Load() != 0 {
		x.heldSince.Store(0)
	}
}

// PlainPos finds the plain task queued with arg (compared with ==) in m's
// queue (locked): it reports whether the task still waits there, and if
// so its position, as EachManyAheadPlain takes it. It is false once a drive
// loop took the task into a batch (it runs or is about to) or TakePlain
// took it out. It looks at each waiting slot in turn, so it costs the
// length of the key's queue; the owner keeps no position per task.
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
// the oldest that m runs or queues (locked): the running plain batch's
// first; else, unless a batch of Turns runs (its next Turn is older), the
// first queued slot, if it goes ahead of every queued Turn. Slots taken out
// (TakePlain) are skipped. It is nil otherwise, or if that task has no arg.
// A task of a running batch may have started or ended by then: its arg is
// what the owner queued, which the owner may still read (to name the
// task's key, say).
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

// Aux is what an owner keeps with a mailbox (SetAux, Plain.NewAux): V is
// the owner's. A mailbox keeps a pointer to it, one word, so that a
// waiting key does not pay for an interface; the owner embeds the Aux in
// the value V names, so that keeping it costs no allocation of its own.
type Aux struct{ V any }

// Aux returns what SetAux stored, or what Plain.NewAux made as the first
// plain batch was cut (locked; or unlocked by the runner's Plain, as it
// runs a task of a batch: m had one by then); nil until then. Once set it
// never changes, and it stays with the mailbox when the mailbox is reused
// for another key.
func (m *Mailbox) Aux() *Aux { return m.aux }

// SetAux stores a value for the owner, say what the plain tasks of m share
// (locked). m must have none yet (Aux is nil): once set, Aux never changes.
func (m *Mailbox) SetAux(v *Aux) { m.aux = v }

// Local returns a value, kept by m's home, that every mailbox under m's
// lock shares (locked): what the user keeps per lock rather than per key
// (Aux), say a stock of what its tasks draw on. It is nil until stored.
func (m *Mailbox) Local() *any { return &m.home.local }

// Count returns a counter, kept by m's home, that every mailbox under m's
// lock shares, for its user to add to under the lock and read at any time:
// it sits beside the lock, so that adding to it while holding the lock
// costs no cache line more than the lock does (the executor counts its
// plain tasks submitted there).
func (m *Mailbox) Count() *atomic.Uint64 { return &m.home.count }

// TakePlain takes out of m every plain task that has not started and for
// which drop (given its arg) says so, and returns their args in FIFO order,
// for its owner to end without running them (locked): a giving-up Close
// drops them all, a sweep those whose ctx has ended. Each was pending: the
// caller must call DonePlain once per task it ends, unlocked.
//
// A running batch's tasks that the loop has not claimed are reached too:
// TakePlain claims each it takes (see claim), and the loop skips it. A
// task taken out of the queue leaves its slot behind as a tombstone (no
// fn), so that the positions that order plain slots among entries
// (Entry.plainBefore) stay true: the loop skips it too, and tombstones at
// the head of an idle queue are dropped at once, so that they never keep
// the key from holding or retiring.
func (m *Mailbox) TakePlain(drop func(arg any) bool) []any {
	q := &m.plain
	buf, args := q.buf(), q.argBuf()
	var ps []any
	if x := m.x.Load(); x != nil && q.cut > 1 {
		// A batch of one has nothing behind its slot, and may have run
		// without the extra (made since, its claims not the batch's): it
		// is left alone, and its task, if it has not started, is noticed
		// as it starts.
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

// giveBack frees the place of a task that left m (locked; it unlocks):
// it admits parked submissions into the room, and wakes m if what is now
// at its head can go.
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

// runPlain runs a batch of the plain tasks at the head of the queue, up to
// budget, like runBatch: m is locked on entry and on return, done (a task
// of the caller's) is settled once unlocked, and it returns how many tasks
// it took. A slot taken out (a tombstone, see TakePlain) is cut with the
// batch but costs no budget, as a Turn withdrawn before its batch is cut
// is never taken. The batch's slots stay in the ring while it runs
// unlocked, so that new ones queue behind them; if the ring grows
// meanwhile, the batch goes on reading the buffer it was cut from, whose
// slots are copied, never overwritten.
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

// runPlainFrom runs the tasks of a running plain batch of n, whose first
// slot is buf[first] (its args in args, nil if every one is nil, and its
// stamps in stamps, if kept), from its i-th on (the ones before it have
// run, ran of them tasks: the others were tombstones, see TakePlain). If
// a task never returns (its fn called runtime.Goexit, and RunPlain
// accounted for it), the deferred check frees the task's place and hands
// the rest of the batch, the mailbox and the execution slot to a fresh
// drive loop, as runFrom does.
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

// ranBatched frees the place of a task of a running batch, plain or not,
// once it ran, and admits a parked submission into the room (it queues
// behind the batch).
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

// endPlain removes the batch that ran from the ring and releases its hold
// (locked).
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

// claim claims slot i of a running plain batch, for the drive loop
// before it starts it, or for TakePlain as it takes it out: it reports
// whether the slot was still unclaimed. One atomic OR on one word decides
// which of the two gets a slot: the one that found its bit clear. A
// mailbox without its extra runs batches of one, which TakePlain leaves
// alone.
func claim(x *extra, i int) bool {
	return x == nil || x.plainClaim.Or(1<<i)&(1<<i) == 0
}

// plainOldest returns the stamp of the oldest plain task that waits in the
// running batch, if one runs and the runner tracks it (locked): the first
// slot that nobody has claimed (see claim) and is no tombstone. The
// batch's slots are only read until the batch ends, which takes m's lock:
// a slot found unclaimed is the batch's, and has not started.
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
