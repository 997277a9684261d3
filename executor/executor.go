package executor

import (
	"context"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alitto/pond/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/internal/mailbox"
	"github.com/perkey/perkey/internal/router"
)

// Executor runs closures one at a time per key, in submission order, and in
// parallel across keys on a bounded pool. The zero value is not usable; call
// New. All methods are safe for concurrent use.
type Executor[K comparable] struct {
	cfg      config
	log      *zap.Logger
	sampled  *zap.Logger // rejections and cancellations
	limited  *zap.Logger // panics of callbacks other than fn, rate-limited
	obs      Observer    // nil if none; contains the user's Observer's panics
	keyCheck keyCheck    // what a key of type K is checked for (see validate)
	needsAge bool        // the policy reads queue age
	ages     bool        // tasks are stamped and holds timed (see KeyLoad)

	// batchRelease: with no global cap, a batch's reservations are given
	// back in one step at its end (see unreserveBatch).
	batchRelease bool
	runner       *mailbox.Runner
	router       *router.Router[K]
	pool         pond.Pool
	ownPool      bool

	jobs sync.Pool // of *job[K]; see job

	// multiMu makes every multi-key enqueue one atomic step relative to the
	// others (see DoMany). Single-key submissions never take it.
	multiMu sync.Mutex

	// Counters, each on its own cache line: submitters write pending and
	// submitted, workers started and completed. Queued and Running are
	// derived (Submitted - Started - Canceled and Started - Completed), so
	// Stats add up by construction.
	pending   paddedInt64 // accepted and not yet ended: WithMaxPending, and what Close drains
	submitted paddedUint64
	started   paddedUint64 // tasks whose fn began
	completed paddedUint64
	closed    atomic.Bool

	rejected, canceled, panicked, slow atomic.Uint64

	slowStop chan struct{} // closed to stop the slow-task watcher; nil if none
	slowDone chan struct{} // closed when it has stopped
	slowOnce sync.Once

	force       context.Context // canceled when Close gives up: running tasks see their ctx end
	forceCancel context.CancelFunc
	closing     chan struct{} // closed when Close starts
	drained     chan struct{} // closed once closed and nothing is pending

	// dispatching counts submitters between enqueueing a task on an idle
	// mailbox and spawning its drive loop. The task may be canceled and
	// settled in that window, letting Close drain; Close waits for these
	// before it waits for the runner, so no loop starts after Close returns.
	dispatching sync.WaitGroup

	gmu       sync.Mutex    // guards gwait
	gwait     []*roomWaiter // submissions parked for global room, FIFO
	gparked   atomic.Int32  // live entries in gwait
	drainOnce sync.Once

	// The first Close to get past the drain stops the executor; the others
	// wait for stopped. (Not a sync.Once: a Close blocked on a Once's mutex
	// while the first one polls the pool would never count as durably
	// blocked, which hangs concurrent Closes under testing/synctest.)
	stopping atomic.Bool
	stopped  chan struct{}
}

type paddedInt64 struct {
	atomic.Int64
	_ [56]byte
}

type paddedUint64 struct {
	atomic.Uint64
	_ [56]byte
}

// Stats is a snapshot of an executor's counters. At any quiet moment
// Submitted == Completed + Canceled + Queued + Running.
type Stats struct {
	ActiveKeys int    // keys that have a live mailbox now
	Queued     int    // tasks accepted and not started
	Running    int    // tasks executing now
	Submitted  uint64 // tasks accepted since New
	Completed  uint64 // tasks whose fn returned (with or without error)
	Rejected   uint64 // submissions refused by backpressure
	Canceled   uint64 // accepted tasks that never ran (ctx ended, or Close gave up)
	Panicked   uint64 // tasks whose fn panicked (also counted in Completed)
	Slow       uint64 // holds reported slow (WithSlowTaskWarning)
}

// KeyLoad is a key's live load: its pending tasks and, where ages are
// tracked (see WithSlowTaskWarning), how old its work is.
type KeyLoad[K comparable] struct {
	Key     K
	Pending int // queued + running for this key

	// Held is how long the key's current hold has lasted: its running task
	// (or the shared group, or the multi-key task, holding it). OldestWait
	// is how long its oldest queued task has waited. Each is 0 when there is
	// none, or when the executor does not track ages.
	Held       time.Duration
	OldestWait time.Duration
}

// New returns an executor configured by opts. A bad option value is an
// error wrapping its description; New never panics.
func New[K comparable](opts ...Option) (*Executor[K], error) {
	cfg := defaults()
	for _, o := range opts {
		if o == nil {
			return nil, optErr("nil Option")
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	e := &Executor[K]{cfg: cfg, drained: make(chan struct{}), closing: make(chan struct{}),
		stopped: make(chan struct{})}
	e.keyCheck = keyCheckOf[K]()
	e.log = cfg.logger.WithOptions(zap.WrapCore(containCore)).Named("perkey")
	e.sampled = e.log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, time.Second, 10, 1000)
	}))
	e.limited = e.log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, time.Second, 1, 0)
	}))
	if cfg.hasObserver {
		e.obs = &safeObserver{o: cfg.observer, onPanic: e.callbackPanicked}
	}
	if a, ok := cfg.policy.(backpressure.NeedsQueueAge); ok {
		e.needsAge = e.askNeedsAge(a)
	}
	e.pool = cfg.pool
	if e.pool == nil {
		// Unbounded: the runner's slots are the bound. A pond goroutine
		// exists only for a slot owner or a task blocked in a nested call.
		e.pool = pond.NewPool(0)
		e.ownPool = true
	}
	e.jobs.New = func() any { return &job[K]{done: make(chan struct{}, 1)} }
	e.force, e.forceCancel = context.WithCancel(context.Background())
	e.ages = e.obs != nil || e.needsAge || cfg.slow > 0
	e.batchRelease = cfg.maxPending == 0
	opt := mailbox.RunnerOptions{
		TrackOldest:    e.ages || cfg.stripes > 0,       // see askKey, nameOf and OldestKeys
		MeasureService: cfg.maxPerKey > 0 || e.needsAge, // Retry hints: see askKey
	}
	if e.ages {
		opt.Clock = monotime // see KeyLoad.Held
	}
	if e.batchRelease {
		opt.Ran = e.unreserveBatch // see job.release
	}
	e.runner = mailbox.NewRunner(e.pool, cfg.workers, cfg.throughput, opt)
	e.router = router.New[K](e.runner, cfg.stripes, cfg.maxPerKey)
	e.attach()
	if cfg.slow > 0 {
		e.slowStop, e.slowDone = make(chan struct{}), make(chan struct{})
		go e.watchSlow(cfg.slow)
	}
	e.log.Debug("executor started", zap.Int("workers", cfg.workers),
		zap.Int("throughput", cfg.throughput), zap.Int("stripes", cfg.stripes))
	return e, nil
}

// Do runs fn holding key and returns fn's error. Tasks of one key run one
// at a time, in the order their submissions were accepted; tasks of
// different keys run in parallel, within WithWorkers.
//
// fn receives a context derived from ctx, canceled when ctx is and when a
// giving-up Close cancels running tasks. If ctx ends before fn starts, fn
// never runs and Do returns an error satisfying errors.Is(err, ctx.Err()),
// giving the task's place back at once; once fn has started, Do waits for it.
// A panic in fn is recovered and returned as a *PanicError.
//
// When the key is idle and a slot is free, fn runs on the caller's
// goroutine; otherwise the caller waits while a pool worker runs it. A
// rejected submission returns a *backpressure.BusyError (errors.Is ErrBusy).
//
// Called from inside a task with that task's ctx (or one derived from it),
// Do is a nested call: on a key the task holds it returns ErrReentrant (or,
// with WithReentrant, runs fn inline at once), and so it does behind a
// DoMany that waits for a key the task holds; on any other key it lends the
// task's execution slot while it waits, so nesting never deadlocks the
// bounded pool. Two tasks that wait on each other's keys form a cycle no
// executor can break: take both keys with DoMany instead.
func (e *Executor[K]) Do(ctx context.Context, key K, fn func(context.Context) error) error {
	return e.doOne(ctx, key, fn, false)
}

// DoShared runs fn holding key in shared mode, like a read lock: shared
// tasks that are next to each other in the key's queue run together, and a
// shared task joins a running shared group when nothing exclusive is queued
// ahead of it. An exclusive task (Do, Submit, DoMany) waits for the shared
// group before it and holds back the shared tasks after it, so neither
// readers nor writers starve. Everything else is as for Do.
func (e *Executor[K]) DoShared(ctx context.Context, key K, fn func(context.Context) error) error {
	return e.doOne(ctx, key, fn, true)
}

func (e *Executor[K]) doOne(ctx context.Context, key K, fn func(context.Context) error, shared bool) error {
	if err := e.check(ctx, fn); err != nil {
		return err
	}
	if err := e.validate(key); err != nil {
		return err
	}
	return e.doValid(ctx, key, fn, shared)
}

// doValid is doOne for a key already validated.
func (e *Executor[K]) doValid(ctx context.Context, key K, fn func(context.Context) error, shared bool) error {
	outer := e.innermost(ctx)
	if outer != nil && e.held(ctx, key) {
		if e.cfg.reentrant {
			return e.inline(ctx, fn, zap.Any("key", key))
		}
		return ErrReentrant
	}
	c := &taskCtx[K]{key: key}
	j := e.newJob(ctx, fn, c)
	j.turn.Init(j, shared)
	ran, lentBy, err := e.enter(ctx, j, outer, true)
	switch {
	case err != nil:
		e.reuse(j) // never accepted: nothing refers to it
		return err
	case ran:
		// Nothing else ever saw j (it was in no queue): reuse it even
		// while Close may be giving up, or in striped mode.
		err := j.err
		e.reuse(j)
		return err
	}
	return e.wait(ctx, j, outer, lentBy != nil)
}

// enter admits a single-key job and queues it, or, if inline is allowed,
// the key is idle and a slot is free, runs it on the caller's goroutine (and
// reports ran). An error means the job was never accepted.
//
// The inline run is the fast path of an uncontended Do: the caller would
// block anyway, so it runs fn itself instead of paying a hand-off. It obeys
// every rule a pooled run does: it takes an execution slot (its own task's,
// if it is a nested call, else a free one), it holds the mailbox like a
// drive loop would (so later submissions queue behind it in FIFO order), and
// it goes through Run for ctx, panics and Stats.
//
// A nested call that waited for room lends its task's slot (see park) and
// is admitted with it still lent: lentBy is that task, and the caller must
// unlend once it has made sure the task ends if ctx does (wait does, and
// Submit once it watches ctx). Taking the slot back first would leave the
// queued task deaf to ctx for as long as every slot is busy.
func (e *Executor[K]) enter(ctx context.Context, j *job[K], outer *taskCtx[K], inline bool) (ran bool, lentBy *taskCtx[K], err error) {
	if err := e.reserve(ctx); err != nil {
		return false, nil, err
	}
	key := j.ctx.key
	m := e.router.Acquire(key)
	if outer != nil && e.waitsOnCaller(ctx, m) {
		m.Release()
		e.unreserve()
		return false, nil, errWaitsOnCaller
	}
	v, err := e.askKey(m, key)
	switch v {
	case backpressure.Reject:
		m.Release()
		e.unreserve()
		return false, nil, e.reject(err)
	case backpressure.Wait:
		if outer == nil {
			outer = e.innermost(ctx) // a Submit passes none
		}
		if outer != nil && e.held(ctx, key) {
			// A nested Submit on a key its task holds: the room it would
			// wait for is given back only once that task ends.
			be := e.keyBusy(m, key)
			m.Release()
			e.unreserve()
			return false, nil, e.reject(be)
		}
		if j.done == nil {
			j.done = make(chan struct{}, 1) // an asynchronous job's, for park
		}
		m.Park(j.turn.Entry())
		m.Release()
		if lent, err := e.park(ctx, j, m, outer); err != nil || !lent {
			return false, nil, err
		}
		return false, outer, nil
	}
	if inline && m.CanHold(j.turn.Shared()) {
		if slot := e.takeSlot(outer); slot != noSlot {
			m.Hold(&j.turn)
			e.countAccepted(j)
			m.Release()
			e.observeAccepted()
			e.runInline(j, outer, slot)
			return true, nil, nil
		}
	}
	e.countAccepted(j)
	dispatch := m.Enqueue(j.turn.Entry())
	if dispatch {
		e.dispatching.Add(1) // under m's lock: before j can settle
	}
	m.Release()
	e.observeAccepted()
	if dispatch {
		m.Dispatch()
		e.dispatching.Done()
	}
	return false, nil, nil
}

// runInline runs j, held inline (see enter), with slot s, then gives back
// its hold, the slot and its reservation: the caller reads j.err and reuses
// j. They are given back in a deferred call, so that a fn that calls
// runtime.Goexit leaves nothing behind either: the caller's goroutine then
// exits (as Goexit requires) and j is left to the GC.
func (e *Executor[K]) runInline(j *job[K], outer *taskCtx[K], s slot) {
	defer func() {
		j.turn.Vacate()
		e.giveSlot(outer, s)
		e.unreserve()
	}()
	j.Run()
}

// inline runs the fn of a nested call on keys its task already holds
// (WithReentrant) at once, on the caller's goroutine. A panic is recovered
// into a *PanicError and logged with the key, as for any other run, so it
// never unwinds through the task that made the call. The call is part of
// that task and has no Stats of its own.
func (e *Executor[K]) inline(ctx context.Context, fn func(context.Context) error, key zap.Field) (err error) {
	defer func() {
		if v := recover(); v != nil {
			pe := &PanicError{Value: v, Stack: debug.Stack()}
			err = pe
			e.log.Error("task panicked", key, zap.Any("panic", v), zap.ByteString("stack", pe.Stack))
		}
	}()
	return fn(ctx)
}

// Submit queues fn on key and returns at once; the returned Task reports
// its end. Ordering, ctx and panics are as for Do: a Task whose ctx ends
// before it starts gives its place back at once and never runs.
//
// Submitted from inside a task with the task's ctx, the new task inherits
// the task's marks while that task runs (Wait on it from there returns
// ErrReentrant if it waits on a key the task holds); detached work should
// use a fresh ctx. A Wait from inside a task never waits for a submission
// queued behind a DoMany that waits for the waiting task: see Task.Wait.
func (e *Executor[K]) Submit(ctx context.Context, key K, fn func(context.Context) error) (*Task, error) {
	a, err := e.submit(ctx, key, fn, false)
	if err != nil {
		return nil, err
	}
	return &a.task, nil
}

// Go queues fn on key and returns at once, like Submit, but gives the caller
// nothing to wait on: fn's error, its panic (a *PanicError) or why it never
// ran goes to the error handler (see WithErrorHandler; by default it is
// logged at error level with the key). Admission, caps, policies, order,
// ctx and the nesting rules are those of Submit, and so are Stats. Use it for
// work whose outcome the caller would only log.
func (e *Executor[K]) Go(ctx context.Context, key K, fn func(context.Context) error) error {
	_, err := e.submit(ctx, key, fn, true)
	return err
}

// submit queues an asynchronous task (Submit, Go); unread says that no
// caller will read its result (Go).
func (e *Executor[K]) submit(ctx context.Context, key K, fn func(context.Context) error, unread bool) (*asyncJob[K], error) {
	if err := e.check(ctx, fn); err != nil {
		return nil, err
	}
	if err := e.validate(key); err != nil {
		return nil, err
	}
	a := &asyncJob[K]{}
	a.job.unread = unread
	a.ctx.key = key
	j := e.bind(&a.job, ctx, fn, &a.ctx)
	a.task.call = a
	a.watched = ctx.Done() != nil
	j.turn.Init(a, false)
	_, lentBy, err := e.enter(ctx, j, nil, false)
	if err != nil {
		return nil, err
	}
	if a.watched {
		e.watch(ctx, a)
	}
	if lentBy != nil {
		e.unlend(lentBy, true) // its ctx is watched: the task may go on
	}
	return a, nil
}

// DoMany runs fn holding every key in keys: no other task of any of those
// keys runs during fn, and on each key fn keeps its FIFO place. Duplicate
// keys (in striped mode, keys on one stripe) count once; no keys is
// ErrNoKeys. If any key is at its cap nothing is enqueued and the
// *backpressure.BusyError names that key. Concurrent DoMany and Do calls
// made from outside tasks never deadlock, whatever the keys and whatever
// their type: K needs no ordering (a nested call that would wait behind a
// DoMany waiting for its own task returns ErrReentrant: see "Nested calls"
// in the package doc). A DoMany is one task for WithMaxPending
// and one pending task on each of its keys. Everything else is as for Do.
func (e *Executor[K]) DoMany(ctx context.Context, keys []K, fn func(context.Context) error) error {
	if err := e.check(ctx, fn); err != nil {
		return err
	}
	if len(keys) == 0 {
		return ErrNoKeys
	}
	if err := e.validateAll(keys); err != nil {
		return err
	}
	keys = e.dedup(keys)
	outer := e.innermost(ctx)
	if outer != nil {
		held := 0
		for _, k := range keys {
			if e.held(ctx, k) {
				held++
			}
		}
		switch {
		case held == len(keys) && e.cfg.reentrant:
			return e.inline(ctx, fn, zap.Any("keys", keys))
		case held > 0:
			return ErrReentrant
		}
	}
	if len(keys) == 1 {
		return e.doValid(ctx, keys[0], fn, false)
	}
	j := e.newJob(ctx, fn, &taskCtx[K]{multi: &keys})
	entries := j.turn.InitMany(j, len(keys))
	if err := e.reserve(ctx); err != nil {
		e.reuse(j)
		return err
	}
	for backoff := 50 * time.Microsecond; ; backoff = min(2*backoff, 10*time.Millisecond) {
		v, err := e.enqueueMany(ctx, j, entries, outer)
		if v == backpressure.Admit {
			break
		}
		if v == backpressure.Wait {
			// Waiting in line on every key would hold room on the free
			// ones, which a task nested on them may need while it holds
			// a key this DoMany waits for (see backpressure.Block): a
			// DoMany polls instead. Each try is a fresh job: a giving-up
			// Close may still hold the withdrawn one (it lists the queued
			// tasks, then cancels them unlocked), and must find it
			// canceled, not queued again for the next try. The GC takes
			// it, like a rejected one.
			if err = e.pause(ctx, backoff, outer); err == nil {
				j = e.newJob(ctx, fn, &taskCtx[K]{multi: &keys})
				entries = j.turn.InitMany(j, len(keys))
			}
		}
		if err != nil {
			e.unreserve()
			return e.reject(err) // j was withdrawn: the GC takes it
		}
	}
	e.observeAccepted()
	return e.wait(ctx, j, outer, false)
}

// enqueueMany puts a multi-key job in all its mailboxes.
//
// Deadlock freedom: enqueues of multi-key tasks are serialised by multiMu,
// so any two of them, A and B, are queued in the same relative order (say A
// before B) in every mailbox they share. Order all multi-key tasks that way.
// The oldest multi-key task T that has not run finds ahead of it, in each of
// its mailboxes, only single-key tasks (which need nothing else and finish)
// and older multi-key tasks (which, being older than T, have run or will
// run). So T is eventually at the head of, and granted, every mailbox:
// no cycle of waits can form, for any key type and with no key ordering.
//
// If a key is at its cap, the entries already queued are withdrawn and
// nothing is left behind.
//
// A nested call (outer is its task) that would wait on a mailbox behind a
// DoMany that waits for the task is refused too (see waitsOnCaller).
func (e *Executor[K]) enqueueMany(ctx context.Context, j *job[K], entries []mailbox.Entry, outer *taskCtx[K]) (backpressure.Verdict, error) {
	var buf [8]*mailbox.Mailbox
	dispatch := buf[:0]
	e.stamp(j) // before the first enqueue: queue age reads it under any of j's mailboxes
	e.multiMu.Lock()
	var err error
	v := backpressure.Admit
	for i, k := range *j.ctx.multi {
		m := e.router.Acquire(k)
		if outer != nil && e.waitsOnCaller(ctx, m) {
			m.Release()
			v, err = backpressure.Reject, errWaitsOnCaller
			break
		}
		if v, err = e.askKey(m, k); v != backpressure.Admit {
			m.Release()
			break
		}
		last := i == len(entries)-1
		if last {
			e.countAccepted(j) // j can start once m is unlocked
		}
		if m.Enqueue(&entries[i]) {
			dispatch = append(dispatch, m)
			e.dispatching.Add(1) // under m's lock: before j can settle
		}
		if last {
			// Accepted. Until now a giving-up Close that saw j queued
			// left it alone (Staged); from now on it may cancel it. Under
			// m's lock, so before m can grant j, and after every entry's
			// mailbox is set, which that cancel reads.
			j.turn.Commit()
		}
		m.Release()
	}
	e.multiMu.Unlock()
	if v != backpressure.Admit {
		j.turn.Withdraw()
	}
	for _, m := range dispatch {
		m.Dispatch()
		e.dispatching.Done()
	}
	return v, err
}

// Call runs fn with Do and returns its value and error.
func Call[K comparable, T any](ctx context.Context, e *Executor[K], key K,
	fn func(context.Context) (T, error)) (T, error) {
	var out T
	if fn == nil {
		return out, ErrNilFunc
	}
	err := e.Do(ctx, key, func(ctx context.Context) error {
		v, err := fn(ctx)
		out = v
		return err
	})
	return out, err
}

// Close stops the executor: new submissions fail with ErrClosed, every
// accepted task runs, the workers of the pool the executor owns exit (a
// pool given with WithPool is left running), and Close returns nil.
//
// If ctx ends first, Close gives up, as http.Server.Shutdown does: tasks
// that have not started end with ErrClosed (their Wait or Do returns it),
// running tasks see their ctx canceled, and Close returns ctx's error at
// once, without waiting for a task that ignores its ctx. Such a task keeps
// its goroutine until fn returns, and its key's mailbox until then; nothing
// else is left, and a later Close returns nil once nothing runs.
//
// Close is idempotent and safe to call concurrently. Once a Close has
// returned nil, no goroutine of the executor is left. Called from inside a
// task, it returns ErrReentrant and closes nothing.
func (e *Executor[K]) Close(ctx context.Context) error {
	switch {
	case e == nil:
		return ErrNilExecutor
	case ctx == nil:
		return ErrNilContext
	}
	if e.innermost(ctx) != nil {
		return ErrReentrant
	}
	if !e.closed.Swap(true) {
		close(e.closing) // parked submitters leave with ErrClosed
	}
	if e.pending.Load() == 0 {
		e.drain()
	}
	var err error
	select {
	case <-e.drained:
	case <-ctx.Done():
		select {
		case <-e.drained:
			// Drained as well (say, nothing was pending): nothing to give
			// up, so the result does not depend on select's coin toss.
		default:
			err = ctx.Err()
			e.stopWatch()
			e.giveUp()
			select {
			case <-e.drained: // nothing was running: stop now
			default:
				return err // running tasks ignore their ctx: do not wait
			}
		}
	}
	if e.stopping.Swap(true) {
		<-e.stopped // drained: no user code is left to run, so this is quick
		return err
	}
	// Drained: every accepted task has settled. What is left are drive
	// loops and pond workers on their way out, which take microseconds.
	e.stopWatch()
	e.dispatching.Wait()
	e.runner.Wait()
	if e.ownPool {
		stopIdle(e.pool)
	}
	e.forceCancel()
	e.log.Debug("executor closed", zap.Uint64("completed", e.completed.Load()),
		zap.Uint64("canceled", e.canceled.Load()))
	e.detach()
	close(e.stopped)
	return err
}

// giveUp fails every task that has not started with ErrClosed and cancels
// the contexts of running ones.
func (e *Executor[K]) giveUp() {
	e.forceCancel()
	var queued []*mailbox.Turn
	e.router.Each(func(_ K, m *mailbox.Mailbox) {
		m.Each(func(t *mailbox.Turn) { queued = append(queued, t) })
	})
	for _, t := range queued {
		// cancel also settles the task, so its Wait returns and the drain
		// that Close waits for counts it. (A multi-key task queued in
		// several mailboxes is listed once per mailbox; cancel is a no-op
		// the second time.)
		e.cancel(jobOf[K](t), ErrClosed)
	}
}

func (e *Executor[K]) drain() { e.drainOnce.Do(func() { close(e.drained) }) }

// Stats returns a snapshot of the executor's counters.
func (e *Executor[K]) Stats() Stats {
	if e == nil {
		return Stats{}
	}
	// Load in the order the counters move (a task is submitted, then
	// started or canceled, then completed), latest first, so that no derived
	// gauge is ever negative.
	completed := e.completed.Load()
	started := e.started.Load()
	canceled := e.canceled.Load()
	submitted := e.submitted.Load()
	return Stats{
		ActiveKeys: e.router.Live(),
		Queued:     int(submitted - started - canceled),
		Running:    int(started - completed),
		Submitted:  submitted,
		Completed:  completed,
		Rejected:   e.rejected.Load(),
		Canceled:   canceled,
		Panicked:   e.panicked.Load(),
		Slow:       e.slow.Load(),
	}
}

// ActiveKeys is the number of keys (in striped mode, stripes) with a live
// mailbox: keys with tasks queued or running, plus any about to retire.
func (e *Executor[K]) ActiveKeys() int {
	if e == nil {
		return 0
	}
	return e.router.Live()
}

// MaxKeyPending is the pending count of the busiest key (or stripe) now.
// It costs what HotKeys(1) costs.
func (e *Executor[K]) MaxKeyPending() int {
	if e == nil {
		return 0
	}
	most := 0
	e.router.Each(func(_ K, m *mailbox.Mailbox) { most = max(most, m.Pending()) })
	return most
}

// stopIdle waits for the pond workers of a pool the executor owns to exit.
// Every drive loop has returned by now, so pond's queue is empty and each
// worker exits as soon as it sees that. (pond's StopAndWait would do the
// same, but it submits its stop to pond's global default pool, which ties
// unrelated executors together and breaks testing/synctest bubbles.)
func stopIdle(p pond.Pool) {
	for p.RunningWorkers() > 0 {
		time.Sleep(10 * time.Microsecond)
	}
}
