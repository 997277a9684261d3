package executor_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/perkey/perkey/executor"
)

func TestPanic(t *testing.T) {
	sentinel := errors.New("sentinel")
	values := []struct {
		name  string
		value any
	}{
		{"string", "boom"},
		{"error", sentinel},
		{"int", 42},
	}
	for _, c := range callers {
		for _, v := range values {
			t.Run(c.name+"/"+v.name, func(t *testing.T) {
				core, logs := observer.New(zapcore.DebugLevel)
				e := newExec[string](t, executor.WithWorkers(2), executor.WithLogger(zap.New(core)))
				err := c.call(e, context.Background(), "k", func(context.Context) error { panic(v.value) })
				var pe *executor.PanicError
				if !errors.As(err, &pe) {
					t.Fatalf("got %v (%T); want a *PanicError", err, err)
				}
				if pe.Value != v.value {
					t.Errorf("PanicError.Value: got %v; want %v", pe.Value, v.value)
				}
				if len(pe.Stack) == 0 || !bytes.Contains(pe.Stack, []byte("executor_test")) {
					t.Errorf("PanicError.Stack: got %q; want the panicking goroutine's stack", pe.Stack)
				}
				if v.value == sentinel && !errors.Is(err, sentinel) {
					t.Errorf("errors.Is(%v, sentinel): got false; want true", err)
				}
				// Logged, and counted, by the time the call returns.
				entries := logs.FilterLevelExact(zapcore.ErrorLevel).All()
				if len(entries) != 1 {
					t.Fatalf("error-level log entries: got %d; want 1 (%v)", len(entries), logs.All())
				}
				fields := entries[0].ContextMap()
				key, hasKey := fields["key"]
				keys, hasKeys := fields["keys"]
				if !(hasKey && key == "k") && !(hasKeys && fmt.Sprint(keys) == "[k k']") {
					t.Errorf("panic log fields: got %v; want the key k", fields)
				}
				if s := e.Stats(); s.Panicked != 1 || s.Completed != 1 || !balanced(s) {
					t.Errorf("Stats: got %+v; want Panicked 1, Completed 1, balanced", s)
				}
				// The key's next task runs normally.
				if err := c.call(e, context.Background(), "k", nop); err != nil {
					t.Errorf("next task: got %v; want nil", err)
				}
				waitIdle(t, e)
			})
		}
	}
}

// TestPanicQueued: a panic in a pooled task (not the inline fast path)
// leaves the mailbox running its queue.
func TestPanicQueued(t *testing.T) {
	e := newExec[string](t, executor.WithWorkers(1), executor.WithThroughput(2))
	g, _ := block(t, e, "k")
	var tasks []*executor.Task
	var ran atomic.Int64
	for i := range 10 {
		task, err := e.Submit(context.Background(), "k", func(context.Context) error {
			ran.Add(1)
			if i%2 == 0 {
				panic(i)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, task)
	}
	g.open()
	for i, task := range tasks {
		err := task.Wait(context.Background())
		var pe *executor.PanicError
		if i%2 == 0 && (!errors.As(err, &pe) || pe.Value != i) {
			t.Errorf("task %d: got %v; want a *PanicError with value %d", i, err, i)
		}
		if i%2 == 1 && err != nil {
			t.Errorf("task %d: got %v; want nil", i, err)
		}
	}
	if got := ran.Load(); got != 10 {
		t.Errorf("tasks run: got %d; want 10", got)
	}
	if s := waitIdle(t, e); s.Panicked != 5 {
		t.Errorf("Stats.Panicked: got %d; want 5", s.Panicked)
	}
}
