package backpressure

import "time"

// Load is what the executor knows about a submission when it asks a Policy.
// Key figures are for the submission's key (for a multi-key task, the key
// being checked); a Limit of 0 means no cap.
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

func (failFast) Decide(l Load) Verdict {
	if l.Full() != 0 {
		return Reject
	}
	return Admit
}
