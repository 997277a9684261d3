package executor_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/perkey/perkey/executor"
)

// TestFairness: with one worker and a hot key holding thousands of queued
// tasks, a task for another key starts after at most WithThroughput further
// tasks of the hot key.
func TestFairness(t *testing.T) {
	for _, throughput := range []int{1, 4, 16} {
		t.Run(fmt.Sprintf("throughput=%d", throughput), func(t *testing.T) {
			const hot = 3000
			e := newExec[string](t, executor.WithWorkers(1), executor.WithThroughput(throughput))
			g, _ := block(t, e, "hot")
			var hotStarted atomic.Int64
			var last *executor.Task
			for range hot {
				task, err := e.Submit(context.Background(), "hot", func(context.Context) error {
					hotStarted.Add(1)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				last = task
			}
			before := hotStarted.Load() // 0: the blocker holds the only worker
			var seen int64
			cold, err := e.Submit(context.Background(), "cold", func(context.Context) error {
				seen = hotStarted.Load()
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			g.open()
			if err := cold.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := seen - before; got > int64(throughput) {
				t.Errorf("hot-key tasks started before the cold key's: got %d; want <= %d", got, throughput)
			}
			if err := last.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
			// A cold task submitted mid-stream also waits at most one turn.
			waitIdle(t, e)
		})
	}
}

// TestFairnessManyKeys: with one worker, keys take turns: between two
// consecutive tasks of one key, no key runs more than throughput tasks.
func TestFairnessManyKeys(t *testing.T) {
	const keys, each, throughput = 5, 40, 3
	e := newExec[int](t, executor.WithWorkers(1), executor.WithThroughput(throughput))
	g, _ := block(t, e, -1)
	var mu sync.Mutex
	var trace []int
	var tasks []*executor.Task
	for i := range each {
		for k := range keys {
			_ = i
			task, err := e.Submit(context.Background(), k, func(context.Context) error {
				mu.Lock()
				trace = append(trace, k)
				mu.Unlock()
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			tasks = append(tasks, task)
		}
	}
	g.open()
	for _, task := range tasks {
		_ = task.Wait(context.Background())
	}
	// Runs of one key are at most throughput long, and while any other key
	// has work left no key gets two turns in a row.
	run := 0
	for i := range trace {
		if i > 0 && trace[i] == trace[i-1] {
			run++
		} else {
			run = 1
		}
		if run > throughput {
			t.Fatalf("key %d ran %d tasks in a row at %d; want <= %d (trace %v)", trace[i], run, i, throughput, trace)
		}
	}
	waitIdle(t, e)
}
