package executor

import (
	"time"

	"github.com/perkey/perkey/backpressure"
)

// Outcome is how a task that ran ended.
type Outcome uint8

const (
	OK       Outcome = iota // fn returned nil
	Failed                  // fn returned an error
	Panicked                // fn panicked
)

// Reason says why a submission was rejected.
type Reason uint8

const (
	ReasonKey    Reason = iota + 1 // the per-key cap (WithMaxQueuePerKey)
	ReasonGlobal                   // the executor-wide cap (WithMaxPending)
	ReasonDelay                    // latency-based shedding (backpressure.MaxQueueDelay)
	ReasonClosed                   // the executor was closed
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
// under a lock, from the goroutine where the event happens: it must be cheap,
// must not block, and must be safe for concurrent use. A panic in it is
// recovered and logged at error level (rate-limited), and the task and its
// key go on as if the event had been delivered; a runtime.Goexit in it ends
// the goroutine that reported the event, and nothing else. An event may
// reach it after later ones of the same task (TaskStarted before
// TaskAccepted, say): count events, do not sequence them.
type Observer interface {
	// TaskAccepted: a submission was accepted.
	TaskAccepted()
	// TaskRejected: a submission was refused, not accepted: by backpressure
	// (ReasonKey, ReasonGlobal, ReasonDelay; counted in Stats.Rejected), or
	// with ErrClosed as the executor is closed or closing (ReasonClosed).
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
	MaxKeyPending() int // see Executor.MaxKeyPending
}

// Attacher is implemented by observers that want to read an executor's
// gauges; New calls Attach once with the executor it builds.
type Attacher interface {
	Attach(g Gauges)
}

// Detacher is implemented by observers that stop reading an executor's
// gauges once it has closed; a Close that returns nil calls Detach once, as
// the executor has stopped.
type Detacher interface {
	Detach(g Gauges)
}
