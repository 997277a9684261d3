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
// # Architecture
//
// The package owns the API, the options and their defaults, the task
// lifecycle (accept, run, cancel, settle), the counters and every call into
// user code. A submission flows one way: the executor checks the key, asks
// the Policy (package backpressure) whether to admit, asks the router
// (internal/router) for the key's mailbox, and hands the mailbox
// (internal/mailbox) a turn to queue and run on the shared pond pool; the
// result comes back through the task's done signal. Five calls go back up,
// each because the lower layer must act on something only the upper one
// knows: the mailbox runs and ends turns through the executor's Work (Run,
// Settle, Promote, and Plain for plain tasks); a drive loop reports a
// finished batch (RunnerOptions.Ran, or Plain.RanPlain with its mailbox, so
// that a plain batch's reservations go back to its router shard's counts)
// so the executor gives back its reservations in one step; the runner
// reports a slot given back (RunnerOptions.Released), since Close's drain
// waits for free slots as well as reservations (an uncontended Do without a
// global cap holds only its slot); a mailbox tells the router it is idle
// (Owner.Retire) under the shard lock, which settles the retire-versus-submit
// race; and the executor reads back the Work of turns it finds queued (Close
// giving up, HotKeys in striped mode, the deadlock check). See mailbox and
// router for their design.
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
// the marks while that task runs; detached work should use a fresh ctx. A
// DoMany holds each of its keys from the moment it reaches the head of that
// key's queue until it has all of them, so a nested call that would wait
// behind a DoMany needing a key the calling task holds (a task on a calling
// into b behind a DoMany on a and b) could never go first: it returns
// ErrReentrant at once. Close called from inside a task returns
// ErrReentrant.
//
// # Deadlocks
//
// Tasks that call into each other's keys can wait in a cycle: a task on a
// calls Do on b while the task on b calls Do on a, or a ring of any length,
// through Do, DoShared, DoMany, Task.Wait, a DoMany holding one key while it
// waits for another, or a wait for room under backpressure.Block on a key
// one task holds exclusively. The nested
// call that would close such a cycle returns ErrDeadlock at once (a Do,
// DoShared or DoMany refused so never runs its fn and counts as canceled);
// its task can then return, and the other tasks of the cycle go ahead. A
// wait that closes no cycle (a chain a -> b -> c, a wait behind queued
// tasks, a shared call joining shared holders) is never refused. The check
// costs calls from outside tasks nothing; a nested call that waits pays one
// lock and a walk of the waits it would join. What it cannot see: waits
// outside this executor (a channel, a mutex, another executor), nested
// calls made with a detached ctx (they are calls from outside any task),
// a DoMany polling for room under Block, and a wait for room under Block
// behind shared holders (room may come from any of them). A task that will need b is
// still best off taking it up front, with a, in one DoMany.
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
// at error level, to stderr unless WithLogger says otherwise. A Goexit in
// one of those callbacks ends the goroutine it was called on (the
// caller's, a pool worker's, a ctx watch's, the slow-task watcher's, which
// a fresh one replaces) and leaves nothing behind: every task is accounted
// for before any callback hears of it, what the goroutine held is given
// back as it exits, and an accepted task still runs or ends. One whose Do
// caller exited before fn started ends with ErrGoexit, counted as
// canceled.
//
// # Costs
//
// An uncontended Do runs fn on the caller's goroutine: no hand-off. A Do or
// DoShared allocates one object, the ctx fn receives (48 bytes with a string
// key: the caller's ctx, the key, and one word naming the task while it
// lives; 32 bytes when a ctx made on its own has context.Background() for
// its caller's, which it finds without keeping a copy);
// the rest of the task is recycled once the call has returned, and a Do
// that runs at once (on an executor without stripes) has nothing else: its
// hold is a mark in the key's mailbox. That ctx
// cannot be recycled: fn may keep it or hand it to a goroutine, and a
// recycled ctx would then carry another call's values and marks.
//
// Such a Do takes its ctx from a block of eight that the executor makes for the
// calls of one shard of its key table: one allocation for every eight calls,
// still 48 bytes a call. Each ctx is still one call's only. A ctx that fn keeps
// after the call keeps its block (384 bytes) alive, and with it what the other
// seven refer to (their callers' contexts and keys), until it is dropped: one
// more reason for detached work to use a fresh ctx. And while a shard is
// carving a block, the block keeps the contexts of up to seven of its calls
// that have ended, until the shard's next calls use it up: an executor left
// idle keeps at most that many per shard.
//
// A Go whose ctx never ends (its Done returns nil, as context.Background's and
// context.WithoutCancel's do) also allocates only its ctx, on an executor
// without stripes: nothing can withdraw such a task, so it waits as a slot in
// its key's ring of plain tasks, reused from one task to the next. If that
// ctx is context.Background() itself, the slot is 8 bytes, fn alone, and the
// task's 32-byte ctx is made only as it starts, by the worker that runs it (a
// waiting Go costs no ctx); with any other, the 48-byte ctx is made as the
// task is queued, and the slot is 16 bytes (fn and the ctx). A
// Go that runs alone allocates its ctx on its own; the Gos of a batch (up to
// WithThroughput tasks of one key, run one after another) with
// context.Background() take theirs from blocks of up to eight that the key's
// mailbox makes for the batch's tasks yet to run, so a batch of Gos uses its
// last block up, and leaves nothing of itself behind. As for a Do, a ctx that fn keeps keeps its
// block, and what the others in it refer to. Such a Submit allocates one
// object, its ctx and the Task it returns (which is the caller's to keep): 48
// bytes with context.Background(), 64 with another ctx;
// only if the task fails does its Task also make its waiters, to keep the
// error. With
// a ctx that can end, a Go allocates one 208-byte object (the task and its
// ctx), a Submit one of 224 bytes (with its Task), and each also the watch of
// its ctx (context.AfterFunc: three small objects), which withdraws the task at
// once if the ctx ends while it waits; a DoMany also its keys. A waiting task
// costs that object or slot; a busy key one mailbox; an idle key nothing. See
// BENCHMARKS.md for figures.
package executor
