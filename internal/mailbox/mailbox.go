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
	// holdPlain is an exclusive hold that has no Turn: a drive loop's
	// batch, or a plain task run on its caller's goroutine (see HoldPlain).
	holdPlain
	// holdFast is a plain hold that may be given back without the lock
	// (see "Fast holds" in plain.go).
	holdFast
	// holdTurn is a Turn's hold (Hold, or a multi-key task granted by the
	// drive loop): the Turn is extra.holder.
	holdTurn
)

// Owner is told, with the mailbox's lock held, when a mailbox is idle
// (nothing queued, held, parked or driven) as its lock is released. It may
// be told again while the mailbox stays idle.
//
// Linger asks, locked, whether the plain hold m is about to grant may be
// given back without the lock (a fast hold, see plain.go). An owner that
// says yes must call Claim on m whenever it hands m out locked to a caller
// that may queue, park or hold on it, and must settle m (Released, Claim)
// before it counts, walks or looks up its live mailboxes: a fast hold given
// back leaves m idle but not yet retired.
type Owner interface {
	Retire(m *Mailbox)
	Linger(m *Mailbox) bool
}

// Home is what the mailboxes under one lock share: the lock, the runner
// they run on, their Owner, and one value for the mailboxes' user (see
// Mailbox.Local). A router shard is one. A mailbox names its home with one
// pointer, where the three would cost 32 bytes in every mailbox, which is
// most of what a waiting key costs; the owner finds the mailbox's key from
// the mailbox itself, since it made the mailbox (see router's nodeOf).
//
// The runner and the owner are set once (Init) and read by the mailboxes
// beside the lock, on the cache line that taking the lock brings in; the
// user's value and count (Mailbox.Count) are on that line as well.
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

// Unlock unlocks h. To leave a mailbox, use its Release, which retires it
// if it is idle.
func (h *Home) Unlock() { h.mu.Unlock() }

// Mailbox is one key's FIFO queue and the holds granted on it. Its fields
// are guarded by its home's lock (the router shard the mailbox lives in),
// except where a field says otherwise (the drive loop updates a few atomics
// while it runs a batch unlocked); every method that says "locked" must be
// called with that lock held.
type Mailbox struct {
	home  *Home     // set by Init, never changed
	plain plainRing // plain tasks, in one FIFO with the queue (see Plain)
	aux   *Aux      // the owner's (SetAux)

	// x is the rest of the mailbox, what only some keys need (see extra):
	// nil until then. It is set locked and kept for the mailbox's life; the
	// drive loop loads it unlocked.
	x atomic.Pointer[extra]

	// pending counts the entries queued, holding or in a run (see count);
	// decremented unlocked only by the driver, and by a fast hold given
	// back (see plain.go), which also sets fastBit in it.
	pending atomic.Int32
	driven  bool     // a drive loop is scheduled or running
	hold    holdKind // what holds m exclusively, if anything

	// Mark is the owner's: the mailbox never reads it (locked). It sits in
	// what would be padding, so that an owner embedding a mailbox needs no
	// flag of its own (the router's table node then fits a smaller size
	// class).
	Mark bool
}

// extra is the part of a mailbox that a key needs only for work other than
// plain tasks and plain holds (queued Turns, a Turn's hold, a waiting room,
// shared holds), or on a runner that times holds (RunnerOptions.Clock),
// tracks the oldest task (TrackOldest) or measures service
// (MeasureService). A mailbox lives as long as its key is busy, so its size
// is most of what a waiting key costs: the plain-only key, the common one,
// does without these 96 bytes (a mailbox is 64, a router node with a
// string key 80). It is made on the first need (Mailbox.more), or at Init
// for such a runner, and stays with the mailbox when it is reused.
type extra struct {
	queue  list                  // FIFO of entries waiting for a hold
	cursor atomic.Pointer[Entry] // the batch's next task to start, if any
	holder *Turn                 // the exclusive holder, if a Turn (holdTurn)

	// The waiting room: submissions parked until the queue has room
	// (backpressure.Block). They are not pending; FIFO among themselves.
	park list

	// Service-rate estimate for retry hints, kept only while a queue stands:
	// served tasks finished since busySince (unix ns; 0 = no queue yet).
	busySince int64

	// heldSince is when the current hold began (RunnerOptions.Clock), 0 if
	// none: a batch's task as it starts, else the first of the holders
	// granted. Written locked, or by the drive loop during its batch; read
	// locked. It holds the time shifted left by one (see held), and its low
	// bit is set once the hold has been reported slow (MarkSlow): a new
	// hold's time clears it.
	heldSince atomic.Int64

	served  atomic.Int32 // counted unlocked by the drive loop, task by task; decayed locked
	parked  atomic.Int32 // submissions in park; changed locked, read unlocked by the driver
	sharers int32        // shared holds granted

	// plainClaim has a bit per slot of a running plain batch (at most
	// maxCut), set once the slot is claimed: by the drive loop as it
	// starts it, or by TakePlain as it takes it out (see claim).
	plainClaim atomic.Uint32

	many bool // a multi-key task may be queued or hold m: set by Enqueue, cleared by EachManyAhead

	// stamps are the plain ring's stamps on a runner that tracks the
	// oldest task (see plainRing), with its buffer's length and indexes;
	// made at Init there, nil elsewhere. A pointer keeps extra at 96 bytes.
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

// made returns m's extra on a runner whose options make every mailbox
// need one (a clock, TrackOldest or MeasureService): Init made it.
func (m *Mailbox) made() *extra { return m.x.Load() }

// stamps returns the plain ring's stamps if the runner keeps them, else
// nil (locked): Init makes them, in the extra, only on a runner that
// tracks the oldest task.
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

// nparked is the number of submissions in the waiting room (locked, or
// unlocked by the driver).
func (m *Mailbox) nparked() int32 {
	if x := m.x.Load(); x != nil {
		return x.parked.Load()
	}
	return 0
}

// Init prepares m to live in home h, whose lock guards it, run on h's
// runner and retire through h's owner.
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
// and a plain ring grown past ring slots) before it is reused for another
// key (locked).
func (m *Mailbox) Reset(ring int) {
	m.forget()
	m.TrimRing(ring)
}

// TrimRing drops an idle mailbox's plain-ring buffer if it has grown past
// ring slots (locked); the next plain task makes a fresh one.
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

// Unlock retires the mailbox if it is idle and unlocks its shard.
func (m *Mailbox) Release() { m.unlockRetire() }

// Pending is the number of tasks queued or holding (locked).
func (m *Mailbox) Pending() int { return int(m.count()) }

// count is pending without fastBit.
func (m *Mailbox) count() int32 { return m.pending.Load() &^ fastBit }

// Parked is the number of submissions waiting for room (locked).
func (m *Mailbox) Parked() int { return int(m.nparked()) }

// Idle reports whether nothing is queued, held, parked or driven (locked).
func (m *Mailbox) Idle() bool { return m.count() == 0 && m.nparked() == 0 && !m.driven }

// ServiceTime estimates how long the key takes per task lately, from the
// tasks it finished while a queue stood; 0 means no estimate, always so
// unless the runner measures it (RunnerOptions.MeasureService) (locked).
func (m *Mailbox) ServiceTime() time.Duration {
	x := m.x.Load()
	if x == nil || x.busySince == 0 {
		return 0
	}
	busy := time.Duration(time.Now().UnixNano() - x.busySince)
	served := x.served.Load()
	if served == 0 {
		// Nothing finished since the queue formed: the running task's age
		// so far is a lower bound, if the runner keeps a clock; else there
		// is no estimate.
		if at, ok := m.HeldSince(); ok {
			return time.Duration(m.home.r.opt.Clock() - at)
		}
		return 0
	}
	return busy / time.Duration(served)
}

// Park puts e in the waiting room until the queue has room; its task's
// Promote is called when it enters the queue (locked), perhaps at once.
func (m *Mailbox) Park(e *Entry) {
	e.m = m
	e.at = inRoom
	x := m.more()
	x.park.push(e)
	x.parked.Add(1)
	// A running batch frees a task's place unlocked (ranBatched: pending
	// first, then a look for parked submissions), so the place may have
	// been freed since the owner found the key full under this lock. Look
	// again now that e is counted: either this sees the place, or the
	// batch's look sees e. Only a running batch frees places unlocked, so
	// whatever this admits is found by that batch's loop: no wake is due.
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

// promote admits parked submissions while there is room (locked); the
// caller then calls wake, as after any change to the queue (a running
// batch need not: the drive loop finds them when the batch ends).
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
		m.link(e)
	}
}

// Oldest returns the oldest task that has not started: the next of a
// running batch (if the runner tracks it, see RunnerOptions.TrackOldest), else the
// head of the queue; nil if none (locked). The next of a running batch may
// start and end at any moment: read only what its owner never reuses (see
// OldestStamp for the stamp). It sees Turns only: an owner that reads it
// queues no plain tasks (see Plain).
func (m *Mailbox) Oldest() *Turn {
	if x := m.x.Load(); x != nil {
		if e := x.cursor.Load(); e != nil {
			return e.t
		}
	}
	return m.Head()
}

// OldestStamp returns the stamp (Turn.SetStamp) of the oldest task that
// waits (it has not started and was not withdrawn), and false if there is
// none (locked).
//
// The tasks of a running batch are read while the drive loop runs unlocked:
// by the time a stamp is read its task may have started, ended and been
// reused by its owner. The loop moves the cursor past a task before it
// starts it, and no new batch starts while m is locked, so a cursor that
// still points where it did after the read proves that neither that task
// nor any after it had started. A withdrawn task may stay in the batch until
// the loop skips it; it is skipped here too: it no longer waits. Only the
// link of an entry found withdrawn while the cursor had not moved is
// followed: that entry was withdrawn from this batch, its owner never reuses
// it, so its link stays as the batch was cut, under m's lock.
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

// Head returns the oldest queued Turn, or nil (locked); plain tasks are not
// Turns, and one may be queued ahead of it (see Plain).
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

// Each calls f for every queued Turn, oldest first (locked); plain tasks
// are not Turns (see Plain and TakePlain).
func (m *Mailbox) Each(f func(t *Turn)) {
	for e := m.head(); e != nil; e = e.next {
		f(e.t)
	}
}

// EachParked calls f for every Turn in m's waiting room, in the order they
// parked (locked).
func (m *Mailbox) EachParked(f func(t *Turn)) {
	if x := m.x.Load(); x != nil {
		for e := x.park.head; e != nil; e = e.next {
			f(e.t)
		}
	}
}

// EachWaiting calls f (locked) for every turn of m that has not started:
// first those a running batch has taken from the queue but not yet started
// (from the batch's cursor on; f may meet one the loop is starting now, whose
// Cancel then fails), then the queued ones. A Close that gives up and a
// sweep of ended contexts must reach both (see PITFALLS: work taken out of
// the queue is invisible to the queue's owner).
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
//
// A mailbox where no multi-key task was queued since the last walk that
// found none answers at once: the walk, under the shard's lock and as long
// as the queue, is paid only where such a task may be.
func (m *Mailbox) EachManyAhead(e *Entry, f func(t *Turn)) {
	m.eachManyAhead(func(o *Entry) bool { return o != e }, f)
}

// eachManyAhead is EachManyAhead for the queued entries for which ahead
// holds, a run at the head of the queue (locked).
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

// Hold grants single-key task t its hold at once, for a run on the caller's
// goroutine (which must own an execution slot). The caller must have checked
// CanHold under the same lock; after running it calls t.Vacate (unlocked).
// The task stays in state Queued: it is in no queue, so nothing else can
// start or cancel it, and it can be reused as soon as Vacate returns.
func (m *Mailbox) Hold(t *Turn) {
	e := &t.one
	e.m = m
	m.grant(e)
	m.pending.Add(1)
}

// Enqueue appends e at the tail of the queue (locked). It reports whether the
// mailbox now needs a drive loop; if so the caller must call Dispatch after
// unlocking.
func (m *Mailbox) Enqueue(e *Entry) (dispatch bool) {
	e.m = m
	if e.t.many != nil {
		m.more().many = true
	}
	m.link(e)
	return m.wake()
}

// link appends e, whose m is set, at the tail of the queue (locked). It
// does not write e.m: a parked entry's was set by Park, and promote wakes
// its submitter (Work.Promote) before it links the entry, so the submitter
// may already read e.m unlocked (Entry.release does, to find the lock).
func (m *Mailbox) link(e *Entry) {
	m.measure()
	e.at = inQueue
	e.plainBefore = m.plain.tail
	m.more().queue.push(e)
	m.pending.Add(1)
}

// measure starts the service-rate estimate when a task is about to be
// queued behind another (locked): a queue forms.
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

// HeldSince returns when the key's current hold began, on the runner's
// clock (RunnerOptions.Clock): the running task of a batch, an inline run, a
// multi-key task (from the moment it holds this key) or a shared group
// (from its first task); false if nothing holds m or the runner keeps no
// clock (locked).
func (m *Mailbox) HeldSince() (int64, bool) {
	x := m.x.Load()
	if x == nil {
		return 0, false // the runner keeps no clock
	}
	h := x.heldSince.Load()
	return h >> 1, h != 0
}

// held is what heldSince holds for a hold that began at clock time at and
// has not been reported slow: at shifted left by one, keeping its sign (a
// Clock's times are within 2^62 ns, 146 years, of its zero).
func held(at int64) int64 { return at << 1 }

// MarkSlow reports whether the current hold has not been reported slow yet,
// and marks it reported (locked): a slow task is reported once. A drive
// loop that starts its batch's next task meanwhile (unlocked) wins: the
// new hold is not the one that was slow.
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

// unlockRetire retires m if it is idle, then unlocks. The retirement race is
// settled here: idleness is decided under the shard lock that every submitter
// takes to find m, so a submitter either finds m live (and its entry keeps m
// live) or finds it gone and creates a fresh mailbox. m is never touched
// after it retires.
//
// A fast hold may be given back unlocked at any moment (UnholdPlain's
// swap), so pending is read once: a hold still taken then keeps m live,
// and one given back by then is settled and m retired. Reading it twice,
// once to settle and once to count, let a swap between the two retire m
// with the stale hold still set: the next submitter, finding m through
// the table rather than as the shard's fast node, saw it held, queued
// behind a hold that nobody would give back, and nothing ever drove the
// key (TestStress, about one run in 200).
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
// budget exclusive tasks in a row, then, if other work waits for a slot, it
// yields (re-queues m on the runner); otherwise it takes another budget. It
// returns a granted multi-key or shared task for the caller to run with the
// same slot, or nil.
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
			// this loop, through the ready queue's lock twice. Go on.
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

// cutRuns is how many turns a batch takes at most once a group's run
// ends in it: the cut walks every turn it takes, cold in the cache, before
// the first one runs, so a batch of large runs (a Batcher's) is cut one run
// at a time, and its first call starts after a walk of one run, not of
// every run the budget allows; small runs are still cut together, so that
// a batch of them costs no more lock round trips than before.
const cutRuns = 64

// runBatch runs a batch of the single-key exclusive tasks at the head of the
// queue, up to budget, with m locked on entry and on return; it settles done
// (a task of the caller's) once unlocked, and returns how many tasks it took
// (a run of one group, up to its Max, counts as one: see Group).
//
// A group's run ends the batch once the batch holds cutRuns turns: the
// tasks before it go with it, but what follows it waits for the next batch
// of the same drive loop. So a long queue of a group's large runs is taken
// a run at a time, and its first Run starts without walking the whole
// queue first.
//
// The batch is detached from the queue under one lock and run without
// taking the lock again, so a busy key costs two lock round trips per batch
// instead of two per task. While it runs, m.hold is holdPlain: nothing else
// can hold m and new submissions queue behind the batch. A batched task
// canceled before it starts loses the start CAS; its canceler gives its
// place back at once (Entry.release), and the loop skips it.
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

// runFrom runs the tasks of a running batch from e on; ran is how many of
// the batch's tasks ran before e.
//
// If a task's Run never returns (its fn called runtime.Goexit: the Work
// accounted for it, and the goroutine is exiting), the deferred check ends
// that task as after any run and hands the rest of the batch, the mailbox
// and this goroutine's execution slot to a fresh drive loop, so the key
// goes on in FIFO order and nothing is left driven.
func (m *Mailbox) runFrom(e *Entry, ran int) {
	var running *Entry  // the entry whose task is in Run
	var grouped []*Turn // the turns of a group in Run, if any
	var after *Entry    // the entry after that group's run
	defer func() {
		// The fresh loop's closure captures copies: capturing ran or after
		// themselves would move them to the heap on every call.
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
			// A run of the group: the turns that win their start, up to
			// Max entries, go to one Run.
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
// parked submission into the room (it queues behind the batch), and
// settles the task.
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

// grantReaders grants every further shared task at the head and puts them on
// the ready queue, so that each runs on its own slot while the mailbox is
// released (locked). It reports whether any was queued.
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
// both the count and the span, and it forgets everything when the queue
// drains (locked).
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

// String describes m's state for a person debugging a stuck key (locked):
// its pending count (with the fast-hold bit), what holds it, whether a
// drive loop is due, and what waits in its queues.
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

// String describes r's slots and ready queue, for a person debugging a
// stuck executor.
func (r *Runner) String() string {
	return fmt.Sprintf("active=%d/%d ready=%d", r.active.Load(), r.limit, r.nready.Load())
}
