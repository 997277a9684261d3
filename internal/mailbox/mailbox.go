package mailbox

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// holdKind is what holds a mailbox exclusively (Mailbox.hold).
type holdKind uint8

const (
	holdNone  holdKind = iota
	holdPlain          // no Turn: a batch, or an inline plain task (HoldPlain)
	holdFast           // given back without the lock ("Fast holds", plain.go)
	holdTurn           // a Turn's hold (extra.holder)
)

// Owner is told (Retire), locked, as a mailbox's lock is released while it is
// idle, perhaps more than once. Linger (locked) allows the plain hold m is
// about to grant to be fast: then keep to "Fast holds" (plain.go).
type Owner interface {
	Retire(m *Mailbox)
	Linger(m *Mailbox) bool
}

// Home is what the mailboxes under one lock (a router shard) share, on its
// cache line: runner and Owner (Init), the user's value and count (Local, Count).
type Home struct {
	mu    sync.Mutex
	r     *Runner
	owner Owner
	local any           // guarded by mu
	count atomic.Uint64 // written under mu; see Mailbox.Count
}

// Init prepares h for mailboxes that run on r and retire through o.
func (h *Home) Init(r *Runner, o Owner) { h.r, h.owner = r, o }

// Lock locks h (and so every mailbox at home in h).
func (h *Home) Lock() { h.mu.Lock() }

// Unlock unlocks h; a mailbox is left with Release, which retires it if idle.
func (h *Home) Unlock() { h.mu.Unlock() }

// Mailbox is one key's FIFO queue and the holds on it, guarded by its home's
// lock unless a field says otherwise; "locked" methods need it held.
type Mailbox struct {
	home *Home // set by Init, never changed
	q    ring  // the queue, plain tasks and turns in one FIFO (see "The queue")
	aux  *Aux  // the owner's (SetAux)

	// x is what only some keys need (see extra), nil until then: stored
	// locked, kept for m's life, loaded unlocked by the drive loop.
	x atomic.Pointer[extra]

	// pending counts entries queued, holding or in a run (with the batch's
	// ended ones if extra counts them: see count), plus fastBit. Only the
	// driver of a batch without extra and UnholdPlain decrement it unlocked.
	pending atomic.Int32
	driven  bool     // a drive loop is scheduled or running
	hold    holdKind // what holds m exclusively, if anything

	Mark bool // the owner's (locked), never read here; fills padding
}

// extra is what a key needs only for a batch of several tasks, a Turn's hold,
// a waiting room or shared holds, or on a runner with a Clock, TrackOldest or
// MeasureService: made on need (more) or at Init there, kept on reuse.
type extra struct {
	holder *Turn // the exclusive holder, if a Turn (holdTurn)

	park list // the waiting room (backpressure.Block): FIFO, not pending

	busySince int64 // served counts since (unix ns; 0: no queue): service rate

	// heldSince is held(when the current hold began), 0 if none: a batch's
	// running task, else the first holder granted; low bit: reported slow
	// (MarkSlow). Written locked or by the batch's loop, read locked.
	heldSince atomic.Int64

	served  atomic.Int32 // counted unlocked by the drive loop as tasks end; decayed locked
	parked  atomic.Int32 // submissions in park; changed locked, read unlocked by the driver
	sharers int32        // shared holds granted

	plainClaim atomic.Uint32 // a bit per plain task of the batch (maxCut): claim

	// cursor is where the running batch's loop got (0: no batch): batch index (high
	// half) and plain tasks before (low half) of the turn it starts or the slot after
	// a group's run. All before it started or were skipped: queue readers start there.
	cursor atomic.Uint64

	// ran counts the batch's ended tasks still in pending (ranBatched): added
	// to unlocked by the drive loop alone, taken off pending by endBatch.
	ran atomic.Int32

	many    bool // a multi-key task may be queued or hold m: set by Enqueue, cleared by EachManyAhead
	measure bool // the runner measures service (RunnerOptions.MeasureService): set by Init

	stamps *[]int64 // the ring's (TrackOldest, Init); a pointer keeps extra small
}

// more returns m's extra, making it if m has none yet (locked).
func (m *Mailbox) more() *extra {
	x := m.x.Load()
	if x == nil {
		x = new(extra)
		m.x.Store(x)
	}
	return x
}

// made returns m's extra on a runner whose options make Init create it.
func (m *Mailbox) made() *extra { return m.x.Load() }

// stamps returns the ring's stamps, nil if not tracked (locked).
func (m *Mailbox) stamps() *[]int64 {
	if !m.home.r.opt.TrackOldest {
		// Spares a submitter the extra's line, written per task (ranBatched).
		return nil
	}
	if x := m.x.Load(); x != nil {
		return x.stamps
	}
	return nil
}

// sharing is the number of shared holds granted (locked).
func (m *Mailbox) sharing() int32 {
	if x := m.x.Load(); x != nil {
		return x.sharers
	}
	return 0
}

// nparked counts the waiting room (locked, or unlocked by the driver).
func (m *Mailbox) nparked() int32 {
	if x := m.x.Load(); x != nil {
		return x.parked.Load()
	}
	return 0
}

// Init prepares m to live in h: under its lock, on its runner and owner.
func (m *Mailbox) Init(h *Home) {
	m.home = h
	if o := h.r.opt; o.Clock != nil || o.TrackOldest || o.MeasureService {
		x := m.more() // every task reads or writes it
		if o.TrackOldest {
			x.stamps = new([]int64)
		}
		x.measure = o.MeasureService
	}
	m.Reset(0)
}

// Reset clears what an idle mailbox remembers, before reuse for a key (locked).
func (m *Mailbox) Reset(ring int) {
	m.forget()
	m.TrimRing(ring)
}

// TrimRing drops an idle mailbox's ring buffer if over ring slots (locked).
func (m *Mailbox) TrimRing(ring int) {
	if q := &m.q; q.len() > ring {
		q.setBuf(nil)
		q.args = nil
		q.head, q.high = 0, false
		if st := m.stamps(); st != nil {
			*st = nil
		}
	}
}

// forget clears the service-rate estimate once the queue has drained.
func (m *Mailbox) forget() {
	if x := m.x.Load(); x != nil {
		x.busySince = 0
		x.served.Store(0)
		x.many = false
	}
}

// Lock locks the mailbox's home.
func (m *Mailbox) Lock() { m.home.mu.Lock() }

// Release retires the mailbox if it is idle and unlocks its home.
func (m *Mailbox) Release() { m.unlockRetire() }

// Pending is the number of tasks queued or holding (locked).
func (m *Mailbox) Pending() int { return int(m.count()) }

// Slots counts the slots in m's ring, batch and tombstones included (locked).
func (m *Mailbox) Slots() int { return m.q.size() }

// count is pending less fastBit and extra.ran: tasks queued, holding or in a
// run and not ended (locked). pending is read first: a task ending between
// the reads counts as ended; endBatch moves ran into pending under the lock.
func (m *Mailbox) count() int32 {
	v := m.pending.Load() &^ fastBit
	if x := m.x.Load(); x != nil {
		v -= x.ran.Load()
	}
	return v
}

// Parked is the number of submissions waiting for room (locked).
func (m *Mailbox) Parked() int { return int(m.nparked()) }

// Idle reports whether nothing is queued, held, parked or driven (locked).
func (m *Mailbox) Idle() bool { return m.count() == 0 && m.nparked() == 0 && !m.driven }

// ServiceTime estimates the key's recent time per task while a queue stands
// (locked); 0 if none, as always without RunnerOptions.MeasureService.
func (m *Mailbox) ServiceTime() time.Duration {
	x := m.x.Load()
	if x == nil || x.busySince == 0 {
		return 0
	}
	busy := time.Duration(time.Now().UnixNano() - x.busySince)
	served := x.served.Load()
	if served == 0 {
		// None finished yet: the running task's age is a lower bound.
		if at, ok := m.HeldSince(); ok {
			return time.Duration(m.home.r.opt.Clock() - at)
		}
		return 0
	}
	return busy / time.Duration(served)
}

// Park puts e in the waiting room until the queue has room (locked); its
// task's Promote is called as it enters the queue, perhaps at once.
func (m *Mailbox) Park(e *Entry) {
	e.m = m
	e.at = inRoom
	x := m.more()
	x.park.push(e)
	x.parked.Add(1)
	// Only a batch frees places unlocked, then looks here (ranBatched): with
	// e counted, its look or this one finds a place freed since the key was
	// found full; no wake is due, the batch's loop finds what this admits.
	m.promote()
}

// Unpark takes e out of the waiting room, false if it was admitted meanwhile.
func (m *Mailbox) Unpark(e *Entry) bool {
	m.home.mu.Lock()
	was := e.at == inRoom
	if was {
		m.unpark(e)
	}
	m.unlockRetire()
	return was
}

func (m *Mailbox) unpark(e *Entry) {
	x := m.x.Load() // e is in its park
	x.park.remove(e)
	e.at = nowhere
	x.parked.Add(-1)
}

// promote admits parked submissions while there is room (locked). Call wake
// next, unless from a running batch, whose loop finds them as it ends.
func (m *Mailbox) promote() {
	x := m.x.Load()
	if x == nil {
		return // nothing ever parked
	}
	for room := m.home.r.opt.Room; x.parked.Load() > 0 && (room == 0 || int(m.count()) < room); {
		e := x.park.head
		if !e.t.work.Promote() {
			return // refused: the submitter takes it out (Unpark)
		}
		m.unpark(e)
		if p, ok := e.t.work.(PlainWork); ok {
			fn, arg, stamp := p.Slot()
			m.queuePlain(fn, arg, stamp) // the Turn was only for the room
			continue
		}
		m.link(e)
	}
}

// Holder returns the Turn holding m exclusively, nil if none (locked).
func (m *Mailbox) Holder() *Turn {
	if m.hold != holdTurn {
		return nil
	}
	return m.x.Load().holder
}

// EachParked calls f for every Turn in m's waiting room, in order (locked).
func (m *Mailbox) EachParked(f func(t *Turn)) {
	if x := m.x.Load(); x != nil {
		for e := x.park.head; e != nil; e = e.next {
			f(e.t)
		}
	}
}

// CanHold reports whether a new task could hold m now (locked).
func (m *Mailbox) CanHold(shared bool) bool {
	return m.q.queued() == 0 && m.hold == holdNone && (shared || m.sharing() == 0)
}

// Hold grants single-key t its hold now, CanHold checked under this lock;
// the caller, owning a slot, runs t, then calls t.Vacate unlocked. t stays
// Queued (in no queue, nothing else can start or cancel it) and may be
// reused once Vacate returns.
func (m *Mailbox) Hold(t *Turn) {
	e := &t.one
	e.m = m
	m.grant(e)
	m.pending.Add(1)
}

// Enqueue appends e to the queue (locked) and reports whether to Dispatch.
func (m *Mailbox) Enqueue(e *Entry) (dispatch bool) {
	e.m = m
	if e.t.many != nil {
		m.more().many = true
	}
	m.link(e)
	return m.wake()
}

// measure starts the service-rate estimate as a queue forms (locked).
func (m *Mailbox) measure() {
	if !m.home.r.opt.MeasureService || m.count() == 0 {
		return
	}
	if x := m.made(); x.busySince == 0 {
		x.busySince = time.Now().UnixNano()
		x.served.Store(0)
	}
}

// Dispatch schedules m's drive loop; call after Enqueue said so, unlocked.
func (m *Mailbox) Dispatch() { m.home.r.Dispatch(m) }

func (m *Mailbox) grant(e *Entry) {
	e.at = holding
	if m.home.r.opt.Clock != nil && m.hold == holdNone && m.sharing() == 0 {
		m.made().heldSince.Store(held(m.home.r.opt.Clock()))
	}
	if e.shared {
		m.more().sharers++
	} else {
		m.hold = holdTurn
		m.more().holder = e.t
	}
}

func (m *Mailbox) unhold(e *Entry) {
	e.at = nowhere
	if e.shared {
		m.x.Load().sharers-- // made by grant
	} else {
		m.hold = holdNone
		m.x.Load().holder = nil // made by grant
	}
	if m.hold == holdNone && m.sharing() == 0 {
		m.clearHeld()
	}
}

// HeldSince returns when the current hold (a batch's running task, an inline
// run, a multi-key task here, a shared group's first) began, else false (locked).
func (m *Mailbox) HeldSince() (int64, bool) {
	x := m.x.Load()
	if x == nil {
		return 0, false // the runner keeps no clock
	}
	h := x.heldSince.Load()
	return h >> 1, h != 0
}

// held is heldSince for a hold begun at at, not reported slow (at fits 62 bits).
func held(at int64) int64 { return at << 1 }

// MarkSlow marks the current hold reported slow, false if already so (locked).
// A drive loop starting its next task meanwhile wins: the new hold is not slow.
func (m *Mailbox) MarkSlow() bool {
	x := m.x.Load()
	if x == nil {
		return false // the runner keeps no clock
	}
	h := x.heldSince.Load()
	return h != 0 && h&1 == 0 && x.heldSince.CompareAndSwap(h, h|1)
}

// wake marks m driven, true if its head can go now and no loop is due (locked).
func (m *Mailbox) wake() bool {
	if m.driven || m.hold != holdNone {
		return false
	}
	if e, ok := m.front(); !ok || m.sharing() > 0 && (e == nil || !e.shared) {
		return false
	}
	m.driven = true
	return true
}

// unlockRetire retires m if idle, then unlocks. The retirement race: idleness
// is decided under the shard lock every submitter takes to find m, so it finds
// m live (its entry keeps it so) or gone (and makes a fresh one); a retired m
// is never touched. pending is read once, as a fast hold may be given back
// unlocked at any time (UnholdPlain): two reads could retire m with a stale
// hold nobody gives back, queueing the next submitter behind it.
func (m *Mailbox) unlockRetire() {
	h := m.home
	v := m.pending.Load()
	if m.hold == holdFast {
		if v != 0 {
			h.mu.Unlock() // taken, or revoked: its holder gives it back
			return
		}
		m.hold = holdNone // given back: settled
	}
	if v == 0 && !m.driven && m.nparked() == 0 {
		h.owner.Retire(m)
	}
	h.mu.Unlock()
}

// drive runs m's queue on a goroutine owning an execution slot, budget
// exclusive tasks at a time, yielding (requeue) only if other work waits for
// a slot; it returns a granted multi-key or shared task for that slot, or nil.
func (m *Mailbox) drive(budget int) *Turn {
	m.home.mu.Lock()
	for {
		e, ok := m.front()
		if !ok || m.hold != holdNone || m.sharing() > 0 && (e == nil || !e.shared) {
			m.driven = false
			m.unlockRetire()
			return nil
		}
		if budget == 0 && m.home.r.nready.Load() == 0 {
			budget = m.home.r.throughput // a yield would only hand m back
		}
		if budget == 0 {
			m.home.mu.Unlock()
			m.home.r.requeue(m) // yield: m stays driven, at the ready queue's back
			return nil
		}
		if e == nil || e.t.many == nil && !e.shared {
			budget -= m.runBatch(budget) // a plain task or an exclusive turn
			continue
		}
		t := m.take(e)
		if t == nil {
			continue
		}
		if t.need.Add(-1) > 0 {
			continue // a multi-key task: m now waits for its other mailboxes
		}
		if !t.state.CompareAndSwap(Queued, Granted) {
			continue // canceled: its canceler gives the hold back
		}
		more := e.shared && m.grantReaders()
		m.driven = false
		m.home.mu.Unlock()
		if more {
			m.home.r.kick()
		}
		return t
	}
}

// take takes e, a shared or multi-key turn at the head of the queue, out
// of it and grants it m's hold, unless its task was canceled (locked).
func (m *Mailbox) take(e *Entry) *Turn {
	m.unlink(e)
	if e.t.state.Load() == Canceled {
		m.pending.Add(-1) // its canceler finds e neither queued nor held
		return nil
	}
	m.grant(e)
	return e.t
}

// grantReaders readies every further shared head task; true if any (locked).
func (m *Mailbox) grantReaders() bool {
	more := false
	for e, _ := m.front(); e != nil && e.shared; e, _ = m.front() {
		t := m.take(e)
		if t == nil {
			continue
		}
		t.need.Store(0)
		if t.state.CompareAndSwap(Queued, Granted) {
			m.home.r.push(item{t})
			more = true
		}
	}
	return more
}

// decay halves the estimate past 64 tasks and forgets it once drained (locked).
func (m *Mailbox) decay() {
	x := m.x.Load()
	if x == nil || x.busySince == 0 {
		return
	}
	if m.q.queued() == 0 {
		m.forget() // the queue drained
		return
	}
	if s := x.served.Load(); s >= 64 {
		now := time.Now().UnixNano()
		x.busySince = now - (now-x.busySince)/2
		x.served.Store(s / 2)
	}
}

// list is an intrusive doubly linked list of entries: a waiting room.
type list struct {
	head, tail *Entry
}

func (l *list) push(e *Entry) {
	e.next = nil
	e.prev = l.tail
	if l.tail != nil {
		l.tail.next = e
	} else {
		l.head = e
	}
	l.tail = e
}

func (l *list) remove(e *Entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		l.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		l.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

// String describes m for debugging a stuck key (locked).
func (m *Mailbox) String() string {
	turns := 0
	for i := range m.q.queued() {
		if entryAt(m.q.buf(), m.q.argBuf(), m.q.at(int(m.q.cut)+i)) != nil {
			turns++
		}
	}
	s := fmt.Sprintf("pending=%d fast=%v hold=%d driven=%v queued=%d turns=%d batch=%d",
		m.count(), m.pending.Load()&fastBit != 0, m.hold, m.driven, m.q.queued(), turns, m.q.cut)
	if x := m.x.Load(); x != nil {
		p := 0
		for e := x.park.head; e != nil; e = e.next {
			p++
		}
		s += fmt.Sprintf(" parked=%d holder=%v sharers=%d", p, x.holder != nil, x.sharers)
	}
	return s
}

// String describes r's slots and ready queue, for debugging a stuck executor.
func (r *Runner) String() string {
	return fmt.Sprintf("active=%d/%d ready=%d", r.active.Load(), r.limit, r.nready.Load())
}
