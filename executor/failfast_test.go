package executor_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

func TestFailFast(t *testing.T) {
	const limit, total = 100, 1000
	e := newExec[string](t, executor.WithWorkers(4), executor.WithMaxQueuePerKey(limit))
	g, first := block(t, e, "hot")
	tasks := []*executor.Task{first}
	var busy []error
	var ran atomic.Int64
	for i := 1; i < total; i++ {
		task, err := e.Submit(context.Background(), "hot", func(context.Context) error { ran.Add(1); return nil })
		if err != nil {
			busy = append(busy, err)
			continue
		}
		tasks = append(tasks, task)
	}
	if len(tasks) != limit || len(busy) != total-limit {
		t.Fatalf("got %d accepted, %d refused; want %d, %d", len(tasks), len(busy), limit, total-limit)
	}
	for _, err := range busy {
		var be *backpressure.BusyError
		switch {
		case !errors.Is(err, executor.ErrBusy) || !errors.Is(err, backpressure.ErrBusy):
			t.Fatalf("refusal: got %v; want errors.Is ErrBusy", err)
		case !errors.As(err, &be):
			t.Fatalf("refusal: got %T; want *backpressure.BusyError", err)
		case be.Key != "hot" || be.Pending != limit || be.Limit != limit || be.Scope != backpressure.ScopeKey:
			t.Fatalf("BusyError: got Key %v, Pending %d, Limit %d, Scope %v; want hot, %d, %d, key",
				be.Key, be.Pending, be.Limit, be.Scope, limit, limit)
		}
	}
	// Blocking entry points refuse at once too: the blocker still holds the
	// key, so a Do that waited would not return here.
	if err := e.Do(context.Background(), "hot", nop); !errors.Is(err, executor.ErrBusy) {
		t.Errorf("Do on a full key: got %v; want ErrBusy", err)
	}
	if err := e.DoShared(context.Background(), "hot", nop); !errors.Is(err, executor.ErrBusy) {
		t.Errorf("DoShared on a full key: got %v; want ErrBusy", err)
	}
	if err := e.DoMany(context.Background(), []string{"cold", "hot"}, nop); !errors.Is(err, executor.ErrBusy) {
		t.Errorf("DoMany with a full key: got %v; want ErrBusy", err)
	}
	// Other keys are unaffected, and DoMany left nothing behind on "cold".
	if err := e.Do(context.Background(), "cold", nop); err != nil {
		t.Errorf("Do on another key: got %v; want nil", err)
	}
	s := e.Stats()
	if want := uint64(total - limit + 3); s.Rejected != want {
		t.Errorf("Stats.Rejected: got %d; want %d", s.Rejected, want)
	}
	if s.Submitted != limit+1 || s.Queued != limit-1 || s.Running != 1 {
		t.Errorf("Stats: got %+v; want Submitted %d, Queued %d, Running 1", s, limit+1, limit-1)
	}
	if hot := e.HotKeys(5); len(hot) != 1 || hot[0] != (executor.KeyLoad[string]{Key: "hot", Pending: limit}) {
		t.Errorf("HotKeys: got %v; want [{hot %d}]", hot, limit)
	}
	g.open()
	for _, task := range tasks {
		if err := task.Wait(context.Background()); err != nil {
			t.Errorf("Wait: got %v; want nil", err)
		}
	}
	if got := ran.Load(); got != limit-1 {
		t.Errorf("accepted tasks run: got %d; want %d", got, limit-1)
	}
	waitIdle(t, e)
	// The key has room again.
	if err := e.Do(context.Background(), "hot", nop); err != nil {
		t.Errorf("Do after draining: got %v; want nil", err)
	}
}

func TestFailFastGlobal(t *testing.T) {
	e := newExec[string](t, executor.WithWorkers(4), executor.WithMaxPending(3))
	g, _ := block(t, e, "a")
	for _, k := range []string{"b", "c"} {
		if _, err := e.Submit(context.Background(), k, func(context.Context) error { <-g.release; return nil }); err != nil {
			t.Fatalf("Submit %s: got %v; want nil", k, err)
		}
	}
	err := e.Do(context.Background(), "d", nop)
	var be *backpressure.BusyError
	if !errors.As(err, &be) || be.Key != nil || be.Scope != backpressure.ScopeGlobal || be.Limit != 3 || be.Pending != 3 {
		t.Errorf("Do past the global cap: got %#v; want a global *BusyError with Pending 3, Limit 3", err)
	}
	if err := e.DoMany(context.Background(), []string{"x", "y"}, nop); !errors.Is(err, executor.ErrBusy) {
		t.Errorf("DoMany past the global cap: got %v; want ErrBusy", err)
	}
	g.open()
	waitIdle(t, e)
	// A DoMany counts once against the global cap.
	g2, _ := block(t, e, "a")
	if err := e.DoMany(context.Background(), []string{"x", "y", "z"}, nop); err != nil {
		t.Errorf("DoMany with room for one task: got %v; want nil", err)
	}
	g2.open()
}

// shedAll is a policy that refuses everything, to check that a policy can
// shed below the caps.
type shedAll struct{}

func (shedAll) Decide(backpressure.Load) backpressure.Verdict { return backpressure.Reject }

func TestCustomPolicy(t *testing.T) {
	e := newExec[string](t, executor.WithMaxQueuePerKey(10), executor.WithPolicy(shedAll{}))
	if err := e.Do(context.Background(), "k", nop); !errors.Is(err, executor.ErrBusy) {
		t.Errorf("Do under a shed-all policy: got %v; want ErrBusy", err)
	}
	if s := e.Stats(); s.Rejected != 1 || s.Submitted != 0 {
		t.Errorf("Stats: got %+v; want Rejected 1, Submitted 0", s)
	}
	waitIdle(t, e)
}
