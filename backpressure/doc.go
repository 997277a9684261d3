// Package backpressure says what an executor does with a submission that
// meets a cap (executor.WithMaxQueuePerKey, executor.WithMaxPending), and how
// a refusal reads.
//
// Pick a policy with executor.WithPolicy: FailFast (the default) refuses at
// once, Block waits in line for room until the caller's ctx ends, and
// MaxQueueDelay also refuses while a key's oldest queued task has waited too
// long. A Policy of your own may refuse more, never admit past a cap.
//
// A refused call returns a *BusyError, which wraps ErrBusy (the same value as
// executor.ErrBusy): it names the key, the cap and what was pending, and its
// RetryAfter suggests when to try again, for an HTTP 429's Retry-After:
//
//	var busy *backpressure.BusyError
//	if errors.As(err, &busy) {
//		secs := max(1, int(math.Ceil(busy.RetryAfter().Seconds()))) // 0: no estimate yet
//		w.Header().Set("Retry-After", strconv.Itoa(secs))
//		http.Error(w, err.Error(), http.StatusTooManyRequests)
//	}
//
// The package only decides: it never queues or runs work.
package backpressure
