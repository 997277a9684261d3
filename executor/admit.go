package executor

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/internal/mailbox"
)

func (e *Executor[K]) check(ctx context.Context, fn func(context.Context) error) error {
	switch {
	case e == nil:
		return ErrNilExecutor
	case ctx == nil:
		return ErrNilContext
	case fn == nil:
		return ErrNilFunc
	}
	// A call whose ctx already ended is refused before it is accepted.
	return ctx.Err()
}

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
	if j.turn.State() != mailbox.Done || e.closed.Load() || e.router.Striped() {
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

// reserve counts a submission against the executor-wide cap and against
// Close: a submission either sees closed, or Close sees it pending (both
// sides write, then read the other's word). At the cap the policy decides:
// reject, or wait in the executor's FIFO waiting room.
func (e *Executor[K]) reserve(ctx context.Context) error {
	n := e.pending.Add(1)
	if e.closed.Load() {
		e.unreserve()
		return e.reject(ErrClosed)
	}
	limit := e.cfg.maxPending
	if limit == 0 || (n <= int64(limit) && e.gparked.Load() == 0) {
		return nil
	}
	e.unreserve()
	// Over the cap, or others wait ahead (no barging): the load is full.
	load := backpressure.Load{TotalPending: max(int(n-1), limit), TotalLimit: limit}
	v, err := e.decide(load, backpressure.ScopeGlobal)
	if err != nil {
		return e.reject(err)
	}
	if v == backpressure.Wait && e.innermost(ctx) == nil {
		return e.parkGlobal(ctx)
	}
	// A nested call is refused rather than made to wait: its own task (and
	// any it is nested in, and the tasks queued behind them) hold room that
	// is given back only once it returns. With every reservation held so,
	// it would wait forever.
	return e.reject(&backpressure.BusyError{Scope: backpressure.ScopeGlobal, Pending: int(n - 1), Limit: limit})
}

// unreserve gives back a reservation: to the first submission parked for
// global room if there is one, else to Close's drain count.
func (e *Executor[K]) unreserve() {
	if e.pending.Add(-1) == 0 && e.closed.Load() {
		e.drain()
	}
	if e.gparked.Load() > 0 {
		e.handGlobal()
	}
}

// unreserveBatch gives back the reservations of n tasks that ran in one
// drive-loop batch (mailbox.RunnerOptions.Ran). It serves only executors without
// a global cap: nobody waits for room there, only Close's drain counts
// reservations, so one atomic operation can stand for the whole batch.
func (e *Executor[K]) unreserveBatch(n int) {
	if e.pending.Add(-int64(n)) == 0 && e.closed.Load() {
		e.drain()
	}
}

// roomWaiter is a submission parked for global room.
type roomWaiter struct {
	ch   chan struct{} // closed when room is handed over
	gone bool          // gave up; guarded by gmu
}

// parkGlobal waits for global room in FIFO order until ctx ends or the
// executor closes. On success the caller holds a reservation.
func (e *Executor[K]) parkGlobal(ctx context.Context) error {
	w := &roomWaiter{ch: make(chan struct{})}
	e.gmu.Lock()
	e.gwait = append(e.gwait, w)
	e.gparked.Add(1)
	e.gmu.Unlock()
	e.handGlobal() // room may have appeared before we were listed
	select {
	case <-w.ch:
		if e.closed.Load() {
			e.unreserve()
			return e.reject(ErrClosed)
		}
		return nil
	case <-ctx.Done():
	case <-e.closing:
	}
	e.gmu.Lock()
	select {
	case <-w.ch: // handed room meanwhile: give it on
		e.gmu.Unlock()
		e.unreserve()
	default:
		w.gone = true
		e.gparked.Add(-1)
		e.gmu.Unlock()
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return e.reject(ErrClosed)
}

// handGlobal hands free global room to parked submissions, oldest first.
func (e *Executor[K]) handGlobal() {
	e.gmu.Lock()
	defer e.gmu.Unlock()
	for len(e.gwait) > 0 {
		w := e.gwait[0]
		if !w.gone {
			if e.pending.Load() >= int64(e.cfg.maxPending) {
				return
			}
			e.pending.Add(1)
			e.gparked.Add(-1)
			close(w.ch)
		}
		e.gwait[0] = nil
		e.gwait = e.gwait[1:]
	}
}

// park waits, after the mailbox parked j, until j is admitted to the queue,
// ctx ends or the executor closes; in the last two cases j leaves the
// waiting room and was never accepted. A nested call (outer is its task)
// lends the task's slot while it waits: the tasks it waits for may need it.
// If j is admitted with the slot lent, park reports lent and leaves the
// slot lent (see enter); otherwise it takes the slot back before returning.
func (e *Executor[K]) park(ctx context.Context, j *job[K], m *mailbox.Mailbox, outer *taskCtx[K]) (lent bool, err error) {
	lent = e.lend(outer)
	select {
	case <-j.done:
		e.observeAccepted()
		return lent, nil
	case <-ctx.Done():
	case <-e.closing:
	}
	if !m.Unpark(j.turn.Entry()) {
		<-j.done            // admitted meanwhile (Admit has sent)
		e.observeAccepted() // the caller's wait sees ctx
		return lent, nil
	}
	e.unreserve()
	// The outcome is what sent the call away, decided now: taking the slot
	// back may wait, and a giving-up Close may end ctx meanwhile.
	if err = ctx.Err(); err == nil {
		err = e.reject(ErrClosed)
	}
	e.unlend(outer, lent)
	return false, err
}

// pause sleeps d unless ctx ends or the executor closes first; it reports
// ErrClosed whenever Close has begun, even if its timer fired at the same
// time (as for a call in a waiting room, once Close has begun none enters).
// A nested call (outer is its task) lends the task's slot meanwhile.
func (e *Executor[K]) pause(ctx context.Context, d time.Duration, outer *taskCtx[K]) error {
	lent := e.lend(outer)
	defer e.unlend(outer, lent)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		if e.closed.Load() {
			return ErrClosed
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-e.closing:
		return ErrClosed
	}
}

// admit asks the policy about one key, with m locked. A Wait verdict is
// honoured only at the key's cap (there is nothing else to wait for), and
// Admit only below it.
func (e *Executor[K]) askKey(m *mailbox.Mailbox, key K) (backpressure.Verdict, error) {
	limit := e.cfg.maxPerKey
	if limit == 0 && !e.needsAge {
		return backpressure.Admit, nil
	}
	// The global cap was settled by reserve; this load is about the key.
	load := backpressure.Load{
		Pending: m.Pending() + m.Parked(), // parked ones are ahead: no barging
		Limit:   limit,
	}
	if e.needsAge {
		if at, ok := m.OldestStamp(); ok {
			load.OldestWait = since(at)
		}
	}
	v, err := e.decide(load, backpressure.ScopeKey)
	if err != nil {
		return backpressure.Reject, err
	}
	full := load.Full() == backpressure.ScopeKey
	switch {
	case v == backpressure.Wait && full:
		return backpressure.Wait, nil
	case v != backpressure.Reject && !full:
		return backpressure.Admit, nil
	}
	be := e.keyBusy(m, key)
	if !full {
		be.Scope, be.Wait = backpressure.ScopeDelay, load.OldestWait
	}
	return backpressure.Reject, be
}

// keyBusy describes key's mailbox m at its cap (locked).
func (e *Executor[K]) keyBusy(m *mailbox.Mailbox, key K) *backpressure.BusyError {
	return &backpressure.BusyError{Key: key, Scope: backpressure.ScopeKey,
		Pending: m.Pending() + m.Parked(), Limit: e.cfg.maxPerKey, Retry: m.ServiceTime()}
}

// reject counts and logs a refusal by backpressure, and reports it and a
// refusal because the executor closed (ErrClosed, not in Stats.Rejected) to
// the observer; it returns err.
func (e *Executor[K]) reject(err error) error {
	if pe, ok := err.(*policyError); ok {
		e.rejected.Add(1) // refused by backpressure, if not by a verdict
		if e.obs != nil {
			e.obs.TaskRejected(reasonOf(pe.scope))
		}
		return err
	}
	be, ok := err.(*backpressure.BusyError)
	if !ok {
		if err == ErrClosed && e.obs != nil {
			e.obs.TaskRejected(ReasonClosed)
		}
		return err
	}
	e.rejected.Add(1)
	if e.obs != nil {
		e.obs.TaskRejected(reasonOf(be.Scope))
	}
	if ce := e.sampled.Check(zap.InfoLevel, "task rejected"); ce != nil {
		ce.Write(zap.Any("key", be.Key), zap.Stringer("cap", be.Scope),
			zap.Int("pending", be.Pending), zap.Int("limit", be.Limit))
	}
	return err
}

// accept counts an accepted task; called with its (last) mailbox locked,
// before the task can start. A multi-key job was stamped before its first
// enqueue (see stamp).
func (e *Executor[K]) countAccepted(j *job[K]) {
	e.submitted.Add(1)
	if j.ctx.multi == nil {
		e.stamp(j)
	}
}

// stamp records when j entered the queue, if anyone reads it; it must
// happen before j is linked into any mailbox, whose lock then publishes it.
func (e *Executor[K]) stamp(j *job[K]) {
	if e.ages {
		j.turn.SetStamp(monotime())
	}
}

// accepted reports an acceptance to the observer, unlocked.
func (e *Executor[K]) observeAccepted() {
	if e.obs != nil {
		e.obs.TaskAccepted()
	}
}

// abandon ends an accepted task that will never run (already taken out of
// Queued by the caller).
func (e *Executor[K]) abandon(j *job[K], err error) {
	e.canceled.Add(1)
	j.err = err
	if e.obs != nil {
		e.obs.TaskCanceled()
	}
	if j.unread {
		e.unread(j.ctx.keyField(), j.ctx.keyAny(), err)
		return
	}
	if ce := e.sampled.Check(zap.InfoLevel, "task canceled"); ce != nil {
		ce.Write(j.ctx.keyField(), zap.Error(err))
	}
}

// cancel withdraws a queued task whose ctx ended; false if it already started.
func (e *Executor[K]) cancel(j *job[K], err error) bool {
	if !j.turn.Cancel() {
		return false
	}
	e.abandon(j, err)
	j.turn.Work().Settle()
	return true
}

// watch gives an async task's place back as soon as its ctx ends.
func (e *Executor[K]) watch(ctx context.Context, a *asyncJob[K]) {
	a.stop = context.AfterFunc(ctx, func() { e.cancel(&a.job, ctx.Err()) })
	if !a.af.CompareAndSwap(0, 1) {
		a.stop() // the task already ended
	}
}

// wait blocks until the synchronous job j ends; if ctx ends first and j has
// not started, j is withdrawn at once. It recycles j. A nested call lends
// its task's slot meanwhile, unless it already has (lent, see enter).
func (e *Executor[K]) wait(ctx context.Context, j *job[K], outer *taskCtx[K], lent bool) error {
	if !lent {
		lent = e.lend(outer)
	}
	if done := ctx.Done(); done == nil {
		<-j.done // ctx never ends: a plain receive is cheaper than a select
	} else {
		select {
		case <-j.done:
		case <-done:
			e.cancel(j, ctx.Err())
			<-j.done
		}
	}
	e.unlend(outer, lent)
	err := j.err
	e.recycle(j)
	return err
}

// slot says where an inline run's execution slot came from.
type slot uint8

const (
	noSlot    slot = iota
	ownSlot        // acquired from the runner
	outerSlot      // borrowed from the task this nested call runs in
)

// takeSlot finds a slot for an inline run: the calling task's own (it is
// blocked in this call), else a free one.
func (e *Executor[K]) takeSlot(outer *taskCtx[K]) slot {
	if outer != nil && outer.lent.CompareAndSwap(0, 1) {
		return outerSlot
	}
	if e.runner.TryAcquire() {
		return ownSlot
	}
	return noSlot
}

func (e *Executor[K]) giveSlot(outer *taskCtx[K], s slot) {
	switch s {
	case outerSlot:
		outer.lent.Store(0)
	case ownSlot:
		e.runner.Release()
	}
}

// lend gives the calling task's slot to other work while a nested call
// waits, so nesting never exhausts the pool. It reports whether it did.
func (e *Executor[K]) lend(outer *taskCtx[K]) bool {
	if outer == nil || !outer.lent.CompareAndSwap(0, 1) {
		return false
	}
	e.runner.Release()
	return true
}

// unlend takes a slot back for the calling task after a nested wait.
func (e *Executor[K]) unlend(outer *taskCtx[K], lent bool) {
	if lent {
		e.runner.Acquire()
		outer.lent.Store(0)
	}
}

// innermost returns the innermost running task of e marked in ctx.
func (e *Executor[K]) innermost(ctx context.Context) *taskCtx[K] {
	for {
		m, _ := ctx.Value(markKey{}).(marker)
		if m == nil {
			return nil
		}
		if c, ok := m.(*taskCtx[K]); ok && c.e == e {
			return c
		}
		ctx = m.callerCtx()
	}
}

// waitsOnCaller reports whether a blocking nested call made with ctx, if
// queued on m now (locked), would wait behind a multi-key task that needs a
// key the calling task, or one it is nested in, holds. That task cannot run
// before the caller returns, nor the call before that task (a DoMany holds
// each key it reaches the head of while it waits for the others): a cycle
// that would last until the call's ctx ends. Every task ahead of the call
// is in m's queue or holds m, and none that arrives later gets ahead of it.
// Only the nested caller's own chain is searched: cycles through other
// tasks' nested calls stay the caller's to avoid (see the package doc).
//
// It walks the key's queue under its lock, only where a multi-key task may
// be queued (see mailbox.Mailbox.EachManyAhead): only nested calls pay for it.
func (e *Executor[K]) waitsOnCaller(ctx context.Context, m *mailbox.Mailbox) bool {
	found := false
	m.EachManyAhead(nil, func(t *mailbox.Turn) { found = found || e.needsHeld(ctx, t) })
	return found
}

// queuedBehindCaller is waitsOnCaller for a Wait made with ctx on t, a
// submission already queued: whether a multi-key task holding t's mailbox or
// queued ahead of t needs a key the waiting task holds.
func (e *Executor[K]) queuedBehindCaller(ctx context.Context, t *mailbox.Turn) bool {
	found := false
	t.EachManyAhead(func(o *mailbox.Turn) { found = found || e.needsHeld(ctx, o) })
	return found
}

// needsHeld reports whether t, a task in a queue or holding a mailbox (so
// not recycled), is a multi-key task that needs a key held by the task
// marked in ctx or by one it is nested in.
func (e *Executor[K]) needsHeld(ctx context.Context, t *mailbox.Turn) bool {
	for _, k := range jobOf[K](t).ctx.keys() { // none for a single-key task
		if e.held(ctx, k) {
			return true
		}
	}
	return false
}

// held reports whether a running task of e marked in ctx holds key.
func (e *Executor[K]) held(ctx context.Context, key K) bool {
	for {
		m, _ := ctx.Value(markKey{}).(marker)
		if m == nil {
			return false
		}
		if c, ok := m.(*taskCtx[K]); ok && c.e == e && c.holds(key) {
			return true
		}
		ctx = m.callerCtx()
	}
}
