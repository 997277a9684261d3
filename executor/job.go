package executor

import (
	"context"
	"runtime/debug"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/perkey/perkey/mailbox"
)

// job is one submission: the public Task, the caller's fn and ctx, and the
// key or keys it holds.
type job[K comparable] struct {
	Task
	e     *Executor[K]
	fn    func(context.Context) error
	key   K    // single-key jobs
	multi *[]K // multi-key jobs: the keys, deduplicated
	ctx   taskCtx
	enq   int64 // monotime when accepted; only measured when someone reads it

	// lent counts nested calls that borrowed this running job's slot; only
	// the one that moves it from 0 to 1 owns the slot.
	lent atomic.Int32

	// af guards the AfterFunc registration of an async job: 0 none,
	// 1 registered (stop is set), 2 ended.
	af   atomic.Int32
	stop func() bool

	room chan struct{} // closed when a parked submission is admitted
}

// Admit is called, with the mailbox locked, when a parked job gets room
// (mailbox.Work).
func (j *job[K]) Admit() {
	j.e.accept(j)
	close(j.room)
}

func (j *job[K]) callerCtx() context.Context { return j.ctx.parent }

func (j *job[K]) forceCtx() context.Context { return j.e.force }

// keys returns a multi-key job's keys, or nil.
func (j *job[K]) keys() []K {
	if j.multi == nil {
		return nil
	}
	return *j.multi
}

// epoch anchors monotime: durations between two monotimes are monotonic.
var epoch = time.Now()

// monotime is the monotonic time since epoch, in nanoseconds.
func monotime() int64 { return int64(time.Since(epoch)) }

// since is the time elapsed since monotime t.
func since(t int64) time.Duration { return time.Duration(monotime() - t) }

// holds reports whether the job holds key (by stripe, in striped mode).
func (j *job[K]) holds(key K) bool {
	if j.multi == nil {
		return j.e.router.Same(j.key, key)
	}
	for _, k := range *j.multi {
		if j.e.router.Same(k, key) {
			return true
		}
	}
	return false
}

// Run executes fn (mailbox.Work). A task whose caller's ctx ended, or that
// a giving-up Close abandoned, is not run and is accounted as canceled.
func (j *job[K]) Run() {
	e := j.e
	err := j.ctx.parent.Err()
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
		e.obs.TaskStarted(time.Duration(start.Sub(epoch)) - time.Duration(j.enq))
	}
	j.ctx.start()
	err, panicked := j.call()
	j.ctx.end()
	j.err = err
	e.completed.Add(1)
	outcome := OK
	switch {
	case panicked:
		e.panicked.Add(1)
		outcome = Panicked
	case err != nil:
		outcome = Failed
	}
	if e.obs != nil {
		e.obs.TaskFinished(time.Since(start), outcome)
	}
}

// call runs fn, turning a panic into a *PanicError logged with the key.
func (j *job[K]) call() (err error, panicked bool) {
	defer func() {
		if v := recover(); v != nil {
			pe := &PanicError{Value: v, Stack: debug.Stack()}
			err, panicked = pe, true
			j.e.log.Error("task panicked",
				j.keyField(), zap.Any("panic", v), zap.ByteString("stack", pe.Stack))
		}
	}()
	return j.fn(&j.ctx), false
}

func (j *job[K]) keyField() zap.Field {
	if j.multi != nil {
		return zap.Any("keys", *j.multi)
	}
	return zap.Any("key", j.key)
}

// Settle ends the task once no mailbox refers to it (mailbox.Work).
func (j *job[K]) Settle() {
	if j.af.Swap(2) == 1 {
		j.stop()
	}
	err := j.err
	j.e.unreserve()
	j.end(err)
}

// beforeWait implements waitHook for Task.Wait.
func (j *job[K]) beforeWait(ctx context.Context) (func(), error) {
	e := j.e
	outer := e.innermost(ctx)
	if outer == nil {
		return func() {}, nil
	}
	if j.multi == nil && e.held(ctx, j.key) {
		return nil, ErrReentrant
	}
	for _, k := range j.keys() {
		if e.held(ctx, k) {
			return nil, ErrReentrant
		}
	}
	lent := e.lend(outer)
	return func() { e.unlend(outer, lent) }, nil
}

var _ mailbox.Work = (*job[int])(nil)
