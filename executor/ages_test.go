package executor_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

// slowCounter is an Observer that counts TaskSlow calls (SlowObserver).
type slowCounter struct {
	countingObserver
	slow atomic.Int64
	age  atomic.Int64
}

func (o *slowCounter) TaskSlow(age time.Duration) { o.slow.Add(1); o.age.Store(int64(age)) }

// TestKeyAges: on virtual time, HotKeys and OldestKeys report how long a
// key's hold has lasted and how long its oldest queued task has waited.
func TestKeyAges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, err := executor.New[string](executor.WithSlowTaskWarning(time.Hour), executor.WithLogger(zap.NewNop()))
		if err != nil {
			t.Fatal(err)
		}
		bg := context.Background()
		stuck := make(chan struct{})
		if err := e.Go(bg, "stuck", func(context.Context) error { <-stuck; return nil }); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		for range 2 {
			e.Go(bg, "stuck", nop)
		}
		time.Sleep(5 * time.Second)
		young := make(chan struct{})
		e.Go(bg, "young", func(context.Context) error { <-young; return nil })
		time.Sleep(time.Second)
		synctest.Wait()

		hot := e.HotKeys(1)
		if len(hot) != 1 || hot[0].Key != "stuck" || hot[0].Pending != 3 ||
			hot[0].Held != 6*time.Second || hot[0].OldestWait != 6*time.Second {
			t.Errorf("HotKeys(1): got %+v; want stuck, 3 pending, held 6s, oldest waiting 6s", hot)
		}
		old := e.OldestKeys(10)
		if len(old) != 2 || old[0].Key != "stuck" || old[1].Key != "young" ||
			old[1].Held != time.Second || old[1].OldestWait != 0 {
			t.Errorf("OldestKeys(10): got %+v; want stuck (6s), then young (held 1s, nothing queued)", old)
		}
		if a := e.Ages(); a != (executor.Ages{OldestHeld: 6 * time.Second, OldestWait: 6 * time.Second}) {
			t.Errorf("Ages: got %+v; want the oldest hold and wait 6s, no hold past the 1h threshold", a)
		}
		close(stuck)
		close(young)
		synctest.Wait()
		if got := e.OldestKeys(10); len(got) != 0 {
			t.Errorf("OldestKeys once idle: got %+v; want none", got)
		}
		if err := e.Close(bg); err != nil {
			t.Fatal(err)
		}
	})
}

// TestAgesOffByDefault: without an Observer, a queue-age policy or
// WithSlowTaskWarning nothing reads a clock: no ages, no OldestKeys.
func TestAgesOffByDefault(t *testing.T) {
	e := newExec[string](t)
	g, _ := block(t, e, "a")
	e.Go(context.Background(), "a", nop)
	if hot := e.HotKeys(1); len(hot) != 1 || hot[0].Held != 0 || hot[0].OldestWait != 0 {
		t.Errorf("HotKeys without ages: got %+v; want Held and OldestWait 0", hot)
	}
	if old := e.OldestKeys(1); old != nil {
		t.Errorf("OldestKeys without ages: got %+v; want nil", old)
	}
	g.open()
}

// TestSlowTaskWarning: a hold longer than d is reported once (log at warn
// level with key and age, Stats.Slow, SlowObserver), and each slow task
// of a key once; a task under d is never reported.
func TestSlowTaskWarning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zapcore.WarnLevel)
		obs := &slowCounter{}
		e, err := executor.New[string](executor.WithSlowTaskWarning(time.Second),
			executor.WithLogger(zap.New(core)), executor.WithObserver(obs))
		if err != nil {
			t.Fatal(err)
		}
		bg := context.Background()
		release := make(chan struct{})
		slowFn := func(context.Context) error { <-release; return nil }
		e.Go(bg, "k", slowFn)
		e.Go(bg, "k", slowFn)
		e.Go(bg, "fast", func(context.Context) error { time.Sleep(500 * time.Millisecond); return nil })
		time.Sleep(10 * time.Second) // far past d: still one report for the first task
		synctest.Wait()
		if n := logs.FilterMessage("task running long").Len(); n != 1 {
			t.Fatalf("reports after 10s of one stuck task: got %d; want 1", n)
		}
		entry := logs.FilterMessage("task running long").All()[0]
		if f := entry.ContextMap(); f["key"] != "k" || f["age"].(time.Duration) < time.Second ||
			f["age"].(time.Duration) > 1250*time.Millisecond {
			t.Errorf("report fields: got %v; want key k and an age between 1s and 1.25s", f)
		}
		release <- struct{}{} // the first ends; the second now holds k
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if s := e.Stats(); s.Slow != 2 || obs.slow.Load() != 2 {
			t.Errorf("Stats.Slow %d, TaskSlow calls %d; want 2 and 2 (each slow task once)", s.Slow, obs.slow.Load())
		}
		close(release)
		if err := e.Close(bg); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSlowInlineDo: a Do that runs on its caller's goroutine (its key was
// idle and a slot free) is timed like a task on a worker: a hold longer than
// d is reported once, under its key, and the next task on the key is timed
// afresh.
func TestSlowInlineDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zapcore.WarnLevel)
		e, err := executor.New[string](executor.WithSlowTaskWarning(time.Second), executor.WithLogger(zap.New(core)))
		if err != nil {
			t.Fatal(err)
		}
		bg := context.Background()
		release := make(chan struct{})
		done := make(chan error, 1)
		go func() { done <- e.Do(bg, "k", func(context.Context) error { <-release; return nil }) }()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := logs.FilterMessage("task running long").Len(); n != 1 {
			t.Fatalf("reports after 10s of one stuck inline Do: got %d; want 1", n)
		}
		if f := logs.FilterMessage("task running long").All()[0].ContextMap(); f["key"] != "k" {
			t.Errorf("report fields: got %v; want key k", f)
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatalf("Do: %v", err)
		}
		if err := e.Do(bg, "k", func(context.Context) error { time.Sleep(500 * time.Millisecond); return nil }); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if s := e.Stats(); s.Slow != 1 {
			t.Errorf("Stats.Slow: got %d; want 1 (a fast Do after the slow one is not reported)", s.Slow)
		}
		if err := e.Close(bg); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRetryAfterLowerBound: while a key's only task runs and none has
// finished, a rejection's RetryAfter is that task's age so far (a lower
// bound), not the microseconds since the queue formed; without ages there
// is no estimate (0).
func TestRetryAfterLowerBound(t *testing.T) {
	for _, ages := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			opts := []executor.Option{executor.WithMaxQueuePerKey(2), executor.WithLogger(zap.NewNop())}
			if ages {
				opts = append(opts, executor.WithSlowTaskWarning(time.Hour))
			}
			e, err := executor.New[string](opts...)
			if err != nil {
				t.Fatal(err)
			}
			bg := context.Background()
			release := make(chan struct{})
			e.Go(bg, "k", func(context.Context) error { <-release; return nil })
			synctest.Wait()
			time.Sleep(3 * time.Second)
			e.Go(bg, "k", nop)
			err = e.Do(bg, "k", nop)
			var be *backpressure.BusyError
			if !errors.As(err, &be) {
				t.Fatalf("Do at the cap: got %v; want a BusyError", err)
			}
			want := time.Duration(0)
			if ages {
				want = 3 * time.Second
			}
			if got := be.RetryAfter(); got != want {
				t.Errorf("ages %v: RetryAfter: got %v; want %v", ages, got, want)
			}
			close(release)
			if err := e.Close(bg); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestAgesSlowHolds: Ages counts the holds older than the slow-task
// threshold now, and forgets a hold once it ends.
func TestAgesSlowHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, err := executor.New[string](executor.WithSlowTaskWarning(2*time.Second), executor.WithLogger(zap.NewNop()))
		if err != nil {
			t.Fatal(err)
		}
		bg := context.Background()
		release := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{}), "c": make(chan struct{})}
		for _, k := range []string{"a", "b"} {
			ch := release[k]
			e.Go(bg, k, func(context.Context) error { <-ch; return nil })
		}
		time.Sleep(2 * time.Second)
		ch := release["c"]
		e.Go(bg, "c", func(context.Context) error { <-ch; return nil })
		time.Sleep(time.Second)
		synctest.Wait()
		if a := e.Ages(); a.SlowHolds != 2 || a.OldestHeld != 3*time.Second || a.OldestWait != 0 {
			t.Errorf("Ages: got %+v; want 2 slow holds, the oldest 3s, nothing queued", a)
		}
		close(release["a"])
		synctest.Wait()
		if a := e.Ages(); a.SlowHolds != 1 {
			t.Errorf("Ages after a slow hold ended: got %+v; want 1 slow hold", a)
		}
		close(release["b"])
		close(release["c"])
		if err := e.Close(bg); err != nil {
			t.Fatal(err)
		}
	})
}
