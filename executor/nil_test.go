package executor_test

import (
	"context"
	"errors"
	"testing"

	"github.com/perkey/perkey/executor"
)

// TestNilExecutor: every method of a nil *Executor answers with
// ErrNilExecutor or a zero value instead of panicking.
func TestNilExecutor(t *testing.T) {
	var e *executor.Executor[string]
	ctx := context.Background()
	nop := func(context.Context) error { return nil }
	calls := map[string]func() error{
		"Do":       func() error { return e.Do(ctx, "k", nop) },
		"DoShared": func() error { return e.DoShared(ctx, "k", nop) },
		"DoMany":   func() error { return e.DoMany(ctx, []string{"k"}, nop) },
		"Submit":   func() error { _, err := e.Submit(ctx, "k", nop); return err },
		"Call": func() error {
			_, err := executor.Call(ctx, e, "k", func(context.Context) (int, error) { return 1, nil })
			return err
		},
		"Close": func() error { return e.Close(ctx) },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, executor.ErrNilExecutor) {
			t.Errorf("%s on a nil executor: got %v; want ErrNilExecutor", name, err)
		}
	}
	if s := e.Stats(); s != (executor.Stats{}) {
		t.Errorf("Stats on a nil executor: got %+v; want zero", s)
	}
	if e.ActiveKeys() != 0 || e.HotKeys(3) != nil || e.MaxKeyPending() != 0 {
		t.Error("ActiveKeys/HotKeys/MaxKeyPending on a nil executor: want zero values")
	}
}
