package executor_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/alitto/pond/v2"
	"go.uber.org/zap"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

var errTask = errors.New("task failed")

func nop(context.Context) error { return nil }

// Bad input

func TestNewRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opt  executor.Option
	}{
		{"nil option", nil},
		{"WithWorkers(0)", executor.WithWorkers(0)},
		{"WithWorkers(-1)", executor.WithWorkers(-1)},
		{"WithMaxQueuePerKey(-1)", executor.WithMaxQueuePerKey(-1)},
		{"WithMaxPending(-1)", executor.WithMaxPending(-1)},
		{"WithThroughput(0)", executor.WithThroughput(0)},
		{"WithThroughput(-3)", executor.WithThroughput(-3)},
		{"WithStripes(0)", executor.WithStripes(0)},
		{"WithStripes(-1)", executor.WithStripes(-1)},
		{"WithLogger(nil)", executor.WithLogger(nil)},
		{"WithPool(nil)", executor.WithPool(nil)},
		{"WithPolicy(nil)", executor.WithPolicy(nil)},
		{"WithObserver(nil)", executor.WithObserver(nil)},
		{"WithErrorHandler(nil)", executor.WithErrorHandler(nil)},
		{"WithSlowTaskWarning(0)", executor.WithSlowTaskWarning(0)},
		{"WithSlowTaskWarning(-1s)", executor.WithSlowTaskWarning(-time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				e   *executor.Executor[string]
				err error
			)
			func() {
				defer func() {
					if v := recover(); v != nil {
						t.Fatalf("New(%s) panicked: %v; want an error", tt.name, v)
					}
				}()
				e, err = executor.New[string](executor.WithWorkers(2), tt.opt)
			}()
			if err == nil {
				t.Fatalf("New(%s): got nil error; want an error", tt.name)
			}
			if e != nil {
				t.Errorf("New(%s): got a non-nil executor with error %v; want nil", tt.name, err)
			}
			if name, _, _ := strings.Cut(tt.name, "("); tt.opt != nil && !strings.Contains(err.Error(), name) {
				t.Errorf("New(%s): got error %q; want it to name %s", tt.name, err, name)
			}
		})
	}
}

func TestNewAcceptsGoodOptions(t *testing.T) {
	pool := pond.NewPool(0)
	defer pool.StopAndWait()
	tests := []struct {
		name string
		opts []executor.Option
	}{
		{"defaults", nil},
		{"caps zero", []executor.Option{executor.WithMaxQueuePerKey(0), executor.WithMaxPending(0)}},
		{"everything", []executor.Option{
			executor.WithWorkers(1), executor.WithMaxQueuePerKey(1), executor.WithMaxPending(1),
			executor.WithThroughput(1), executor.WithLogger(zap.NewNop()), executor.WithStripes(1),
			executor.WithReentrant(), executor.WithPool(pool), executor.WithPolicy(backpressure.FailFast()),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newExec[string](t, tt.opts...)
			if err := e.Do(context.Background(), "k", nop); err != nil {
				t.Errorf("Do: got %v; want nil", err)
			}
		})
	}
}

// TestBadArguments checks that every entry point refuses nil arguments with
// its sentinel, at once, and counts nothing.
func TestBadArguments(t *testing.T) {
	e := newExec[string](t, executor.WithWorkers(2))
	bg := context.Background()
	var nilCtx context.Context
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"Do nil fn", func() error { return e.Do(bg, "k", nil) }, executor.ErrNilFunc},
		{"Do nil ctx", func() error { return e.Do(nilCtx, "k", nop) }, executor.ErrNilContext},
		{"DoShared nil fn", func() error { return e.DoShared(bg, "k", nil) }, executor.ErrNilFunc},
		{"DoShared nil ctx", func() error { return e.DoShared(nilCtx, "k", nop) }, executor.ErrNilContext},
		{"Submit nil fn", func() error { _, err := e.Submit(bg, "k", nil); return err }, executor.ErrNilFunc},
		{"Submit nil ctx", func() error { _, err := e.Submit(nilCtx, "k", nop); return err }, executor.ErrNilContext},
		{"DoMany nil fn", func() error { return e.DoMany(bg, []string{"a", "b"}, nil) }, executor.ErrNilFunc},
		{"DoMany nil ctx", func() error { return e.DoMany(nilCtx, []string{"a", "b"}, nop) }, executor.ErrNilContext},
		{"DoMany nil keys", func() error { return e.DoMany(bg, nil, nop) }, executor.ErrNoKeys},
		{"DoMany empty keys", func() error { return e.DoMany(bg, []string{}, nop) }, executor.ErrNoKeys},
		{"Call nil fn", func() error {
			_, err := executor.Call[string, int](bg, e, "k", nil)
			return err
		}, executor.ErrNilFunc},
		{"Call nil ctx", func() error {
			_, err := executor.Call(nilCtx, e, "k", func(context.Context) (int, error) { return 1, nil })
			return err
		}, executor.ErrNilContext},
		{"nil Task Wait", func() error { var task *executor.Task; return task.Wait(bg) }, executor.ErrNilTask},
		{"zero Task Wait", func() error { var task executor.Task; return task.Wait(bg) }, executor.ErrNilTask},
		{"Close nil ctx", func() error { return e.Close(nilCtx) }, executor.ErrNilContext},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, tt.want) {
				t.Errorf("got %v; want %v", err, tt.want)
			}
			if s := e.Stats(); s != (executor.Stats{}) {
				t.Errorf("Stats after a refused call: got %+v; want all zero", s)
			}
		})
	}
	t.Run("Wait nil ctx", func(t *testing.T) {
		task, err := e.Submit(bg, "k", nop)
		if err != nil {
			t.Fatalf("Submit: got %v; want nil", err)
		}
		if err := task.Wait(nilCtx); !errors.Is(err, executor.ErrNilContext) {
			t.Errorf("Wait(nil): got %v; want %v", err, executor.ErrNilContext)
		}
		if err := task.Wait(bg); err != nil {
			t.Errorf("Wait: got %v; want nil", err)
		}
	})
	t.Run("nil Task Done", func(t *testing.T) {
		var task *executor.Task
		select {
		case <-task.Done():
		default:
			t.Errorf("(*Task)(nil).Done(): got an open channel; want a closed one")
		}
	})
	t.Run("zero Task Done", func(t *testing.T) {
		var task executor.Task
		select {
		case <-task.Done():
		default:
			t.Errorf("Task{}.Done(): got an open channel; want a closed one")
		}
	})
	t.Run("HotKeys n<=0", func(t *testing.T) {
		g, _ := block(t, e, "busy")
		defer g.open()
		for _, n := range []int{0, -1, -100} {
			if got := e.HotKeys(n); got != nil {
				t.Errorf("HotKeys(%d): got %v; want nil", n, got)
			}
		}
	})
}

// TestSettings: Settings reports the values New settled on, defaults
// included.
func TestSettings(t *testing.T) {
	e := newExec[string](t, executor.WithWorkers(3), executor.WithMaxQueuePerKey(7),
		executor.WithPolicy(backpressure.MaxQueueDelay(time.Second)), executor.WithSlowTaskWarning(time.Minute))
	s := e.Settings()
	if s.Workers != 3 || s.MaxQueuePerKey != 7 || s.MaxPending != 0 || s.Throughput != executor.DefaultThroughput ||
		s.Policy != "MaxQueueDelay(1s)" || s.SlowTask != time.Minute || !s.Ages || s.Started.IsZero() {
		t.Errorf("Settings: got %+v; want workers 3, key cap 7, no global cap, default throughput, MaxQueueDelay(1s), slow 1m, ages", s)
	}
	if p := newExec[int](t).Settings(); p.Policy != "FailFast" || p.Ages || p.Workers != max(runtime.GOMAXPROCS(0), executor.DefaultWorkers) {
		t.Errorf("default Settings: got %+v; want FailFast, no ages, default workers", p)
	}
}
