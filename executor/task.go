package executor

import (
	"context"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/perkey/perkey/internal/mailbox"
)

// Task is an accepted asynchronous submission (see Submit).
type Task struct {
	w    atomic.Pointer[waiters] // made on demand by Done; ended once the task ended
	call taskCall                // the submission: its result and re-entry checks
}

// waiters is the channel a Task closes when it ends.
type waiters struct{ ch chan struct{} }

// ended marks a Task that ended before anyone asked Done.
var ended = &waiters{ch: func() chan struct{} { c := make(chan struct{}); close(c); return c }()}

// taskCall is the submission behind a Task.
type taskCall interface {
	// result is fn's error, or why the task never ran; read once it ended.
	result() error
	// beforeWait checks re-entry and lends the waiter's slot for Wait.
	beforeWait(ctx context.Context) (after func(), err error)
}

// Done returns a channel that is closed when the task has ended: fn returned
// or panicked, or the task will never run. By then Stats account for it.
func (t *Task) Done() <-chan struct{} {
	if t == nil {
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

// Wait blocks until the task ends or ctx ends. It returns fn's error (a
// *PanicError if fn panicked), or why the task never ran (the submitter's
// ctx error, ErrClosed), or ctx's error if ctx ended first; in that last case
// the task is unaffected. Called from inside a task whose ctx holds the
// task's key, or while the task is queued behind a DoMany that waits for a
// key the calling task holds, Wait returns ErrReentrant instead of
// deadlocking; called from inside a task, it returns ErrDeadlock if the
// wait would close a cycle of tasks waiting for each other's keys. In both
// cases the task is unaffected. A nil Task gives ErrNilTask.
func (t *Task) Wait(ctx context.Context) error {
	if t == nil {
		return ErrNilTask
	}
	if ctx == nil {
		return ErrNilContext
	}
	if t.w.Load() == ended {
		return t.call.result()
	}
	after, err := t.call.beforeWait(ctx)
	if err != nil {
		return err
	}
	defer after()
	done := ctx.Done()
	if done == nil {
		<-t.Done() // ctx never ends: a plain receive is cheaper than a select
		return t.call.result()
	}
	select {
	case <-t.Done():
		return t.call.result()
	case <-done:
		return ctx.Err()
	}
}

// end wakes every waiter; the result is written by then.
func (t *Task) end() {
	if w := t.w.Swap(ended); w != nil {
		close(w.ch)
	}
}

// markKey is the context key under which a task's ctx finds itself.
type markKey struct{}

// marker is what a task context stores under markKey.
type marker interface {
	callerCtx() context.Context
}

// taskCtx is the context fn receives, one per call. It carries the caller's
// values and deadline, is canceled with the caller's ctx, when a giving-up
// Close cancels running tasks, and when fn returns; and, while fn runs, it
// marks the keys the task holds, so that nested calls can see them, and
// counts the nested calls that borrowed the task's execution slot.
//
// It is the only allocation of a synchronous call: fn may keep its ctx
// (hand it to a goroutine, say), so it is never recycled, and it holds
// nothing that is. It costs no further allocation unless fn asks for Done:
// only then is a cancelable child of the caller's ctx made.
type taskCtx[K comparable] struct {
	parent context.Context
	e      *Executor[K]
	key    K    // single-key tasks
	multi  *[]K // multi-key tasks: the keys, deduplicated

	// lent counts nested calls that borrowed this running task's slot;
	// only the one that moves it from 0 to 1 owns the slot.
	lent atomic.Int32
	// flags: ctxEnded once fn has returned (before that, only fn has the
	// context); ctxUnread and ctxOwn are facts about the call, set before it
	// is queued. One word for all three keeps the context at 64 bytes.
	flags atomic.Uint32

	inner atomic.Pointer[innerCtx]
}

const (
	ctxEnded  = 1 << iota // fn returned
	ctxUnread             // no caller reads the result (Go): a failure goes to the error handler
	ctxOwn                // the job is part of a larger object (a Batcher's message): never pooled
)

func (c *taskCtx[K]) ended() bool  { return c.flags.Load()&ctxEnded != 0 }
func (c *taskCtx[K]) unread() bool { return c.flags.Load()&ctxUnread != 0 }
func (c *taskCtx[K]) own() bool    { return c.flags.Load()&ctxOwn != 0 }

type innerCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
	stop   func() bool
}

func (c *taskCtx[K]) callerCtx() context.Context { return c.parent }

func (c *taskCtx[K]) Deadline() (deadline time.Time, ok bool) { return c.parent.Deadline() }

func (c *taskCtx[K]) Done() <-chan struct{} {
	if in := c.inner.Load(); in != nil {
		return in.ctx.Done()
	}
	ctx, cancel := context.WithCancel(c.parent)
	in := &innerCtx{ctx: ctx, cancel: cancel, stop: context.AfterFunc(c.e.force, cancel)}
	if !c.inner.CompareAndSwap(nil, in) {
		in.stop()
		cancel()
		return c.inner.Load().ctx.Done()
	}
	if c.ended() {
		// The task ended (or end raced with us: end stores ended, then
		// loads inner; we store inner, then load ended; one of us sees the
		// other, and cancelling twice is harmless).
		in.stop()
		cancel()
	}
	return ctx.Done()
}

func (c *taskCtx[K]) Err() error {
	if in := c.inner.Load(); in != nil {
		return in.ctx.Err()
	}
	if err := c.parent.Err(); err != nil {
		return err
	}
	if c.ended() || c.e.force.Err() != nil {
		return context.Canceled
	}
	return nil
}

func (c *taskCtx[K]) Value(key any) any {
	if key == (markKey{}) {
		if !c.ended() {
			return c
		}
		return c.parent.Value(key)
	}
	if in := c.inner.Load(); in != nil {
		return in.ctx.Value(key)
	}
	return c.parent.Value(key)
}

func (c *taskCtx[K]) String() string { return "perkey.taskCtx" }

// end cancels the context once fn has returned.
func (c *taskCtx[K]) end() {
	c.flags.Or(ctxEnded)
	if in := c.inner.Load(); in != nil {
		in.stop()
		in.cancel()
	}
}

// keys returns a multi-key task's keys, or nil.
func (c *taskCtx[K]) keys() []K {
	if c.multi == nil {
		return nil
	}
	return *c.multi
}

// holds reports whether the task holds key (by stripe, in striped mode).
func (c *taskCtx[K]) holds(key K) bool {
	if c.multi == nil {
		return c.e.router.Same(c.key, key)
	}
	for _, k := range *c.multi {
		if c.e.router.Same(k, key) {
			return true
		}
	}
	return false
}

// keyAny is the task's key, or its keys, for the error handler.
func (c *taskCtx[K]) keyAny() any {
	if c.multi != nil {
		return *c.multi
	}
	return c.key
}

func (c *taskCtx[K]) keyField() zap.Field {
	if c.multi != nil {
		return zap.Any("keys", *c.multi)
	}
	return zap.Any("key", c.key)
}

// beforeWait implements taskCall's for the Task of t, the submission whose
// context c is. Besides a wait on a key the waiting task holds, it refuses
// one on a submission queued behind a DoMany that waits for a key the
// waiting task holds: neither could ever go first (see waitsOnCaller).
func (c *taskCtx[K]) beforeWait(ctx context.Context, t *mailbox.Turn) (func(), error) {
	e := c.e
	outer := e.innermost(ctx)
	if outer == nil {
		return func() {}, nil
	}
	if c.multi == nil && e.held(ctx, c.key) {
		return nil, ErrReentrant
	}
	for _, k := range c.keys() {
		if e.held(ctx, k) {
			return nil, ErrReentrant
		}
	}
	if e.queuedBehindCaller(ctx, t) {
		return nil, errWaitsOnCaller
	}
	b, err := e.block(ctx, t)
	if err != nil {
		return nil, err
	}
	lent := outer.lend(e.runner)
	return func() { e.unblock(b); outer.unlend(e.runner, lent) }, nil
}
