package executor_test

import (
	"context"
	"errors"
	"testing"

	"github.com/perkey/perkey/executor"
)

// holder keeps an Executor by value, as one keeps a sync.Mutex: its zero
// value is an Executor that New did not make.
type holder struct {
	exec  executor.Executor[string]
	batch executor.Batcher[string, int]
	task  executor.Task
}

// TestNilExecutor: every method of a nil *Executor, and of a zero Executor
// (held by value, never made by New), answers with ErrNilExecutor or a
// zero value instead of panicking; so do a nil or zero Batcher and Task.
func TestNilExecutor(t *testing.T) {
	var h holder
	for name, e := range map[string]*executor.Executor[string]{"nil": nil, "zero value": &h.exec} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			nop := func(context.Context) error { return nil }
			calls := map[string]func() error{
				"Do":       func() error { return e.Do(ctx, "k", nop) },
				"DoShared": func() error { return e.DoShared(ctx, "k", nop) },
				"DoMany":   func() error { return e.DoMany(ctx, []string{"k"}, nop) },
				"Submit":   func() error { _, err := e.Submit(ctx, "k", nop); return err },
				"Go":       func() error { return e.Go(ctx, "k", nop) },
				"Call": func() error {
					_, err := executor.Call(ctx, e, "k", func(context.Context) (int, error) { return 1, nil })
					return err
				},
				"Close": func() error { return e.Close(ctx) },
				"NewBatcher": func() error {
					_, err := executor.NewBatcher(e, func(context.Context, string, []int) error { return nil })
					return err
				},
			}
			for name, call := range calls {
				if _, err := attempt(t, name, call); !errors.Is(err, executor.ErrNilExecutor) {
					t.Errorf("%s: got %v; want ErrNilExecutor", name, err)
				}
			}
			if s := e.Stats(); s != (executor.Stats{}) {
				t.Errorf("Stats: got %+v; want zero", s)
			}
			if e.ActiveKeys() != 0 || e.HotKeys(3) != nil || e.OldestKeys(3) != nil || e.MaxKeyPending() != 0 {
				t.Error("ActiveKeys/HotKeys/OldestKeys/MaxKeyPending: want zero values")
			}
			if s := e.Settings(); s != (executor.Settings{}) {
				t.Errorf("Settings: got %+v; want zero", s)
			}
		})
	}
	var nilBatch *executor.Batcher[string, int]
	for name, b := range map[string]*executor.Batcher[string, int]{"nil": nilBatch, "zero value": &h.batch} {
		t.Run("Batcher "+name, func(t *testing.T) {
			if _, err := attempt(t, "Batcher.Do", func() error { return b.Do(context.Background(), "k", 1) }); !errors.Is(err, executor.ErrNilBatcher) {
				t.Errorf("Do: got %v; want ErrNilBatcher", err)
			}
			if _, err := attempt(t, "Batcher.Submit", func() error { _, err := b.Submit(context.Background(), "k", 1); return err }); !errors.Is(err, executor.ErrNilBatcher) {
				t.Errorf("Submit: got %v; want ErrNilBatcher", err)
			}
		})
	}
	var nilTask *executor.Task
	for name, task := range map[string]*executor.Task{"nil": nilTask, "zero value": &h.task} {
		t.Run("Task "+name, func(t *testing.T) {
			if _, err := attempt(t, "Task.Wait", func() error { return task.Wait(context.Background()) }); !errors.Is(err, executor.ErrNilTask) {
				t.Errorf("Wait: got %v; want ErrNilTask", err)
			}
			recv(t, "a nil or zero Task's Done", task.Done())
		})
	}
}
