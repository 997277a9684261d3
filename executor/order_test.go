package executor_test

import (
	"context"
	"sync"
	"testing"

	"github.com/perkey/perkey/executor"
)

// TestPerKeyFIFO submits from one goroutine per key (so submissions are
// ordered by happens-before) and checks that every key's tasks start in
// submission order and never overlap. Every tenth submission is a Do, which
// must find every earlier task of its key already done.
func TestPerKeyFIFO(t *testing.T) {
	tests := []struct {
		name       string
		workers    int
		throughput int
		keys       int
		perKey     int
	}{
		{"one worker one key", 1, 32, 1, 300},
		{"one worker many keys", 1, 4, 8, 100},
		{"two workers", 2, 32, 8, 100},
		{"many workers throughput 1", 16, 1, 16, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newExec[int](t, executor.WithWorkers(tt.workers), executor.WithThroughput(tt.throughput))
			var occ occupancies[int]
			order := make([][]int, tt.keys)
			var mu sync.Mutex // guards order
			var wg sync.WaitGroup
			for k := range tt.keys {
				wg.Go(func() {
					o := occ.of(k)
					var tasks []*executor.Task
					for i := range tt.perKey {
						fn := func(context.Context) error {
							o.enter(false)
							defer o.exit(false)
							mu.Lock()
							defer mu.Unlock()
							if i%10 == 9 && len(order[k]) != i {
								t.Errorf("key %d: Do #%d started with %d earlier tasks done; want %d", k, i, len(order[k]), i)
							}
							order[k] = append(order[k], i)
							return nil
						}
						if i%10 == 9 {
							if err := e.Do(context.Background(), k, fn); err != nil {
								t.Errorf("Do: got %v; want nil", err)
							}
							continue
						}
						task, err := e.Submit(context.Background(), k, fn)
						if err != nil {
							t.Errorf("Submit: got %v; want nil", err)
							continue
						}
						tasks = append(tasks, task)
					}
					for _, task := range tasks {
						if err := task.Wait(context.Background()); err != nil {
							t.Errorf("Wait: got %v; want nil", err)
						}
					}
				})
			}
			waitAll(t, &wg)
			for k, got := range order {
				if len(got) != tt.perKey {
					t.Errorf("key %d: got %d tasks run; want %d", k, len(got), tt.perKey)
				}
				for i, seq := range got {
					if seq != i {
						t.Errorf("key %d: task #%d started at position %d; want FIFO order", k, seq, i)
						break
					}
				}
			}
			if n := occ.overlaps(); n != 0 {
				t.Errorf("got %d overlapping runs within a key; want 0", n)
			}
			s := waitIdle(t, e)
			if want := uint64(tt.keys * tt.perKey); s.Submitted != want || s.Completed != want {
				t.Errorf("Stats: got Submitted %d, Completed %d; want %d each", s.Submitted, s.Completed, want)
			}
		})
	}
}
