package mailbox

import (
	"context"
	"math/bits"
	"unsafe"
)

// The queue.
//
// A mailbox queues every task in one ring of slots, FIFO: a plain task (fn,
// and an arg for the runner's Plain), a turn (no fn; a Turn's Entry as arg),
// or a tombstone (neither) where a task left the middle of the queue
// (TakePlain, Turn.Cancel), so that positions stay true. Drive loops skip
// tombstones; trim drops those at the head once no batch runs, so they never
// keep the key from holding or retiring, or a turn behind them from a shared
// hold; compact closes the others when the ring is full.
//
// Positions are absolute and wrap: tail counts slots ever queued less those
// compact closed, taken those taken into a batch or out; tail-taken are
// queued, and the buffer's first slot (head) is at position taken-cut. A
// task's position (Entry.pos, Place) finds its slot in O(1) and orders tasks
// (EachManyAhead). A batch (cut slots at the head) runs unlocked and stays in
// the ring until it ends, so the queue's readers see it too.

// slot is a queued task's fn: nil for a turn or a tombstone (args: ring).
type slot struct {
	fn func(context.Context) error
}

// ring is a mailbox's queue (see "The queue"): the running batch's cut
// slots, then the queued ones. It is inline in the mailbox, its buffer held
// as the first slot's address and the log of its size, so a mailbox stays at
// 64 bytes; the buffer is made with one slot and grows when full (grown).
// Args have a buffer of their own by the same indexes, made for the first
// non-nil arg (a Go with context.Background() has none) and dropped by a
// resize with none queued; a free index's arg is nil (drop and tombstones
// clear it), so push writes only non-nil ones. Stamps (OldestStamp), where
// tracked, are kept by the same indexes in the extra (st; nil elsewhere).
type ring struct {
	ptr         *slot  // the buffer's first slot; nil: no buffer yet
	args        *any   // the args buffer's first (see above); nil: every arg is nil
	head        uint32 // buffer index of the first slot (of the batch, if one runs)
	tail, taken uint32
	cut         uint16 // slots at head in the running batch
	log         uint8  // the buffer holds 1<<log slots, if there is one
	high        bool   // the ring held over an eighth of its buffer since the last drop
}

func (q *ring) buf() []slot {
	if q.ptr == nil {
		return nil
	}
	return unsafe.Slice(q.ptr, 1<<q.log)
}

func (q *ring) argBuf() []any {
	if q.args == nil {
		return nil
	}
	return unsafe.Slice(q.args, 1<<q.log)
}

func (q *ring) arg(k int) any { return argAt(q.argBuf(), k) }

// clearSlot empties slot k of a ring with buf and args, so what it held can
// be collected.
func clearSlot(buf []slot, args []any, k int) {
	buf[k] = slot{}
	if args != nil {
		args[k] = nil
	}
}

func argAt(args []any, k int) any {
	if args == nil {
		return nil
	}
	return args[k]
}

// entryAt is slot k's turn entry, nil for a plain task or a tombstone.
func entryAt(buf []slot, args []any, k int) *Entry {
	if buf[k].fn != nil {
		return nil
	}
	e, _ := argAt(args, k).(*Entry)
	return e
}

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

// index is the buffer index of position pos, in the ring (queued or batched).
func (q *ring) index(pos uint32) int { return q.at(int(pos - (q.taken - uint32(q.cut)))) }

// push queues a slot and returns its position; a full ring compacts first.
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

func stampAt(st *[]int64, k int) int64 {
	if st == nil {
		return 0
	}
	return (*st)[k]
}

// grown is the size a full ring grows to: one slot first (most keys have
// one task waiting), doubling while small, fourfold from bigRing on, where
// so deep a queue is likely a burst and each growth copies it under the
// key's lock. A ring grown so is a quarter full: drop does not shrink it.
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

const bigRing = 256

// compact closes the gaps tombstones leave among the queued slots, moving
// later slots (args, stamps) forward in order, and returns how many it freed
// at the tail (locked); the batch's slots, read unlocked, stay. A moved turn's
// entry gets its new position; nothing else keeps one across the lock
// (PlainPos is asked anew). Without it, tombstones behind a task that never
// ends would grow the ring without bound and slow each walk of the queue.
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
		clearSlot(buf, args, k)
	}
	q.tail -= uint32(size - w)
	return size - w
}

// resize moves the slots (args, stamps) to new buffers of n slots, with args
// if a slot or withArgs has one; a running batch may still read the old ones.
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

// drop clears the n slots at head, no longer counted (a batch that ran, or
// queued ones taken). Over 64 slots, the buffer shrinks to a quarter once the
// ring held at most an eighth of it since the last drop (high), so a Batcher's
// queue, drained and refilled at each batch, keeps its buffer.
func (q *ring) drop(n int, st *[]int64) {
	buf, args := q.buf(), q.argBuf()
	for i := range n {
		k := q.at(i)
		clearSlot(buf, args, k)
	}
	q.head = uint32(q.at(n))
	if l := len(buf); l > 64 && !q.high && q.size() <= l/8 {
		q.resize(l/4, false, st)
	}
	q.high = q.size() > q.len()>>3
}

// trim drops the tombstones at the queue's head, no batch running (locked).
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

// tombstone empties the queued slot at buffer index k (locked).
func (m *Mailbox) tombstone(k int) {
	q := &m.q
	clearSlot(q.buf(), q.argBuf(), k)
	if q.cut == 0 {
		q.trim(m.stamps())
	}
}

// link appends e to the queue (locked). It must not write e.m (set already):
// a parked entry's submitter, woken by Promote first, may read it unlocked.
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

// front returns the first queued task's entry (nil: a plain task), or !ok
// if none (locked, no batch running: the head is no tombstone).
func (m *Mailbox) front() (e *Entry, ok bool) {
	q := &m.q
	if q.queued() == 0 {
		return nil, false
	}
	return entryAt(q.buf(), q.argBuf(), q.at(int(q.cut))), true
}

// EnqueuePlain queues fn (not nil) at m's tail, with arg for the runner's
// Plain and stamp for OldestStamp (0: none), locked, and reports, as Enqueue
// does, whether to call Dispatch after unlocking; at finds it again (Place).
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

// A Place is where EnqueuePlain queued a plain task, all its owner keeps of
// it: PlainPos and TakePlainOf find the task in O(1), or O(gaps closed ahead)
// once compact moved it toward the head. The zero Place: the queue is walked.
type Place struct {
	pos uint32
	ok  bool
}

// findPlain finds arg's plain task among the queued, at or before at (locked).
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

// eachWaiting calls f, oldest first until it returns false, for each task not
// yet started (locked): a batch's from its cursor on (plain unclaimed, turn
// Queued, maybe one starting now), then the queued. k is the buffer index, e
// the entry (nil: plain).
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
				// No extra: a batch of one, whose task counts as started.
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

// EachWaiting calls f (locked) for every turn not yet started, a batch's too,
// which Close giving up and the sweep must reach (one starting now fails Cancel).
func (m *Mailbox) EachWaiting(f func(t *Turn)) {
	m.eachWaiting(func(_ int, e *Entry) bool {
		if e != nil {
			f(e.t)
		}
		return true
	})
}

// Oldest returns the oldest waiting turn or plain arg (see eachWaiting; locked).
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

// OldestStamp returns the stamp (Turn.SetStamp, EnqueuePlain) of the oldest
// waiting task (eachWaiting), or false (locked). A batched turn is read only
// while Queued: its owner never reuses a turn batched or canceled.
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
// ahead of e (of every queued task if e is nil), oldest first (locked).
// Unless one was queued since a walk found none (extra.many), it walks nothing.
func (m *Mailbox) EachManyAhead(e *Entry, f func(t *Turn)) {
	if e == nil {
		m.eachManyAhead(m.q.tail, f)
		return
	}
	m.eachManyAhead(e.pos, f)
}

// EachManyAheadPlain is EachManyAhead for a waiting plain task's pos (PlainPos).
func (m *Mailbox) EachManyAheadPlain(pos uint32, f func(t *Turn)) { m.eachManyAhead(pos, f) }

// eachManyAhead is EachManyAhead up to position end (locked).
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

// PlainPos reports whether the plain task queued with arg (==) at at still
// waits, not batched or taken, and its position for EachManyAheadPlain (locked).
func (m *Mailbox) PlainPos(arg any, at Place) (pos uint32, queued bool) {
	i, queued := m.q.findPlain(arg, at)
	return m.q.taken + uint32(i), queued
}

// TakePlain takes out of m every plain task not yet started that drop selects
// by its arg, returning their args in FIFO order for the owner to end unrun
// (locked): Close giving up takes all, a sweep those whose ctx ended. Each was
// pending: call DonePlain per task, unlocked. One in a running batch is
// claimed (claim), so the loop skips it; a queued one leaves a tombstone.
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
		clearSlot(buf, args, k)
	}
	if q.cut == 0 {
		q.trim(m.stamps())
	}
	return ps
}

// takeBatched is TakePlain for the running batch: it claims what drop selects.
func (m *Mailbox) takeBatched(drop func(arg any) bool) (ps []any) {
	q := &m.q
	x := m.x.Load()
	if x == nil || q.cut <= 1 {
		// A batch of one has nothing behind its task and may predate the
		// extra (whose claims are not its): its task is noticed as it starts.
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

// TakePlainOf is TakePlain for the plain task queued with arg at at (Place),
// reporting whether it took it (locked); its owner ends it likewise.
func (m *Mailbox) TakePlainOf(arg any, at Place) bool {
	q := &m.q
	if i, queued := q.findPlain(arg, at); queued {
		m.tombstone(q.at(int(q.cut) + i))
		return true
	}
	return m.takeBatched(func(a any) bool { return a == arg }) != nil
}
