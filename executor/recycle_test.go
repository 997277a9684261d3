package executor_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

// The executor recycles the internals of synchronous calls. These tests pin
// down what must survive that: the ctx fn received keeps its meaning after
// the call, whatever calls come after it, and every path that ends a call
// without running it (rejection, a parked call giving up, cancellation)
// leaves the next calls unharmed.

type valKey struct{}

// TestBatchContextsReleased: the plain Gos of a batch whose caller's ctx
// is context.Background() take their contexts from blocks that their
// mailbox keeps, made for at most the tasks of the batch yet to run, so the
// batch uses its last block up: once the key is idle, nothing in the
// executor refers to those contexts. A plain Go with another ctx has its
// context made as it is queued: once the key is idle, nothing refers to
// the caller's ctx either, or to what it holds.
func TestBatchContextsReleased(t *testing.T) {
	for _, name := range []string{"Background", "values"} {
		t.Run(name, func(t *testing.T) {
			e := newExec[string](t)
			bg := context.Background()
			release := make(chan struct{})
			if err := e.Go(bg, "k", func(context.Context) error { <-release; return nil }); err != nil {
				t.Fatal(err)
			}
			const n = 21 // blocks of 8, 8 and 5 for one batch behind the first task
			gone := make([]weak.Pointer[byte], n)
			var ran sync.WaitGroup
			ran.Add(n)
			for i := range n {
				ctx := bg
				if name == "values" {
					value := new([64]byte)
					gone[i] = weak.Make(&value[0])
					ctx = context.WithValue(bg, valKey{}, value)
				}
				if err := e.Go(ctx, "k", func(ctx context.Context) error {
					if name == "values" && ctx.Value(valKey{}) == nil {
						t.Error("a Go's ctx lost its caller's value")
					}
					if name == "Background" {
						// The context's memory, a part of its block
						// (its concrete type is the executor's own).
						gone[i] = weak.Make((*byte)(reflect.ValueOf(ctx).UnsafePointer()))
					}
					ran.Done()
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			close(release)
			waitAll(t, &ran)
			waitIdle(t, e)
			runtime.GC()
			runtime.GC()
			for i, p := range gone {
				if p.Value() != nil {
					t.Errorf("Go %d of %d: its ctx (Background) or the value in its caller's (values) is still reachable once its key is idle", i+1, n)
				}
			}
		})
	}
}

// TestEndedContextsReleased: what an ended task's ctx refers to (its
// caller's ctx, and the values in it) is not kept by the executor for long.
// The ctx of a Do that runs at once is carved from a block that its key's
// table shard keeps while carving it, so the block keeps the ctx of up to
// seven ended tasks; once the shard's next tasks have used the block up,
// nothing in the executor refers to them. A plain Go that runs alone makes
// its own, as it runs: nothing refers to it once the task has ended (for
// Gos that run in a batch, see TestBatchContextsReleased).
func TestEndedContextsReleased(t *testing.T) {
	bg := context.Background()
	for _, via := range []string{"Do", "Go"} {
		t.Run(via, func(t *testing.T) {
			e := newExec[string](t)
			value := new([1 << 16]byte)
			gone := weak.Make(value)
			ctx := context.WithValue(bg, valKey{}, value)
			done := make(chan struct{})
			fn := func(context.Context) error { close(done); return nil }
			var err error
			if via == "Do" {
				err = e.Do(ctx, "k", fn)
			} else {
				err = e.Go(ctx, "k", fn)
			}
			if err != nil {
				t.Fatal(err)
			}
			recv(t, "the task", done)
			waitIdle(t, e)        // so that each Do below runs at once, on the block
			ctx, value = nil, nil // the test's own references
			_ = ctx
			after := 0
			if via == "Do" {
				after = 7 // the rest of its block
			}
			for range after {
				if err := e.Do(bg, "k", nop); err != nil {
					t.Fatal(err)
				}
			}
			waitIdle(t, e)
			runtime.GC()
			runtime.GC()
			if gone.Value() != nil {
				t.Errorf("a value in the caller's ctx of an ended %s is still reachable after %d more tasks on its shard", via, after)
			}
		})
	}
}

// TestRetainedContext keeps the ctx of a finished Do and checks it after
// many later calls: its values are its own caller's, it is canceled, and it
// no longer marks the key as held. Every other fn asks for Done while it
// runs, so that both ways a context ends are checked: with and without the
// child Done makes.
func TestRetainedContext(t *testing.T) {
	for _, workers := range []int{1, 4} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			e := newExec[string](t, executor.WithWorkers(workers))
			const n = 200
			kept := make([]context.Context, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					parent := context.WithValue(context.Background(), valKey{}, i)
					err := e.Do(parent, fmt.Sprint("k", i%7), func(ctx context.Context) error {
						kept[i] = ctx
						if i%2 == 0 {
							select {
							case <-ctx.Done():
								t.Errorf("Do %d: its ctx is done while it runs", i)
							default:
							}
						}
						return nil
					})
					if err != nil {
						t.Errorf("Do %d: %v", i, err)
					}
				})
			}
			waitAll(t, &wg)
			checkKept(t, e, kept)
		})
	}
}

// TestContextUsedAfterReturn hands fn's ctx to a goroutine that reads it
// while later calls run (the race detector watches), and then checks it.
func TestContextUsedAfterReturn(t *testing.T) {
	e := newExec[int](t, executor.WithWorkers(2))
	var wg sync.WaitGroup
	for i := range 100 {
		parent := context.WithValue(context.Background(), valKey{}, i)
		if err := e.Do(parent, i%3, func(ctx context.Context) error {
			wg.Go(func() {
				<-ctx.Done()
				if got := ctx.Value(valKey{}); got != i {
					t.Errorf("ctx %d used after its call: Value = %v", i, got)
				}
				if !errors.Is(ctx.Err(), context.Canceled) {
					t.Errorf("ctx %d used after its call: Err = %v", i, ctx.Err())
				}
			})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	waitAll(t, &wg)
}

// TestCallsAfterRefusals ends calls in every way that does not run them and
// checks that the calls after them still run and return.
func TestCallsAfterRefusals(t *testing.T) {
	cases := []struct {
		name   string
		policy backpressure.Policy
	}{
		{"failfast", backpressure.FailFast()},
		{"block", backpressure.Block()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newExec[string](t, executor.WithMaxQueuePerKey(2), executor.WithPolicy(tc.policy),
				executor.WithWorkers(2))
			g, _ := block(t, e, "hot")
			if _, err := e.Submit(context.Background(), "hot", func(context.Context) error { return nil }); err != nil {
				t.Fatal(err)
			}
			for range 20 {
				// Under Block the calls park, then give up when ctx ends.
				ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
				if _, err := e.Submit(ctx, "hot", func(context.Context) error { return nil }); err == nil {
					t.Fatal("Submit on a full key: got nil error")
				}
				if err := e.Do(ctx, "hot", func(context.Context) error { return nil }); err == nil {
					t.Fatal("Do on a full key: got nil error")
				}
				cancel()
			}
			// Calls on other keys, two callers per key (within the cap,
			// so some run inline and some queue), all run and return.
			var wg sync.WaitGroup
			for i := range 10 {
				wg.Go(func() {
					for range 40 {
						err := e.Do(context.Background(), fmt.Sprint("k", i/2), func(context.Context) error { return nil })
						if err != nil {
							t.Errorf("Do after refusals: %v", err)
						}
					}
				})
			}
			waitAll(t, &wg)
			g.open()
			waitIdle(t, e)
		})
	}
}

// TestRetainedAsyncContext keeps the ctx of finished Go and Submit tasks
// (whose jobs are left to the GC, and whose contexts no longer name them)
// and checks it after many later tasks, as TestRetainedContext does for Do.
func TestRetainedAsyncContext(t *testing.T) {
	for _, how := range []string{"Go", "Submit"} {
		t.Run(how, func(t *testing.T) {
			e := newExec[string](t, executor.WithWorkers(2))
			const n = 200
			kept := make([]context.Context, n)
			for i := range n {
				parent, cancel := context.WithCancel(context.WithValue(context.Background(), valKey{}, i))
				defer cancel()
				fn := func(ctx context.Context) error {
					kept[i] = ctx
					if ctx.Err() != nil {
						t.Errorf("task %d: its ctx ended while it ran: %v", i, ctx.Err())
					}
					return nil
				}
				key := fmt.Sprint("k", i%7)
				var err error
				if how == "Go" {
					err = e.Go(parent, key, fn)
				} else {
					_, err = e.Submit(parent, key, fn)
				}
				if err != nil {
					t.Fatalf("%s %d: %v", how, i, err)
				}
			}
			waitIdle(t, e)
			checkKept(t, e, kept)
		})
	}
}

// checkKept checks the contexts kept[i] that the tasks of a finished test
// received from parents carrying valKey i, on keys "k<i%7>": each keeps its
// own caller's values, is canceled, and no longer marks its key as held.
func checkKept(t *testing.T, e *executor.Executor[string], kept []context.Context) {
	t.Helper()
	for i, ctx := range kept {
		if got := ctx.Value(valKey{}); got != i {
			t.Fatalf("kept ctx %d: Value = %v; want %d (another call's context)", i, got, i)
		}
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("kept ctx %d: Err = %v; want context.Canceled", i, ctx.Err())
		}
		recv(t, "a kept ctx's Done", ctx.Done())
		// Not nested any more: a call on its old key with a ctx derived
		// from it runs. (WithoutCancel keeps the values, marks included,
		// and drops the cancellation, which would refuse the call before
		// re-entry is even checked.)
		ran := false
		err := e.Do(context.WithoutCancel(ctx), fmt.Sprint("k", i%7),
			func(context.Context) error { ran = true; return nil })
		if err != nil || !ran {
			t.Fatalf("Do with a ctx derived from kept ctx %d: err %v, ran %v; want the key free", i, err, ran)
		}
	}
}
