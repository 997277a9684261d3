package soak

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

// The checks must be able to fail: each test plants the violation it
// guards against.

func TestOccupancy(t *testing.T) {
	tests := []struct {
		name  string
		first bool // shared
		then  bool // shared
		ok    bool
	}{
		{"exclusive then exclusive", false, false, false},
		{"exclusive then shared", false, true, false},
		{"shared then exclusive", true, false, false},
		{"shared then shared", true, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := make(occupancy, 2)
			if !o.enter(1, tt.first) {
				t.Fatal("first enter on an idle key reported an overlap")
			}
			if got := o.enter(1, tt.then); got != tt.ok {
				t.Errorf("second enter: got ok=%v; want %v", got, tt.ok)
			}
			if !o.enter(0, false) {
				t.Error("another key: got an overlap; want none")
			}
			o.leave(1, tt.then)
			o.leave(1, tt.first)
			if o[1].Load() != 0 {
				t.Errorf("after both left: state %#x; want 0", o[1].Load())
			}
		})
	}
}

func TestStream(t *testing.T) {
	var s stream
	for _, seq := range []int64{1, 3, 4} { // 2 was canceled: a gap is fine
		if !s.start(seq) {
			t.Fatalf("start(%d) after a lower seq: got a FIFO break", seq)
		}
	}
	if s.start(2) {
		t.Error("start(2) after 4: got ok; want a FIFO break")
	}
}

func TestHistogram(t *testing.T) {
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}} {
		got := h.quantile(c.q)
		if d := float64(got-c.want) / float64(c.want); d < -0.07 || d > 0.07 {
			t.Errorf("quantile(%v) = %v; want %v within 7%%", c.q, got, c.want)
		}
	}
	if got := time.Duration(h.max.Load()); got != time.Millisecond {
		t.Errorf("max = %v; want 1ms", got)
	}
	for ns := uint64(0); ns < 1<<20; ns = ns*3/2 + 1 {
		b := bucketOf(ns)
		if lo, hi := lowerBound(b), lowerBound(b+1); ns < lo || ns >= hi {
			t.Fatalf("%dns in bucket %d = [%d, %d)", ns, b, lo, hi)
		}
	}
}

// TestSettle feeds settle results that disagree with what fn did.
func TestSettle(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name   string
		do     behaviour
		ran    bool
		ctx    context.Context
		result func(t *task) error
		want   Invariant // numInvariants: no violation
	}{
		{"ran, nil", quick, true, context.Background(), func(*task) error { return nil }, numInvariants},
		{"never ran, nil", quick, false, context.Background(), func(*task) error { return nil }, WrongOutcome},
		{"ran, ErrClosed", quick, true, context.Background(), func(*task) error { return executor.ErrClosed }, WrongOutcome},
		{"never ran, ErrClosed", quick, false, context.Background(), func(*task) error { return executor.ErrClosed }, numInvariants},
		{"never ran, ErrBusy", quick, false, context.Background(), func(*task) error { return &backpressure.BusyError{} }, numInvariants},
		{"never ran, ended ctx", quick, false, canceled, func(*task) error { return context.Canceled }, numInvariants},
		{"never ran, ctx error of a live ctx", quick, false, context.Background(), func(*task) error { return context.Canceled }, WrongOutcome},
		{"failed, own error", failing, true, context.Background(), func(t *task) error { return t.result }, numInvariants},
		{"failed, another task's error", failing, true, context.Background(), func(t *task) error { return &taskError{t: &task{}} }, WrongOutcome},
		{"panicked, own value", panicky, true, context.Background(), func(t *task) error { return &executor.PanicError{Value: panicValue{t}} }, numInvariants},
		{"panicked, nil", panicky, true, context.Background(), func(*task) error { return nil }, WrongOutcome},
		{"delay rejection, plausible age", quick, false, context.Background(), func(*task) error {
			return &backpressure.BusyError{Scope: backpressure.ScopeDelay, Wait: time.Nanosecond}
		}, numInvariants},
		{"delay rejection, head older than the executor", quick, false, context.Background(), func(*task) error {
			return &backpressure.BusyError{Scope: backpressure.ScopeDelay, Wait: time.Hour}
		}, FalseDelay},
		{"unexpected error", quick, false, context.Background(), func(*task) error { return errors.New("boom") }, WrongOutcome},
		{"exited, ErrGoexit", goexit, true, context.Background(), func(*task) error { return executor.ErrGoexit }, numInvariants},
		{"exited, nil", goexit, true, context.Background(), func(*task) error { return nil }, WrongOutcome},
		{"ran, ErrGoexit", quick, true, context.Background(), func(*task) error { return executor.ErrGoexit }, WrongOutcome},
		{"never ran, ErrGoexit", goexit, false, context.Background(), func(*task) error { return executor.ErrGoexit }, WrongOutcome},
		{"never ran, ErrDeadlock, not nested", quick, false, context.Background(), func(*task) error { return executor.ErrDeadlock }, WrongOutcome},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &harness{}
			tk := &task{g: &generation{born: time.Now()}, p: &producer{}, do: tt.do, ctx: tt.ctx}
			if tt.do == failing {
				tk.result = &taskError{t: tk}
			}
			if tt.ran {
				tk.state.Store(started | finished)
				switch tt.do {
				case goexit:
					tk.state.Or(goexited)
				case panicky:
					tk.state.Or(panicked) // as run sets it, just before the panic
				}
			}
			h.settle(tk, tt.result(tk), 0, false)
			for i := range numInvariants {
				want := int64(0)
				if i == tt.want {
					want = 1
				}
				if got := h.v.n[i].Load(); got != want {
					t.Errorf("%s: got %d; want %d (%s)", i, got, want, strings.Join(h.v.details, "; "))
				}
			}
		})
	}
}

// TestRanAfterCancel: a fn that starts after its submitter was told it
// never ran is caught, as is a second start.
func TestRanAfterCancel(t *testing.T) {
	h := &harness{workers: 1}
	tk := &task{g: &generation{occ: make(occupancy, 1)}, p: &producer{}, keys: []int{0}, ctx: context.Background()}
	h.settle(tk, executor.ErrClosed, 0, false)
	if err := h.run(context.Background(), tk); err != nil {
		t.Fatalf("run: %v", err)
	}
	if got := h.v.n[RanAfterCancel].Load(); got != 1 {
		t.Errorf("ran after cancel: got %d; want 1", got)
	}
	h.run(context.Background(), tk)
	if got := h.v.n[RanTwice].Load(); got != 1 {
		t.Errorf("run twice: got %d; want 1", got)
	}
}

// wantViolations fails t unless h counted exactly want of inv and nothing else.
func wantViolations(t *testing.T, h *harness, inv Invariant, want int64) {
	t.Helper()
	for i := range numInvariants {
		w := int64(0)
		if i == inv {
			w = want
		}
		if got := h.v.n[i].Load(); got != w {
			t.Errorf("%s: got %d; want %d (%s)", i, got, w, strings.Join(h.v.details, "; "))
		}
	}
}

// TestGone: a call that never returned is right only for a fn that ended
// through Goexit.
func TestGone(t *testing.T) {
	h := &harness{}
	g := &generation{}
	exited := &task{g: g, p: &producer{}, do: goexit}
	exited.state.Store(started | finished | goexited)
	h.gone(exited)
	wantViolations(t, h, numInvariants, 0)
	returned := &task{g: g, p: &producer{}}
	returned.state.Store(started | finished)
	h.gone(returned)
	wantViolations(t, h, WrongOutcome, 1)
	if h.callersGone.Load() != 1 {
		t.Errorf("callers gone: got %d; want 1", h.callersGone.Load())
	}
}

// TestMayExit: a blocking call may lose its goroutine if fn, or a chain of
// nested calls that can run inline on it, calls Goexit; a nested Submit
// runs on a worker and stops the chain.
func TestMayExit(t *testing.T) {
	for _, tt := range []struct {
		name string
		t    *task
		want bool
	}{
		{"quick", &task{}, false},
		{"goexit", &task{do: goexit}, true},
		{"nested Do that exits", &task{inner: &task{kind: opDo, do: goexit}}, true},
		{"nested Submit that exits", &task{inner: &task{kind: opSubmit, do: goexit}}, false},
		{"nested Do, then Submit that exits", &task{inner: &task{kind: opDo, inner: &task{kind: opSubmit, do: goexit}}}, false},
		{"nested Submit, then Do that exits", &task{inner: &task{kind: opSubmit, inner: &task{kind: opDo, do: goexit}}}, false},
	} {
		if got := tt.t.mayExit(); got != tt.want {
			t.Errorf("%s: mayExit = %v; want %v", tt.name, got, tt.want)
		}
	}
}

// TestHandle feeds the error handler, and checkGo, failures that disagree
// with what the Go tasks did.
func TestHandle(t *testing.T) {
	newGen := func() (*harness, *generation) {
		g := &generation{notRun: map[int]int{}}
		return &harness{}, g
	}
	goTask := func(g *generation, key int, do behaviour, st uint32) *task {
		tk := &task{g: g, p: &producer{}, kind: opGo, keys: []int{key}, do: do, ctx: context.Background()}
		if do == failing {
			tk.result = &taskError{t: tk}
		}
		tk.state.Store(st)
		g.goTasks = append(g.goTasks, tk)
		return tk
	}
	ran := uint32(started | finished)
	tests := []struct {
		name string
		run  func(h *harness, g *generation)
		want int64 // HandlerMiss violations
	}{
		{"failed, handed once", func(h *harness, g *generation) {
			tk := goTask(g, 1, failing, ran)
			h.handle(g, 1, tk.result)
		}, 0},
		{"failed, handed twice", func(h *harness, g *generation) {
			tk := goTask(g, 1, failing, ran)
			h.handle(g, 1, tk.result)
			h.handle(g, 1, tk.result)
		}, 2}, // when handed again, and by checkGo
		{"failed, never handed", func(h *harness, g *generation) { goTask(g, 1, failing, ran) }, 1},
		{"failed, handed with another key", func(h *harness, g *generation) {
			tk := goTask(g, 1, failing, ran)
			h.handle(g, 2, tk.result)
		}, 1},
		{"failed, key not an int", func(h *harness, g *generation) {
			tk := goTask(g, 1, failing, ran)
			h.handle(g, "1", tk.result)
		}, 2}, // the odd key, and the task never handed
		{"returned nil, handed", func(h *harness, g *generation) {
			tk := goTask(g, 1, quick, ran)
			h.handle(g, 1, &taskError{t: tk})
		}, 2}, // handed what fn did not return, and handed when nothing failed
		{"panicked, handed its panic", func(h *harness, g *generation) {
			tk := goTask(g, 1, panicky, ran|panicked)
			h.handle(g, 1, &executor.PanicError{Value: panicValue{tk}})
		}, 0},
		{"exited, handed ErrGoexit", func(h *harness, g *generation) {
			tk := goTask(g, 1, goexit, ran|goexited)
			g.goexitOn.Store(1, tk)
			h.handle(g, 1, executor.ErrGoexit)
		}, 0},
		{"ErrGoexit, no task exited", func(h *harness, g *generation) { h.handle(g, 1, executor.ErrGoexit) }, 1},
		{"exited, never handed", func(h *harness, g *generation) {
			tk := goTask(g, 1, goexit, ran|goexited)
			g.goexitOn.Store(1, tk)
		}, 2}, // the task, and the Goexit left unclaimed
		{"never ran, handed its ctx error", func(h *harness, g *generation) {
			goTask(g, 1, quick, 0)
			h.handle(g, 1, context.Canceled)
		}, 0},
		{"never ran, not handed", func(h *harness, g *generation) { goTask(g, 1, quick, 0) }, 1},
		{"never ran, handed for another key", func(h *harness, g *generation) {
			goTask(g, 1, quick, 0)
			h.handle(g, 2, context.Canceled)
		}, 2},
		{"never ran, ErrClosed from a Close that gave up", func(h *harness, g *generation) {
			goTask(g, 1, quick, 0)
			g.gaveUp = true
			h.handle(g, 1, executor.ErrClosed)
		}, 0},
		{"never ran, ErrClosed from a Close that drained", func(h *harness, g *generation) {
			goTask(g, 1, quick, 0)
			h.handle(g, 1, executor.ErrClosed)
		}, 1},
		{"unexpected error", func(h *harness, g *generation) { h.handle(g, 1, errors.New("boom")) }, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, g := newGen()
			tt.run(h, g)
			h.checkGo(g)
			wantViolations(t, h, HandlerMiss, tt.want)
		})
	}
}

// TestCheckObserver: observer counts that disagree with Stats, or with
// what the fns did, are counted; a panicking event still counts.
func TestCheckObserver(t *testing.T) {
	h := &harness{}
	g := &generation{}
	g.obs.h = h
	g.obs.events.Store(obsPanicEvery - 1)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the observer's event number obsPanicEvery did not panic")
			}
		}()
		g.obs.TaskAccepted()
	}()
	g.obs.TaskStarted(0)
	g.obs.TaskFinished(0, executor.Failed)
	g.runs.Store(1)
	g.failedRuns.Store(1)
	h.checkObserver(g, executor.Stats{Submitted: 1, Completed: 1})
	wantViolations(t, h, numInvariants, 0)
	if h.obsPanics.Load() != 1 {
		t.Errorf("observer panics: got %d; want 1", h.obsPanics.Load())
	}
	h.checkObserver(g, executor.Stats{Submitted: 2, Completed: 1, Canceled: 1})
	wantViolations(t, h, Counters, 2)
}

// TestCheckGaveUp: after a Close that gave up, a task whose call has not
// returned, an accepted task whose Done is open and a Go task the error
// handler has not heard of are each counted; a task that ended, one that
// started, and a Go task the handler heard of are not.
func TestCheckGaveUp(t *testing.T) {
	e, err := executor.New[int]()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	p := &producer{}
	h := &harness{prods: []*producer{p}, giveUpWatch: 10 * time.Millisecond}
	p.h = h
	g := &generation{e: e, notRun: map[int]int{}, closedAt: time.Now()}
	newTask := func(kind op, key int) *task {
		return &task{id: h.nextID.Add(1), g: g, p: p, op: kind.String(), kind: kind, keys: []int{key}}
	}
	calling := newTask(opDo, 1) // its call never returns
	h.track(calling)
	open := newTask(opSubmit, 2) // accepted, its Task never ends
	release := make(chan struct{})
	defer close(release)
	tk, err := e.Submit(context.Background(), 2, func(context.Context) error { <-release; return nil })
	if err != nil {
		t.Fatal(err)
	}
	open.tk.Store(tk)
	h.track(open)
	ended := newTask(opSubmit, 3) // accepted, ended
	tk3, err := e.Submit(context.Background(), 3, func(context.Context) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := tk3.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	ended.tk.Store(tk3)
	h.track(ended)
	running := newTask(opDo, 4) // its fn runs
	running.state.Store(started)
	h.track(running)
	for _, k := range []int{5, 5, 6} { // key 5: one heard of, one not; key 6: heard of
		g.goTasks = append(g.goTasks, newTask(opGo, k))
	}
	g.notRun[5], g.notRun[6] = 1, 1
	// open is still running, so not queued: Stats.Queued is 0.
	h.checkGaveUp(g)
	h.watchGaveUp(g)
	wantViolations(t, h, GiveUpLeft, 3)
	for _, want := range []string{"its call has not returned", "its Task's Done not closed", "key 5: 2 Go tasks never started"} {
		if !strings.Contains(strings.Join(h.v.details, "; "), want) {
			t.Errorf("violations %q: none says %q", h.v.details, want)
		}
	}
}
