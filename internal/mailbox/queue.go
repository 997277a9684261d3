package mailbox

import (
	"context"
	"math/bits"
	"unsafe"
)

// The queue.
//
// A mailbox queues every task in one ring of slots, in FIFO order. A slot
// holds one of:
//
//   - a plain task: its fn, and an arg for the runner's Plain
//     (EnqueuePlain). Nobody finds it while it waits but through the
//     queue (TakePlain, and TakePlainOf and PlainPos from where it was
//     queued: Place), so it needs no node of its own;
//   - a turn: no fn, and the Entry of a Turn as its arg (Enqueue), for a
//     task that others must find or wait for (a Do's caller, a shared or
//     multi-key task, a Batcher's message);
//   - a tombstone: neither, where a task was taken out of the middle of
//     the queue (TakePlain, Turn.Cancel), so that positions stay true.
//     Drive loops skip tombstones, and those at the head of the queue go
//     as soon as no batch runs (trim): they never keep the key from
//     holding or retiring, or a turn behind them from a shared hold. A
//     full ring closes the gaps the others leave before it grows (compact).
//
// Positions are absolute and wrap: tail counts slots ever queued, less
// those compact closed, taken those taken into a batch or out; tail-taken
// are queued, and the first slot in the buffer (head) is at position
// taken-cut. A turn's entry records its position (Entry.pos): its slot is
// found in O(1) to withdraw it, and positions order tasks among each
// other (EachManyAhead). A plain task's owner may keep it (Place).
//
// A drive loop cuts a batch off the head (cut slots) and runs it without
// the lock; its slots stay in the ring until it ends, so what reads the
// queue (OldestStamp, EachWaiting, TakePlain) sees them too.

// slot is a queued task's fn, nil for a turn or a tombstone; its arg is
// kept apart (ring).
type slot struct {
	fn func(context.Context) error
}

// ring is a mailbox's queue (see "The queue"): the running batch's slots
// (cut of them), then the queued ones.
//
// It is inline in the mailbox (a ring of its own would cost a pointer, an
// object and a cache line more per task), its buffer held as the first
// slot's address and the log of its size (9 bytes, not a slice's 24) and
// the batch size in 16 bits, so a mailbox stays at 64 bytes. The buffer is
// made on the first task queued, with one slot, and grows when full (grown).
//
// Args live in a second buffer with the same indexes, made once a non-nil
// arg is queued and dropped by a resize with none queued: a waiting task
// with a nil arg (a plain Go with context.Background()) costs 8 bytes, one
// pointer to scan; one with an arg 24. A free index always has a nil arg (drop
// and tombstones clear it), so push writes only non-nil args. Stamps (for
// OldestStamp) are kept only where the runner tracks the oldest task, in
// the extra, by the same indexes (the st arguments below; nil elsewhere).
type ring struct {
	ptr         *slot  // the buffer's first slot; nil: no buffer yet
	args        *any   // the args buffer's first (see above); nil: every arg is nil
	head        uint32 // buffer index of the first slot (of the batch, if one runs)
	tail, taken uint32
	cut         uint16 // slots at head in the running batch
	log         uint8  // the buffer holds 1<<log slots, if there is one
	high        bool   // the ring held over an eighth of its buffer since the last drop
}

// buf returns the ring's buffer, nil if it has none.
func (q *ring) buf() []slot {
	if q.ptr == nil {
		return nil
	}
	return unsafe.Slice(q.ptr, 1<<q.log)
}

// argBuf returns the ring's args buffer, nil if it has none.
func (q *ring) argBuf() []any {
	if q.args == nil {
		return nil
	}
	return unsafe.Slice(q.args, 1<<q.log)
}

// arg is the arg of the slot at buffer index k.
func (q *ring) arg(k int) any { return argAt(q.argBuf(), k) }

// argAt is args[k], or nil if there are no args.
func argAt(args []any, k int) any {
	if args == nil {
		return nil
	}
	return args[k]
}

// entryAt is the entry of the turn in the slot at buffer index k of a
// ring with buf and args; nil for a plain task or a tombstone.
func entryAt(buf []slot, args []any, k int) *Entry {
	if buf[k].fn != nil {
		return nil
	}
	e, _ := argAt(args, k).(*Entry)
	return e
}

// len is the buffer's size in slots: 0 or a power of two.
func (q *ring) len() int {
	if q.ptr == nil {
		return 0
	}
	return 1 << q.log
}

// setBuf makes buf, nil or of a power of two slots, the ring's buffer.
func (q *ring) setBuf(buf []slot) {
	q.ptr, q.log = nil, 0
	if len(buf) > 0 {
		q.ptr, q.log = unsafe.SliceData(buf), uint8(bits.TrailingZeros(uint(len(buf))))
	}
}

// queued is the number of slots waiting (tombstones included).
func (q *ring) queued() int { return int(q.tail - q.taken) }

func (q *ring) size() int { return int(q.cut) + q.queued() }

// at returns the index in buf of the i-th slot from head.
func (q *ring) at(i int) int { return (int(q.head) + i) & (q.len() - 1) }

// index returns the buffer index of the slot at position pos, which must
// be in the ring (queued, or in the running batch).
func (q *ring) index(pos uint32) int { return q.at(int(pos - (q.taken - uint32(q.cut)))) }

// push queues a slot and returns its position. A full ring first closes
// the gaps its tombstones leave (compact), and grows only if that freed
// under a quarter of it.
func (q *ring) push(fn func(context.Context) error, arg any, stamp int64, st *[]int64) uint32 {
	if n := q.size(); n == q.len() && (q.compact(st) == 0 || 4*q.size() > 3*q.len()) {
		q.resize(q.grown(), arg != nil, st)
	}
	n := q.size()
	k := q.at(n)
	q.buf()[k] = slot{fn}
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
	q.high = q.high || n >= q.len()>>3
	return q.tail - 1
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
func (q *ring) grown() int {
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

// compact closes the gaps that tombstones leave among the queued slots
// (locked), moving those behind a gap forward in order, with their args
// and stamps, and returns how many slots it freed at the tail. A moved
// turn's entry gets its new position, so positions stay true: a queued
// slot is at taken plus its place among the queued, and nothing else keeps
// a position across the lock (PlainPos is asked anew).
//
// Without it, tombstones in the middle of the queue go only once they
// reach its head: behind a task that never ends, every submission
// withdrawn meanwhile (its ctx ended while a Wait or a Do waited) would
// leave one, the ring would grow without bound, and every walk of the
// queue (a sweep) would cost more each time. The running batch's slots are
// not touched: its loop reads them unlocked.
func (q *ring) compact(st *[]int64) int {
	if q.ptr == nil {
		return 0
	}
	buf, args := q.buf(), q.argBuf()
	cut, size := int(q.cut), q.size()
	w := cut // where the next live slot goes
	for i := cut; i < size; i++ {
		k := q.at(i)
		if buf[k].fn == nil && argAt(args, k) == nil {
			continue // a tombstone
		}
		if i != w {
			d := q.at(w)
			buf[d] = buf[k]
			if args != nil {
				args[d] = args[k]
			}
			if st != nil {
				(*st)[d] = (*st)[k]
			}
			if e := entryAt(buf, args, d); e != nil {
				e.pos = q.taken + uint32(w-cut)
			}
		}
		w++
	}
	for i := w; i < size; i++ {
		k := q.at(i)
		buf[k] = slot{}
		if args != nil {
			args[k] = nil
		}
	}
	q.tail -= uint32(size - w)
	return size - w
}

// resize moves the slots (with their args and stamps, if kept) to new
// buffers of n slots; the args buffer is kept only if a slot has an arg or
// withArgs (the push that grows the ring has one). A running batch may
// still read the old buffers: its slots are copied, never overwritten.
func (q *ring) resize(n int, withArgs bool, st *[]int64) {
	old, oldArgs := q.buf(), q.argBuf()
	for i := 0; !withArgs && oldArgs != nil && i < q.size(); i++ {
		withArgs = oldArgs[q.at(i)] != nil
	}
	buf := make([]slot, n)
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

// drop removes the n slots at head, which the counts no longer include
// (a batch that ran, or queued ones taken), clearing them so that what
// they held can be collected.
//
// It gives back what a burst took: a buffer of over 64 slots shrinks to a
// quarter once the ring held at most an eighth of it from the last drop
// to this one (high). A queue that drains at every batch and fills again
// meanwhile, as a Batcher's does, keeps its buffer instead of shrinking and
// regrowing it each time (Mailbox.Reset drops all but a small ring).
func (q *ring) drop(n int, st *[]int64) {
	buf, args := q.buf(), q.argBuf()
	for i := range n {
		k := q.at(i)
		buf[k] = slot{}
		if args != nil {
			args[k] = nil
		}
	}
	q.head = uint32(q.at(n))
	if l := len(buf); l > 64 && !q.high && q.size() <= l/8 {
		q.resize(l/4, false, st)
	}
	q.high = q.size() > q.len()>>3
}

// trim drops the tombstones at the head of the queue while no batch runs
// (locked; see "The queue").
func (q *ring) trim(st *[]int64) {
	buf, args, n := q.buf(), q.argBuf(), 0
	for n < q.queued() && buf[q.at(n)].fn == nil && argAt(args, q.at(n)) == nil {
		n++
	}
	if n > 0 {
		q.taken += uint32(n)
		q.drop(n, st)
	}
}

// tombstone takes the queued slot at buffer index k out of the queue
// (locked): its task left it unrun.
func (m *Mailbox) tombstone(k int) {
	q := &m.q
	q.buf()[k] = slot{}
	if args := q.argBuf(); args != nil {
		args[k] = nil
	}
	if q.cut == 0 {
		q.trim(m.stamps())
	}
}

// link appends e, whose m is set, to the queue (locked). It does not write
// e.m: for a parked entry Park set it, and promote wakes the submitter
// (Work.Promote) before linking, so the submitter may already read e.m
// unlocked (Entry.release does, to find the lock).
func (m *Mailbox) link(e *Entry) {
	m.measure()
	e.at = inQueue
	e.pos = m.q.push(nil, e, 0, m.stamps())
	m.pending.Add(1)
}

// unlink takes the queued entry e out of the queue (locked).
func (m *Mailbox) unlink(e *Entry) {
	m.tombstone(m.q.index(e.pos))
	e.at = nowhere
}

// front returns what goes first among the queued: a turn's entry, or nil
// for a plain task; ok is false if nothing is queued (locked, no batch
// running: the head is no tombstone).
func (m *Mailbox) front() (e *Entry, ok bool) {
	q := &m.q
	if q.queued() == 0 {
		return nil, false
	}
	return entryAt(q.buf(), q.argBuf(), q.at(int(q.cut))), true
}

// EnqueuePlain queues fn, with arg for the runner's Plain and the stamp
// OldestStamp reports (as for Turn.SetStamp; 0 if none), at m's tail
// (locked). Like Enqueue it reports whether to call Dispatch after
// unlocking. fn must not be nil. The owner takes it out with TakePlain or
// TakePlainOf, which at makes cheap.
func (m *Mailbox) EnqueuePlain(fn func(context.Context) error, arg any, stamp int64) (at Place, dispatch bool) {
	at = m.queuePlain(fn, arg, stamp)
	return at, m.wake()
}

// queuePlain queues a plain task (locked).
func (m *Mailbox) queuePlain(fn func(context.Context) error, arg any, stamp int64) Place {
	m.measure()
	pos := m.q.push(fn, arg, stamp, m.stamps())
	m.pending.Add(1)
	return Place{pos, true}
}

// A Place is where EnqueuePlain queued a plain task, kept by its owner
// (the owner of a plain task keeps nothing else per task): PlainPos and
// TakePlainOf find the task from it in O(1) while nothing moved it, and in
// O(gaps closed ahead of it) after compact did, which moves slots only
// toward the head. The zero Place knows nothing: the queue is walked.
type Place struct {
	pos uint32
	ok  bool
}

// findPlain returns the index among the queued (from the first after the
// running batch) of the plain task queued with arg, at or before at's
// position (see Place), or false if it is not queued (locked).
func (q *ring) findPlain(arg any, at Place) (i int, queued bool) {
	buf, args := q.buf(), q.argBuf()
	i = q.queued() - 1
	if at.ok {
		i = min(i, int(int32(at.pos-q.taken)))
	}
	for ; i >= 0; i-- {
		if k := q.at(int(q.cut) + i); buf[k].fn != nil && argAt(args, k) == arg {
			return i, true
		}
	}
	return 0, false
}

// eachWaiting calls f for each task of m that has not started, oldest
// first, until f returns false (locked): those of a running batch not yet
// started (from its loop's cursor on: a plain task unclaimed, a turn still
// Queued; f may meet one the loop is starting now), then the queued ones.
// k is the task's buffer index, e its entry (nil for a plain task).
func (m *Mailbox) eachWaiting(f func(k int, e *Entry) bool) {
	q := &m.q
	buf, args := q.buf(), q.argBuf()
	x := m.x.Load()
	from, plain := 0, 0 // plain: plain tasks of the batch before slot i
	if x != nil && q.cut > 0 {
		c := x.cursor.Load()
		from, plain = int(c>>32), int(uint32(c))
	}
	for i := from; i < q.size(); i++ {
		k := q.at(i)
		inBatch := i < int(q.cut)
		if buf[k].fn != nil {
			if inBatch {
				plain++
				// A batch of one without the extra claims nothing (claim): its
				// task counts as started.
				if x == nil || x.plainClaim.Load()&(1<<(plain-1)) != 0 {
					continue
				}
			}
			if !f(k, nil) {
				return
			}
			continue
		}
		e := entryAt(buf, args, k)
		if e == nil || inBatch && e.t.state.Load() != Queued {
			continue
		}
		if !f(k, e) {
			return
		}
	}
}

// EachWaiting calls f (locked) for every turn of m not yet started: those
// of a running batch (f may meet one the loop is starting now, whose
// Cancel then fails), then the queued ones. A Close that gives up and a
// sweep of ended contexts must reach both (PITFALLS: work taken out of the
// queue is invisible to the queue's owner).
func (m *Mailbox) EachWaiting(f func(t *Turn)) {
	m.eachWaiting(func(_ int, e *Entry) bool {
		if e != nil {
			f(e.t)
		}
		return true
	})
}

// Oldest returns m's oldest task not yet started (see eachWaiting): a
// turn, or the arg of a plain task (t nil); neither if none (locked).
func (m *Mailbox) Oldest() (t *Turn, arg any) {
	m.eachWaiting(func(k int, e *Entry) bool {
		if e != nil {
			t = e.t
		} else {
			arg = m.q.arg(k)
		}
		return false
	})
	return t, arg
}

// OldestStamp returns the stamp (Turn.SetStamp, or EnqueuePlain's) of the
// oldest task that waits (see eachWaiting), or false if none (locked). A
// turn in a running batch is read only while it is Queued: its owner
// never reuses a turn that was in a batch (Turn.Batched) or canceled.
func (m *Mailbox) OldestStamp() (at int64, ok bool) {
	m.eachWaiting(func(k int, e *Entry) bool {
		if e != nil {
			at = e.t.stamp.Load()
		} else {
			at = stampAt(m.stamps(), k)
		}
		ok = true
		return false
	})
	return at, ok
}

// EachManyAhead calls f for each multi-key task that holds m or is queued
// ahead of e, oldest first; ahead of every queued task if e is nil (locked).
// A mailbox where no multi-key task was queued since a walk found none
// answers at once, without walking its queue under the lock.
func (m *Mailbox) EachManyAhead(e *Entry, f func(t *Turn)) {
	if e == nil {
		m.eachManyAhead(m.q.tail, f)
		return
	}
	m.eachManyAhead(e.pos, f)
}

// EachManyAheadPlain is EachManyAhead for the plain task queued at pos,
// which must still wait (PlainPos).
func (m *Mailbox) EachManyAheadPlain(pos uint32, f func(t *Turn)) { m.eachManyAhead(pos, f) }

// eachManyAhead is EachManyAhead for the tasks queued before position end
// (locked).
func (m *Mailbox) eachManyAhead(end uint32, f func(t *Turn)) {
	x := m.x.Load()
	if x == nil || !x.many {
		return
	}
	found := false
	if h := m.Holder(); h != nil && h.many != nil {
		found = true
		f(h)
	}
	q := &m.q
	buf, args := q.buf(), q.argBuf()
	n := min(q.queued(), max(0, int(int32(end-q.taken))))
	for i := range n {
		if o := entryAt(buf, args, q.at(int(q.cut)+i)); o != nil && o.t.many != nil {
			found = true
			f(o.t)
		}
	}
	if !found && n == q.queued() {
		x.many = false // the whole queue was seen
	}
}

// PlainPos reports whether the plain task queued with arg (==) at at (see
// Place) still waits in m's queue, and if so its position for
// EachManyAheadPlain (locked); not once a drive loop took it into a batch
// or TakePlain took it out.
func (m *Mailbox) PlainPos(arg any, at Place) (pos uint32, queued bool) {
	i, queued := m.q.findPlain(arg, at)
	return m.q.taken + uint32(i), queued
}

// TakePlain takes out of m every plain task not yet started that drop
// (given its arg) selects, returning their args in FIFO order for the
// owner to end unrun (locked): a Close that gives up takes all, a sweep
// those whose ctx ended. Each was pending: call DonePlain once per task
// ended, unlocked.
//
// In a running batch it claims each task it takes (claim), so the loop
// skips it; a queued one leaves a tombstone.
func (m *Mailbox) TakePlain(drop func(arg any) bool) []any {
	q := &m.q
	buf, args := q.buf(), q.argBuf()
	ps := m.takeBatched(drop)
	for i := range q.queued() {
		k := q.at(int(q.cut) + i)
		if buf[k].fn == nil || !drop(argAt(args, k)) {
			continue
		}
		ps = append(ps, argAt(args, k))
		buf[k] = slot{}
		if args != nil {
			args[k] = nil
		}
	}
	if q.cut == 0 {
		q.trim(m.stamps())
	}
	return ps
}

// takeBatched is TakePlain for the running batch's plain tasks not yet
// started: it claims each that drop selects (claim), so the loop skips it,
// and returns their args.
func (m *Mailbox) takeBatched(drop func(arg any) bool) (ps []any) {
	q := &m.q
	x := m.x.Load()
	if x == nil || q.cut <= 1 {
		// A batch of one has nothing behind its task and may have run
		// without the extra (made since: its claims are not the batch's):
		// leave it; its task, if not started, is noticed as it starts.
		return nil
	}
	buf, args := q.buf(), q.argBuf()
	plain := 0
	for i := range int(q.cut) {
		k := q.at(i)
		if buf[k].fn == nil {
			continue
		}
		bit := uint32(1) << plain
		plain++
		if x.plainClaim.Load()&bit == 0 && drop(argAt(args, k)) && claim(x, plain-1) {
			ps = append(ps, argAt(args, k))
		}
	}
	return ps
}

// TakePlainOf is TakePlain for the one plain task queued with arg at at
// (see Place), in O(1) if it is still queued where it was: it reports
// whether it took the task out (locked). Its owner ends it as it would one
// TakePlain took, and calls DonePlain.
func (m *Mailbox) TakePlainOf(arg any, at Place) bool {
	q := &m.q
	if i, queued := q.findPlain(arg, at); queued {
		m.tombstone(q.at(int(q.cut) + i))
		return true
	}
	return m.takeBatched(func(a any) bool { return a == arg }) != nil
}
