package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"go.uber.org/zap"

	"github.com/perkey/perkey/internal/mailbox"
)

// DefaultMaxBatch is the most messages a Batcher hands its BatchFunc at once
// unless WithMaxBatch says otherwise: it amortises a sink's per-call cost (a
// multi-row INSERT, a bulk request) and keeps a failed, retried batch small.
const DefaultMaxBatch = 100

// BatchFunc handles consecutive queued messages of one key, in submission
// order. It returns nil if all succeeded, a BatchErrors of len(msgs) to fail
// single messages, or any other error to fail them all. ctx carries the first
// message's ctx values and, as Do's fn's ctx does, marks key as held; no
// message's ctx cancels it, only a giving-up Close that cancels running tasks.
type BatchFunc[K comparable, M any] func(ctx context.Context, key K, msgs []M) error

// BatchErrors is what a BatchFunc returns to fail single messages: error i
// is message i's outcome (nil: it succeeded). If its length is not the number
// of messages, every message fails with an error saying so.
type BatchErrors []error

// Error summarises the failures.
func (b BatchErrors) Error() string {
	n, first := 0, error(nil)
	for _, err := range b {
		if err != nil {
			if n == 0 {
				first = err
			}
			n++
		}
	}
	return fmt.Sprintf("perkey: %d of %d messages failed; the first: %v", n, len(b), first)
}

// BatchOption configures a Batcher. A bad value makes NewBatcher fail.
type BatchOption func(*batchConfig) error

type batchConfig struct {
	max int
}

// WithMaxBatch sets the most messages one BatchFunc call gets. n must be at
// least 1; the default is DefaultMaxBatch (100).
func WithMaxBatch(n int) BatchOption {
	return func(c *batchConfig) error {
		if n < 1 {
			return optErr("WithMaxBatch(%d): need at least 1", n)
		}
		c.max = n
		return nil
	}
}

// Batcher hands a key's queued messages to one BatchFunc call, in order.
// Each message is a task of its key: one pending task for the caps, the
// Policy, the Observer and Stats, in FIFO order among the key's other tasks.
// When the key's turn comes, the messages queued back to back at the head
// of its queue, up to WithMaxBatch, go to one call, run as one task of the
// key; a task queued between two messages splits them into two batches. A
// message whose ctx ended before its batch started is left out, and its Wait
// returns the ctx's error. Each message ends with its own outcome (see
// BatchFunc); a panic in the BatchFunc fails every message of the batch with
// the *PanicError, is logged once, and the key goes on. A message submitted
// with Do on an idle key with a free slot may run alone at once.
//
// In striped mode messages of keys sharing a stripe may be queued back to
// back: one run, one BatchFunc call per key in order, ending together.
//
// There is no linger: a batch holds what is queued when it starts, so a
// lightly loaded key runs each message at once and batches grow with the
// backlog. All methods are safe for concurrent use.
type Batcher[K comparable, M any] struct {
	e     *Executor[K]
	fn    BatchFunc[K, M]
	group mailbox.Group
	jobs  sync.Pool // *[]*job[K]: run's scratch list of a run's jobs
}

// ErrNilBatcher means a method was called on a nil *Batcher, or on a zero
// Batcher that NewBatcher did not make.
var ErrNilBatcher = errors.New("perkey: nil batcher")

// NewBatcher returns a Batcher that runs fn on e. A nil e or fn, or a bad
// option, is an error.
func NewBatcher[K comparable, M any](e *Executor[K], fn BatchFunc[K, M], opts ...BatchOption) (*Batcher[K, M], error) {
	switch {
	case e.unmade():
		return nil, ErrNilExecutor
	case fn == nil:
		return nil, ErrNilFunc
	}
	cfg := batchConfig{max: DefaultMaxBatch}
	for _, o := range opts {
		if o == nil {
			return nil, optErr("nil BatchOption")
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	b := &Batcher[K, M]{e: e, fn: fn}
	b.group = mailbox.Group{Max: cfg.max, Run: b.run}
	if e.cfg.stripes > 0 {
		// A run is one key's messages: the next key's wait unstarted, where a
		// giving-up Close finds them. Without stripes a mailbox is one key.
		b.group.Same = func(a, c *mailbox.Turn) bool {
			return jobOf[K](a).ctx.key == jobOf[K](c).ctx.key
		}
	}
	return b, nil
}

// batchSubmit is a message submitted with Batcher.Submit: an asynchronous
// job and its message in one object. g and msg sit next to the job's Turn,
// on the cache line a drive loop cutting a batch misses on anyway.
type batchSubmit[K comparable, M any] struct {
	g   *mailbox.Group
	msg M
	submission[K]
}

// batchDo is a message submitted with Batcher.Do.
type batchDo[K comparable, M any] struct {
	g   *mailbox.Group
	msg M
	job[K]
}

func (m *batchSubmit[K, M]) message() M { return m.msg }
func (m *batchDo[K, M]) message() M     { return m.msg }

// Group is the message's batch group (mailbox.Grouped).
func (m *batchSubmit[K, M]) Group() *mailbox.Group { return m.g }

// Group is the message's batch group (mailbox.Grouped).
func (m *batchDo[K, M]) Group() *mailbox.Group { return m.g }

type message[M any] interface{ message() M }

// alone returns the fn that runs msg as a batch of one (an inline Do).
func (b *Batcher[K, M]) alone(key K, msg M) func(context.Context) error {
	return func(ctx context.Context) error {
		err := b.fn(ctx, key, []M{msg})
		if errs, ok := err.(BatchErrors); ok {
			if len(errs) != 1 {
				return badBatchErrors(len(errs), 1)
			}
			return errs[0]
		}
		return err
	}
}

// queuedOnly is the fn of a message queued by Submit, never called: its group
// runs it. Were it called, the message would fail, not run out of turn.
func queuedOnly(context.Context) error {
	return errors.New("perkey: internal error: a queued Batcher message ran outside its batch")
}

func badBatchErrors(got, want int) error {
	return fmt.Errorf("perkey: the BatchFunc returned BatchErrors of %d errors for %d messages", got, want)
}

// Submit queues msg on key and returns at once; the returned Task ends with
// msg's own outcome. Admission, caps, ctx and the nesting rules are those of
// Executor.Submit.
func (b *Batcher[K, M]) Submit(ctx context.Context, key K, msg M) (*Task, error) {
	if b == nil || b.e == nil { // nil, or a zero Batcher NewBatcher did not make
		return nil, ErrNilBatcher
	}
	e := b.e
	if err := e.checkOne(ctx, key, queuedOnly); err != nil {
		return nil, err
	}
	m := &batchSubmit[K, M]{msg: msg, g: &b.group}
	m.e, m.own = e, true
	m.task.ops = &e.subOps
	if err := e.enqueueMessage(ctx, key, &m.job, &m.ctx, m); err != nil {
		return nil, err
	}
	return &m.task, nil
}

// Do submits msg on key and waits for its outcome, as Executor.Do waits
// for fn: it returns msg's own error (or the batch's), or why it never ran.
// Called from inside a task on a key the task holds it returns ErrReentrant
// (with WithReentrant it runs msg alone at once).
func (b *Batcher[K, M]) Do(ctx context.Context, key K, msg M) error {
	if b == nil || b.e == nil { // nil, or a zero Batcher NewBatcher did not make
		return ErrNilBatcher
	}
	e := b.e
	fn := b.alone(key, msg)
	if err := e.checkOne(ctx, key, fn); err != nil {
		return err
	}
	outer := e.innermost(ctx)
	if outer != nil && e.held(ctx, key) {
		if e.cfg.reentrant {
			return e.inline(ctx, fn, zap.Any("key", key))
		}
		return ErrReentrant
	}
	m := &batchDo[K, M]{msg: msg, g: &b.group}
	m.e, m.own, m.done = e, true, make(chan struct{}, 1)
	c := newTaskCtx(ctx, key)
	j := e.bind(&m.job, fn, c)
	j.turn.Init(m, false)
	j.turn.SetGrouped()
	p, err := e.enter(ctx, j, outer, true)
	switch {
	case err != nil:
		return err
	case p == ranInline:
		return j.err
	}
	return e.wait(ctx, j, outer, p == queuedLent)
}

// run is the group's Run: it hands the messages of ts (one mailbox's turns,
// in order) to fn, one call per run of equal keys.
func (b *Batcher[K, M]) run(ts []*mailbox.Turn) {
	e := b.e
	// Every message is accounted for before a callback hears of it; if one
	// calls runtime.Goexit, those not yet accounted for end with ErrGoexit,
	// and the mailbox hands the rest of its queue on (Group).
	done := false
	defer func() {
		if !done {
			forEach(0, len(ts), func(i int) {
				if j := jobOf[K](ts[i]); !j.ctx.ended() {
					e.abandon(j, ErrGoexit)
				}
			})
		}
	}()
	// jobs is reused scratch; msgs is fn's to keep, so each run has its own.
	scratch, _ := b.jobs.Get().(*[]*job[K])
	if scratch == nil {
		scratch = new([]*job[K])
	}
	jobs := (*scratch)[:0]
	msgs := make([]M, 0, len(ts))
	// The batch starts now: a Close that gives up later sees it running.
	closed := e.force.Err() != nil
	for _, t := range ts {
		// One type switch, with no interface call and no load of j.ctx, so
		// that successive messages' cache misses overlap.
		var j *job[K]
		var c *taskCtx[K]
		var msg M
		switch w := t.Work().(type) {
		case *batchSubmit[K, M]:
			j, c, msg = &w.job, &w.ctx, w.msg // Submit bound w.ctx to w.job
		case *batchDo[K, M]:
			j, msg = &w.job, w.msg
			c = j.ctx
		default: // not reached: the group holds only this Batcher's messages
			j, msg = jobOf[K](t), t.Work().(message[M]).message()
			c = j.ctx
		}
		if err := ctxErr(c.caller()); err != nil {
			e.abandon(j, err) // left out: its ctx ended before the batch started
			t.Leave()         // its Wait returns, and its room is free, now
			continue
		}
		if closed {
			e.abandon(j, ErrClosed)
			t.Leave()
			continue
		}
		jobs = append(jobs, j)
		msgs = append(msgs, msg)
	}
	all := jobs
	for len(jobs) > 0 {
		n := 1
		if b.group.Same == nil {
			n = len(jobs) // without stripes, a mailbox queues one key
		}
		for n < len(jobs) && jobs[n].ctx.key == jobs[0].ctx.key {
			n++
		}
		now, nowMsgs := jobs[:n], msgs[:n]
		jobs, msgs = jobs[n:], msgs[n:]
		b.call(now, nowMsgs)
	}
	done = true
	clear(all)
	*scratch = all[:0]
	b.jobs.Put(scratch)
}

// call runs fn on one key's messages and ends each job with its outcome. A
// panic fails them all with the *PanicError; a runtime.Goexit (in fn,
// TaskStarted, or the logger reporting fn's panic) ends them all with
// ErrGoexit as the goroutine exits (see invoke).
func (b *Batcher[K, M]) call(jobs []*job[K], msgs []M) {
	e := b.e
	first := jobs[0].ctx
	// The batch's context marks the key as held; a nested call marks the slot
	// lent on the first message's job (alive until the batch settles).
	c := newTaskCtx(context.WithoutCancel(first.caller()), first.key)
	c.st = unsafe.Pointer(&jobs[0].core)
	var start time.Time
	returned := false // fn returned, or its panic was recovered and reported
	defer func() {
		if !returned {
			b.end(c, jobs, ErrGoexit, nil, Failed, start)
		}
	}()
	defer func() {
		if returned {
			return
		}
		if v := recover(); v != nil {
			pe := e.recovered(v, zap.Any("key", first.key), zap.Int("messages", len(jobs)))
			returned = true
			b.end(c, jobs, pe, nil, Panicked, start)
		}
	}()
	e.counts.started.Add(uint64(len(jobs)))
	if e.obs != nil {
		start = time.Now()
		for _, j := range jobs {
			e.obs.TaskStarted(time.Duration(start.Sub(epoch)) - time.Duration(j.turn.Stamp()))
		}
	}
	err := b.fn(c, first.key, msgs)
	returned = true
	errs, per := err.(BatchErrors)
	if per && len(errs) != len(jobs) {
		err, errs = badBatchErrors(len(errs), len(jobs)), nil
	}
	b.end(c, jobs, err, errs, OK, start)
}

// end ends the jobs of a batch run with context c: each with err, or its own
// of errs if not nil, and outcome (Failed for an error if OK). All are
// accounted for before the Observer hears of any; it hears of each even if
// it calls runtime.Goexit.
func (b *Batcher[K, M]) end(c *taskCtx[K], jobs []*job[K], err error, errs BatchErrors, outcome Outcome, start time.Time) {
	e := b.e
	c.end()
	for i, j := range jobs {
		j.err = err
		if errs != nil {
			j.err = errs[i]
		}
		j.ctx.end()
	}
	e.counts.completed.Add(uint64(len(jobs)))
	if outcome == Panicked {
		e.panicked.Add(uint64(len(jobs)))
	}
	if e.obs == nil {
		return
	}
	run := time.Since(start)
	forEach(0, len(jobs), func(i int) {
		out := outcome
		if out == OK && jobs[i].err != nil {
			out = Failed
		}
		e.obs.TaskFinished(run, out)
	})
}

// enqueueMessage queues the job j of a Batcher message w on key, with task
// context c. j's fn is queuedOnly: the group's run calls the batch's fn.
func (e *Executor[K]) enqueueMessage(ctx context.Context, key K, j *job[K], c *taskCtx[K], w mailbox.Work) error {
	c.key, c.parent = key, ctx
	e.bind(j, queuedOnly, c)
	j.async = true
	j.turn.Init(w, false)
	j.turn.SetGrouped()
	p, err := e.enter(ctx, j, nil, false)
	if err != nil {
		return err
	}
	if p == queuedLent {
		e.innermost(ctx).unlend(e.runner, true) // queued: the task may go on
	}
	return nil
}
