package backpressure

import (
	"errors"
	"fmt"
	"time"
)

// ErrBusy is returned (wrapped in a *BusyError) when a per-key or global cap
// refuses a task. Match it with errors.Is.
var ErrBusy = errors.New("perkey: busy")

// Scope says which cap refused a task.
type Scope uint8

const (
	// ScopeKey is the per-key cap (executor.WithMaxQueuePerKey).
	ScopeKey Scope = iota + 1
	// ScopeGlobal is the executor-wide cap (executor.WithMaxPending).
	ScopeGlobal
	// ScopeDelay is latency-based shedding (MaxQueueDelay).
	ScopeDelay
)

// String returns the scope as used in metric labels: "key", "global" or "delay".
func (s Scope) String() string {
	switch s {
	case ScopeKey:
		return "key"
	case ScopeGlobal:
		return "global"
	case ScopeDelay:
		return "delay"
	}
	return "unknown"
}

// BusyError is the error a refused submission returns. It wraps ErrBusy.
type BusyError struct {
	Key     any           // the key whose cap refused the task (nil for the global cap)
	Scope   Scope         // which cap refused it
	Pending int           // tasks pending (queued + running) under that cap when it refused
	Limit   int           // the cap
	Wait    time.Duration // for ScopeDelay: how long the oldest queued task had waited
	Retry   time.Duration // suggested delay before retrying; 0 when unknown
}

// Error names the key and the limit, as in
// `perkey: key "acct-1" is busy: 100 pending, limit 100`.
func (e *BusyError) Error() string {
	switch e.Scope {
	case ScopeGlobal:
		return fmt.Sprintf("perkey: executor is busy: %d pending, limit %d", e.Pending, e.Limit)
	case ScopeDelay:
		return fmt.Sprintf("perkey: key %#v is busy: oldest task queued for %v, %d pending", e.Key, e.Wait, e.Pending)
	}
	return fmt.Sprintf("perkey: key %#v is busy: %d pending, limit %d", e.Key, e.Pending, e.Limit)
}

// Unwrap returns ErrBusy.
func (e *BusyError) Unwrap() error { return ErrBusy }

// RetryAfter is a suggested delay before the caller retries, estimated from
// the key's recent service rate (the time per task finished while a queue
// stood). While no task has finished since the queue formed it is the
// running task's age so far, a lower bound, if the executor tracks ages
// (executor.WithSlowTaskWarning, an Observer or a queue-age policy). It is 0
// when the executor has no estimate.
func (e *BusyError) RetryAfter() time.Duration { return e.Retry }
