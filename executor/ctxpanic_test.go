package executor_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

// panickyCtx is a ctx whose Err panics from its second call on (the
// first, the submission's own check, passes), or whose Done panics.
type panickyCtx struct {
	context.Context
	err, done bool // which panics
	calls     atomic.Int64
}

func (c *panickyCtx) Err() error {
	if c.err && c.calls.Add(1) > 1 {
		panic("ctx.Err exploded")
	}
	return c.Context.Err()
}

func (c *panickyCtx) Done() <-chan struct{} {
	if c.done {
		panic("ctx.Done exploded")
	}
	return c.Context.Done()
}

// TestContextMethodsPanic: a queued task's ctx is user code, asked for Err
// and Done by sweeps and watches that hold a key's lock, on other callers'
// goroutines. One that panics there fails no other call and leaves no lock
// held. A ctx whose Err panics counts as ended: a submission at the cap
// sweeps its task out and is let in, and the task ends with a *PanicError
// that its error handler hears of. A ctx whose Done panics is not watched:
// a waiter gets in when the task ahead of it ends. Either way the key takes
// calls again, Close goes on, and Stats add up.
func TestContextMethodsPanic(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      []executor.Option
		err, done bool
		waits     bool // the submission at the cap waits until the first task ends
	}{
		{"key cap, FailFast, Err", []executor.Option{executor.WithMaxQueuePerKey(2)}, true, false, false},
		{"key cap, Block, Err", []executor.Option{executor.WithMaxQueuePerKey(2), executor.WithPolicy(backpressure.Block())}, true, false, false},
		{"key cap, Block, Done", []executor.Option{executor.WithMaxQueuePerKey(2), executor.WithPolicy(backpressure.Block())}, false, true, true},
		{"global cap, FailFast, Err", []executor.Option{executor.WithMaxPending(2)}, true, false, false},
		{"global cap, Block, Done", []executor.Option{executor.WithMaxPending(2), executor.WithPolicy(backpressure.Block())}, false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			handled := make(chan error, 4)
			opts := append([]executor.Option{executor.WithWorkers(2),
				executor.WithErrorHandler(func(_ any, err error) { handled <- err })}, tc.opts...)
			e := newExec[string](t, opts...)
			executor.WatchAtOnce(e) // a waiter watches what is ahead as it begins
			bg := context.Background()
			gate, running := make(chan struct{}), make(chan struct{})
			if err := e.Go(bg, "k", func(context.Context) error { close(running); <-gate; return nil }); err != nil {
				t.Fatal(err)
			}
			recv(t, "the first task to run", running)
			bad := &panickyCtx{Context: bg, err: tc.err, done: tc.done}
			if err := e.Go(bad, "k", nop); err != nil {
				t.Fatalf("Go with the ctx that panics: %v", err)
			}
			// k (or the executor) is full: this one sweeps, asking the
			// queued task's ctx, and waits if it must (watching it).
			got := make(chan any, 1)
			go func() {
				defer func() {
					if v := recover(); v != nil {
						got <- fmt.Sprintf("panicked: %v", v)
					}
				}()
				got <- e.Go(bg, "k", nop)
			}()
			if tc.waits {
				close(gate)
			}
			switch v := recv(t, "the Go at the cap", got).(type) {
			case string:
				t.Fatalf("the Go at the cap %s", v)
			case error:
				t.Errorf("the Go at the cap: got %v; want nil", v)
			}
			if !tc.waits {
				close(gate)
				var pe *executor.PanicError
				if err := recv(t, "the error handler, for the task whose ctx panicked", handled); !errors.As(err, &pe) {
					t.Errorf("the task whose ctx panicked ended with %v; want a *PanicError", err)
				}
			}
			// k's lock was not left held: k drains, and a Do on it gets through.
			eventually(t, "k to drain", func() bool { s := e.Stats(); return s.Queued == 0 && s.Running == 0 })
			done := make(chan error, 1)
			go func() { done <- e.Do(bg, "k", nop) }()
			if err := recv(t, "a Do on k", done); err != nil {
				t.Errorf("a Do on k: %v", err)
			}
			closeCtx, stop := context.WithTimeout(bg, patience)
			defer stop()
			if err := e.Close(closeCtx); err != nil {
				t.Errorf("Close: %v", err)
			}
			// A ctx that panics cancels its task; no fn panicked (Panicked
			// counts those, within Completed).
			if s := e.Stats(); !balanced(s) || s.Submitted != 4 || s.Panicked != 0 {
				t.Errorf("Stats: %+v; want 4 submitted, each completed or canceled, none panicked", s)
			}
		})
	}
}

// lyingCtx ends for its second Err only: a sweep finds it ended, then it
// says it is not.
type lyingCtx struct {
	context.Context
	calls atomic.Int64
}

func (c *lyingCtx) Err() error {
	if c.calls.Add(1) == 2 {
		return context.Canceled
	}
	return nil
}

// TestContextThatLies: a task a sweep took out because its ctx had ended
// ends with an error even if its ctx says otherwise when asked again: it is
// never reported as ending with none.
func TestContextThatLies(t *testing.T) {
	handled := make(chan error, 2)
	e := newExec[string](t, executor.WithWorkers(2), executor.WithMaxQueuePerKey(2),
		executor.WithErrorHandler(func(_ any, err error) { handled <- err }))
	bg := context.Background()
	gate, running := make(chan struct{}), make(chan struct{})
	defer close(gate)
	if err := e.Go(bg, "k", func(context.Context) error { close(running); <-gate; return nil }); err != nil {
		t.Fatal(err)
	}
	recv(t, "the first task to run", running)
	if err := e.Go(&lyingCtx{Context: bg}, "k", nop); err != nil {
		t.Fatalf("Go with the lying ctx: %v", err)
	}
	if err := e.Go(bg, "k", nop); err != nil { // at the cap: sweeps the lying task out
		t.Fatalf("the Go at the cap: got %v; want nil", err)
	}
	if err := recv(t, "the error handler, for the swept task", handled); !errors.Is(err, context.Canceled) {
		t.Errorf("the swept task ended with %v; want %v", err, context.Canceled)
	}
	if s := e.Stats(); s.Canceled != 1 {
		t.Errorf("Stats().Canceled = %d; want 1", s.Canceled)
	}
}
