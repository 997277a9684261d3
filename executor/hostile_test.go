package executor_test

// Hostile callers: keys that cannot be hashed or never equal themselves, fns
// that call runtime.Goexit, Observers, Policies and loggers that panic, tasks
// that ignore their ctx at Close. None may wedge a key, a slot or Close, and
// nothing may fail silently (contract items 12 and 15-18).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

// attempt runs f on a goroutine of its own and returns its error, or the
// value it panicked with; it fails the test if f does not return within
// patience, so a wedged executor fails instead of hanging.
func attempt(t *testing.T, what string, f func() error) (panicked any, err error) {
	t.Helper()
	type result struct {
		err error
		p   any
	}
	ch := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			if v := recover(); v != nil {
				r.p = v
			}
			ch <- r
		}()
		r.err = f()
	}()
	select {
	case r := <-ch:
		return r.p, r.err
	case <-time.After(patience):
		t.Fatalf("%s: still blocked after %v", what, patience)
		return nil, nil
	}
}

// closeWithin closes e with a deadline and fails the test if Close errs.
func closeWithin[K comparable](t *testing.T, e *executor.Executor[K]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if p, err := attempt(t, "Close", func() error { return e.Close(ctx) }); err != nil || p != nil {
		t.Fatalf("Close: got %v (panic %v); want nil", err, p)
	}
}

// keyMethods calls every method that takes a key with key, each returning
// the error it gave its caller.
func keyMethods[K comparable](e *executor.Executor[K], good, key K) map[string]func() error {
	bg := context.Background()
	return map[string]func() error{
		"Do":       func() error { return e.Do(bg, key, nop) },
		"DoShared": func() error { return e.DoShared(bg, key, nop) },
		"Submit": func() error {
			_, err := e.Submit(bg, key, nop)
			return err
		},
		"Go": func() error { return e.Go(bg, key, nop) },
		"Call": func() error {
			_, err := executor.Call(bg, e, key, func(context.Context) (int, error) { return 1, nil })
			return err
		},
		"DoMany":      func() error { return e.DoMany(bg, []K{good, key}, nop) },
		"DoManyAlone": func() error { return e.DoMany(bg, []K{key}, nop) },
	}
}

// TestInvalidKeyUnhashable: an interface key whose dynamic type cannot be
// hashed is refused with ErrInvalidKey by every method that takes a key;
// nothing panics, nothing is counted or left held, and the executor goes on.
func TestInvalidKeyUnhashable(t *testing.T) {
	type holder struct {
		S []int
	}
	type outer struct {
		N int
		V any
	}
	bad := []struct {
		name string
		key  any
		typ  string
	}{
		{"slice", []int{1}, "[]int"},
		{"map", map[string]int{"a": 1}, "map[string]int"},
		{"func", func() {}, "func()"},
		{"struct with slice", holder{S: []int{1}}, "holder"},
		{"struct holding an interface holding a slice", outer{V: []int{1}}, "outer"},
		{"array of interfaces", [2]any{1, []byte("x")}, "[2]interface {}"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			e, err := executor.New[any](executor.WithWorkers(1), executor.WithMaxQueuePerKey(4))
			if err != nil {
				t.Fatal(err)
			}
			for name, f := range keyMethods[any](e, "good", tc.key) {
				p, err := attempt(t, name, f)
				if p != nil {
					t.Fatalf("%s(%T): panicked with %v; want an error", name, tc.key, p)
				}
				if !errors.Is(err, executor.ErrInvalidKey) {
					t.Fatalf("%s(%T): got %v; want ErrInvalidKey", name, tc.key, err)
				}
				if !strings.Contains(err.Error(), tc.typ) {
					t.Errorf("%s(%T): error %q does not name the key's type %q", name, tc.key, err, tc.typ)
				}
			}
			if s := e.Stats(); s != (executor.Stats{}) {
				t.Errorf("Stats after refusals: got %+v; want all zero", s)
			}
			if p, err := attempt(t, "Do on a good key", func() error { return e.Do(context.Background(), "good", nop) }); err != nil || p != nil {
				t.Errorf("Do on a good key afterwards: got %v (panic %v); want nil", err, p)
			}
			closeWithin(t, e)
		})
	}
}

// TestInvalidKeyNaN: keys that are not equal to themselves can never be
// serialised; they are refused, whatever holds the NaN.
func TestInvalidKeyNaN(t *testing.T) {
	type point struct{ X, Y float64 }
	check := func(t *testing.T, name string, methods map[string]func() error, typ string) {
		t.Helper()
		for m, f := range methods {
			p, err := attempt(t, m, f)
			if p != nil || !errors.Is(err, executor.ErrInvalidKey) {
				t.Errorf("%s %s: got %v (panic %v); want ErrInvalidKey", name, m, err, p)
				continue
			}
			if !strings.Contains(err.Error(), typ) {
				t.Errorf("%s %s: error %q does not name the type %q", name, m, err, typ)
			}
		}
	}
	t.Run("float64", func(t *testing.T) {
		e := newExec[float64](t)
		check(t, "NaN", keyMethods(e, 1, math.NaN()), "float64")
		if err := e.Do(context.Background(), math.Inf(1), nop); err != nil {
			t.Errorf("Do(+Inf): got %v; want nil (Inf equals itself)", err)
		}
		if s := e.Stats(); s.Submitted != 1 {
			t.Errorf("Stats.Submitted: got %d; want 1 (refused keys count nowhere)", s.Submitted)
		}
	})
	t.Run("struct", func(t *testing.T) {
		e := newExec[point](t)
		check(t, "point{NaN}", keyMethods(e, point{}, point{X: math.NaN()}), "point")
	})
	t.Run("array", func(t *testing.T) {
		e := newExec[[2]float32](t)
		check(t, "[2]float32{NaN}", keyMethods(e, [2]float32{}, [2]float32{0, float32(math.NaN())}), "[2]float32")
	})
	t.Run("complex", func(t *testing.T) {
		e := newExec[complex128](t)
		check(t, "complex(NaN)", keyMethods(e, 0, complex(math.NaN(), 0)), "complex128")
	})
	t.Run("interface", func(t *testing.T) {
		e := newExec[any](t)
		check(t, "any(NaN)", keyMethods[any](e, "good", math.NaN()), "float64")
		check(t, "any(point{NaN})", keyMethods[any](e, "good", point{Y: math.NaN()}), "point")
	})
	t.Run("concurrent", func(t *testing.T) {
		// Before the check, 200 concurrent Dos on NaN all ran at once.
		e := newExec[float64](t)
		var running, overlaps, ran atomic.Int64
		var wg sync.WaitGroup
		for range 200 {
			wg.Go(func() {
				e.Do(context.Background(), math.NaN(), func(context.Context) error {
					ran.Add(1)
					if running.Add(1) > 1 {
						overlaps.Add(1)
					}
					time.Sleep(time.Millisecond)
					running.Add(-1)
					return nil
				})
			})
		}
		waitAll(t, &wg)
		if ran.Load() != 0 || overlaps.Load() != 0 {
			t.Errorf("200 NaN Dos: %d ran, %d overlapped; want none run", ran.Load(), overlaps.Load())
		}
	})
}

// TestValidKeysStillWork: keys of kinds the check looks at, but valid,
// are served as usual (pointers, channels, interfaces holding comparable
// values, -0 and +0 as one key).
func TestValidKeysStillWork(t *testing.T) {
	e := newExec[any](t)
	ch := make(chan int)
	x := 1
	for _, k := range []any{1, "s", 1.5, &x, ch, struct{ A, B int }{1, 2}, [2]any{1, "a"}, nil} {
		if err := e.Do(context.Background(), k, nop); err != nil {
			t.Errorf("Do(%#v): got %v; want nil", k, err)
		}
	}
	f := newExec[float64](t)
	var occ occupancy
	var wg sync.WaitGroup
	for i := range 50 {
		k := 0.0
		if i%2 == 1 {
			k = math.Copysign(0, -1) // -0 == +0: the same key
		}
		wg.Go(func() {
			f.Do(context.Background(), k, func(context.Context) error {
				occ.enter(false)
				time.Sleep(100 * time.Microsecond)
				occ.exit(false)
				return nil
			})
		})
	}
	waitAll(t, &wg)
	if n := occ.overlaps(); n != 0 {
		t.Errorf("+0 and -0 overlapped %d times; want 0 (they are one key)", n)
	}
}

// TestGoexit: a fn that calls runtime.Goexit (as t.FailNow does) ends its
// task with ErrGoexit; its key's next task runs, the slot is given back and
// Stats add up, whichever goroutine ran it.
func TestGoexit(t *testing.T) {
	bg := context.Background()
	exit := func(context.Context) error { runtime.Goexit(); return nil }
	t.Run("Submit", func(t *testing.T) {
		e, _ := executor.New[string](executor.WithWorkers(1))
		task, err := e.Submit(bg, "a", exit)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := attempt(t, "Wait", func() error { return task.Wait(bg) }); !errors.Is(err, executor.ErrGoexit) {
			t.Errorf("Wait: got %v; want ErrGoexit", err)
		}
		for _, k := range []string{"a", "b"} {
			if _, err := attempt(t, "Do "+k, func() error { return e.Do(bg, k, nop) }); err != nil {
				t.Errorf("Do(%s) after the Goexit: got %v; want nil", k, err)
			}
		}
		waitIdle(t, e)
		closeWithin(t, e)
	})
	t.Run("inline Do", func(t *testing.T) {
		e, _ := executor.New[string](executor.WithWorkers(1))
		// The key is idle: fn runs on the calling goroutine.
		if !exits(t, "the Goexit caller's goroutine", func() { e.Do(bg, "a", exit) }) {
			t.Errorf("Do returned to a caller whose fn called Goexit; want its goroutine to exit")
		}
		doEach(t, e, "a", "b")
		if s := waitIdle(t, e); s.Completed != 3 {
			t.Errorf("Stats.Completed: got %d; want 3 (the Goexit task counts as completed)", s.Completed)
		}
		closeWithin(t, e)
	})
	t.Run("queued Do", func(t *testing.T) {
		e, _ := executor.New[string](executor.WithWorkers(1))
		g, _ := block(t, e, "a")
		done := make(chan error, 1)
		go func() { done <- e.Do(bg, "a", exit) }()
		eventually(t, "the Do to queue", func() bool { return e.Stats().Queued == 1 })
		g.open()
		if err := recv(t, "Do", done); !errors.Is(err, executor.ErrGoexit) {
			t.Errorf("Do whose fn ran on a worker and called Goexit: got %v; want ErrGoexit", err)
		}
		waitIdle(t, e)
		closeWithin(t, e)
	})
	t.Run("middle of a batch", func(t *testing.T) {
		for _, workers := range []int{1, 3} {
			e, _ := executor.New[string](executor.WithWorkers(workers), executor.WithThroughput(4))
			g, _ := block(t, e, "a")
			var order []int
			var mu sync.Mutex
			var tasks []*executor.Task
			for i := range 12 {
				fn := func(context.Context) error {
					mu.Lock()
					order = append(order, i)
					mu.Unlock()
					if i%5 == 2 {
						runtime.Goexit()
					}
					return nil
				}
				task, err := e.Submit(bg, "a", fn)
				if err != nil {
					t.Fatal(err)
				}
				tasks = append(tasks, task)
			}
			g.open()
			for i, task := range tasks {
				_, err := attempt(t, "Wait", func() error { return task.Wait(bg) })
				if want := i%5 == 2; want != errors.Is(err, executor.ErrGoexit) || (!want && err != nil) {
					t.Errorf("workers=%d task %d: got %v; want ErrGoexit only for tasks 2 and 7", workers, i, err)
				}
			}
			if fmt.Sprint(order) != fmt.Sprint([]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}) {
				t.Errorf("workers=%d order: got %v; want FIFO", workers, order)
			}
			waitIdle(t, e)
			closeWithin(t, e)
		}
	})
	t.Run("DoShared and DoMany", func(t *testing.T) {
		e, _ := executor.New[string](executor.WithWorkers(1))
		g, _ := block(t, e, "a")
		errs := make(chan error, 2)
		go func() { errs <- e.DoShared(bg, "a", exit) }()
		go func() { errs <- e.DoMany(bg, []string{"a", "b"}, exit) }()
		eventually(t, "both to queue", func() bool { return e.Stats().Queued == 2 })
		g.open()
		for range 2 {
			if err := recv(t, "a call", errs); !errors.Is(err, executor.ErrGoexit) {
				t.Errorf("got %v; want ErrGoexit", err)
			}
		}
		for _, k := range []string{"a", "b"} {
			if _, err := attempt(t, "Do "+k, func() error { return e.Do(bg, k, nop) }); err != nil {
				t.Errorf("Do(%s): got %v; want nil", k, err)
			}
		}
		waitIdle(t, e)
		closeWithin(t, e)
	})
	t.Run("nested inline", func(t *testing.T) {
		// The inner fn runs inline on the outer task's goroutine: the Goexit
		// unwinds both, and both keys go on.
		e, _ := executor.New[string](executor.WithWorkers(1))
		task, err := e.Submit(bg, "outer", func(ctx context.Context) error {
			return e.Do(ctx, "inner", exit)
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := attempt(t, "Wait", func() error { return task.Wait(bg) }); !errors.Is(err, executor.ErrGoexit) {
			t.Errorf("outer task: got %v; want ErrGoexit", err)
		}
		for _, k := range []string{"outer", "inner"} {
			if _, err := attempt(t, "Do "+k, func() error { return e.Do(bg, k, nop) }); err != nil {
				t.Errorf("Do(%s): got %v; want nil", k, err)
			}
		}
		waitIdle(t, e)
		closeWithin(t, e)
	})
	t.Run("Go reports to the error handler", func(t *testing.T) {
		got := make(chan error, 1)
		e, _ := executor.New[string](executor.WithErrorHandler(func(key any, err error) {
			if key == "a" {
				got <- err
			}
		}))
		if err := e.Go(bg, "a", exit); err != nil {
			t.Fatal(err)
		}
		if err := recv(t, "the error handler", got); !errors.Is(err, executor.ErrGoexit) {
			t.Errorf("error handler: got %v; want ErrGoexit", err)
		}
		waitIdle(t, e)
		closeWithin(t, e)
	})
}

// panickyObserver panics in the events named in boom.
type panickyObserver struct {
	boom  map[string]bool
	calls atomic.Int64
}

func (o *panickyObserver) hit(ev string) {
	o.calls.Add(1)
	if o.boom[ev] {
		panic("observer " + ev)
	}
}
func (o *panickyObserver) TaskAccepted()                                { o.hit("accepted") }
func (o *panickyObserver) TaskRejected(executor.Reason)                 { o.hit("rejected") }
func (o *panickyObserver) TaskStarted(time.Duration)                    { o.hit("started") }
func (o *panickyObserver) TaskFinished(time.Duration, executor.Outcome) { o.hit("finished") }
func (o *panickyObserver) TaskCanceled()                                { o.hit("canceled") }

// TestObserverPanics: an Observer that panics in any event never reaches the
// caller, never leaves a key, a slot or Close stuck, and is logged.
func TestObserverPanics(t *testing.T) {
	bg := context.Background()
	for _, ev := range []string{"accepted", "rejected", "started", "finished", "canceled"} {
		t.Run(ev, func(t *testing.T) {
			core, logs := observer.New(zapcore.ErrorLevel)
			obs := &panickyObserver{boom: map[string]bool{ev: true}}
			e, err := executor.New[string](executor.WithObserver(obs), executor.WithWorkers(1),
				executor.WithMaxQueuePerKey(2), executor.WithLogger(zap.New(core)))
			if err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if p, err := attempt(t, "Do", func() error { return e.Do(bg, "a", nop) }); err != nil || p != nil {
					t.Fatalf("Do %d: got %v (panic %v); want nil", i, err, p)
				}
				task, err := e.Submit(bg, "a", nop)
				if err != nil {
					t.Fatalf("Submit %d: %v", i, err)
				}
				if _, err := attempt(t, "Wait", func() error { return task.Wait(bg) }); err != nil {
					t.Fatalf("Wait %d: got %v; want nil", i, err)
				}
				if err := e.Go(bg, "a", nop); err != nil {
					t.Fatalf("Go %d: %v", i, err)
				}
			}
			// A rejection and a cancellation.
			g, _ := block(t, e, "a")
			ctx, cancel := context.WithCancel(bg)
			queued, err := e.Submit(ctx, "a", nop)
			if err != nil {
				t.Fatal(err)
			}
			if p, err := attempt(t, "Do at the cap", func() error { return e.Do(bg, "a", nop) }); !errors.Is(err, executor.ErrBusy) || p != nil {
				t.Errorf("Do at the cap: got %v (panic %v); want ErrBusy", err, p)
			}
			cancel()
			if _, err := attempt(t, "Wait canceled", func() error { return queued.Wait(bg) }); !errors.Is(err, context.Canceled) {
				t.Errorf("canceled task: got %v; want context.Canceled", err)
			}
			g.open()
			waitIdle(t, e)
			closeWithin(t, e)
			if logs.FilterMessageSnippet("observer panicked").Len() == 0 {
				t.Errorf("no error log for the Observer's panic in %s", ev)
			}
		})
	}
}

// panickyPolicy panics whenever it is asked.
type panickyPolicy struct{}

func (panickyPolicy) Decide(backpressure.Load) backpressure.Verdict { panic("policy boom") }

// TestPolicyPanics: a Policy that panics refuses that one submission with an
// error wrapping a *PanicError; nothing is held or accepted, and the
// refusal counts as Rejected. A per-key cap asks the policy about every
// submission; the global cap only past it.
func TestPolicyPanics(t *testing.T) {
	bg := context.Background()
	refused := func(t *testing.T, e *executor.Executor[string]) {
		t.Helper()
		before := e.Stats()
		methods := keyMethods(e, "b", "a")
		for name, f := range methods {
			p, err := attempt(t, name, f)
			var pe *executor.PanicError
			if p != nil || !errors.As(err, &pe) || pe.Value != "policy boom" {
				t.Errorf("%s with a panicking Policy: got %v (panic %v); want a *PanicError", name, err, p)
			}
		}
		after := e.Stats()
		if after.Submitted != before.Submitted || after.Rejected != before.Rejected+uint64(len(methods)) {
			t.Errorf("Stats: got %+v after %+v; want no submission and %d rejections more", after, before, len(methods))
		}
	}
	t.Run("per-key cap", func(t *testing.T) {
		e, err := executor.New[string](executor.WithPolicy(panickyPolicy{}), executor.WithMaxQueuePerKey(1), executor.WithLogger(zap.NewNop()))
		if err != nil {
			t.Fatal(err)
		}
		refused(t, e)
		waitIdle(t, e)
		closeWithin(t, e)
	})
	t.Run("global cap", func(t *testing.T) {
		e, err := executor.New[string](executor.WithPolicy(panickyPolicy{}), executor.WithMaxPending(1), executor.WithLogger(zap.NewNop()))
		if err != nil {
			t.Fatal(err)
		}
		g, _ := block(t, e, "x")
		refused(t, e)
		g.open()
		waitIdle(t, e)
		if _, err := attempt(t, "Do", func() error { return e.Do(bg, "a", nop) }); err != nil {
			t.Errorf("Do below the cap: got %v; want nil", err)
		}
		closeWithin(t, e)
	})
}

// panickyCore is a zap core whose Write panics.
type panickyCore struct{ zapcore.LevelEnabler }

func (c panickyCore) With([]zapcore.Field) zapcore.Core { return c }
func (c panickyCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(ent.Level) {
		return ce.AddCore(ent, c)
	}
	return ce
}
func (panickyCore) Write(zapcore.Entry, []zapcore.Field) error { panic("logger boom") }
func (panickyCore) Sync() error                                { return nil }

// TestLoggerPanics: a logger core that panics while the executor logs (a
// task's panic, a rejection, a cancellation) is contained.
func TestLoggerPanics(t *testing.T) {
	bg := context.Background()
	e, err := executor.New[string](executor.WithLogger(zap.New(panickyCore{zapcore.DebugLevel})),
		executor.WithWorkers(1), executor.WithMaxQueuePerKey(1))
	if err != nil {
		t.Fatal(err)
	}
	p, err := attempt(t, "Do", func() error { return e.Do(bg, "a", func(context.Context) error { panic("task boom") }) })
	var pe *executor.PanicError
	if p != nil || !errors.As(err, &pe) {
		t.Errorf("Do with a panicking fn and logger: got %v (panic %v); want the task's *PanicError", err, p)
	}
	task, _ := e.Submit(bg, "a", func(context.Context) error { panic("task boom") })
	if _, err := attempt(t, "Wait", func() error { return task.Wait(bg) }); !errors.As(err, &pe) {
		t.Errorf("Submit with a panicking fn and logger: got %v; want *PanicError", err)
	}
	g, _ := block(t, e, "a")
	if p, err := attempt(t, "Do at the cap", func() error { return e.Do(bg, "a", nop) }); !errors.Is(err, executor.ErrBusy) || p != nil {
		t.Errorf("Do at the cap: got %v (panic %v); want ErrBusy", err, p)
	}
	g.open()
	waitIdle(t, e)
	closeWithin(t, e)
}

// TestCloseKeepsDeadline: a task that ignores its ctx does not hold Close
// past its deadline; once it returns, a later Close returns nil and nothing
// is left (TestMain's goleak check covers the goroutines).
func TestCloseKeepsDeadline(t *testing.T) {
	e, err := executor.New[string](executor.WithWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	g := newGate()
	stuck, err := e.Submit(context.Background(), "stuck", func(context.Context) error {
		close(g.started)
		<-release // ignores its ctx
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	<-g.started
	queued, err := e.Submit(context.Background(), "stuck", nop)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = attempt(t, "Close with a deadline", func() error { return e.Close(ctx) })
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close: got %v; want DeadlineExceeded", err)
	}
	if took > 2*time.Second { // generous: the deadline is 200 ms
		t.Errorf("Close returned %v after it began; want promptly after its 200ms deadline", took)
	}
	if err := queued.Wait(context.Background()); !errors.Is(err, executor.ErrClosed) {
		t.Errorf("queued task: got %v; want ErrClosed", err)
	}
	select {
	case <-stuck.Done():
		t.Fatalf("the stuck task ended before it was released")
	default:
	}
	if err := e.Do(context.Background(), "other", nop); !errors.Is(err, executor.ErrClosed) {
		t.Errorf("Do after Close: got %v; want ErrClosed", err)
	}
	close(release)
	if _, err := attempt(t, "Wait stuck", func() error { return stuck.Wait(context.Background()) }); err != nil {
		t.Errorf("stuck task: got %v; want nil", err)
	}
	closeWithin(t, e)
	if s := e.Stats(); !balanced(s) || s.Completed != 1 || s.Canceled != 1 {
		t.Errorf("Stats: got %+v; want Completed 1, Canceled 1, balanced", s)
	}
}

// TestDefaultLoggerReportsPanics: with no WithLogger, a recovered panic and
// an unread failure are written to stderr at error level; nothing else is.
func TestDefaultLoggerReportsPanics(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = w
	e, err := executor.New[string](executor.WithMaxQueuePerKey(1))
	os.Stderr = saved
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	e.Do(bg, "panicky", func(context.Context) error { panic("boom") })
	e.Go(bg, "failing", func(context.Context) error { return errors.New("nobody reads this") })
	g, _ := block(t, e, "busy")
	e.Do(bg, "busy", nop) // rejected: logged only at info level
	g.open()
	waitIdle(t, e)
	closeWithin(t, e)
	w.Close()
	var out strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			break
		}
	}
	got := out.String()
	for _, want := range []string{"task panicked", "boom", "panicky", "nobody reads this", "failing"} {
		if !strings.Contains(got, want) {
			t.Errorf("stderr lacks %q; got:\n%s", want, got)
		}
	}
	if strings.Contains(got, "rejected") || strings.Contains(got, "executor started") {
		t.Errorf("stderr has more than errors; got:\n%s", got)
	}
	if n := strings.Count(got, "\n"); n != 2 {
		t.Errorf("stderr: got %d lines; want 2 (one panic, one unread failure):\n%s", n, got)
	}
}

// TestDoManyLinear: DoMany's admission is linear in its keys; 100,000 keys
// with duplicates take well under a second (0.3 s here; the bound is
// generous for a shared machine; the quadratic version took over 30 s).
// Under the race detector it takes 20,000 keys, which the quadratic
// version still could not admit in the bound.
func TestDoManyLinear(t *testing.T) {
	e := newExec[int](t)
	n := 100_000
	if raceEnabled {
		n = 20_000
	}
	keys := make([]int, 0, 2*n)
	for i := range n {
		keys = append(keys, i, i/2)
	}
	start := time.Now()
	var held int
	_, err := attempt(t, "DoMany", func() error {
		return e.DoMany(context.Background(), keys, func(context.Context) error {
			held = e.ActiveKeys()
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("DoMany of %d keys (%d distinct) took %v; want well under a second", 2*n, n, took)
	}
	if held != n {
		t.Errorf("keys held during fn: got %d; want %d (duplicates removed)", held, n)
	}
	waitIdle(t, e)
}

// TestDefaultLoggerSlowWarnings: with WithSlowTaskWarning and no
// WithLogger, the warnings the caller asked for reach stderr too.
func TestDefaultLoggerSlowWarnings(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = w
	e, err := executor.New[string](executor.WithSlowTaskWarning(10 * time.Millisecond))
	os.Stderr = saved
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	e.Go(context.Background(), "slow", func(context.Context) error { <-release; return nil })
	eventually(t, "the slow-task warning", func() bool { return e.Stats().Slow == 1 })
	close(release)
	closeWithin(t, e)
	w.Close()
	out, _ := io.ReadAll(r)
	if !strings.Contains(string(out), "task running long") || !strings.Contains(string(out), "slow") {
		t.Errorf("stderr: got %q; want the slow-task warning with its key", out)
	}
}
