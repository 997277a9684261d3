package executor_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/perkey/perkey/executor"
)

// TestBounded runs a mix of Do, Submit, DoShared, DoMany and nested calls and
// checks that no more than WithWorkers bodies execute at once. A body blocked
// in a nested call lends its slot, so it is not counted while it waits.
//
// Nesting is kept free of the cycles the contract calls unresolvable: the
// outer tasks (Do, DoShared, Submit, DoMany on keys 0-7) nest only into keys
// 8-15, those nest only into higher keys of 8-15 or into a DoMany on keys
// 16-23, whose bodies do not nest.
func TestBounded(t *testing.T) {
	const (
		outer  = 0  // keys 0-7: called from outside
		middle = 8  // keys 8-15: nested calls, nesting upwards
		leaf   = 16 // keys 16-23: nested DoMany, no further nesting
		span   = 8
	)
	for _, workers := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			e := newExec[int](t, executor.WithWorkers(workers), executor.WithThroughput(2))
			var conc concurrency
			var nested atomic.Int64
			var body func(k int, r *rand.Rand) func(context.Context) error
			body = func(k int, r *rand.Rand) func(context.Context) error {
				var call func(ctx context.Context) error
				switch {
				case k >= leaf || r.IntN(3) == 0:
					// A leaf.
				case k < middle || k == middle+span-1 || r.IntN(4) == 0:
					ks := []int{leaf + r.IntN(span-1)}
					ks = append(ks, ks[0]+1)
					sub := body(leaf, r)
					call = func(ctx context.Context) error { return e.DoMany(ctx, ks, sub) }
				default:
					next := k + 1 + r.IntN(middle+span-1-k)
					if k < middle {
						next = middle + r.IntN(span)
					}
					sub := body(next, r)
					switch r.IntN(3) {
					case 0:
						call = func(ctx context.Context) error { return e.Do(ctx, next, sub) }
					case 1:
						call = func(ctx context.Context) error { return e.DoShared(ctx, next, sub) }
					default:
						call = func(ctx context.Context) error {
							task, err := e.Submit(ctx, next, sub)
							if err != nil {
								return err
							}
							return task.Wait(ctx)
						}
					}
				}
				return func(ctx context.Context) error {
					conc.enter()
					defer conc.exit()
					runtime.Gosched()
					if call == nil {
						return nil
					}
					nested.Add(1)
					conc.exit() // the slot is lent while the nested call waits
					defer conc.enter()
					return call(ctx)
				}
			}
			var wg sync.WaitGroup
			for c := range 8 {
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(c), uint64(workers)))
					var tasks []*executor.Task
					for range 50 {
						k := outer + r.IntN(span)
						fn := body(k, r)
						var err error
						switch r.IntN(4) {
						case 0:
							err = e.Do(context.Background(), k, fn)
						case 1:
							err = e.DoShared(context.Background(), k, fn)
						case 2:
							err = e.DoMany(context.Background(), []int{k, outer + (k+1)%span}, fn)
						default:
							var task *executor.Task
							if task, err = e.Submit(context.Background(), k, fn); err == nil {
								tasks = append(tasks, task)
							}
						}
						if err != nil {
							t.Errorf("call: got %v; want nil", err)
						}
					}
					for _, task := range tasks {
						if err := task.Wait(context.Background()); err != nil {
							t.Errorf("Wait: got %v; want nil", err)
						}
					}
				})
			}
			waitAll(t, &wg)
			if got := conc.peak.Load(); got > int64(workers) {
				t.Errorf("peak concurrent bodies: got %d; want <= %d", got, workers)
			}
			t.Logf("peak concurrent bodies: %d of %d, nested calls: %d", conc.peak.Load(), workers, nested.Load())
			waitIdle(t, e)
		})
	}
}

// TestBoundedInline checks that runs on callers' goroutines count against
// WithWorkers: with every slot held by pooled tasks, a Do on an idle key
// waits instead of running inline.
func TestBoundedInline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, err := executor.New[int](executor.WithWorkers(2))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		defer e.Close(context.Background())
		g1, g2 := newGate(), newGate()
		if _, err := e.Submit(context.Background(), 1, g1.fn); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Submit(context.Background(), 2, g2.fn); err != nil {
			t.Fatal(err)
		}
		<-g1.started
		<-g2.started
		var ran atomic.Bool
		done := make(chan error)
		go func() {
			done <- e.Do(context.Background(), 3, func(context.Context) error { ran.Store(true); return nil })
		}()
		synctest.Wait()
		if ran.Load() {
			t.Errorf("Do on an idle key ran with every slot taken; want it to wait for a slot")
		}
		g1.open()
		if err := <-done; err != nil || !ran.Load() {
			t.Errorf("Do after a slot freed: got err %v, ran %v; want nil, true", err, ran.Load())
		}
		g2.open()
	})
}
