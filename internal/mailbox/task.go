package mailbox

import (
	"context"
	"sync/atomic"
)

// Turn states: Queued -> Granted -> Running -> Done, or Queued or Granted ->
// Canceled; that CAS decides run or cancel, never both, never neither. A task
// held inline (Mailbox.Hold) stays Queued while its owner runs it: in no
// queue, nothing else can start or cancel it. A multi-key task is Staged, not
// yet accepted, while its owner enqueues it one mailbox at a time:
// EachWaiting may see it, Cancel leaves it alone, until Commit or Withdraw.
const (
	Queued State = iota
	Granted
	Running
	Done
	Canceled
	Staged
)

// State is where a turn is in its life (see the constants).
type State int32

func (s State) String() string {
	switch s {
	case Queued:
		return "queued"
	case Granted:
		return "granted"
	case Running:
		return "running"
	case Done:
		return "done"
	case Canceled:
		return "canceled"
	case Staged:
		return "staged"
	}
	return "unknown"
}

type atomicState struct{ v atomic.Int32 }

func (a *atomicState) Load() State   { return State(a.v.Load()) }
func (a *atomicState) Store(s State) { a.v.Store(int32(s)) }
func (a *atomicState) CompareAndSwap(old, new State) bool {
	return a.v.CompareAndSwap(int32(old), int32(new))
}

// Work is what a Turn runs; the executor implements it.
type Work interface {
	// Run executes the task, Running and holding its mailboxes; it must not
	// panic. On runtime.Goexit it does not return but must have accounted
	// for the task's end (deferred); the key goes on on a fresh drive loop.
	Run()
	// Settle, called once after Run or a successful Cancel, when no mailbox
	// refers to the task any more, wakes its waiters.
	Settle()
	// Promote, called locked as a parked submission (Mailbox.Park) gets room,
	// just before it is queued, must not block. False refuses it (the owner is
	// closing): it stays parked, ahead of the others, until Unparked. A submitter
	// it wakes locks an entry's mailbox (set by Park) before touching the entries.
	Promote() bool
}

// PlainWork is the Work of a parked submission that enters the queue as a
// plain slot (see Plain); its Turn serves only while it waits. Slot, called
// locked right after Promote said yes, gives the slot as EnqueuePlain would.
type PlainWork interface {
	Work
	Slot() (fn func(context.Context) error, arg any, stamp int64)
}

// Turn is the unit a mailbox schedules; Init (one key) or InitMany it first.
type Turn struct {
	state atomicState
	need  atomic.Int32 // mailboxes that have not granted the task yet
	one   Entry        // a single-key task's entry
	many  *[]Entry     // for multi-key tasks; nil otherwise
	work  Work
	stamp atomic.Int64 // when the task was accepted, if the owner measures it
}

// Group runs up to Max consecutive queued turns of one key as one unit of a
// drive loop's throughput: Run gets, in queue order, those that won their
// start (each Running and holding the key). Like Work.Run, it must account
// for every turn and not panic, and on a Goexit may not return.
type Group struct {
	Max int
	Run func(ts []*Turn)
	// Same, if set, reports whether b may join the run a starts (a
	// Batcher's). Only a run's turns have started, so a Close that gives up
	// still finds a later run's (EachWaiting).
	Same func(a, b *Turn) bool
}

func (g *Group) joins(a, b *Turn) bool { return g.Same == nil || g.Same(a, b) }

// Entry is a task's place in one mailbox.
type Entry struct {
	prev, next *Entry
	m          *Mailbox
	t          *Turn
	at         place  // where it is in m; guarded by m's lock
	shared     bool   // asks for a shared hold (only a single-key task's entry does)
	grouped    bool   // its turn is in a batch group (Turn.SetGrouped); set before it is queued
	pos        uint32 // its position in m's queue (see "The queue"), while queued or in a batch
}

// place is where an entry is in its mailbox.
type place uint8

const (
	nowhere place = iota
	inQueue       // in m's queue
	holding       // m has granted its turn
	inRoom        // linked in m's waiting room
	inBatch       // taken into a drive loop's batch (and, if it started, left so)
)

// Init prepares t for a single-key submission: a zero Turn, or a reused
// one that ran (Done, or still Queued after an inline run, see Mailbox.Hold).
func (t *Turn) Init(w Work, shared bool) {
	// Atomic stores only where a reused task differs: most ran inline (Queued).
	if t.state.Load() != Queued {
		t.state.Store(Queued)
	}
	if t.need.Load() != 1 {
		t.need.Store(1)
	}
	t.many = nil
	t.one.at, t.one.grouped = nowhere, false
	t.one.shared = shared
	// Left as they are on reuse, so the queue's readers (OldestStamp) race no write.
	if t.work != w {
		t.work = w
	}
	if t.one.t != t {
		t.one.t = t
	}
}

// Grouped is implemented by the Work of a grouped turn (Turn.SetGrouped).
type Grouped interface {
	Group() *Group
}

// SetGrouped marks a just-initialised single-key exclusive turn as one of
// a batch group (its Work implements Grouped); unmarked turns pay nothing.
func (t *Turn) SetGrouped() { t.one.grouped = true }

func (t *Turn) group() *Group {
	if !t.one.grouped {
		return nil
	}
	return t.work.(Grouped).Group()
}

// InitMany prepares t for an exclusive submission on n keys, returning its entries
// for Mailbox.Enqueue; t is Staged until Commit or Withdraw. Never reinitialise a
// task once queued: whoever saw it (EachWaiting, EachManyAhead) may still hold it.
func (t *Turn) InitMany(w Work, n int) []Entry {
	t.state.Store(Staged)
	t.need.Store(int32(n))
	t.one.shared = false
	t.work = w
	many := make([]Entry, n)
	for i := range many {
		many[i].t = t
	}
	t.many = &many
	return many
}

// SetStamp records when t was accepted (OldestStamp); call it before t is queued.
func (t *Turn) SetStamp(at int64) { t.stamp.Store(at) }

func (t *Turn) Stamp() int64 { return t.stamp.Load() }

// Entry returns the entry of a single-key task.
func (t *Turn) Entry() *Entry { return &t.one }

// Batched reports whether a single-key task that ran was in a drive loop's
// batch, whose end goes to RunnerOptions.Ran. Read it in Settle.
func (t *Turn) Batched() bool { return t.many == nil && t.one.at == inBatch }

func (t *Turn) State() State { return t.state.Load() }

func (t *Turn) Shared() bool { return t.one.shared }

// Commit makes a Staged multi-key task Queued: accepted, and cancelable.
// Call it right after enqueuing its last entry, that mailbox still locked:
// every entry's mailbox is set (Cancel reads them), and it cannot be granted
// there yet (a task Staged when every mailbox has granted it never runs).
func (t *Turn) Commit() { t.state.Store(Queued) }

// Withdraw takes a Staged task (no room on one of its keys) out of the
// mailboxes it entered; Canceled, never accepted, it is settled by nobody.
func (t *Turn) Withdraw() {
	if t.state.CompareAndSwap(Staged, Canceled) {
		t.Vacate()
	}
}

// Cancel takes a task that has not started out of every queue and hold;
// the caller then owns its settlement. False: it started, ended, or is
// Staged. A canceled task may stay in a running batch, seen by the queue's
// readers, until the loop skips it: its owner must never reuse it.
func (t *Turn) Cancel() bool {
	for {
		s := t.state.Load()
		if s != Queued && s != Granted {
			return false
		}
		if t.state.CompareAndSwap(s, Canceled) {
			break
		}
	}
	t.Vacate()
	return true
}

// Vacate takes t out of every mailbox it is queued in or holds: an inline
// run's holds (Mailbox.Hold), or a task that never ran. Call it before Settle.
func (t *Turn) Vacate() {
	if t.many == nil {
		t.one.release()
		return
	}
	for i := range *t.many {
		(*t.many)[i].release()
	}
}

// start moves a granted task to Running; false means it was canceled.
func (t *Turn) start() bool { return t.state.CompareAndSwap(Granted, Running) }

// Finish marks a task that ran Done; call after Release, before Settle.
func (t *Turn) Finish() { t.state.Store(Done) }

// Leave, called only inside Group.Run, ends a turn the run leaves out (its
// ctx ended): its place is freed and it settles now; the loop skips it.
func (t *Turn) Leave() {
	if t.state.CompareAndSwap(Running, Done) {
		t.one.m.ranBatched(t.one.m.x.Load(), 1)
		t.work.Settle()
	}
}

// release takes e out of its mailbox, whether queued or holding.
func (e *Entry) release() {
	m := e.m
	if m == nil {
		return
	}
	m.home.mu.Lock()
	switch {
	case e.at == inQueue:
		m.unlink(e)
	case e.at == holding:
		m.unhold(e)
	case e.at == inBatch:
		e.at = nowhere // the drive loop will skip it
	default:
		m.home.mu.Unlock()
		return
	}
	m.giveBack()
}

// EachManyAhead calls f, t's mailbox locked, for each multi-key task holding
// it or queued ahead of single-key t, while t is queued (Mailbox.EachManyAhead).
func (t *Turn) EachManyAhead(f func(o *Turn)) {
	e := &t.one
	m := e.m // set when t was queued, before its submitter could hand t on
	if m == nil {
		return
	}
	m.home.mu.Lock()
	defer m.home.mu.Unlock() // nothing changes: no retirement to decide
	if e.at == inQueue {
		m.EachManyAhead(e, f)
	}
}

// EachWaitedMany calls f, one mailbox locked at a time, for every multi-key
// turn t waits behind: holding or queued ahead of t where t is queued,
// holding or queued at all where it is parked. f must not lock a mailbox.
func (t *Turn) EachWaitedMany(f func(o *Turn)) {
	if t.many == nil {
		t.one.eachWaitedMany(f)
		return
	}
	for i := range *t.many {
		(*t.many)[i].eachWaitedMany(f)
	}
}

// ParkedBehind reports whether single-key turn t is parked for room and, if
// so, whether its mailbox is held exclusively (task or batch): room comes
// only once that holder ends, as every queued turn waits for it. many is the
// holder if multi-key (it may hold the key while waiting for its others).
func (t *Turn) ParkedBehind() (parked, exclusive bool, many *Turn) {
	e := &t.one
	m := e.m
	if t.many != nil || m == nil {
		return false, false, nil
	}
	m.home.mu.Lock()
	defer m.home.mu.Unlock()
	if e.at != inRoom || m.hold == holdNone {
		return e.at == inRoom, false, nil
	}
	if h := m.Holder(); h != nil && h.many != nil {
		many = h
	}
	return true, true, many
}

// JoinsShared reports whether t, a queued single-key shared turn, needs only a
// worker: nothing holds its mailbox exclusively and every turn ahead is shared.
func (t *Turn) JoinsShared() bool {
	e := &t.one
	m := e.m
	if t.many != nil || !e.shared || m == nil {
		return false
	}
	m.home.mu.Lock()
	defer m.home.mu.Unlock()
	if e.at != inQueue || m.hold != holdNone {
		return false
	}
	q := &m.q
	buf, args := q.buf(), q.argBuf()
	for i := range int(e.pos - q.taken) {
		k := q.at(int(q.cut) + i)
		if o := entryAt(buf, args, k); buf[k].fn != nil || o != nil && !o.shared {
			return false // an exclusive task is queued ahead
		}
	}
	return true
}

func (e *Entry) eachWaitedMany(f func(o *Turn)) {
	m := e.m
	if m == nil {
		return
	}
	m.home.mu.Lock()
	defer m.home.mu.Unlock()
	switch {
	case e.at == inQueue:
		m.EachManyAhead(e, f)
	case e.at == inRoom:
		m.EachManyAhead(nil, f)
	}
}

func (t *Turn) Work() Work { return t.work }
