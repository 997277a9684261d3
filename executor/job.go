package executor

import (
	"context"
	"runtime/debug"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/perkey/perkey/internal/mailbox"
)

// job is what the mailboxes schedule for one submission: fn, the context it
// runs with, and how its end is reported.
//
// The jobs of synchronous calls (Do, DoShared, DoMany) are recycled (see
// Executor.recycle), so such a call allocates only its taskCtx, which fn may
// keep. A job goes back to the pool only once nothing can refer to it any
// more: it was never accepted, or it ran inline, or it ran from a queue, its
// caller has seen it end, the executor is not closing (a giving-up Close
// cancels jobs it listed earlier) and not striped (HotKeys names a stripe
// after the next task of a running batch). A canceled job may still be
// linked in a drive loop's batch (Mailbox.OldestStamp follows its link), so
// it is left to the GC. An
// asynchronous job is allocated with its context and its Task in one object
// (asyncJob) and left to the GC: its Task is the caller's to keep.
//
// A synchronous job is its task's mailbox.Work; an asynchronous one's is
// the asyncJob around it, whose Settle ends the Task (see work).
type job[K comparable] struct {
	turn mailbox.Turn
	fn   func(context.Context) error
	ctx  *taskCtx[K] // what fn receives (and its executor, ctx.e); per call, never recycled
	err  error       // written before the job settles, read after

	// done receives one value when a parked job is admitted to its queue
	// (see park) and one when a synchronous job settles. It has capacity 1
	// and every value is received before the next is sent, so a pooled
	// job keeps its channel.
	done chan struct{}
}

// asyncJob is what Submit allocates, in one 224-byte object: the job, the
// AfterFunc that watches the submitter's ctx if it can end (watched; af: 0
// none yet, 1 registered and stop is set, 2 ended), the job's context and
// the Task handed to the caller.
type asyncJob[K comparable] struct {
	job     job[K]
	watched bool
	af      atomic.Int32
	stop    func() bool
	ctx     taskCtx[K]
	task    Task
}

// work is what a task's mailbox.Work is: a synchronous call's job, or the
// asyncJob around a submission's.
type work[K comparable] interface {
	mailbox.Work
	base() *job[K]
}

func (j *job[K]) base() *job[K]      { return j }
func (a *asyncJob[K]) base() *job[K] { return &a.job }

// jobOf returns the job of a task the executor queued.
func jobOf[K comparable](t *mailbox.Turn) *job[K] { return t.Work().(work[K]).base() }

func (a *asyncJob[K]) Run()          { a.job.Run() }
func (a *asyncJob[K]) Promote() bool { return a.job.Promote() }

func (a *asyncJob[K]) result() error { return a.job.err }

func (a *asyncJob[K]) beforeWait(ctx context.Context) (func(), error) {
	return a.ctx.beforeWait(ctx, &a.job.turn)
}

// Admit is called, with the mailbox locked, when a parked job gets room
// (mailbox.Work). Once the executor is closed it refuses: the parked
// submitter leaves with ErrClosed, and no work is accepted after Close.
func (j *job[K]) Promote() bool {
	e := j.ctx.e
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

// Run executes fn (mailbox.Work). A task whose caller's ctx ended, or that
// a giving-up Close abandoned, is not run and is accounted as canceled.
//
// Run contains everything fn can do: a panic becomes a *PanicError, and a
// runtime.Goexit is accounted here (ErrGoexit) before the goroutine goes on
// exiting, so the mailbox's deferred checks find the task ended and hand
// the key on (see mailbox's Work).
func (j *job[K]) Run() {
	e := j.ctx.e
	c := j.ctx
	err := c.parent.Err()
	if err == nil && e.force.Err() != nil {
		err = ErrClosed
	}
	if err != nil {
		e.abandon(j, err)
		return
	}
	e.started.Add(1)
	var start time.Time
	if e.obs != nil {
		start = time.Now() // one clock read for both the wait and the run
		e.obs.TaskStarted(time.Duration(start.Sub(epoch)) - time.Duration(j.turn.Stamp()))
	}
	outcome, err := j.call(start)
	j.ran(err, outcome, start)
}

// call runs fn, turning a panic into a *PanicError logged with the key. If
// fn calls runtime.Goexit, call ends the task with ErrGoexit itself (its
// deferred check sees that fn neither returned nor panicked, as
// singleflight's does), and never returns.
func (j *job[K]) call(start time.Time) (outcome Outcome, err error) {
	returned := false
	defer func() {
		if returned {
			return
		}
		if v := recover(); v != nil {
			err, outcome = j.ctx.e.recovered(v, j.ctx.keyField()), Panicked
			return
		}
		// Neither a return nor a panic (since Go 1.21 panic(nil) is a
		// *runtime.PanicNilError): runtime.Goexit. End the task now, while
		// the goroutine unwinds.
		j.ran(ErrGoexit, Failed, start)
	}()
	err = j.fn(j.ctx)
	returned = true
	if err != nil {
		outcome = Failed
	}
	return outcome, err
}

// recovered makes a *PanicError of a panic recovered from fn (called in
// the deferred function that recovered it, so the stack is the panic's) and
// logs it at error level with fields, which name the key: a recovered panic
// is never silent.
func (e *Executor[K]) recovered(v any, fields ...zap.Field) *PanicError {
	pe := &PanicError{Value: v, Stack: debug.Stack()}
	e.log.Error("task panicked", append(fields, zap.Any("panic", v), zap.ByteString("stack", pe.Stack))...)
	return pe
}

// ran accounts for a task whose fn ended with err.
func (j *job[K]) ran(err error, outcome Outcome, start time.Time) {
	e := j.ctx.e
	j.ctx.end()
	j.err = err
	e.completed.Add(1)
	if outcome == Panicked {
		e.panicked.Add(1)
	}
	if e.obs != nil {
		e.obs.TaskFinished(time.Since(start), outcome)
	}
	if j.ctx.unread() && err != nil {
		e.unread(j.ctx.keyField(), j.ctx.keyAny(), err)
	}
}

// Settle ends a synchronous call's task once no mailbox refers to it
// (mailbox.Work): it gives back the reservation and wakes the caller. The
// job is not touched after that, since its woken caller recycles it at once.
func (j *job[K]) Settle() {
	j.release()
	j.done <- struct{}{}
}

// Settle ends a submission's task once no mailbox refers to it
// (mailbox.Work): it gives back the reservation, stops watching the
// submitter's ctx and ends the Task.
func (a *asyncJob[K]) Settle() {
	a.job.release()
	if a.watched && a.af.Swap(2) == 1 {
		a.stop()
	}
	a.task.end()
}

// release gives back a settling task's reservation. A task that ran in a
// batch leaves it to the batch's end, if the executor has no global cap
// (see unreserveBatch): the task still ends at once.
func (j *job[K]) release() {
	e := j.ctx.e
	if !e.batchRelease || !j.turn.Batched() {
		e.unreserve()
	}
}

var (
	_ work[int] = (*job[int])(nil)
	_ work[int] = (*asyncJob[int])(nil)
)

// newJob takes a job from the pool for a synchronous call of fn with ctx
// and binds it to c, the call's fresh task context (which names its keys).
func (e *Executor[K]) newJob(ctx context.Context, fn func(context.Context) error, c *taskCtx[K]) *job[K] {
	return e.bind(e.jobs.Get().(*job[K]), ctx, fn, c)
}

// bind makes j a call of fn with ctx, run with the task context c.
func (e *Executor[K]) bind(j *job[K], ctx context.Context, fn func(context.Context) error, c *taskCtx[K]) *job[K] {
	c.parent, c.e = ctx, e
	j.fn, j.ctx = fn, c
	return j
}

// recycle puts a settled synchronous job back in the pool, unless
// something may still refer to it (see job): only a job that ran, not while
// Close may be giving up, and not in striped mode, where HotKeys names a
// stripe after the next task of a running batch (Executor.nameOf).
func (e *Executor[K]) recycle(j *job[K]) {
	// Multi-key jobs are never reused: a nested call's deadlock check may
	// still hold one it met in a queue (see closesCycle).
	if j.turn.State() != mailbox.Done || e.closed.Load() || e.router.Striped() || j.ctx.multi != nil || j.ctx.own() {
		return
	}
	e.reuse(j)
}

// reuse puts a synchronous job nothing refers to back in the pool. It drops
// what the caller gave; everything else is set again before it is read (see
// newJob, Task.Init and Run, which always writes err).
func (e *Executor[K]) reuse(j *job[K]) {
	j.fn, j.ctx, j.err = nil, nil, nil
	e.jobs.Put(j)
}
