package mailbox

import (
	"sync"
	"time"
)

// Owner is told when a mailbox goes idle (nothing queued, held or driven) or
// busy again. Both are called with the mailbox's lock held.
type Owner interface {
	Retire(m *Mailbox)
}

// Mailbox is one key's FIFO queue and the holds granted on it. All fields
// are guarded by mu, the lock of the router shard the mailbox lives in; every
// method that says "locked" must be called with it held.
type Mailbox struct {
	mu         *sync.Mutex // the owner's lock; guards everything below
	r          *Runner
	owner      Owner
	head, tail *Entry
	pending    int   // entries queued or holding
	readers    int   // shared holds granted
	writer     *Task // the exclusive holder, if any
	driven     bool  // a drive loop is scheduled or running
	run        func()

	// The waiting room: submissions parked until the queue has room
	// (backpressure.Block). They are not pending; FIFO among themselves.
	parkHead, parkTail *Entry
	parked             int
	limit              int // room: at most limit pending; 0 = no cap

	// Service-rate estimate for retry hints, kept only while a queue stands:
	// served tasks finished since busySince (unix ns; 0 = no queue yet).
	busySince int64
	served    int

	// Slot is free for the owner (the router keeps the key's index here).
	Slot int
}

// Init prepares m to live under lock mu, run on r and retire through o,
// with room for limit pending tasks (0 = no cap) when submissions park.
func (m *Mailbox) Init(mu *sync.Mutex, r *Runner, o Owner, limit int) {
	m.mu, m.r, m.owner, m.limit = mu, r, o, limit
	m.busySince, m.served = 0, 0
	if m.run == nil {
		m.run = func() { r.loop(item{m: m}) }
	}
}

// Reset clears what an idle mailbox remembers (its service-rate estimate)
// before it is reused for another key (locked).
func (m *Mailbox) Reset() { m.busySince, m.served = 0, 0 }

// Lock locks the mailbox's shard.
func (m *Mailbox) Lock() { m.mu.Lock() }

// Unlock retires the mailbox if it is idle and unlocks its shard.
func (m *Mailbox) Unlock() { m.unlockRetire() }

// Pending is the number of tasks queued or holding (locked).
func (m *Mailbox) Pending() int { return m.pending }

// Parked is the number of submissions waiting for room (locked).
func (m *Mailbox) Parked() int { return m.parked }

// Idle reports whether nothing is queued, held, parked or driven (locked).
func (m *Mailbox) Idle() bool { return m.pending == 0 && m.parked == 0 && !m.driven }

// ServiceTime estimates how long the key takes per task lately, from the
// tasks it finished while a queue stood; 0 means no estimate (locked).
func (m *Mailbox) ServiceTime() time.Duration {
	if m.busySince == 0 {
		return 0
	}
	busy := time.Duration(time.Now().UnixNano() - m.busySince)
	if m.served == 0 {
		return busy // nothing finished yet: at least this long
	}
	return busy / time.Duration(m.served)
}

// Park puts e in the waiting room until the queue has room; its task's
// Admit is called when it enters the queue (locked).
func (m *Mailbox) Park(e *Entry) {
	e.m = m
	e.parked = true
	e.next = nil
	e.prev = m.parkTail
	if m.parkTail != nil {
		m.parkTail.next = e
	} else {
		m.parkHead = e
	}
	m.parkTail = e
	m.parked++
}

// Unpark takes e out of the waiting room if it is still there, and reports
// whether it was; false means it was admitted meanwhile.
func (m *Mailbox) Unpark(e *Entry) bool {
	m.mu.Lock()
	was := e.parked
	if was {
		m.unpark(e)
	}
	m.unlockRetire()
	return was
}

func (m *Mailbox) unpark(e *Entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		m.parkHead = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		m.parkTail = e.prev
	}
	e.prev, e.next = nil, nil
	e.parked = false
	m.parked--
}

// promote admits parked submissions while there is room (locked); the
// caller then calls wake, as after any change to the queue.
func (m *Mailbox) promote() {
	for m.parkHead != nil && (m.limit == 0 || m.pending < m.limit) {
		e := m.parkHead
		m.unpark(e)
		e.t.work.Admit()
		m.link(e)
	}
}

// Head returns the oldest queued task, or nil (locked).
func (m *Mailbox) Head() *Task {
	if m.head == nil {
		return nil
	}
	return m.head.t
}

// Holder returns the task holding m exclusively, or nil (locked).
func (m *Mailbox) Holder() *Task { return m.writer }

// Each calls f for every queued task, oldest first (locked).
func (m *Mailbox) Each(f func(t *Task)) {
	for e := m.head; e != nil; e = e.next {
		f(e.t)
	}
}

// CanHold reports whether a new task could hold m at once: nothing is
// queued ahead of it and no hold excludes it (locked).
func (m *Mailbox) CanHold(shared bool) bool {
	return m.head == nil && m.writer == nil && (m.readers == 0 || shared)
}

// Hold grants single-key task t its hold at once, for a run on the caller's
// goroutine (which must own an execution slot). The caller must have checked
// CanHold under the same lock; after running it calls t.Release, t.Finish and
// then settles (locked).
func (m *Mailbox) Hold(t *Task) {
	e := &t.one
	e.m = m
	e.held = true
	m.grant(e)
	m.pending++
	t.need.Store(0)
	t.markRunning()
}

// Enqueue appends e at the tail of the queue (locked). It reports whether the
// mailbox now needs a drive loop; if so the caller must call Dispatch after
// unlocking.
func (m *Mailbox) Enqueue(e *Entry) (dispatch bool) {
	m.link(e)
	return m.wake()
}

// link appends e at the tail of the queue (locked).
func (m *Mailbox) link(e *Entry) {
	if m.head != nil && m.busySince == 0 {
		m.busySince = time.Now().UnixNano() // a queue forms: start measuring
	}
	e.m = m
	e.queued = true
	e.next = nil
	e.prev = m.tail
	if m.tail != nil {
		m.tail.next = e
	} else {
		m.head = e
	}
	m.tail = e
	m.pending++
}

// Dispatch schedules m's drive loop; call after Enqueue said so, unlocked.
func (m *Mailbox) Dispatch() { m.r.Dispatch(m) }

func (m *Mailbox) unlink(e *Entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		m.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		m.tail = e.prev
	}
	e.prev, e.next = nil, nil
	e.queued = false
}

func (m *Mailbox) grant(e *Entry) {
	e.held = true
	if e.t.shared {
		m.readers++
	} else {
		m.writer = e.t
	}
}

func (m *Mailbox) unhold(e *Entry) {
	e.held = false
	if e.t.shared {
		m.readers--
	} else {
		m.writer = nil
	}
}

// wake marks m driven and reports true if its head can be granted now and
// no drive loop is scheduled (locked).
func (m *Mailbox) wake() bool {
	if m.driven || m.head == nil || m.writer != nil || (m.readers > 0 && !m.head.t.shared) {
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
func (m *Mailbox) unlockRetire() {
	mu := m.mu
	if m.pending == 0 && !m.driven && m.parked == 0 {
		m.owner.Retire(m)
	}
	mu.Unlock()
}

// drive runs m's queue on a goroutine that owns an execution slot: up to
// budget exclusive tasks in a row, then it yields (re-queues m on the
// runner). It returns a granted multi-key or shared task for the caller to
// run with the same slot, or nil.
func (m *Mailbox) drive(budget int) *Task {
	m.mu.Lock()
	var done *Task // ran in this loop; settled once m's lock is released
	for {
		e := m.head
		if e == nil || m.writer != nil || (m.readers > 0 && !e.t.shared) {
			m.driven = false
			m.unlockRetire()
			settle(done)
			return nil
		}
		if budget == 0 {
			// Yield: m stays driven and goes to the back of the ready queue.
			m.mu.Unlock()
			settle(done)
			m.r.requeue(m)
			return nil
		}
		t := e.t
		m.unlink(e)
		if t.state.Load() == Canceled {
			// Its canceler finds the entry neither queued nor held.
			m.pending--
			continue
		}
		m.grant(e)
		if t.need.Add(-1) > 0 {
			continue // a multi-key task: m now waits for its other mailboxes
		}
		if t.many != nil || t.shared {
			if !t.state.CompareAndSwap(Queued, Granted) {
				continue // canceled: its canceler gives the hold back
			}
			var more bool
			if t.shared {
				more = m.grantReaders()
			}
			m.driven = false
			m.mu.Unlock()
			settle(done)
			if more {
				m.r.kick()
			}
			return t
		}
		if !t.state.CompareAndSwap(Queued, Running) {
			continue // canceled: its canceler gives the hold back
		}
		m.mu.Unlock()
		settle(done)
		t.work.Run()
		budget--
		m.mu.Lock()
		m.unhold(e)
		m.pending--
		m.finished()
		m.promote()
		t.finish()
		done = t
	}
}

// grantReaders grants every further shared task at the head and puts them on
// the ready queue, so that each runs on its own slot while the mailbox is
// released (locked). It reports whether any was queued.
func (m *Mailbox) grantReaders() bool {
	more := false
	for e := m.head; e != nil && e.t.shared; e = m.head {
		t := e.t
		m.unlink(e)
		if t.state.Load() == Canceled {
			m.pending--
			continue
		}
		m.grant(e)
		t.need.Store(0)
		if t.state.CompareAndSwap(Queued, Granted) {
			m.r.push(item{t: t})
			more = true
		}
	}
	return more
}

// finished counts a finished task toward the service-rate estimate, which
// decays so that it follows recent tasks (locked).
func (m *Mailbox) finished() {
	if m.busySince == 0 {
		return
	}
	if m.served++; m.served == 64 {
		now := time.Now().UnixNano()
		m.busySince = now - (now-m.busySince)/2
		m.served = 32
	}
	if m.head == nil {
		m.busySince, m.served = 0, 0 // the queue drained
	}
}

func settle(t *Task) {
	if t != nil {
		t.work.Settle()
	}
}
