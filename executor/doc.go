// Package executor is perkey's public face: a per-key serial executor that
// replaces per-key locks.
//
// Callers hand the Executor a closure tagged with a key. Closures with the
// same key run one at a time, in the order they were submitted; closures
// with different keys run in parallel, at most WithWorkers at once, on one
// pond pool. A key's mailbox exists only while it has work: it is created on
// the first submission and retired when it drains, so memory follows the
// keys that are busy now, never the keys ever seen.
//
//	exec, _ := executor.New[string](executor.WithMaxQueuePerKey(100))
//	defer exec.Close(ctx)
//	err := exec.Do(ctx, accountID, func(ctx context.Context) error {
//		return debit(ctx, accountID, amount)
//	})
//
// The package owns the API, the options and their defaults, the task
// lifecycle (accept, run, cancel, settle) and the counters. It asks package
// backpressure whether to admit, package router which mailbox a key has, and
// package mailbox to queue and run; it never schedules work itself.
//
// # Nested calls and contexts
//
// The ctx a task's fn receives marks the keys the task holds. A Do,
// DoShared, DoMany or Task.Wait made with that ctx (or one derived from it)
// is a nested call: on a held key it returns ErrReentrant at once instead of
// deadlocking (or runs inline with WithReentrant), and while it waits (for
// its turn, or for room under backpressure.Block) it lends the task's
// execution slot, so nesting never exhausts the pool, even with
// WithWorkers(1). Under Block a nested call never waits for room that its
// own task holds: at the WithMaxPending cap, or on a key the task holds (a
// nested Submit), it is refused at once with ErrBusy, since that room comes
// back only once the task returns. Work submitted with a task's ctx inherits
// the marks while that task runs; detached work should use a fresh ctx. Two
// tasks that wait on each other's keys form a cycle no executor can break:
// take both keys with DoMany. A DoMany holds each of its keys from the
// moment it reaches the head of that key's queue until it has all of them,
// so a nested call that would wait behind a DoMany needing a key the calling
// task holds (a task on a calling into b behind a DoMany on a and b) could
// never go first: it returns ErrReentrant at once. Longer cycles, through
// other tasks' nested calls, are not detected; a task that will need b is
// best off taking it up front, with a, in one DoMany. Close called from
// inside a task returns ErrReentrant.
//
// # Hostile callers
//
// Nothing a caller hands the executor can wedge it. A key that can never be
// serialised (a NaN, a struct or array holding one, an interface holding a
// slice, map or func) is refused with ErrInvalidKey before anything is
// locked or counted; key types that can hold neither a float nor an
// interface pay nothing for the check. A fn that calls runtime.Goexit (as
// t.FailNow and testify's require do) ends its task with ErrGoexit: the
// key's next task runs, the execution slot is given back, and a Do whose fn
// ran on the caller's goroutine lets that goroutine exit, as Goexit
// requires. A panic in fn becomes a *PanicError; a panic in an Observer, a
// Policy (which refuses that submission), the error handler or the
// logger's core is recovered and logged. Every recovered panic is logged
// at error level, to stderr unless WithLogger says otherwise.
//
// # Costs
//
// An uncontended Do runs fn on the caller's goroutine: no hand-off. A Do,
// DoShared or DoMany allocates one 64-byte object, the ctx fn receives (it
// marks the keys the task holds); the rest of the task is recycled once
// the call has returned. That ctx cannot be recycled: fn may keep it or hand
// it to a goroutine, and a recycled ctx would then carry another call's
// values and marks. A Submit allocates one 224-byte object (task, ctx and
// the Task it returns, which is the caller's to keep). A waiting task costs
// its entry; a busy key one mailbox; an idle key nothing. See BENCHMARKS.md
// for figures.
package executor
