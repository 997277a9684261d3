package executor_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/perkey/perkey/executor"
)

// TestReentrantRefused: a nested call on a key the task holds returns
// ErrReentrant at once instead of deadlocking, whatever the entry point and
// however the ctx was derived.
func TestReentrantRefused(t *testing.T) {
	nested := []struct {
		name string
		call func(e *executor.Executor[string], ctx context.Context) error
	}{
		{"Do", func(e *executor.Executor[string], ctx context.Context) error { return e.Do(ctx, "a", nop) }},
		{"DoShared", func(e *executor.Executor[string], ctx context.Context) error { return e.DoShared(ctx, "a", nop) }},
		{"DoMany all held", func(e *executor.Executor[string], ctx context.Context) error {
			return e.DoMany(ctx, []string{"a", "a"}, nop)
		}},
		{"DoMany one held", func(e *executor.Executor[string], ctx context.Context) error {
			return e.DoMany(ctx, []string{"b", "a"}, nop)
		}},
		{"Call", func(e *executor.Executor[string], ctx context.Context) error {
			_, err := executor.Call(ctx, e, "a", func(context.Context) (int, error) { return 0, nil })
			return err
		}},
		{"derived ctx", func(e *executor.Executor[string], ctx context.Context) error {
			ctx, cancel := context.WithTimeout(context.WithValue(ctx, ctxKey{}, 1), time.Hour)
			defer cancel()
			return e.Do(ctx, "a", nop)
		}},
		{"two levels down", func(e *executor.Executor[string], ctx context.Context) error {
			return e.Do(ctx, "b", func(ctx context.Context) error { return e.Do(ctx, "a", nop) })
		}},
	}
	outers := []struct {
		name string
		run  func(e *executor.Executor[string], fn func(context.Context) error) error
	}{
		{"Do", func(e *executor.Executor[string], fn func(context.Context) error) error {
			return e.Do(context.Background(), "a", fn)
		}},
		{"DoShared", func(e *executor.Executor[string], fn func(context.Context) error) error {
			return e.DoShared(context.Background(), "a", fn)
		}},
		{"DoMany", func(e *executor.Executor[string], fn func(context.Context) error) error {
			return e.DoMany(context.Background(), []string{"a", "c"}, fn)
		}},
		{"Submit", func(e *executor.Executor[string], fn func(context.Context) error) error {
			task, err := e.Submit(context.Background(), "a", fn)
			if err != nil {
				return err
			}
			return task.Wait(context.Background())
		}},
	}
	for _, o := range outers {
		for _, n := range nested {
			t.Run(o.name+"/"+n.name, func(t *testing.T) {
				e := newExec[string](t, executor.WithWorkers(1))
				err := o.run(e, func(ctx context.Context) error { return n.call(e, ctx) })
				if !errors.Is(err, executor.ErrReentrant) {
					t.Errorf("got %v; want ErrReentrant", err)
				}
				if s := waitIdle(t, e); s.Submitted != s.Completed {
					t.Errorf("Stats: got %+v; want every accepted task completed", s)
				}
			})
		}
	}
}

// TestReentrantInline: under WithReentrant, a nested call on held keys runs
// fn inline, at once, on the calling goroutine; a DoMany with only some of
// its keys held still fails.
func TestReentrantInline(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	e := newExec[string](t, executor.WithWorkers(1), executor.WithReentrant(), executor.WithLogger(zap.New(core)))
	var trace []string
	err := e.DoMany(context.Background(), []string{"a", "b"}, func(ctx context.Context) error {
		trace = append(trace, "outer")
		if err := e.Do(ctx, "a", func(ctx context.Context) error {
			trace = append(trace, "Do a")
			return e.DoShared(ctx, "b", func(context.Context) error {
				trace = append(trace, "DoShared b")
				return nil
			})
		}); err != nil {
			return err
		}
		if err := e.DoMany(ctx, []string{"b", "a", "b"}, func(context.Context) error {
			trace = append(trace, "DoMany b a")
			return errTask
		}); !errors.Is(err, errTask) {
			t.Errorf("inline DoMany: got %v; want fn's error %v", err, errTask)
		}
		if err := e.DoMany(ctx, []string{"a", "z"}, nop); !errors.Is(err, executor.ErrReentrant) {
			t.Errorf("DoMany with one key not held: got %v; want ErrReentrant", err)
		}
		// A panic in an inline fn is recovered like any other: the nested
		// call returns a *PanicError and the outer task carries on.
		var pe *executor.PanicError
		if err := e.Do(ctx, "a", func(context.Context) error { panic("inner") }); !errors.As(err, &pe) || pe.Value != "inner" {
			t.Errorf("inline Do whose fn panics: got %v; want a *PanicError with value inner", err)
		}
		if err := e.DoMany(ctx, []string{"a", "b"}, func(context.Context) error { panic("inner many") }); !errors.As(err, &pe) || pe.Value != "inner many" {
			t.Errorf("inline DoMany whose fn panics: got %v; want a *PanicError with value inner many", err)
		}
		trace = append(trace, "end")
		return nil
	})
	if err != nil {
		t.Errorf("outer: got %v; want nil", err)
	}
	if n := logs.FilterMessage("task panicked").FilterLevelExact(zapcore.ErrorLevel).Len(); n != 2 {
		t.Errorf("inline panics logged at error level: got %d; want 2", n)
	}
	if want := []string{"outer", "Do a", "DoShared b", "DoMany b a", "end"}; fmt.Sprint(trace) != fmt.Sprint(want) {
		t.Errorf("trace: got %v; want %v", trace, want)
	}
	if s := waitIdle(t, e); s.Submitted != 1 {
		t.Errorf("Stats.Submitted: got %d; want 1 (inline calls are part of their task)", s.Submitted)
	}
}

// TestNestedOtherKey: a nested call on another key completes with a single
// worker, even several levels deep and behind queued work on that key.
func TestNestedOtherKey(t *testing.T) {
	const depth = 6
	keyOf := func(i int) string { return fmt.Sprint("k", i) }
	kinds := []struct {
		name string
		call func(e *executor.Executor[string], ctx context.Context, key string, fn func(context.Context) error) error
	}{
		{"Do", func(e *executor.Executor[string], ctx context.Context, key string, fn func(context.Context) error) error {
			return e.Do(ctx, key, fn)
		}},
		{"DoShared", func(e *executor.Executor[string], ctx context.Context, key string, fn func(context.Context) error) error {
			return e.DoShared(ctx, key, fn)
		}},
		{"DoMany", func(e *executor.Executor[string], ctx context.Context, key string, fn func(context.Context) error) error {
			return e.DoMany(ctx, []string{key, key + "'"}, fn)
		}},
		{"Submit+Wait", func(e *executor.Executor[string], ctx context.Context, key string, fn func(context.Context) error) error {
			task, err := e.Submit(ctx, key, fn)
			if err != nil {
				return err
			}
			return task.Wait(ctx)
		}},
	}
	for _, kind := range kinds {
		for _, queued := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/queued=%v", kind.name, queued), func(t *testing.T) {
				e := newExec[string](t, executor.WithWorkers(1))
				var conc concurrency
				var reached atomic.Int64
				var level func(i int) func(context.Context) error
				level = func(i int) func(context.Context) error {
					return func(ctx context.Context) error {
						conc.enter()
						defer conc.exit()
						reached.Store(int64(i))
						if i == depth {
							return nil
						}
						if queued {
							// Work queued from outside on the next key
							// must run first (FIFO) on the lent slot.
							for range 3 {
								if _, err := e.Submit(context.Background(), keyOf(i+1), nop); err != nil {
									return err
								}
							}
						}
						conc.exit()
						defer conc.enter()
						return kind.call(e, ctx, keyOf(i+1), level(i+1))
					}
				}
				done := make(chan error, 1)
				go func() { done <- e.Do(context.Background(), keyOf(0), level(0)) }()
				if err := recv(t, "the nested calls to complete", done); err != nil {
					t.Errorf("got %v; want nil", err)
				}
				if got := reached.Load(); got != depth {
					t.Errorf("deepest level reached: got %d; want %d", got, depth)
				}
				if got := conc.peak.Load(); got != 1 {
					t.Errorf("peak concurrent bodies: got %d; want 1", got)
				}
				waitIdle(t, e)
			})
		}
	}
}

// TestNestedAcrossExecutors: holding a key of one executor says nothing
// about another executor's keys.
func TestNestedAcrossExecutors(t *testing.T) {
	e1 := newExec[string](t, executor.WithWorkers(1))
	e2 := newExec[string](t, executor.WithWorkers(1))
	err := e1.Do(context.Background(), "a", func(ctx context.Context) error {
		return e2.Do(ctx, "a", func(ctx context.Context) error {
			if err := e1.Do(ctx, "a", nop); !errors.Is(err, executor.ErrReentrant) {
				t.Errorf("e1.Do on a key held further out: got %v; want ErrReentrant", err)
			}
			return e1.Do(ctx, "b", nop)
		})
	})
	if err != nil {
		t.Errorf("got %v; want nil", err)
	}
	waitIdle(t, e1)
	waitIdle(t, e2)
}

// TestCloseFromTask: Close called from inside a task returns ErrReentrant
// and closes nothing.
func TestCloseFromTask(t *testing.T) {
	e := newExec[string](t, executor.WithWorkers(1))
	err := e.Do(context.Background(), "a", func(ctx context.Context) error {
		if err := e.Close(ctx); !errors.Is(err, executor.ErrReentrant) {
			t.Errorf("Close from a task: got %v; want ErrReentrant", err)
		}
		return e.Do(ctx, "b", func(ctx context.Context) error {
			return e.Close(context.WithValue(ctx, ctxKey{}, 1))
		})
	})
	if !errors.Is(err, executor.ErrReentrant) {
		t.Errorf("Close from a nested task: got %v; want ErrReentrant", err)
	}
	if err := e.Do(context.Background(), "a", nop); err != nil {
		t.Errorf("Do after a refused Close: got %v; want nil (nothing closed)", err)
	}
}

// TestWaitFromTask: Task.Wait from inside a task on a task queued behind a
// key the task holds returns ErrReentrant at once; on another key it lends
// the slot and completes.
func TestWaitFromTask(t *testing.T) {
	for _, lane := range submitLanes {
		t.Run(lane, func(t *testing.T) { waitFromTask(t, submitCtx(t, lane)) })
	}
}

func waitFromTask(t *testing.T, sctx context.Context) {
	e := newExec[string](t, executor.WithWorkers(1))
	var behind *executor.Task
	err := e.Do(context.Background(), "a", func(ctx context.Context) error {
		var err error
		behind, err = e.Submit(sctx, "a", nop)
		if err != nil {
			return err
		}
		if err := behind.Wait(ctx); !errors.Is(err, executor.ErrReentrant) {
			t.Errorf("Wait on a task behind a held key: got %v; want ErrReentrant", err)
		}
		many, err := e.Submit(sctx, "b", nop)
		if err != nil {
			return err
		}
		if err := many.Wait(ctx); err != nil {
			t.Errorf("Wait on a task of another key: got %v; want nil", err)
		}
		return nil
	})
	if err != nil {
		t.Errorf("got %v; want nil", err)
	}
	if err := behind.Wait(context.Background()); err != nil {
		t.Errorf("the task behind, waited from outside: got %v; want nil", err)
	}
	waitIdle(t, e)
}

// TestLentSlotAfterTaskEnds: a nested call made from a goroutine that a task
// started borrows the task's slot, and may still run when the task has
// ended; the next task of the key (which may share the ended one's
// bookkeeping: a plain task, a Do run inline, a recycled job) still lends
// its own slot to its nested calls, so a single-worker executor does not
// deadlock. Both kinds of task are tried as the first and as the second.
func TestLentSlotAfterTaskEnds(t *testing.T) {
	bg := context.Background()
	for _, first := range []string{"Do", "Go"} {
		for _, second := range []string{"Do", "Go"} {
			t.Run(first+" then "+second, func(t *testing.T) {
				e := newExec[string](t, executor.WithWorkers(1))
				run := func(how string, fn func(context.Context) error) <-chan error {
					done := make(chan error, 1)
					switch how {
					case "Do":
						go func() { done <- e.Do(bg, "a", fn) }()
					default:
						if err := e.Go(bg, "a", func(ctx context.Context) error { err := fn(ctx); done <- err; return err }); err != nil {
							t.Fatal(err)
						}
					}
					return done
				}
				hold, leaked, leakDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
				// The first task's helper goroutine calls into key b with
				// the task's ctx and stays there after the task returns.
				err := recv(t, "the first task", run(first, func(ctx context.Context) error {
					go func() {
						leakDone <- e.Do(ctx, "b", func(context.Context) error { close(leaked); <-hold; return nil })
					}()
					<-leaked
					return nil
				}))
				if err != nil {
					t.Fatalf("first task: %v", err)
				}
				// The second task's own nested call needs a slot: only its
				// task's can serve (the one worker is taken).
				err = recv(t, "the second task's nested call", run(second, func(ctx context.Context) error {
					return e.Do(ctx, "c", func(context.Context) error { return nil })
				}))
				if err != nil {
					t.Errorf("second task: %v", err)
				}
				close(hold)
				if err := recv(t, "the leaked nested call", leakDone); err != nil {
					t.Errorf("leaked nested call: %v", err)
				}
			})
		}
	}
}
