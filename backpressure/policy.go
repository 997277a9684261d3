package backpressure

import "time"

// Load is what the executor knows about a submission when it asks a Policy.
// It asks twice: once about the executor-wide cap (only TotalPending and
// TotalLimit set, only when that cap is reached), then about the key (only
// the key's figures set; for a multi-key task, once per key). A limit of 0
// means no cap.
type Load struct {
	Pending      int           // tasks pending (queued + running) for the key
	Limit        int           // the per-key cap
	TotalPending int           // tasks pending in the whole executor
	TotalLimit   int           // the global cap
	OldestWait   time.Duration // how long the key's oldest queued task has waited; 0 if none
}

// Full reports which cap the load is at, or 0 if it is below both.
func (l Load) Full() Scope {
	switch {
	case l.Limit > 0 && l.Pending >= l.Limit:
		return ScopeKey
	case l.TotalLimit > 0 && l.TotalPending >= l.TotalLimit:
		return ScopeGlobal
	}
	return 0
}

// Verdict is a Policy's answer.
type Verdict uint8

const (
	// Admit accepts the task.
	Admit Verdict = iota
	// Reject refuses the task with a *BusyError.
	Reject
	// Wait blocks the submitter until room appears or its ctx ends.
	Wait
)

// Policy decides what happens to a submission. Decide is called for every
// submission, on the submitter's goroutine, without executor locks held that
// user code could observe; it must be fast and must not block.
//
// The executor enforces the answer: Admit is honoured only while the load is
// below both caps (a policy can shed more, never admit past a cap).
type Policy interface {
	Decide(l Load) Verdict
}

// NeedsQueueAge is implemented by policies that read Load.OldestWait; the
// executor measures queue age only for them.
type NeedsQueueAge interface {
	NeedsQueueAge() bool
}

type failFast struct{}

// FailFast returns the default policy: a submission at a cap is refused at
// once with ErrBusy.
func FailFast() Policy { return failFast{} }

// String names the policy, for status pages.
func (failFast) String() string { return "FailFast" }

func (failFast) Decide(l Load) Verdict {
	if l.Full() != 0 {
		return Reject
	}
	return Admit
}

type block struct{}

// Block returns a policy that makes a submission at a cap wait for room
// until its ctx ends (the call then returns ctx's error) or the executor
// closes (ErrClosed). Submissions waiting on one key get room in FIFO order,
// and a new submission never overtakes one already waiting; a waiter that
// gives up leaves nothing behind. A waiter enters its key's queue as soon as
// a task of the key ends. The ctx of an asynchronous task holding the room
// it waits for may end too (that task then never runs): a task already
// ended when the waiter came is dropped first (in a room holding over 256
// tasks, which is looked over at most once a millisecond, up to a
// millisecond later), and one that ends later lets the waiter in as it
// ends, or, if the waiter has waited under a millisecond, a millisecond
// after it came (watching costs about 1 µs per distinct ctx, so only a
// wait that lasts pays it). Once Close has begun none enters, and all
// leave with ErrClosed.
//
// A nested call (one made with a running task's ctx) waits like any other
// and lends its task's execution slot meanwhile, except where the room it
// would wait for is held by its own task and comes back only once that task
// returns: at the executor-wide cap (every reservation may be held by tasks
// waiting on nested calls) and on a key its task holds (a nested Submit). It
// is refused at once with ErrBusy there.
//
// A DoMany that meets a full key does not wait in line: it retries with a
// backoff (50µs, doubling to 10ms), all its keys at once. Calls waiting in
// line on that key go first, so while the key stays full and others keep
// waiting for it, the DoMany keeps losing and waits until its ctx ends: give
// it a deadline, or cap such keys with room to spare. (Waiting in line on
// all its keys would hold room on the keys that are free for a DoMany that
// cannot start yet; a task running on one of its other keys that makes a
// nested call on a held one could then wait for it forever.)
func Block() Policy { return block{} }

// String names the policy, for status pages.
func (block) String() string { return "Block" }

func (block) Decide(l Load) Verdict {
	if l.Full() != 0 {
		return Wait
	}
	return Admit
}

type maxQueueDelay struct{ d time.Duration }

// MaxQueueDelay returns a policy that sheds load by queueing delay rather
// than queue length: a new task for a key is rejected (ErrBusy, Scope
// ScopeDelay) while that key's oldest queued task has waited longer than d.
// A slow key is shed even below its length cap; a fast key with a long
// queue is not. At a length cap it rejects, like FailFast.
//
// The signal is the head's sojourn time, CoDel's measure of a standing
// queue: a burst that drains quickly never ages the head past d, while a
// key whose service falls behind its arrivals does, and every task admitted
// behind such a head would wait at least as long. Unlike CoDel it takes no
// minimum over an interval and keeps no timer: a decision costs one clock
// read, and it stops rejecting as soon as the head is young again. It keeps
// FIFO order (adaptive LIFO would break per-key order). d <= 0 is treated
// as 1ns.
func MaxQueueDelay(d time.Duration) Policy { return maxQueueDelay{d: max(d, 1)} }

// String names the policy and its bound, for status pages.
func (p maxQueueDelay) String() string { return "MaxQueueDelay(" + p.d.String() + ")" }

func (p maxQueueDelay) Decide(l Load) Verdict {
	if l.Full() != 0 || l.OldestWait > p.d {
		return Reject
	}
	return Admit
}

func (maxQueueDelay) NeedsQueueAge() bool { return true }
