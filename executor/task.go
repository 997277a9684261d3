package executor

import (
	"context"
	"sync/atomic"
	"time"
	"unsafe"
)

// Task is an accepted asynchronous submission (see Submit).
type Task struct {
	w   atomic.Pointer[waiters] // made on demand by Done or fail; ended once the task ended
	ops *taskOps                // how to reach the submission the Task is part of
}

// waiters is a Task's end channel and, for a failed plain Submit, its result.
type waiters struct {
	ch  chan struct{}
	err error // written before ch is closed, never after
}

// ended marks a Task that ended before anyone asked Done.
var ended = &waiters{ch: func() chan struct{} { c := make(chan struct{}); close(c); return c }()}

// taskOps is how a Task reaches the submission or plainSub whose field it is
// (subOf, plainOf). One per kind per executor, also reaching the executor:
// one pointer keeps a plainSub at 64 bytes, where an interface would not.
type taskOps struct {
	result func(t *Task) error // fn's error, or why it never ran; read once ended
	// beforeWait checks re-entry and lends the waiter's slot for Wait.
	beforeWait func(t *Task, ctx context.Context) (after func(), err error)
	// submitter is the task's submit ctx, which Wait watches; withdraw ends
	// it with err if not started. Nothing else watches it (see Submit).
	submitter func(t *Task) context.Context
	withdraw  func(t *Task, err error)
}

// outerOf returns the T whose field at offset off is t (see taskOps).
func outerOf[T any](t *Task, off uintptr) *T {
	return (*T)(unsafe.Add(unsafe.Pointer(t), -int(off)))
}

// Done returns a channel that is closed when the task has ended: fn returned
// or panicked, or the task will never run. By then Stats account for it.
// A nil Task's, or a zero one's that no Submit returned, is closed.
func (t *Task) Done() <-chan struct{} {
	if t == nil || t.ops == nil {
		return ended.ch
	}
	if w := t.w.Load(); w != nil {
		return w.ch
	}
	w := &waiters{ch: make(chan struct{})}
	if t.w.CompareAndSwap(nil, w) {
		return w.ch
	}
	return t.w.Load().ch // ended (or another Done won)
}

// Wait blocks until the task or ctx ends. It returns fn's error (a
// *PanicError if fn panicked), why the task never ran (the submitter's ctx
// error, ErrClosed), or, if ctx ends first, ctx's error, the task
// unaffected. An ended task gives its result whatever ctx, even one ended
// before the call. Called from inside a task whose ctx holds the task's
// key, or while the task is queued behind a DoMany waiting for a key the
// calling task holds, Wait returns ErrReentrant instead of deadlocking;
// from inside a task, it returns ErrDeadlock if the wait would close a
// cycle of tasks waiting for each other's keys. Either way the task is
// unaffected. A nil Task, or a zero one no Submit returned, gives ErrNilTask.
func (t *Task) Wait(ctx context.Context) error {
	if t == nil || t.ops == nil {
		return ErrNilTask
	}
	if ctx == nil {
		return ErrNilContext
	}
	if t.hasEnded() {
		return t.ops.result(t)
	}
	after, err := t.ops.beforeWait(t, ctx)
	if err != nil {
		return err
	}
	defer after()
	// If the task's ctx ends meanwhile, withdraw the task (a no-op once it runs).
	var own <-chan struct{}
	sub := t.ops.submitter(t)
	if sub != nil {
		own = sub.Done()
	}
	done := ctx.Done()
	if own == nil && done == nil {
		<-t.Done() // neither ctx ever ends: a plain receive is cheaper than a select
		return t.ops.result(t)
	}
	for {
		select {
		case <-t.Done():
			return t.ops.result(t)
		case <-own:
			own = nil
			t.ops.withdraw(t, sub.Err())
		case <-done:
			if t.hasEnded() { // both were ready: select picked one at random
				return t.ops.result(t)
			}
			return ctx.Err()
		}
	}
}

// hasEnded reports whether the task has ended, its result written.
func (t *Task) hasEnded() bool {
	switch w := t.w.Load(); w {
	case ended:
		return true
	case nil:
		return false
	default:
		select {
		case <-w.ch:
			return true
		default:
			return false
		}
	}
}

// end wakes every waiter, once; the result is written by then.
func (t *Task) end() {
	if !t.w.CompareAndSwap(nil, ended) {
		close(t.w.Load().ch) // made by Done, or by fail
	}
}

// fail records a non-nil err as a plain Submit's result before it ends:
// only a failed task pays for waiters (unless Done made them).
func (t *Task) fail(err error) {
	if err == nil {
		return
	}
	w := t.w.Load()
	if w == nil {
		if t.w.CompareAndSwap(nil, &waiters{ch: make(chan struct{}), err: err}) {
			return
		}
		w = t.w.Load() // Done won
	}
	if w != ended { // an ended Task keeps its result
		w.err = err // Done made them: nobody reads err before end
	}
}

// submission is an async job, fn's ctx and its Task; Batcher messages embed it.
type submission[K comparable] struct {
	job[K]
	ctx  taskCtx[K]
	task Task
}

func subOf[K comparable](t *Task) *submission[K] {
	return outerOf[submission[K]](t, unsafe.Offsetof(submission[K]{}.task))
}

func subOps[K comparable]() taskOps {
	return taskOps{
		result: func(t *Task) error { return subOf[K](t).err },
		beforeWait: func(t *Task, ctx context.Context) (func(), error) {
			s := subOf[K](t)
			return s.e.checkWait(ctx, &s.ctx, waitee[K]{t: &s.turn})
		},
		submitter: func(t *Task) context.Context { return subOf[K](t).ctx.caller() },
		withdraw: func(t *Task, err error) {
			s := subOf[K](t)
			s.e.cancel(&s.job, err)
		},
	}
}

// Settle ends the task (mailbox.Work), then its Task: result written, counted.
func (s *submission[K]) Settle() {
	s.job.Settle()
	s.task.end()
}

func noop() {}

// checkWait is a Task's beforeWait (c: its ctx; on: the awaited). From
// inside a task it refuses a wait on a key the task holds, on a task queued
// behind a DoMany waiting for such a key (see waitsOnCaller), or one closing
// a cycle; else it lends the task's slot for the wait, which after gives back.
func (e *Executor[K]) checkWait(ctx context.Context, c *taskCtx[K], on waitee[K]) (after func(), err error) {
	if c.ended() {
		return noop, nil
	}
	key := c.key
	outer := e.innermost(ctx)
	if outer == nil {
		return noop, nil
	}
	if e.held(ctx, key) {
		return nil, ErrReentrant
	}
	if e.queuedBehindCaller(ctx, on) {
		return nil, errWaitsOnCaller
	}
	b, err := e.block(ctx, on)
	if err != nil {
		return nil, err
	}
	lent := outer.lend(e.runner)
	return func() { e.unblock(b); outer.unlend(e.runner, lent) }, nil
}

// markKey is the context key under which a task's ctx finds itself.
type markKey struct{}

// marker is what a task context stores under markKey.
type marker interface {
	callerCtx() context.Context
}

// taskCtx is the context fn receives, one per call: the caller's values and
// deadline, canceled with the caller's ctx, by a giving-up Close and as fn
// returns; while fn runs it marks the keys the task holds, for nested calls.
// A Do's only allocation, never recycled as fn may keep it; Done makes a
// cancelable child of the caller's ctx on demand.
type taskCtx[K comparable] struct {
	parent context.Context // the caller's
	key    K               // a single-key task's (a multi-key task's are its job's)

	// st is the task's state, read atomically once the context can be shared:
	//   - nil: a queued plain Submit's (its core comes as it starts; until
	//     then a Wait reads only its key and whether it ended);
	//   - a *core[K]: the task's job, live, Done not asked;
	//   - the mark of an innerCtx[K] (a core whose in is Done's child);
	//   - endedState: the task ended before anyone asked Done.
	// An ended context never reads its job, which may be recycled (see live);
	// a reader that found it live may go on using what a job keeps for good
	// (j.e) and, while its task is blocked in a nested call, the lent-slot mark.
	st unsafe.Pointer
}

// endedState is the st of a context that ended with no child: endedMark's
// address, compared, never read through.
var endedState = unsafe.Pointer(&endedMark)
var endedMark uint64

// innerOf returns the child a st holds (st is its mark), or nil.
func innerOf[K comparable](st unsafe.Pointer) *innerCtx[K] {
	if st == nil || st == endedState {
		return nil
	}
	return (*core[K])(st).in
}

func newTaskCtx[K comparable](ctx context.Context, key K) *taskCtx[K] {
	return &taskCtx[K]{parent: ctx, key: key}
}

func (c *taskCtx[K]) caller() context.Context { return c.parent }

func (c *taskCtx[K]) load() unsafe.Pointer { return atomic.LoadPointer(&c.st) }

// job returns the task's job, for the task itself (or a reader while live).
func (c *taskCtx[K]) job() *core[K] {
	st := c.load()
	if in := innerOf[K](st); in != nil {
		return in.j
	}
	return (*core[K])(st)
}

// live returns the task's job while the context has not ended, else nil
// (also for a nil context: a call from outside any task). It reads st once:
// ended() then job() could see the task end between, and take endedState.
func (c *taskCtx[K]) live() *core[K] {
	if c == nil {
		return nil
	}
	st := c.load()
	if st == endedState {
		return nil
	}
	if in := innerOf[K](st); in != nil {
		if in.ended.Load() {
			return nil
		}
		return in.j
	}
	return (*core[K])(st)
}

// exec is the executor of a running task's context, or nil once it ended.
func (c *taskCtx[K]) exec() *Executor[K] {
	if j := c.live(); j != nil {
		return j.e
	}
	return nil
}

// ended reports whether fn has returned (or the task will never run).
func (c *taskCtx[K]) ended() bool {
	st := c.load()
	if in := innerOf[K](st); in != nil {
		return in.ended.Load()
	}
	return st == endedState
}

// innerCtx is the cancelable child of the caller's ctx that Done makes.
type innerCtx[K comparable] struct {
	mark   core[K] // what st points to once the child is made: mark.in is the child
	ctx    context.Context
	cancel context.CancelFunc
	stop   func() bool
	j      *core[K]    // the task's job, as st held it
	ended  atomic.Bool // the task ended (see taskCtx.end)
}

func (c *taskCtx[K]) callerCtx() context.Context { return c.caller() }

func (c *taskCtx[K]) Deadline() (deadline time.Time, ok bool) { return c.caller().Deadline() }

func (c *taskCtx[K]) Done() <-chan struct{} {
	st := c.load()
	if st == endedState {
		return ended.ch // closed
	}
	if in := innerOf[K](st); in != nil {
		return in.ctx.Done()
	}
	j := (*core[K])(st)
	ctx, cancel := context.WithCancel(c.caller())
	in := &innerCtx[K]{ctx: ctx, cancel: cancel, stop: context.AfterFunc(j.e.force, cancel), j: j}
	in.mark.in = in
	if !atomic.CompareAndSwapPointer(&c.st, st, unsafe.Pointer(&in.mark)) {
		// Another Done won, or the task ended meanwhile.
		in.stop()
		cancel()
		return c.Done()
	}
	return ctx.Done() // installed while live: end cancels it
}

func (c *taskCtx[K]) Err() error {
	st := c.load()
	if in := innerOf[K](st); in != nil {
		return in.ctx.Err()
	}
	if err := c.caller().Err(); err != nil {
		return err
	}
	if st == endedState || (*core[K])(st).e.force.Err() != nil {
		return context.Canceled
	}
	return nil
}

func (c *taskCtx[K]) Value(key any) any {
	if key == (markKey{}) && !c.ended() {
		return c
	}
	return c.caller().Value(key) // Done's child adds no values
}

func (c *taskCtx[K]) String() string { return "perkey.taskCtx" }

// end cancels the context once fn has returned (or the task will never
// run); it then no longer reads its job. Calling it again does nothing.
func (c *taskCtx[K]) end() {
	for {
		st := c.load()
		if st == endedState {
			return
		}
		if in := innerOf[K](st); in != nil {
			in.ended.Store(true)
			in.stop()
			in.cancel()
			return
		}
		if atomic.CompareAndSwapPointer(&c.st, st, endedState) {
			return
		}
	}
}

// keys returns a running multi-key task's keys, or nil.
func (c *taskCtx[K]) keys() []K {
	if j := c.live(); j != nil && j.multi != nil {
		return *j.multi
	}
	return nil
}

// single reports whether a running task has a single key (c.key).
func (c *taskCtx[K]) single() bool {
	j := c.live()
	return j != nil && j.multi == nil
}

// holds reports whether the running task holds key (by stripe if striped);
// false once it ended.
func (c *taskCtx[K]) holds(key K) bool {
	j := c.live()
	if j == nil {
		return false
	}
	if j.multi == nil {
		return j.e.router.Same(c.key, key)
	}
	for _, k := range *j.multi {
		if j.e.router.Same(k, key) {
			return true
		}
	}
	return false
}
