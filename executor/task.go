package executor

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/perkey/perkey/mailbox"
)

// Task is an accepted asynchronous submission (see Submit).
type Task struct {
	mt  mailbox.Task
	mu  sync.Mutex    // guards ch
	ch  chan struct{} // closed when the task ends; made on demand; closedCh once ended
	err error         // written before the task ends, read after
}

// waitHook lets Wait check re-entry and lend the waiter's slot.
type waitHook interface {
	beforeWait(ctx context.Context) (after func(), err error)
}

// closedCh is returned by Done for tasks that ended before anyone asked.
var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Done returns a channel that is closed when the task has ended: fn returned
// or panicked, or the task will never run. By then Stats account for it.
func (t *Task) Done() <-chan struct{} {
	if t == nil {
		return closedCh
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ch == nil {
		t.ch = make(chan struct{})
	}
	return t.ch
}

// Wait blocks until the task ends or ctx ends. It returns fn's error (a
// *PanicError if fn panicked), or why the task never ran (the submitter's
// ctx error, ErrClosed), or ctx's error if ctx ended first; in that last case
// the task is unaffected. Called from inside a task whose ctx holds the
// task's key, Wait returns ErrReentrant instead of deadlocking. A nil Task
// gives ErrNilTask.
func (t *Task) Wait(ctx context.Context) error {
	if t == nil {
		return ErrNilTask
	}
	if ctx == nil {
		return ErrNilContext
	}
	t.mu.Lock()
	ended := t.ch == closedCh
	t.mu.Unlock()
	if ended {
		return t.err
	}
	after, err := t.mt.Work().(waitHook).beforeWait(ctx)
	if err != nil {
		return err
	}
	defer after()
	select {
	case <-t.Done():
		return t.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// end records err and wakes every waiter.
func (t *Task) end(err error) {
	t.err = err
	t.mu.Lock()
	ch := t.ch
	t.ch = closedCh
	t.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// markKey is the context key under which a task's ctx finds its job.
type markKey struct{}

// marker is what a task context stores under markKey.
type marker interface {
	callerCtx() context.Context
	forceCtx() context.Context // canceled when Close gives up
}

// taskCtx is the context fn receives. It carries the caller's values and
// deadline, is canceled with the caller's ctx, when a giving-up Close
// cancels running tasks, and when fn returns, and it marks the task so that
// nested calls can see which keys they already hold.
//
// It is embedded in the job and costs no allocation unless fn asks for
// Done: only then is a cancelable child of the caller's ctx made.
type taskCtx struct {
	parent context.Context
	mark   marker      // the job
	live   atomic.Bool // fn is running
	mu     sync.Mutex  // guards inner's creation and teardown
	inner  atomic.Pointer[innerCtx]
}

type innerCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
	stop   func() bool
}

func (c *taskCtx) Deadline() (deadline time.Time, ok bool) { return c.parent.Deadline() }

func (c *taskCtx) Done() <-chan struct{} {
	if in := c.inner.Load(); in != nil {
		return in.ctx.Done()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if in := c.inner.Load(); in != nil {
		return in.ctx.Done()
	}
	ctx, cancel := context.WithCancel(c.parent)
	in := &innerCtx{ctx: ctx, cancel: cancel, stop: context.AfterFunc(c.mark.forceCtx(), cancel)}
	c.inner.Store(in)
	if !c.live.Load() {
		// The task ended (or end raced with us: end stores live, then
		// loads inner; we store inner, then load live; one of us sees the
		// other, and cancelling twice is harmless).
		in.stop()
		cancel()
	}
	return ctx.Done()
}

func (c *taskCtx) Err() error {
	if in := c.inner.Load(); in != nil {
		return in.ctx.Err()
	}
	if err := c.parent.Err(); err != nil {
		return err
	}
	if !c.live.Load() || c.mark.forceCtx().Err() != nil {
		return context.Canceled
	}
	return nil
}

func (c *taskCtx) Value(key any) any {
	if key == (markKey{}) {
		if c.live.Load() {
			return c.mark
		}
		return c.parent.Value(key)
	}
	if in := c.inner.Load(); in != nil {
		return in.ctx.Value(key)
	}
	return c.parent.Value(key)
}

func (c *taskCtx) String() string { return "perkey.taskCtx" }

// start arms the context for fn's run.
func (c *taskCtx) start() { c.live.Store(true) }

// end cancels the context once fn has returned.
func (c *taskCtx) end() {
	c.live.Store(false)
	if in := c.inner.Load(); in != nil {
		if in.stop != nil {
			in.stop()
		}
		in.cancel()
	}
}
