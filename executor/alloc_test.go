package executor_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/perkey/perkey/executor"
)

// What one task costs the heap, measured over many tasks (the race detector
// changes allocation, so these run without it). The bounds are the size
// classes the task path is built to: an uncontended Do allocates only fn's
// 48-byte context, and so does a Go with a ctx that never ends (queued as
// a plain task); such a Submit allocates its context and Task in one
// 96-byte object. With a ctx that can end, a Submit allocates its job,
// context and Task in one 224-byte object, and the watch of its ctx
// (string keys).
// Every executor-wide structure is warmed first, so what is left is per task.

// heapPerOp runs op n times after a warm-up, then waits with drained, and
// reports the mean allocations and bytes per op.
func heapPerOp(t *testing.T, n int, op func(), drained func()) (allocs, bytes float64) {
	t.Helper()
	for range 1000 {
		op()
	}
	drained()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		op()
	}
	drained()
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(n), float64(after.TotalAlloc-before.TotalAlloc) / float64(n)
}

func TestHeapPerTask(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation")
	}
	e := newExec[string](t, executor.WithWorkers(2))
	bg := context.Background()
	cancelable, cancel := context.WithCancel(bg)
	defer cancel()
	nop := func(context.Context) error { return nil }
	idle := func() { waitIdle(t, e) }
	gone := 0
	cases := []struct {
		name          string
		op            func()
		allocs, bytes float64
	}{
		{"Do", func() {
			if err := e.Do(bg, "k", nop); err != nil {
				t.Fatal(err)
			}
		}, 1, 48},
		{"Go", func() {
			if err := e.Go(bg, "k", nop); err != nil {
				t.Fatal(err)
			}
			// Bursts of 64: the key's ring of plain tasks grows once
			// and is then reused, as under a steady load.
			if gone++; gone%64 == 0 {
				idle()
			}
		}, 1, 48},
		{"Submit", func() {
			if _, err := e.Submit(bg, "k", nop); err != nil {
				t.Fatal(err)
			}
			if gone++; gone%64 == 0 {
				idle() // as for Go
			}
		}, 1, 96},
		{"Submit with a ctx that can end", func() {
			if _, err := e.Submit(cancelable, "k", nop); err != nil {
				t.Fatal(err)
			}
		}, 4, 432}, // the 224-byte object, and context.AfterFunc's three
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			const n = 20000
			allocs, bytes := heapPerOp(t, n, tc.op, idle)
			t.Logf("%s: %.2f allocs, %.1f B per task", tc.name, allocs, bytes)
			// A little slack for what is paid per burst, not per task
			// (a drive loop's goroutine, a mailbox made after a retire).
			if allocs > tc.allocs+0.1 || bytes > tc.bytes*1.1 {
				t.Errorf("%s: %.2f allocs and %.1f B per task; want at most %v and %v B",
					tc.name, allocs, bytes, tc.allocs, tc.bytes)
			}
		})
	}
}
