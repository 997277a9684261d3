// Package backpressure decides whether the executor admits a task.
//
// It owns the admission vocabulary shared by every layer: the [ErrBusy]
// sentinel, the [BusyError] that carries the facts a caller needs (key, pending
// count, limit, a retry hint), and the [Policy] interface that decides what
// happens when a cap is reached.
//
// It never queues, schedules or runs work, and it never holds a lock: the
// executor gathers a [Load] under its own locks and asks the policy for a
// [Verdict].
package backpressure
