package soak

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/perkey/perkey/executor"
)

// observer counts a generation's task events, to be checked against its
// Stats once it has closed, and panics on one event in obsPanicEvery after
// counting it: the executor must recover the panic and go on as if the
// event had been delivered.
type observer struct {
	h        *harness
	events   atomic.Uint64
	accepted atomic.Int64
	rejected [executor.ReasonClosed + 1]atomic.Int64 // by Reason
	started  atomic.Int64
	finished [executor.Panicked + 1]atomic.Int64 // by Outcome
	canceled atomic.Int64
}

// observerPanic is what the observer panics with.
type observerPanic struct{}

func (o *observer) event() {
	if o.events.Add(1)%obsPanicEvery == 0 {
		o.h.obsPanics.Add(1)
		panic(observerPanic{})
	}
}

func (o *observer) TaskAccepted() { o.accepted.Add(1); o.event() }

func (o *observer) TaskRejected(r executor.Reason) {
	if int(r) < len(o.rejected) {
		o.rejected[r].Add(1)
	}
	o.event()
}

func (o *observer) TaskStarted(time.Duration) { o.started.Add(1); o.event() }

func (o *observer) TaskFinished(_ time.Duration, out executor.Outcome) {
	if int(out) < len(o.finished) {
		o.finished[out].Add(1)
	}
	o.event()
}

func (o *observer) TaskCanceled() { o.canceled.Add(1); o.event() }

// checkObserver compares g's observer with its final Stats and with what
// the harness saw fns do. Every event counted before the observer could
// panic, so a recovered panic must not lose or repeat one.
func (h *harness) checkObserver(g *generation, s executor.Stats) {
	o := &g.obs
	busy := o.rejected[executor.ReasonKey].Load() + o.rejected[executor.ReasonGlobal].Load() +
		o.rejected[executor.ReasonDelay].Load()
	runs := g.runs.Load()
	for _, c := range []struct {
		what      string
		got, want int64
	}{
		{"TaskAccepted vs Submitted", o.accepted.Load(), int64(s.Submitted)},
		{"TaskStarted vs Completed", o.started.Load(), int64(s.Completed)},
		{"TaskCanceled vs Canceled", o.canceled.Load(), int64(s.Canceled)},
		{"TaskRejected (key, global, delay) vs Rejected", busy, int64(s.Rejected)},
		{"TaskFinished(Panicked) vs Panicked", o.finished[executor.Panicked].Load(), int64(s.Panicked)},
		{"TaskFinished(Failed) vs fns that failed or exited", o.finished[executor.Failed].Load(), g.failedRuns.Load()},
		{"TaskFinished(OK) vs fns that returned nil", o.finished[executor.OK].Load(), runs - g.failedRuns.Load() - g.panics.Load()},
	} {
		if c.got != c.want {
			h.v.add(Counters, 1, "gen %d (%s): observer %s: %d; want %d", g.n, g.spec, c.what, c.got, c.want)
		}
	}
}

// What the error handler was handed, for the report.
const (
	handledError    = iota // fn's error
	handledPanic           // a *PanicError
	handledGoexit          // ErrGoexit
	handledNeverRan        // the ctx's error or ErrClosed: fn never ran
	numHandled
)

// handle is g's error handler: it receives the failure of every Go task
// that failed, with the task's key. A failure that names its task (fn's
// error, its panic value) is matched to it at once; ErrGoexit to the Go
// task of that key whose fn just ended through Goexit (the handler runs on
// that goroutine, before the key's next task starts, and Go tasks of one
// key never run side by side); a task that never ran is counted against
// its key, and checkGo matches the counts once g has closed.
func (h *harness) handle(g *generation, key any, err error) {
	k, ok := key.(int)
	if !ok {
		h.v.add(HandlerMiss, 1, "gen %d (%s): error handler: key %v (%T); want an int", g.n, g.spec, key, key)
		return
	}
	var te *taskError
	var pe *executor.PanicError
	switch {
	case errors.As(err, &te):
		h.handled[handledError].Add(1)
		h.handledTask(g, te.t, k, err)
	case errors.As(err, &pe):
		h.handled[handledPanic].Add(1)
		pv, ok := pe.Value.(panicValue)
		if !ok {
			h.v.add(HandlerMiss, 1, "gen %d (%s): error handler: key %d, panic value %v is no task's", g.n, g.spec, k, pe.Value)
			return
		}
		h.handledTask(g, pv.t, k, err)
	case errors.Is(err, executor.ErrGoexit):
		h.handled[handledGoexit].Add(1)
		t, ok := g.goexitOn.LoadAndDelete(k)
		if !ok {
			h.v.add(HandlerMiss, 1, "gen %d (%s): error handler: key %d, %v, but no Go task of that key ended through Goexit",
				g.n, g.spec, k, err)
			return
		}
		h.handledTask(g, t.(*task), k, err)
	case errors.Is(err, executor.ErrClosed), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		h.handled[handledNeverRan].Add(1)
		g.goMu.Lock()
		g.notRun[k]++
		if errors.Is(err, executor.ErrClosed) {
			g.closedGo++
		}
		g.goMu.Unlock()
	default:
		h.v.add(HandlerMiss, 1, "gen %d (%s): error handler: key %d, unexpected error %v", g.n, g.spec, k, err)
	}
}

// handledTask checks a failure the handler was handed for t, which ran.
func (h *harness) handledTask(g *generation, t *task, k int, err error) {
	if t.kind != opGo || t.g != g {
		h.v.add(HandlerMiss, 1, "%s: error handler of gen %d handed %v, but the task is not a Go task of it", t, g.n, err)
		return
	}
	if n := t.handled.Add(1); n > 1 {
		h.v.add(HandlerMiss, 1, "%s: error handler handed its failure %d times (now %v)", t, n, err)
	}
	st := t.state.Load()
	var pe *executor.PanicError
	switch {
	case k != t.keys[0]:
		h.v.add(HandlerMiss, 1, "%s: error handler handed its failure with key %d", t, k)
	case st&finished == 0:
		h.v.add(HandlerMiss, 1, "%s: error handler handed %v before fn ended", t, err)
	case st&goexited != 0:
		if !errors.Is(err, executor.ErrGoexit) {
			h.v.add(HandlerMiss, 1, "%s: fn ended through Goexit; error handler handed %v", t, err)
		}
	case st&panicked != 0:
		if !errors.As(err, &pe) || pe.Value != (panicValue{t}) {
			h.v.add(HandlerMiss, 1, "%s: fn panicked; error handler handed %v", t, err)
		}
	case err != t.result:
		h.v.add(HandlerMiss, 1, "%s: fn returned %v; error handler handed %v", t, t.result, err)
	}
}

// checkGo, once g has closed and its calls have returned, checks that
// every accepted Go task that failed reached the error handler exactly
// once, and no other did: per task for those that ran, per key for those
// that never ran (their failure, a ctx error or ErrClosed, names no task).
// ErrClosed only comes from a Close that gave up.
func (h *harness) checkGo(g *generation) {
	g.goMu.Lock()
	defer g.goMu.Unlock()
	neverRan := map[int]int{}
	for _, t := range g.goTasks {
		st := t.state.Load()
		if st&started == 0 {
			neverRan[t.keys[0]]++
			continue
		}
		want := int32(0)
		if st&(goexited|panicked) != 0 || t.result != nil {
			want = 1
		}
		if n := t.handled.Load(); n != want {
			h.v.add(HandlerMiss, 1, "%s: error handler handed its failure %d times; want %d (state %#x, result %v)",
				t, n, want, st, t.result)
		}
	}
	for k, n := range neverRan {
		if got := g.notRun[k]; got != n {
			h.v.add(HandlerMiss, 1, "gen %d (%s): key %d: %d Go tasks never ran; the error handler was handed %d such failures",
				g.n, g.spec, k, n, got)
		}
	}
	for k, got := range g.notRun {
		if _, ok := neverRan[k]; !ok {
			h.v.add(HandlerMiss, 1, "gen %d (%s): key %d: no Go task of it failed to run; the error handler was handed %d such failures",
				g.n, g.spec, k, got)
		}
	}
	if g.closedGo > 0 && !g.gaveUp {
		h.v.add(HandlerMiss, 1, "gen %d (%s): %d Go tasks failed with ErrClosed, but no Close gave up", g.n, g.spec, g.closedGo)
	}
	if n := func() int {
		c := 0
		g.goexitOn.Range(func(any, any) bool { c++; return true })
		return c
	}(); n > 0 {
		h.v.add(HandlerMiss, 1, "gen %d (%s): %d Go tasks ended through Goexit and the handler never had their ErrGoexit", g.n, g.spec, n)
	}
	g.goTasks, g.notRun = nil, nil
}
