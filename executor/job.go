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

// job is a task's mailbox.Work (a Batcher's message wraps it): fn, its
// context, and how its end is reported. A synchronous call's job is pooled
// once nothing can refer to it (recycle), so the call allocates only fn's
// taskCtx; an asynchronous one is left to the GC: reusing it would write
// cache lines another core's worker wrote last, dearer than allocating.
type job[K comparable] struct {
	turn mailbox.Turn
	core[K]
	fn  func(context.Context) error
	ctx *taskCtx[K] // what fn receives; per call, never recycled
	err error       // written before the job settles, read after

	// done (capacity 1, kept when pooled) gets a value as a parked job is
	// admitted and as a synchronous job settles, each received before the next.
	done chan struct{}
}

// core is what a running task's context reads of its task (taskCtx.st):
// its job's, or for a plain task its mailbox's (see plainCore).
type core[K comparable] struct {
	e     *Executor[K] // set when the core is made, never changed
	multi *[]K         // a multi-key task's keys, deduplicated

	in *innerCtx[K] // set only in the mark of a task context's child

	counts *taskCounts // a plain core's shard's (plainCoreOf); nil in a job's

	bits atomic.Uint32 // lentBit while a nested call borrows (and owns) the task's slot

	// Set before a job is queued (false in a plain core); they fill padding.
	async bool // a Batcher message, or a Go or Submit waiting for room: Settle ends the task, nobody waits on done
	own   bool // part of a larger object (a Batcher's message): never pooled
}

const lentBit uint32 = 1

// work is a task's mailbox.Work: its job, or a Batcher's message around it.
type work[K comparable] interface {
	mailbox.Work
	base() *job[K]
}

func (j *job[K]) base() *job[K] { return j }

// jobOf returns the job of a task the executor queued.
func jobOf[K comparable](t *mailbox.Turn) *job[K] { return t.Work().(work[K]).base() }

// Promote lets a parked job in (mailbox.Work), locked, unless closed: then
// its submitter leaves with ErrClosed, as nothing is accepted after Close.
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

func since(t int64) time.Duration { return time.Duration(monotime() - t) }

// Run executes fn (mailbox.Work) unless its ctx ended or a giving-up Close
// abandoned it (then it counts as canceled). A Goexit is accounted for
// (ErrGoexit) as the goroutine exits, so the mailbox hands the key on.
func (j *job[K]) Run() {
	e := j.e
	if err := e.startErr(ctxErr(j.ctx.caller())); err != nil {
		e.abandon(j, err)
		return
	}
	outcome, start, err := e.invoke(j.ctx, &e.counts, j.multi, j.fn, j.turn.Stamp(), func(start time.Time) { j.ran(ErrGoexit, Failed, start) })
	j.ran(err, outcome, start)
}

// startErr is why a task whose ctx says err may not start: err, or
// ErrClosed once a giving-up Close has canceled running tasks.
func (e *Executor[K]) startErr(err error) error {
	if err == nil && e.force.Err() != nil {
		return ErrClosed
	}
	return err
}

// tellStarted tells the Observer a task's wait; start takes the same clock read.
func (e *Executor[K]) tellStarted(stamp int64, start *time.Time) {
	*start = time.Now()
	e.obs.TaskStarted(time.Duration(start.Sub(epoch)) - time.Duration(stamp))
}

// invoke starts a task accepted at stamp (counts it in n, tells the Observer,
// sets start if there is one) and runs fn with c, making a panic a *PanicError
// logged with the key. If the goroutine exits instead (runtime.Goexit in fn,
// TaskStarted or the logger), exited ends it as ErrGoexit.
func (e *Executor[K]) invoke(c *taskCtx[K], n *taskCounts, multi *[]K, fn func(context.Context) error, stamp int64,
	exited func(start time.Time)) (outcome Outcome, start time.Time, err error) {
	c.job().fresh()
	returned := false
	defer func() {
		if returned {
			return
		}
		v := recover()
		if v == nil { // a Goexit (panic(nil) is a *runtime.PanicNilError)
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

// recovered makes a *PanicError of a panic recovered from fn, in the
// deferred call (so the stack is the panic's), and logs it: never silent.
func (e *Executor[K]) recovered(v any, fields ...zap.Field) *PanicError {
	pe := &PanicError{Value: v, Stack: debug.Stack()}
	e.log.Error("task panicked", append(fields, zap.Any("panic", v), zap.ByteString("stack", pe.Stack))...)
	return pe
}

// watched is the ctx a waiting room watches for j (watch.go): its caller's
// if j is asynchronous; a synchronous job's caller withdraws it itself.
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

// finished accounts for a task (keys multi if several) whose fn ended with
// err, then reports it: a callback that calls Goexit leaves it accounted.
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

// report tells the Observer, and for an unread failure the error handler,
// deferred so that an Observer exiting in TaskFinished cannot skip it.
func (e *Executor[K]) report(c *taskCtx[K], multi *[]K, unread bool, err error, outcome Outcome, start time.Time) {
	if unread && err != nil {
		defer e.unread(keyField(c, multi), keyAny(c, multi), err, true)
	}
	if e.obs != nil {
		e.obs.TaskFinished(time.Since(start), outcome)
	}
}

// keyAny is a task's key, or its keys (multi), for the error handler.
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
// back the reservation and wakes a synchronous job's caller, which recycles
// j, so j is not touched after. (A submission's own Settle ends its Task.)
func (j *job[K]) Settle() {
	j.release()
	if !j.async {
		j.done <- struct{}{}
	}
}

// release gives back a settling task's reservation; without a global cap a
// task that ran in a batch (still ending at once) leaves it to settled.
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

// syncJob takes a pooled job for a synchronous call of fn on key (or keys).
func (e *Executor[K]) syncJob(ctx context.Context, fn func(context.Context) error, key K, keys *[]K) *job[K] {
	j := e.jobs.Get().(*job[K])
	c := newTaskCtx(ctx, key)
	j.multi = keys
	return e.bind(j, fn, c)
}

// bind makes j a call of fn with c (its parent set, unseen by others yet).
func (e *Executor[K]) bind(j *job[K], fn func(context.Context) error, c *taskCtx[K]) *job[K] {
	c.st = unsafe.Pointer(&j.core)
	j.fn, j.ctx = fn, c
	return j
}

// recycle pools a settled synchronous job unless something may still refer
// to it: a running batch's slots, where it stays if canceled or batched,
// read by a giving-up Close or a sweep; a giving-up Close, which cancels
// jobs it listed earlier; HotKeys when striped (nameOf); a deadlock check,
// for a multi-key job (closesCycle).
func (e *Executor[K]) recycle(j *job[K]) {
	if j.turn.State() != mailbox.Done || j.turn.Batched() || e.closed.Load() || e.router.Striped() || j.multi != nil || j.own {
		return
	}
	e.reuse(j)
}

// reuse pools a synchronous job nothing refers to, dropping what the caller
// gave; the rest is set again before it is read (syncJob, Turn.Init, Run).
func (e *Executor[K]) reuse(j *job[K]) {
	j.fn, j.ctx, j.multi, j.err = nil, nil, nil, nil
	e.jobs.Put(j)
}
