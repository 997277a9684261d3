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
	holdNone holdKind = iota
	// holdPlain is an exclusive hold with no Turn: a drive loop's batch, or
	// a plain task run on its caller's goroutine (HoldPlain).
	holdPlain
	// holdFast may be given back without the lock ("Fast holds", plain.go).
	holdFast
	// holdTurn is a Turn's hold; the Turn is extra.holder.
	holdTurn
)

// Owner is told (Retire), locked, when a mailbox is idle (nothing queued,
// held, parked or driven) as its lock is released, perhaps more than once.
// Linger asks, locked, whether the plain hold m is about to grant may be a
// fast hold (plain.go). An owner that says yes must Claim m whenever it
// hands m out locked to a caller that may queue, park or hold on it, and
// settle m (Released, Claim) before it counts, walks or looks up its live
// mailboxes: a fast hold given back leaves m idle but not retired.
type Owner interface {
	Retire(m *Mailbox)
	Linger(m *Mailbox) bool
}

// Home is what the mailboxes under one lock share: the lock, their runner
// and Owner (set once, by Init), and a value and count for their user
// (Mailbox.Local, Count), all on the cache line the lock brings in. A
// router shard is one. One pointer to it saves each mailbox 32 bytes; the
// owner finds a mailbox's key from the mailbox (router's nodeOf).
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

// Mailbox is one key's FIFO queue and the holds granted on it. Its home's
// lock (its router shard's) guards its fields unless a field says
// otherwise (a running batch updates a few atomics unlocked); methods
// marked "locked" need that lock held.
type Mailbox struct {
	home  *Home     // set by Init, never changed
	plain plainRing // plain tasks, in one FIFO with the queue (see Plain)
	aux   *Aux      // the owner's (SetAux)

	// x is what only some keys need (see extra), nil until then. It is set
	// locked and kept for the mailbox's life; the drive loop loads it unlocked.
	x atomic.Pointer[extra]

	// pending counts entries queued, holding or in a run (see count). Only the
	// driver and a fast hold given back (plain.go; fastBit is set in it while
	// the hold is taken) decrement it unlocked.
	pending atomic.Int32
	driven  bool     // a drive loop is scheduled or running
	hold    holdKind // what holds m exclusively, if anything

	// Mark is the owner's (locked); the mailbox never reads it. It fills what
	// would be padding, so the router's node needs no flag of its own.
	Mark bool
}

// extra is what a key needs only for work other than plain tasks and plain
// holds (queued Turns, a Turn's hold, a waiting room, shared holds), or on
// a runner with a Clock, TrackOldest or MeasureService: the common,
// plain-only key saves its 96 bytes. It is made on first need (more), or at
// Init on such a runner, and stays with the mailbox when it is reused.
type extra struct {
	queue  list                  // FIFO of entries waiting for a hold
	cursor atomic.Pointer[Entry] // the batch's next task to start, if any
	holder *Turn                 // the exclusive holder, if a Turn (holdTurn)

	// park is the waiting room: submissions parked until the queue has room
	// (backpressure.Block); not pending, FIFO among themselves.
	park list

	// The service-rate estimate for retry hints, kept only while a queue
	// stands: tasks served since busySince (unix ns; 0 = no queue yet).
	busySince int64

	// heldSince is when the current hold began (RunnerOptions.Clock; 0: none):
	// a batch's running task, else the first holder granted. Written locked or
	// by the batch's loop, read locked. Stored shifted left by one (held); the
	// low bit marks it reported slow (MarkSlow) until a new hold's time.
	heldSince atomic.Int64

	served  atomic.Int32 // counted unlocked by the drive loop, task by task; decayed locked
	parked  atomic.Int32 // submissions in park; changed locked, read unlocked by the driver
	sharers int32        // shared holds granted

	// plainClaim has a bit per slot of a running plain batch (at most maxCut),
	// set as the drive loop starts it or TakePlain takes it out (see claim).
	plainClaim atomic.Uint32

	many bool // a multi-key task may be queued or hold m: set by Enqueue, cleared by EachManyAhead

	// stamps are the plain ring's stamps, by buffer index, where the runner
	// tracks the oldest task (plainRing): made at Init, else nil. A pointer
	// keeps extra at 96 bytes.
	stamps *[]int64
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

// stamps returns the plain ring's stamps, nil if not tracked (locked).
func (m *Mailbox) stamps() *[]int64 {
	if x := m.x.Load(); x != nil {
		return x.stamps
	}
	return nil
}

// head returns the queue's head entry, or nil (locked).
func (m *Mailbox) head() *Entry {
	if x := m.x.Load(); x != nil {
		return x.queue.head
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
	}
	m.Reset(0)
}

// Reset clears what an idle mailbox remembers (its service-rate estimate,
// a plain ring grown past ring slots) before reuse for another key (locked).
func (m *Mailbox) Reset(ring int) {
	m.forget()
	m.TrimRing(ring)
}

// TrimRing drops an idle mailbox's ring buffer if over ring slots (locked).
func (m *Mailbox) TrimRing(ring int) {
	if q := &m.plain; q.len() > ring {
		q.setBuf(nil)
		q.args = nil
		q.head = 0
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

// count is pending without fastBit.
func (m *Mailbox) count() int32 { return m.pending.Load() &^ fastBit }

// Parked is the number of submissions waiting for room (locked).
func (m *Mailbox) Parked() int { return int(m.nparked()) }

// Idle reports whether nothing is queued, held, parked or driven (locked).
func (m *Mailbox) Idle() bool { return m.count() == 0 && m.nparked() == 0 && !m.driven }

// ServiceTime estimates the key's recent time per task, from the tasks it
// finished while a queue stood; 0 means no estimate, always so unless the
// runner measures it (RunnerOptions.MeasureService) (locked).
func (m *Mailbox) ServiceTime() time.Duration {
	x := m.x.Load()
	if x == nil || x.busySince == 0 {
		return 0
	}
	busy := time.Duration(time.Now().UnixNano() - x.busySince)
	served := x.served.Load()
	if served == 0 {
		// Nothing finished since the queue formed: the running task's age is
		// a lower bound, if the runner keeps a clock.
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
	// Only a running batch frees places unlocked (ranBatched: pending,
	// then a look at the park), so one may have freed since the owner found
	// the key full. Now that e is counted, this look or the batch's finds
	// it, and no wake is due: that batch's loop finds what this admits.
	m.promote()
}

// Unpark takes e out of the waiting room if it is still there, and reports
// whether it was; false means it was admitted meanwhile.
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

// Oldest returns the oldest Turn not yet started: a running batch's next
// (with RunnerOptions.TrackOldest), else the queue's head; nil if none
// (locked). A batch's next may start and end at any moment: read only what
// its owner never reuses (the stamp: OldestStamp). It sees Turns only: an
// owner that reads it queues no plain tasks (see Plain).
func (m *Mailbox) Oldest() *Turn {
	if x := m.x.Load(); x != nil {
		if e := x.cursor.Load(); e != nil {
			return e.t
		}
	}
	return m.Head()
}

// OldestStamp returns the stamp (Turn.SetStamp) of the oldest task that
// waits (not started, not withdrawn), or false if none (locked).
//
// A running batch is read while its loop runs unlocked, so a task read may
// have started, ended and been reused. The loop moves the cursor past a
// task before starting it, and no batch starts while m is locked: a cursor
// unchanged after the read proves that task and those after it had not
// started. A withdrawn task's link is followed only if the cursor had not
// moved: withdrawn from this batch, it is never reused, so its link is
// still as the batch was cut.
func (m *Mailbox) OldestStamp() (int64, bool) {
	x := m.x.Load()
read:
	for x != nil {
		e := x.cursor.Load()
		if e == nil {
			break
		}
		f := e
		for f != nil && f.t.state.Load() == Canceled {
			if x.cursor.Load() != e {
				continue read // f may have run and been reused: its state proves nothing
			}
			f = f.next
		}
		var at int64
		if f != nil {
			at = f.t.stamp.Load()
		}
		if x.cursor.Load() == e {
			if f != nil {
				return at, true
			}
			break // every task left in the batch was withdrawn
		}
	}
	if at, ok := m.plainOldest(); ok {
		return at, true
	}
	if at, pos, ok := m.plain.firstStamp(m.stamps()); ok {
		if e := m.head(); e == nil || int32(e.plainBefore-pos) > 0 {
			return at, true // queued before the head entry
		}
	}
	if e := m.head(); e != nil {
		return e.t.stamp.Load(), true
	}
	return 0, false
}

// Head returns the oldest queued Turn, or nil (locked); a plain task, not
// a Turn, may be queued ahead of it (see Plain).
func (m *Mailbox) Head() *Turn {
	if e := m.head(); e != nil {
		return e.t
	}
	return nil
}

// Holder returns the task holding m exclusively, or nil (locked); nil too
// while a drive loop runs a batch or a plain task holds m (HoldPlain).
func (m *Mailbox) Holder() *Turn {
	if m.hold != holdTurn {
		return nil
	}
	return m.x.Load().holder
}

// Each calls f for every queued Turn, oldest first (locked); not plain tasks.
func (m *Mailbox) Each(f func(t *Turn)) {
	for e := m.head(); e != nil; e = e.next {
		f(e.t)
	}
}

// EachParked calls f for every Turn in m's waiting room, in order (locked).
func (m *Mailbox) EachParked(f func(t *Turn)) {
	if x := m.x.Load(); x != nil {
		for e := x.park.head; e != nil; e = e.next {
			f(e.t)
		}
	}
}

// EachWaiting calls f (locked) for every turn of m not yet started: those
// of a running batch from its cursor on (f may meet one the loop is
// starting now, whose Cancel then fails), then the queued ones. A Close
// that gives up and a sweep of ended contexts must reach both (PITFALLS:
// work taken out of the queue is invisible to the queue's owner).
func (m *Mailbox) EachWaiting(f func(t *Turn)) {
	if x := m.x.Load(); x != nil {
		for e := x.cursor.Load(); e != nil; e = e.next {
			f(e.t)
		}
	}
	m.Each(f)
}

// EachManyAhead calls f for each multi-key task that holds m or is queued
// ahead of e, oldest first; ahead of every queued task if e is nil (locked).
// A mailbox where no multi-key task was queued since a walk found none
// answers at once, without walking its queue under the lock.
func (m *Mailbox) EachManyAhead(e *Entry, f func(t *Turn)) {
	m.eachManyAhead(func(o *Entry) bool { return o != e }, f)
}

// eachManyAhead is EachManyAhead for the run of queued entries at the head
// for which ahead holds (locked).
func (m *Mailbox) eachManyAhead(ahead func(o *Entry) bool, f func(t *Turn)) {
	x := m.x.Load()
	if x == nil || !x.many {
		return
	}
	found := false
	if h := m.Holder(); h != nil && h.many != nil {
		found = true
		f(h)
	}
	o := x.queue.head
	for ; o != nil && ahead(o); o = o.next {
		if o.t.many != nil {
			found = true
			f(o.t)
		}
	}
	if !found && o == nil {
		x.many = false // the whole queue was seen
	}
}

// CanHold reports whether a new task could hold m at once: nothing is
// queued ahead of it and no hold excludes it (locked).
func (m *Mailbox) CanHold(shared bool) bool {
	return m.head() == nil && m.plain.queued() == 0 && m.hold == holdNone && (shared || m.sharing() == 0)
}

// Hold grants single-key task t its hold at once, to run on the caller's
// goroutine (which must own an execution slot). The caller must have
// checked CanHold under the same lock, and calls t.Vacate after the run
// (unlocked). t stays Queued: in no queue, nothing else can start or
// cancel it, and it may be reused once Vacate returns.
func (m *Mailbox) Hold(t *Turn) {
	e := &t.one
	e.m = m
	m.grant(e)
	m.pending.Add(1)
}

// Enqueue appends e to the queue (locked) and reports whether m now needs
// a drive loop; if so the caller must call Dispatch after unlocking.
func (m *Mailbox) Enqueue(e *Entry) (dispatch bool) {
	e.m = m
	if e.t.many != nil {
		m.more().many = true
	}
	m.link(e)
	return m.wake()
}

// link appends e, whose m is set, to the queue (locked). It does not write
// e.m: for a parked entry Park set it, and promote wakes the submitter
// (Work.Promote) before linking, so the submitter may already read e.m
// unlocked (Entry.release does, to find the lock).
func (m *Mailbox) link(e *Entry) {
	m.measure()
	e.at = inQueue
	e.plainBefore = m.plain.tail
	m.more().queue.push(e)
	m.pending.Add(1)
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

func (m *Mailbox) unlink(e *Entry) {
	m.x.Load().queue.remove(e) // e is in its queue
	e.at = nowhere
}

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

// HeldSince returns when the current hold began (RunnerOptions.Clock): a
// batch's running task, an inline run, a multi-key task (since it holds
// this key) or a shared group (since its first task); false if none or no
// clock (locked).
func (m *Mailbox) HeldSince() (int64, bool) {
	x := m.x.Load()
	if x == nil {
		return 0, false // the runner keeps no clock
	}
	h := x.heldSince.Load()
	return h >> 1, h != 0
}

// held is heldSince's value for a hold begun at at, not reported slow: at
// shifted left by one (Clock times are within 2^62 ns, 146 years, of 0).
func held(at int64) int64 { return at << 1 }

// MarkSlow marks the current hold reported slow and reports whether it was
// not yet (locked): a slow task is reported once. A drive loop that starts
// its next task meanwhile (unlocked) wins: the new hold was not the slow one.
func (m *Mailbox) MarkSlow() bool {
	x := m.x.Load()
	if x == nil {
		return false // the runner keeps no clock
	}
	h := x.heldSince.Load()
	return h != 0 && h&1 == 0 && x.heldSince.CompareAndSwap(h, h|1)
}

// wake marks m driven and reports true if its head can be granted now and
// no drive loop is scheduled (locked).
func (m *Mailbox) wake() bool {
	if m.driven || m.hold != holdNone {
		return false
	}
	e, plain := m.front()
	if !plain && (e == nil || (m.sharing() > 0 && !e.shared)) || plain && m.sharing() > 0 {
		return false
	}
	m.driven = true
	return true
}

// unlockRetire retires m if it is idle, then unlocks. This settles the
// retirement race: idleness is decided under the shard lock every
// submitter takes to find m, so a submitter finds m live (its entry keeps
// it live) or gone (and creates a fresh one). m is never touched after it
// retires.
//
// pending is read once: a fast hold may be given back unlocked at any
// moment (UnholdPlain), and a swap between two reads would retire m with
// the stale hold set, queueing the next submitter behind a hold nobody
// gives back (TestStress).
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

// drive runs m's queue on a goroutine that owns an execution slot: up to
// budget exclusive tasks in a row, then it yields (requeues m) if other
// work waits for a slot, else takes another budget. It returns a granted
// multi-key or shared task for the caller to run on the same slot, or nil.
func (m *Mailbox) drive(budget int) *Turn {
	m.home.mu.Lock()
	var done *Turn // ran in this loop; settled once m's lock is released
	for {
		e, plain := m.front()
		if !plain && e == nil || m.hold != holdNone || m.sharing() > 0 && (plain || !e.shared) {
			m.driven = false
			m.unlockRetire()
			settle(done)
			return nil
		}
		if budget == 0 && m.home.r.nready.Load() == 0 {
			// Nothing waits for a slot: yielding would only hand m back to
			// this loop, through the ready queue's lock twice.
			budget = m.home.r.throughput
		}
		if budget == 0 {
			// Yield: m stays driven and goes to the back of the ready queue.
			m.home.mu.Unlock()
			settle(done)
			m.home.r.requeue(m)
			return nil
		}
		if plain {
			n := m.runPlain(budget, done)
			done = nil
			budget -= n
			continue
		}
		t := e.t
		if t.many == nil && !e.shared {
			n := m.runBatch(budget, done)
			done = nil
			budget -= n
			continue
		}
		m.unlink(e)
		if t.state.Load() == Canceled {
			// Its canceler finds the entry neither queued nor held.
			m.pending.Add(-1)
			continue
		}
		m.grant(e)
		if t.need.Add(-1) > 0 {
			continue // a multi-key task: m now waits for its other mailboxes
		}
		if t.many != nil || e.shared {
			if !t.state.CompareAndSwap(Queued, Granted) {
				continue // canceled: its canceler gives the hold back
			}
			var more bool
			if e.shared {
				more = m.grantReaders()
			}
			m.driven = false
			m.home.mu.Unlock()
			settle(done)
			if more {
				m.home.r.kick()
			}
			return t
		}
		panic("perkey/mailbox: unreachable")
	}
}

// cutRuns caps a batch's turns once a group's run ends in it: the cut walks
// each turn, cold in cache, before the first runs, so large runs (a
// Batcher's) are cut one at a time while small ones still go together.
const cutRuns = 64

// runBatch runs a batch of the single-key exclusive tasks at the queue's
// head, up to budget (a group's run counts as one, see Group; a run ends
// the batch once it holds cutRuns turns), with m locked on entry and
// return. It settles done (the caller's task) once unlocked and returns how
// many tasks it took.
//
// The batch is detached under one lock and run without it: two lock round
// trips per batch, not per task. m.hold is holdPlain meanwhile, so new
// submissions queue behind it. A batched task canceled before it starts
// loses the start CAS: its canceler frees its place (Entry.release) and the
// loop skips it.
func (m *Mailbox) runBatch(budget int, done *Turn) int {
	x := m.x.Load() // the queue has an entry
	first := x.queue.head
	last, n := first, 0
	var g *Group    // the group of the run being taken, if any
	var start *Turn // the turn that starts that run
	inRun := 0      // turns taken of that run
	taken := 0      // turns taken in all
	for e := first; e != nil && e.t.many == nil && !e.shared && m.before(e); e = e.next {
		if eg := e.t.group(); eg == nil || eg != g || inRun == eg.Max || !eg.joins(start, e.t) {
			if n == budget || g != nil && taken >= cutRuns {
				break // the budget is spent, or enough of a group's runs
			}
			n++ // a new unit: a turn, or the first of a group's run
			g, start, inRun = eg, e.t, 0
		}
		inRun++
		taken++
		e.at = inBatch
		last = e
	}
	x.queue.cut(last)
	x.cursor.Store(first) // locked: EachWaiting sees the batch from now on
	m.hold = holdPlain
	m.home.mu.Unlock()
	settle(done)
	m.runFrom(first, 0)
	m.home.mu.Lock()
	m.endBatch()
	return n
}

// runFrom runs a running batch's tasks from e on; ran of them ran before e.
// If a Run never returns (fn called runtime.Goexit; the Work accounted for
// it), the deferred check ends that task and hands the rest of the batch,
// the mailbox and this slot to a fresh drive loop, so the key goes on in
// FIFO order and nothing is left driven.
func (m *Mailbox) runFrom(e *Entry, ran int) {
	var running *Entry  // the entry whose task is in Run
	var grouped []*Turn // the turns of a group in Run, if any
	var after *Entry    // the entry after that group's run
	defer func() {
		// The closures capture copies: capturing ran or after would move
		// them to the heap on every call.
		switch {
		case running != nil:
			next, n := running.next, ran+1 // read before the task settles
			m.finishRun(running.t)
			m.home.r.takeOver(func() {
				m.runFrom(next, n)
				m.home.mu.Lock()
				m.endBatch()
				m.home.mu.Unlock()
			}, item{m})
		case grouped != nil:
			for _, t := range grouped {
				if t.state.Load() != Done { // not left out (Turn.Leave)
					m.finishRun(t)
				}
			}
			next, n := after, ran+len(grouped)
			m.home.r.takeOver(func() {
				m.runFrom(next, n)
				m.home.mu.Lock()
				m.endBatch()
				m.home.mu.Unlock()
			}, item{m})
		}
	}()
	clock := m.home.r.opt.Clock
	x := m.x.Load() // the batch's entries were queued there
	var buf []*Turn
	for e != nil {
		if g := e.t.group(); g != nil {
			// A group's run: the turns that win their start, up to Max
			// entries, go to one Run.
			if buf == nil {
				buf = make([]*Turn, 0, min(g.Max, 1024))
			}
			buf = buf[:0]
			f := e
			for k := 0; f != nil && f.t.group() == g && k < g.Max && g.joins(e.t, f.t); k++ {
				if f.t.state.CompareAndSwap(Queued, Running) {
					buf = append(buf, f.t)
				}
				f = f.next
			}
			if len(buf) > 0 {
				x.cursor.Store(f)
				if clock != nil {
					x.heldSince.Store(held(clock()))
				}
				grouped, after = buf, f
				g.Run(buf)
				grouped = nil
				for _, t := range buf {
					if t.state.Load() != Done { // not left out (Turn.Leave)
						m.finishRun(t)
					}
				}
				ran += len(buf)
			}
			e = f
			continue
		}
		next := e.next
		t := e.t
		if t.state.CompareAndSwap(Queued, Running) {
			x.cursor.Store(next) // before it starts: see EachWaiting
			if clock != nil {
				x.heldSince.Store(held(clock()))
			}
			running = e
			t.work.Run()
			running = nil
			m.finishRun(t)
			ran++
		}
		e = next
	}
	if m.home.r.opt.Ran != nil && ran > 0 {
		m.home.r.opt.Ran(ran)
	}
}

// finishRun ends a batched task that ran: it frees its place, admits a
// parked submission (queued behind the batch), and settles the task.
func (m *Mailbox) finishRun(t *Turn) {
	m.ranBatched()
	t.Finish()
	t.work.Settle()
}

// endBatch releases the batch's hold once its tasks have run (locked).
func (m *Mailbox) endBatch() {
	if x := m.x.Load(); x != nil {
		x.cursor.Store(nil)
	}
	m.hold = holdNone
	m.clearHeld()
	m.decay()
	m.promote()
}

// grantReaders grants every further shared task at the head, readying each
// for its own slot (locked); it reports whether any was readied.
func (m *Mailbox) grantReaders() bool {
	more := false
	for e := m.head(); e != nil && e.shared && m.before(e); e = m.head() {
		t := e.t
		m.unlink(e)
		if t.state.Load() == Canceled {
			m.pending.Add(-1)
			continue
		}
		m.grant(e)
		t.need.Store(0)
		if t.state.CompareAndSwap(Queued, Granted) {
			m.home.r.push(item{t})
			more = true
		}
	}
	return more
}

// decay keeps the service-rate estimate recent: past 64 tasks it halves
// the count and the span; it forgets all once the queue drains (locked).
func (m *Mailbox) decay() {
	x := m.x.Load()
	if x == nil || x.busySince == 0 {
		return
	}
	if x.queue.head == nil && m.plain.queued() == 0 {
		m.forget() // the queue drained
		return
	}
	if s := x.served.Load(); s >= 64 {
		now := time.Now().UnixNano()
		x.busySince = now - (now-x.busySince)/2
		x.served.Store(s / 2)
	}
}

func settle(t *Turn) {
	if t != nil {
		t.work.Settle()
	}
}

// list is an intrusive doubly linked list of entries; an entry is in at most
// one list (a queue or a waiting room) at a time.
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

// cut detaches the prefix from head through last; the detached entries keep
// their next links, so the prefix can still be walked from the old head.
func (l *list) cut(last *Entry) {
	l.head = last.next
	if l.head != nil {
		l.head.prev = nil
	} else {
		l.tail = nil
	}
	last.next = nil
}

// String describes m for debugging a stuck key (locked): pending (and the
// fast bit), its hold, whether a drive loop is due, and what waits.
func (m *Mailbox) String() string {
	s := fmt.Sprintf("pending=%d fast=%v hold=%d driven=%v plain=%d/%d",
		m.count(), m.pending.Load()&fastBit != 0, m.hold, m.driven, m.plain.queued(), m.plain.cut)
	if x := m.x.Load(); x != nil {
		n, p := 0, 0
		for e := x.queue.head; e != nil; e = e.next {
			n++
		}
		for e := x.park.head; e != nil; e = e.next {
			p++
		}
		s += fmt.Sprintf(" queue=%d parked=%d holder=%v sharers=%d", n, p, x.holder != nil, x.sharers)
	}
	return s
}

// String describes r's slots and ready queue, for debugging a stuck executor.
func (r *Runner) String() string {
	return fmt.Sprintf("active=%d/%d ready=%d", r.active.Load(), r.limit, r.nready.Load())
}
