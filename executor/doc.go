// Package executor runs closures one at a time per key, in submission order,
// and in parallel across keys (at most WithWorkers at once), in place of a
// lock per key. A key costs memory only while it has work.
//
//	exec, err := executor.New[string](executor.WithMaxQueuePerKey(100))
//	if err != nil { ... }
//	defer exec.Close(ctx)
//	err = exec.Do(ctx, accountID, func(ctx context.Context) error {
//		return debit(ctx, accountID, amount)
//	})
//
// What a caller must know (errors are sentinels, matched with errors.Is):
//
//   - State touched only by one key's tasks needs no lock. State that several
//     keys share (the map that finds each key's state, a total) still does.
//   - If ctx ends before fn starts, fn never runs and the call, or Task.Wait,
//     returns ctx's error; queued Go and Submit tasks too. From an HTTP
//     handler, fire and forget with context.WithoutCancel(r.Context()). If
//     ctx ends while fn runs, fn's ctx ends too and Do still waits for fn.
//   - A panic in fn is recovered, logged with the key and returned as a
//     *PanicError; the key's next task runs normally.
//   - At a cap (WithMaxQueuePerKey, WithMaxPending) a submission fails at once
//     with ErrBusy, or waits if WithPolicy says so. Without one, Go and Submit
//     never wait: a producer faster than the workers queues without bound;
//     backpressure.Block() at a per-key cap makes it wait for room instead.
//   - A Do, DoShared or DoMany from inside a task, with the task's ctx, on a key
//     the task holds returns ErrReentrant (WithReentrant runs it inline); on
//     another key it completes, even with WithWorkers(1). Tasks that would wait
//     for each other's keys in a cycle get ErrDeadlock: take both keys up front
//     with DoMany. Work meant to outlive the task needs a fresh ctx.
//   - Close runs every accepted task and returns nil. If its ctx ends first,
//     tasks not started fail with ErrClosed, running ones see their ctx
//     canceled, and Close returns ctx's error at once.
//
// The README is the guide; ARCHITECTURE.md and BENCHMARKS.md hold the
// internals and the figures.
package executor
