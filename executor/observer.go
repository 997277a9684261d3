package executor

import (
	"time"

	"github.com/perkey/perkey/backpressure"
)

// Outcome is how a task that ran ended.
type Outcome uint8

const (
	// OK means fn returned nil.
	OK Outcome = iota
	// Failed means fn returned an error.
	Failed
	// Panicked means fn panicked.
	Panicked
)

// Reason says why a submission was rejected.
type Reason uint8

const (
	// ReasonKey: the per-key cap (WithMaxQueuePerKey).
	ReasonKey Reason = iota + 1
	// ReasonGlobal: the executor-wide cap (WithMaxPending).
	ReasonGlobal
	// ReasonDelay: latency-based shedding (backpressure.MaxQueueDelay).
	ReasonDelay
	// ReasonClosed: the executor was closed.
	ReasonClosed
)

// reasonOf is the Reason for a refusal by the cap of scope.
func reasonOf(s backpressure.Scope) Reason {
	switch s {
	case backpressure.ScopeKey:
		return ReasonKey
	case backpressure.ScopeGlobal:
		return ReasonGlobal
	case backpressure.ScopeDelay:
		return ReasonDelay
	}
	return 0
}

// String returns the reason as a metric label value.
func (r Reason) String() string {
	switch r {
	case ReasonKey:
		return "key"
	case ReasonGlobal:
		return "global"
	case ReasonDelay:
		return "delay"
	case ReasonClosed:
		return "closed"
	}
	return "unknown"
}

// Observer receives task events. The executor calls it synchronously, never
// under a lock, from the goroutine where the event happens; implementations
// must be cheap, must not block, and must be safe for concurrent use. A
// panic in an Observer is recovered and logged at error level
// (rate-limited); the task and its key go on as if the event had been
// delivered. One that calls runtime.Goexit ends the goroutine that
// reported the event, and nothing else (see "Hostile callers" in the
// package doc). An event may reach it after later ones of the same task
// (TaskStarted before TaskAccepted, say): count events, do not sequence
// them.
type Observer interface {
	// TaskAccepted: a submission was accepted.
	TaskAccepted()
	// TaskRejected: a submission was refused (not counted as accepted): by
	// backpressure (ReasonKey, ReasonGlobal, ReasonDelay; Stats.Rejected
	// counts these), or because the executor is closed or closing
	// (ReasonClosed: the call returned ErrClosed without being accepted).
	TaskRejected(reason Reason)
	// TaskStarted: fn is about to run after waiting wait in the queue.
	TaskStarted(wait time.Duration)
	// TaskFinished: fn returned (or panicked) after running for run.
	TaskFinished(run time.Duration, outcome Outcome)
	// TaskCanceled: an accepted task will never run (ctx ended, or Close gave up).
	TaskCanceled()
}

// SlowObserver is implemented by observers that count slow tasks (see
// WithSlowTaskWarning); the executor calls TaskSlow once per hold that
// lasted longer than the option's d, with its age when it was found.
type SlowObserver interface {
	TaskSlow(age time.Duration)
}

// Gauges is the live view an Observer may read at scrape time; every
// *Executor[K] implements it.
type Gauges interface {
	Stats() Stats
	// MaxKeyPending is the pending count of the busiest key (or stripe) now.
	MaxKeyPending() int
}

// Attacher is implemented by observers that want to read an executor's
// gauges; New calls Attach once with the executor it builds.
type Attacher interface {
	Attach(g Gauges)
}

// Detacher is implemented by observers that stop reading an executor's
// gauges once it has closed; Close calls Detach once, when the executor has
// stopped (a Close that returned nil).
type Detacher interface {
	Detach(g Gauges)
}
