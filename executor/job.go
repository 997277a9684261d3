package executor

import (
	"context"
	"runtime/debug"
	"sync/atomic"
	"time"
	"unsafe"

	"go.uber.org/zap"

	"github.com/perkey/perkey/internal/mailbox"
)

// job is what the mailboxes schedule for one task: fn, the context it runs
// with, and how its end is reported. It is the task's mailbox.Work (a
// Batcher's message wraps it).
//
// A synchronous call's job (Do, DoShared) goes back to the pool once
// nothing can refer to it (see recycle), so the call allocates only the
// taskCtx fn receives, which fn may keep; a Do that runs at once takes no
// job (doPlain). An asynchronous task's job (a Batcher message's, a
// parkedPlain's) is left to the GC: recycling it too was measured, and
// lost (see BENCHMARKS.md), as the producer that takes a recycled job
// writes cache lines that the worker on the other core wrote last, which
// costs more than a fresh allocation.
type job[K comparable] struct {
	turn mailbox.Turn
	core[K]
	fn  func(context.Context) error
	ctx *taskCtx[K] // what fn receives; per call, never recycled
	err error       // written before the job settles, read after

	// done receives one value when a parked job is admitted to its queue
	// (see park) and one when a synchronous job settles. It has capacity 1
	// and every value is received before the next is sent, so a pooled
	// job keeps its channel.
	done chan struct{}
}

// core is what a running task's context reads of its task (taskCtx.st):
// its job's, or for a plain task its mailbox's (see plainCore).
type core[K comparable] struct {
	e     *Executor[K] // set when the core is made, never changed
	multi *[]K         // a multi-key task's keys, deduplicated

	// in is set only in the mark of a task context's child (innerCtx),
	// which the context's state then points to: a job's or a mailbox's
	// core never has one.
	in *innerCtx[K]

	// counts: a plain core's, its shard's started and completed counts
	// (see plainCoreOf); nil in a job's, whose tasks count in the
	// executor's (ledger.counts).
	counts *taskCounts

	// bits: lentBit while a nested call borrows this running task's
	// execution slot (only the call that sets it owns the slot).
	bits atomic.Uint32

	// Facts about a job's call, set before it is queued (a plain core's
	// are all false). They sit here, in what would be padding.
	async bool // a Batcher message, or a Go or Submit waiting for room: Settle ends the task, nobody waits on done
	own   bool // part of a larger object (a Batcher's message): never pooled
}

const lentBit uint32 = 1

// work is what a task's mailbox.Work is: its job, or a Batcher's message
// around it.
type work[K comparable] interface {
	mailbox.Work
	base() *job[K]
}

func (j *job[K]) base() *job[K] { return j }

// jobOf returns the job of a task the executor queued.
func jobOf[K comparable](t *mailbox.Turn) *job[K] { return t.Work().(work[K]).base() }

// Promote lets a parked job in (mailbox.Work), locked, unless the executor
// is closed: then the parked submitter leaves with ErrClosed, and no work
// is accepted after Close.
func (j *job[K]) Promote() bool {
	e := j.e
	if e.closed.Load() {
		return false
	}
	e.countAccepted(j)
	j.done <- struct{}{}
	return true
}

// epoch anchors monotime: durations between two monotimes are monotonic.
var epoch = time.Now()

// monotime is the monotonic time since epoch, in nanoseconds.
func monotime() int64 { return int64(time.Since(epoch)) }

// since is the time elapsed since monotime t.
func since(t int64) time.Duration { return time.Duration(monotime() - t) }

// Run executes fn (mailbox.Work); a task whose ctx ended, or that a
// giving-up Close abandoned, is not run and counts as canceled. A panic
// becomes a *PanicError, and a runtime.Goexit is accounted for (ErrGoexit)
// before the goroutine goes on exiting, so the mailbox's deferred checks
// find the task ended and hand the key on.
func (j *job[K]) Run() {
	e := j.e
	c := j.ctx
	err := ctxErr(c.caller())
	if err == nil && e.force.Err() != nil {
		err = ErrClosed
	}
	if err != nil {
		e.abandon(j, err)
		return
	}
	outcome, start, err := e.invoke(j.ctx, &e.counts, j.multi, j.fn, j.turn.Stamp(), func(start time.Time) { j.ran(ErrGoexit, Failed, start) })
	j.ran(err, outcome, start)
}

// tellStarted tells the Observer how long a task accepted at stamp waited,
// setting start first: one clock read serves the wait and the run.
func (e *Executor[K]) tellStarted(stamp int64, start *time.Time) {
	*start = time.Now()
	e.obs.TaskStarted(time.Duration(start.Sub(epoch)) - time.Duration(stamp))
}

// invoke starts a task accepted at stamp (counts it in n, tells the
// Observer, sets start if there is one) and runs its fn with c, turning a
// panic into a *PanicError logged with the key (multi, or c.key). If the
// goroutine exits instead (runtime.Goexit in fn, in TaskStarted, or in the
// logger reporting fn's panic: neither a return nor a panic, told apart as
// singleflight does), the deferred check ends the task with exited, which
// accounts for it as ErrGoexit; invoke never returns.
func (e *Executor[K]) invoke(c *taskCtx[K], n *taskCounts, multi *[]K, fn func(context.Context) error, stamp int64,
	exited func(start time.Time)) (outcome Outcome, start time.Time, err error) {
	c.job().fresh()
	returned := false
	defer func() {
		if returned {
			return
		}
		// Since Go 1.21 panic(nil) is a *runtime.PanicNilError: no
		// recovered value is nil.
		v := recover()
		if v == nil {
			exited(start)
			return
		}
		reported := false
		defer func() {
			if !reported {
				exited(start) // the logger exited while reporting the panic
			}
		}()
		err, outcome = e.recovered(v, keyField(c, multi)), Panicked
		reported = true
	}()
	n.started.Add(1)
	if e.obs != nil {
		e.tellStarted(stamp, &start)
	}
	err = fn(c)
	returned = true
	if err != nil {
		outcome = Failed
	}
	return outcome, start, err
}

// recovered makes a *PanicError of a panic recovered from fn (called in the
// deferred function that recovered it, so the stack is the panic's) and
// logs it at error level with fields naming the key: it is never silent.
func (e *Executor[K]) recovered(v any, fields ...zap.Field) *PanicError {
	pe := &PanicError{Value: v, Stack: debug.Stack()}
	e.log.Error("task panicked", append(fields, zap.Any("panic", v), zap.ByteString("stack", pe.Stack))...)
	return pe
}

// watched is the ctx a waiting room watches for j once it is ahead of
// others (see watch.go): its caller's if j is asynchronous; a synchronous
// job's caller withdraws it itself.
func (j *job[K]) watched() context.Context {
	if j.async {
		return j.ctx.caller()
	}
	return nil
}

// ran accounts for a task whose fn ended with err. A job's result always
// has a reader (a Do, a Task), so a failure is never the error handler's.
func (j *job[K]) ran(err error, outcome Outcome, start time.Time) {
	j.err = err
	j.e.finished(j.ctx, &j.e.counts, j.multi, false, err, outcome, start)
}

// finished accounts for a task (context c, keys multi if several) whose fn
// ended with err, then reports it; if unread, a failure goes to the error
// handler. The task is accounted for before any callback hears of it, so
// one that calls runtime.Goexit cannot leave it unaccounted.
func (e *Executor[K]) finished(c *taskCtx[K], n *taskCounts, multi *[]K, unread bool, err error, outcome Outcome, start time.Time) {
	c.end()
	n.completed.Add(1)
	if outcome == Panicked {
		e.panicked.Add(1)
	}
	if e.obs != nil || unread && err != nil {
		e.report(c, multi, unread, err, outcome, start)
	}
}

// report tells the Observer, and for a failure nobody reads (unread) the
// error handler, of an ended task. The handler's call is deferred, so an
// Observer that calls runtime.Goexit in TaskFinished cannot keep the
// failure from it.
func (e *Executor[K]) report(c *taskCtx[K], multi *[]K, unread bool, err error, outcome Outcome, start time.Time) {
	if unread && err != nil {
		defer e.unread(keyField(c, multi), keyAny(c, multi), err, true)
	}
	if e.obs != nil {
		e.obs.TaskFinished(time.Since(start), outcome)
	}
}

// keyAny is the key of a task with context c, or its keys (multi), for
// the error handler; keyField names them in a log entry.
func keyAny[K comparable](c *taskCtx[K], multi *[]K) any {
	if multi != nil {
		return *multi
	}
	return c.key
}

func keyField[K comparable](c *taskCtx[K], multi *[]K) zap.Field {
	if multi != nil {
		return zap.Any("keys", *multi)
	}
	return zap.Any("key", c.key)
}

// Settle ends a task once no mailbox refers to it (mailbox.Work): it gives
// back the reservation and wakes the caller (Do); an asynchronous job has
// nothing more to do (a submission's Settle then ends its Task). A
// synchronous job is not touched after that: its woken caller recycles it.
func (j *job[K]) Settle() {
	j.release()
	if !j.async {
		j.done <- struct{}{}
	}
}

// release gives back a settling task's reservation. A task that ran in a
// batch leaves it to the batch's end, if the executor has no global cap
// (see settled): the task still ends at once.
func (j *job[K]) release() {
	e := j.e
	if !e.batchRelease || !j.turn.Batched() {
		e.unreserve()
	}
}

var (
	_ work[int] = (*job[int])(nil)
	_ work[int] = (*submission[int])(nil)
)

// syncJob takes a job from the pool for a synchronous call of fn with ctx
// on key (or on keys, if not nil), with a fresh context.
func (e *Executor[K]) syncJob(ctx context.Context, fn func(context.Context) error, key K, keys *[]K) *job[K] {
	j := e.jobs.Get().(*job[K])
	c := newTaskCtx[K](ctx)
	c.key = key
	j.multi = keys
	return e.bind(j, fn, c)
}

// bind makes j a call of fn, run with the task context c, whose caller's
// ctx is set. Nothing else can see c yet.
func (e *Executor[K]) bind(j *job[K], fn func(context.Context) error, c *taskCtx[K]) *job[K] {
	c.st = unsafe.Pointer(&j.core)
	j.fn, j.ctx = fn, c
	return j
}

// recycle puts a settled synchronous job back in the pool unless something
// may still refer to it: a canceled job may still be in a drive loop's
// batch (the mailbox's readers look at it there); a giving-up Close
// cancels jobs it listed earlier; in striped mode HotKeys names a stripe
// after the next task of a running batch (nameOf).
func (e *Executor[K]) recycle(j *job[K]) {
	// A multi-key job may be held by a deadlock check that met it in a queue
	// (closesCycle). A job that ran in a batch stays in the batch's slots,
	// which a giving-up Close or a sweep (Mailbox.EachWaiting) reads while
	// the loop runs: reused, it would be queued again under them.
	if j.turn.State() != mailbox.Done || j.turn.Batched() || e.closed.Load() || e.router.Striped() || j.multi != nil || j.own {
		return
	}
	e.reuse(j)
}

// reuse puts a synchronous job nothing refers to back in the pool. It drops
// what the caller gave; everything else is set again before it is read (see
// syncJob, Turn.Init and Run, which always writes err).
func (e *Executor[K]) reuse(j *job[K]) {
	j.fn, j.ctx, j.multi, j.err = nil, nil, nil, nil
	e.jobs.Put(j)
}
