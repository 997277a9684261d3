package executor_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/perkey/perkey/executor"
)

// TestReferenceWorkload is the contract's workload on the real clock: 1,000
// tasks of 1 ms over 50 keys with 64 workers. Ideal is ~20 ms; one global
// lock would take ~1 s. The bound is loose because the machine is shared.
func TestReferenceWorkload(t *testing.T) {
	const (
		keys  = 50
		ops   = 1000
		bound = time.Second
	)
	e := newExec[int](t, executor.WithWorkers(64))
	var occ occupancies[int]
	var ran atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for c := range 100 { // 100 callers, 10 Do each
		wg.Go(func() {
			for i := range ops / 100 {
				k := (c*(ops/100) + i) % keys
				o := occ.of(k)
				err := e.Do(context.Background(), k, func(context.Context) error {
					o.enter(false)
					defer o.exit(false)
					time.Sleep(time.Millisecond)
					ran.Add(1)
					return nil
				})
				if err != nil {
					t.Errorf("Do: got %v; want nil", err)
				}
			}
		})
	}
	waitAll(t, &wg)
	elapsed := time.Since(start)
	if got := ran.Load(); got != ops {
		t.Errorf("tasks run: got %d; want %d", got, ops)
	}
	if n := occ.overlaps(); n != 0 {
		t.Errorf("got %d overlapping runs within a key; want 0", n)
	}
	if elapsed >= bound {
		t.Errorf("1,000 × 1 ms over 50 keys took %v; want < %v (ideal ~20 ms)", elapsed, bound)
	}
	t.Logf("reference workload: %v", elapsed)
	waitIdle(t, e)
}

// TestParallelFakeClock runs workloads of sleeping tasks on synctest's fake
// clock, where the elapsed time is exact: keys run in parallel up to the
// worker bound and no further.
func TestParallelFakeClock(t *testing.T) {
	tests := []struct {
		name          string
		workers, keys int
		perKey        int
		throughput    int
		async         bool
		want          time.Duration // exact on the fake clock
	}{
		// 50 keys × 20 tasks × 1 ms, every key at once: 20 ms.
		{"reference Submit", 64, 50, 20, 32, true, 20 * time.Millisecond},
		{"reference Do", 64, 50, 20, 32, false, 20 * time.Millisecond},
		// 10 workers: 1,000 ms of work / 10 = 100 ms, never less.
		{"ten workers", 10, 50, 20, 32, true, 100 * time.Millisecond},
		{"ten workers throughput 3", 10, 50, 20, 3, true, 100 * time.Millisecond},
		// One worker: fully serial.
		{"one worker", 1, 5, 10, 2, true, 50 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, err := executor.New[int](executor.WithWorkers(tt.workers), executor.WithThroughput(tt.throughput))
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				defer e.Close(context.Background())
				var occ occupancies[int]
				var conc concurrency
				fn := func(k int) func(context.Context) error {
					o := occ.of(k)
					return func(context.Context) error {
						o.enter(false)
						conc.enter()
						time.Sleep(time.Millisecond)
						conc.exit()
						o.exit(false)
						return nil
					}
				}
				start := time.Now()
				if tt.async {
					var tasks []*executor.Task
					for i := range tt.perKey {
						for k := range tt.keys {
							_ = i
							task, err := e.Submit(context.Background(), k, fn(k))
							if err != nil {
								t.Fatalf("Submit: got %v; want nil", err)
							}
							tasks = append(tasks, task)
						}
					}
					for _, task := range tasks {
						if err := task.Wait(context.Background()); err != nil {
							t.Errorf("Wait: got %v; want nil", err)
						}
					}
				} else {
					var wg sync.WaitGroup
					for k := range tt.keys {
						wg.Go(func() {
							for range tt.perKey {
								if err := e.Do(context.Background(), k, fn(k)); err != nil {
									t.Errorf("Do: got %v; want nil", err)
								}
							}
						})
					}
					wg.Wait()
				}
				if got := time.Since(start); got != tt.want {
					t.Errorf("elapsed on the fake clock: got %v; want %v", got, tt.want)
				}
				if got, limit := conc.peak.Load(), int64(min(tt.workers, tt.keys)); got != limit {
					t.Errorf("peak concurrency: got %d; want %d", got, limit)
				}
				if n := occ.overlaps(); n != 0 {
					t.Errorf("got %d overlapping runs within a key; want 0", n)
				}
				if err := e.Close(context.Background()); err != nil {
					t.Errorf("Close: got %v; want nil", err)
				}
				if s := e.Stats(); s.ActiveKeys != 0 || !balanced(s) || s.Completed != uint64(tt.keys*tt.perKey) {
					t.Errorf("Stats after Close: got %+v; want ActiveKeys 0, Completed %d, balanced", s, tt.keys*tt.perKey)
				}
			})
		})
	}
}
