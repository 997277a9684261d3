package soak

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

// behaviour is what a task's fn does.
type behaviour uint8

const (
	quick     behaviour = iota // return nil at once
	slow                       // sleep up to 2 ms, cut short by ctx; return nil or a taskError
	failing                    // return a taskError
	panicky                    // panic with a panicValue
	goexit                     // call runtime.Goexit
	failBatch                  // a Batcher message that fails its whole batch (see batch.go)
	stubborn                   // sleep for nap whatever its ctx does, then return nil
)

// Bits of task.state.
const (
	started  = 1 << iota // fn has begun
	finished             // fn has returned, panicked or exited through Goexit
	notRun               // the submitter was told fn never ran
	panicked             // fn panicked (set just before the panic)
	goexited             // fn neither returned nor panicked: runtime.Goexit, its own or a nested inline call's
)

// task is one submission as the harness sees it.
type task struct {
	id        uint64
	g         *generation
	p         *producer
	op        string
	kind      op    // what was called; opSubmit includes a Wait when nested
	keys      []int // distinct keys fn holds
	shared    bool
	do        behaviour
	nap       time.Duration // for slow
	ctx       context.Context
	streams   []*stream // one per key, same order; nil outside a batch
	seq       int64
	submitted time.Time
	gate      *gate // non-nil for the gate task of the cancel scenario
	inner     *task // the nested call fn makes first, if any (see nest)
	nested    bool  // made from inside another task's fn, with its ctx

	ring   *ring     // the deadlock ring this task is a member of (see ring.go)
	idx    int       // its place in the ring
	inRing bool      // a ring member's nested call
	batch  *batchRun // for a Batcher message, the batch it ran in; written by the BatchFunc

	// For Go: releases ctx once fn has ended (a ctx that is never used
	// ends by itself within 3 ms), and how often the error handler was
	// handed this task's failure.
	cancel  context.CancelFunc
	handled atomic.Int32

	tk atomic.Pointer[executor.Task] // an accepted Submit's Task

	state      atomic.Uint32
	mustNotRun atomic.Bool // its ctx provably ended while it was queued
	result     error       // what fn returned; written by fn before it returns
}

// mayExit reports whether running t's call may end the calling goroutine:
// t's fn calls runtime.Goexit, or makes a nested call that may run inline
// on fn's goroutine (anything but a Submit) and may end it. A blocking call
// whose fn runs on the caller's goroutine (a Do on an idle key) then takes
// the caller with it.
func (t *task) mayExit() bool {
	for x := t; x != nil; x = x.inner {
		if x.do == goexit {
			return true
		}
		if x.inner != nil && x.inner.kind == opSubmit {
			return false
		}
	}
	return false
}

// taskError is the error a task's fn returns; it names its task so a result
// handed to the wrong submitter shows.
type taskError struct {
	t     *task
	cause error // the ctx error that cut a slow task short, or nil
}

var errTask = errors.New("soak: task error")

func (e *taskError) Error() string {
	if e.cause != nil {
		return fmt.Sprintf("soak: task %d cut short: %v", e.t.id, e.cause)
	}
	return fmt.Sprintf("soak: task %d failed", e.t.id)
}

func (e *taskError) Is(target error) bool { return target == errTask }

// panicValue is what a panicky task panics with.
type panicValue struct{ t *task }

// panicValue is the value t's result must carry if its fn panicked: its
// own, or for a Batcher message that of the message that made its batch
// panic.
func (t *task) panicValue() any {
	if t.batch != nil {
		return panicValue{t.batch.panicker}
	}
	return panicValue{t}
}

// run is every task's fn.
func (h *harness) run(ctx context.Context, t *task) error {
	g := t.g
	h.begin(t, time.Now())
	g.live.Add(1)
	if n := g.running.Add(1); n > int64(h.workers) {
		h.v.add(OverWorkers, 1, "%s: %d fns running; want at most %d", t, n, h.workers)
	}
	for i, k := range t.keys {
		if !g.occ.enter(k, t.shared) {
			h.v.add(Overlap, 1, "%s: key %d already held at start", t, k)
		}
		if t.streams != nil && !t.streams[i].start(t.seq) {
			h.v.add(FIFOBreak, 1, "%s: started after a later submission of its producer on key %d", t, k)
		}
	}
	var err error
	returned := false
	defer func() {
		switch {
		case returned:
			if err != nil {
				g.failedRuns.Add(1)
			}
		case t.state.Load()&panicked == 0:
			// Neither a return nor a panic: runtime.Goexit, this fn's or
			// that of a nested call that ran inline on this goroutine.
			t.state.Or(goexited)
			g.failedRuns.Add(1)
			if t.kind == opGo {
				// The error handler is called next, on this goroutine,
				// before the key's next task starts: see handle.
				g.goexitOn.Store(t.keys[0], t)
			}
		}
		for _, k := range t.keys {
			g.occ.leave(k, t.shared)
		}
		g.running.Add(-1)
		g.live.Add(-1)
		g.runs.Add(1)
		t.state.Or(finished)
		if t.cancel != nil {
			t.cancel()
		}
	}()
	err = h.act(ctx, t)
	returned = true
	return err
}

// begin records that t's fn (or, for a Batcher message, its batch)
// started at start: it must not have started before, nor after its
// submitter was told it never ran; and its queue wait.
func (h *harness) begin(t *task, start time.Time) {
	old := t.state.Or(started)
	if old&started != 0 {
		h.v.add(RanTwice, 1, "%s", t)
	}
	if old&notRun != 0 {
		h.v.add(RanAfterCancel, 1, "%s: fn started after its submitter was told it never ran", t)
	}
	if t.mustNotRun.Load() {
		h.v.add(RanAfterCancel, 1, "%s: ctx was canceled while the key was held, yet fn ran", t)
	}
	wait := start.Sub(t.submitted)
	t.p.wait.record(wait)
	if int64(wait) > h.slowest.Load() {
		h.noteSlowest(t, wait)
	}
}

// act is what fn does once run has recorded its start.
func (h *harness) act(ctx context.Context, t *task) error {
	if t.gate != nil {
		return t.gate.hold(ctx)
	}
	if t.ring != nil {
		h.ringMember(ctx, t)
		return nil
	}
	if t.inner != nil {
		h.nest(ctx, t)
	}
	switch t.do {
	case slow:
		h.slow.Add(1)
		timer := time.NewTimer(t.nap)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			t.result = &taskError{t: t, cause: ctx.Err()}
			h.cut.Add(1)
		}
	case failing:
		t.result = &taskError{t: t}
	case panicky:
		t.g.panics.Add(1)
		t.state.Or(panicked)
		panic(panicValue{t})
	case goexit:
		h.goexits.Add(1)
		runtime.Goexit()
	case stubborn:
		h.stubborn.Add(1)
		timer := time.NewTimer(t.nap) // ctx is ignored: a Close that gives up must not wait for it
		<-timer.C
	}
	return t.result
}

// nest makes t's nested call from its fn, with fn's ctx, on keys above
// every key t holds, so nested calls alone never form a cycle: a Do,
// DoShared or DoMany, or a Submit then a Wait on its Task. Behind a DoMany
// that waits for one of t's keys the executor refuses a blocking call, or
// the Wait, with ErrReentrant; a longer cycle (through a DoMany that waits
// for the key of a task in another nested call) it refuses with
// ErrDeadlock. Whatever else makes the call wait long, its ctx ends after
// nestPatience and it gives its place back. While the call waits t lends
// its execution slot, so t stops counting as running.
func (h *harness) nest(ctx context.Context, t *task) {
	in := t.inner
	ctx, cancel := context.WithTimeout(ctx, nestPatience)
	defer cancel()
	in.ctx = ctx
	h.nested.Add(1)
	t.g.calls.Add(1)
	t.g.running.Add(-1)
	in.submitted = time.Now()
	h.track(in)
	fn := func(ctx context.Context) error { return h.run(ctx, in) }
	returned := false
	var err error
	defer func() {
		h.untrack(in)
		t.g.running.Add(1)
		if returned {
			h.settle(in, err, 0, false)
		} else {
			// The nested call's fn ran inline on this goroutine and
			// called runtime.Goexit: the call never returns, and t's fn
			// goes down with it.
			h.gone(in)
		}
		t.g.returns.Add(1)
	}()
	switch e := t.g.e; in.kind {
	case opDoShared:
		err = e.DoShared(ctx, in.keys[0], fn)
	case opDoMany:
		err = e.DoMany(ctx, in.keys, fn)
	case opSubmit:
		err = h.submitWait(ctx, e, in, fn)
	default:
		err = e.Do(ctx, in.keys[0], fn)
	}
	returned = true
}

// submitWait is a nested Submit followed by a Wait with the same ctx. It
// returns the task's own result: if the Wait ends first (ctx ended, or
// ErrReentrant or ErrDeadlock, counted as a refusal: the task stays
// queued), it waits for the task to end with a Wait whose ctx carries no
// task (so it is neither refused nor lends a slot) and watches the
// task's ctx: nothing else notices that ctx's end while the task is
// queued, here behind a DoMany that waits for this fn's key. ctx ends
// nestPatience at most from now, so that Wait returns soon after; it is
// bounded by waitWatchdog all the same, and a Wait that outlives it is a
// lost task.
func (h *harness) submitWait(ctx context.Context, e *executor.Executor[int], in *task,
	fn func(context.Context) error) error {
	tk, err := e.Submit(ctx, in.keys[0], fn)
	if err != nil {
		return err
	}
	in.tk.Store(tk)
	switch err = tk.Wait(ctx); {
	case errors.Is(err, executor.ErrReentrant):
		h.nestRefused.Add(1) // the task stays queued behind a DoMany
	case errors.Is(err, executor.ErrDeadlock):
		h.nestDeadlock.Add(1) // the Wait would close a cycle; the task stays queued
	case ctx.Err() == nil || !errors.Is(err, ctx.Err()):
		return err // the task ended: this is its result
	}
	wctx, cancel := context.WithTimeout(context.Background(), waitWatchdog)
	defer cancel()
	if err = tk.Wait(wctx); !isDone(tk) {
		h.v.add(Lost, 1, "%s: its Task not ended %v after its Wait ended with ctx (%v): nothing withdrew it", in, waitWatchdog, err)
		return ctx.Err()
	}
	return tk.Wait(context.Background()) // ended: its result at once
}

// noteSlowest remembers the task that waited longest to start.
func (h *harness) noteSlowest(t *task, wait time.Duration) {
	h.slowMu.Lock()
	defer h.slowMu.Unlock()
	if int64(wait) > h.slowest.Load() {
		h.slowest.Store(int64(wait))
		h.slowestTask = fmt.Sprintf("%s, gen %d (%s), keys %v", t.op, t.g.n, t.g.spec, t.keys)
	}
}

func (t *task) String() string {
	return fmt.Sprintf("gen %d (%s) producer %d task %d %s keys %v seq %d",
		t.g.n, t.g.spec, t.p.id, t.id, t.op, t.keys, t.seq)
}

// settle checks a submission's result against what happened to its fn, and
// counts it. value is Call's value (ignored unless checkValue).
func (h *harness) settle(t *task, err error, value uint64, checkValue bool) {
	var pe *executor.PanicError
	st := t.state.Load()
	switch {
	case st&goexited != 0:
		if !errors.Is(err, executor.ErrGoexit) {
			h.v.add(WrongOutcome, 1, "%s: fn ended through runtime.Goexit, result %v", t, err)
			return
		}
		h.goexitRes.Add(1)
		return
	case errors.Is(err, executor.ErrGoexit):
		h.v.add(WrongOutcome, 1, "%s: result %v, but fn did not call runtime.Goexit (state %#x)", t, err, st)
		return
	case err == nil, errors.Is(err, errTask), errors.As(err, &pe):
		if st&finished == 0 {
			h.v.add(WrongOutcome, 1, "%s: result %v, but fn did not run", t, err)
			return
		}
		switch {
		case st&panicked != 0:
			if pe == nil || pe.Value != t.panicValue() {
				h.v.add(WrongOutcome, 1, "%s: fn panicked, result %v", t, err)
			}
			h.panics.Add(1)
		case err != t.result:
			h.v.add(WrongOutcome, 1, "%s: fn returned %v, result %v", t, t.result, err)
		case checkValue && value != t.id:
			h.v.add(WrongOutcome, 1, "%s: Call returned value %d", t, value)
		case err != nil && (t.do == failing || t.batch != nil):
			h.failed.Add(1)
		default:
			h.ok.Add(1)
		}
		return
	}
	if t.state.Or(notRun)&started != 0 {
		h.v.add(WrongOutcome, 1, "%s: fn ran, result %v", t, err)
		return
	}
	switch {
	case errors.Is(err, backpressure.ErrBusy):
		t.g.busy.Add(1)
		if !t.nested {
			t.p.refused.Store(true) // the producer's own call: it backs off
		}
		var be *backpressure.BusyError
		if errors.As(err, &be) {
			h.rejected[be.Scope].Add(1)
			if age := time.Since(t.g.born); be.Scope == backpressure.ScopeDelay && be.Wait > age {
				h.v.add(FalseDelay, 1, "%s: %v: the head cannot have waited %v in an executor %v old",
					t, err, be.Wait, age)
			}
		}
	case errors.Is(err, executor.ErrClosed):
		h.closedRes.Add(1)
	case t.nested && errors.Is(err, executor.ErrReentrant):
		if !t.inRing { // a ring counts its own (see checkRing)
			h.nestRefused.Add(1) // behind a DoMany that waits for its task
		}
	case t.nested && errors.Is(err, executor.ErrDeadlock):
		if !t.inRing {
			h.nestDeadlock.Add(1) // it would have closed a cycle of waits
		}

	case t.ctx.Err() != nil && errors.Is(err, t.ctx.Err()):
		h.ctxRes.Add(1)
	default:
		h.v.add(WrongOutcome, 1, "%s: fn never ran, unexpected result %v (ctx: %v)", t, err, t.ctx.Err())
	}
}

// gone accounts for a blocking call that never returned: its goroutine
// exited. That is right only if fn ran on it, inline, and ended through
// runtime.Goexit (its own, or a nested inline call's).
func (h *harness) gone(t *task) {
	if st := t.state.Load(); st&goexited == 0 || st&finished == 0 {
		h.v.add(WrongOutcome, 1, "%s: the call never returned, yet fn did not end through runtime.Goexit (state %#x)", t, st)
		return
	}
	h.callersGone.Add(1)
}

// gate is the first task of the cancel-while-queued scenario: it holds its
// key until released or its ctx ends.
type gate struct {
	running  chan struct{} // closed when fn starts
	release  chan struct{} // closed by the producer
	returned atomic.Bool   // fn has returned (or is about to)
}

func newGate() *gate {
	return &gate{running: make(chan struct{}), release: make(chan struct{})}
}

func (g *gate) hold(ctx context.Context) error {
	defer g.returned.Store(true)
	close(g.running)
	select {
	case <-g.release:
	case <-ctx.Done():
	}
	return nil
}
