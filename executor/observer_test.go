package executor_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

// TestClosedRefusalsObserved: a call refused because the executor closed is
// reported to the observer as ReasonClosed (what feeds
// perkey_tasks_rejected_total{reason="closed"}), and not counted in
// Stats.Rejected, which counts backpressure only.
func TestClosedRefusalsObserved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := &countingObserver{}
		e, err := executor.New[string](executor.WithObserver(obs), executor.WithMaxQueuePerKey(1),
			executor.WithPolicy(backpressure.Block()))
		if err != nil {
			t.Fatal(err)
		}
		bg := context.Background()
		nop := func(context.Context) error { return nil }
		// A submission parked for room on a full key is sent away by Close.
		release := make(chan struct{})
		if _, err := e.Submit(bg, "k", func(context.Context) error { <-release; return nil }); err != nil {
			t.Fatal(err)
		}
		parked := make(chan error, 1)
		go func() { parked <- e.Do(bg, "k", nop) }()
		synctest.Wait() // the blocker runs and the Do is parked
		closed := make(chan error, 1)
		go func() { closed <- e.Close(bg) }()
		if err := <-parked; !errors.Is(err, executor.ErrClosed) {
			t.Fatalf("parked Do when Close starts: got %v; want ErrClosed", err)
		}
		close(release)
		if err := <-closed; err != nil {
			t.Fatalf("Close: %v", err)
		}
		// And calls after Close.
		if err := e.Do(bg, "k", nop); !errors.Is(err, executor.ErrClosed) {
			t.Fatalf("Do after Close: got %v", err)
		}
		if _, err := e.Submit(bg, "k", nop); !errors.Is(err, executor.ErrClosed) {
			t.Fatalf("Submit after Close: got %v", err)
		}
		if err := e.DoMany(bg, []string{"a", "b"}, nop); !errors.Is(err, executor.ErrClosed) {
			t.Fatalf("DoMany after Close: got %v", err)
		}
		if got := obs.rejected[executor.ReasonClosed].Load(); got != 4 {
			t.Errorf("observer: %d rejections with ReasonClosed; want 4 (one parked, three after Close)", got)
		}
		if s := e.Stats(); s.Rejected != 0 {
			t.Errorf("Stats.Rejected = %d; want 0 (ErrClosed is not backpressure)", s.Rejected)
		}
	})
}
