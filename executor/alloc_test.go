package executor_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/perkey/perkey/executor"
)

// What one task costs the heap, measured over many tasks (the race detector
// changes allocation, so these run without it). The bounds are the size
// classes the task path is built to (string keys): an uncontended Do
// allocates only fn's 40-byte context, carved from a block of 8. Every Go
// and Submit is queued as a plain task. A Go has its 40-byte context made
// as the task runs, whatever its ctx, and a batch of them carves theirs
// from blocks of up to 8 (here the key's batches are 32 long: an eighth of
// an allocation per task). A Submit allocates its context and Task in one
// 64-byte object, whatever its ctx (a failing one also makes its Task's
// waiters, to keep the error).
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
	valued := context.WithValue(bg, ctxKey{}, "v") // never ends
	cancelable, cancel := context.WithCancel(bg)
	defer cancel()
	nop := func(context.Context) error { return nil }
	errFailed := errors.New("failed")
	fail := func(context.Context) error { return errFailed }
	idle := func() { waitIdle(t, e) }
	gone := 0
	// plain queues one plain task with submit, in bursts of 64: the key's
	// ring of plain tasks grows once and is then reused, as under a steady
	// load.
	plain := func(submit func() error) func() {
		return func() {
			if err := submit(); err != nil {
				t.Fatal(err)
			}
			if gone++; gone%64 == 0 {
				idle()
			}
		}
	}
	submit := func(fn func(context.Context) error) func() error {
		return func() error { _, err := e.Submit(bg, "k", fn); return err }
	}
	cases := []struct {
		name          string
		op            func()
		allocs, bytes float64
	}{
		{"Do", func() {
			if err := e.Do(bg, "k", nop); err != nil {
				t.Fatal(err)
			}
		}, 1, 40},
		{"Go", plain(func() error { return e.Go(bg, "k", nop) }), 0.25, 40},
		// Whatever its ctx, a Go's context is carved as it runs.
		{"Go with a ctx of values", plain(func() error { return e.Go(valued, "k", nop) }), 0.25, 40},
		{"Submit", plain(submit(nop)), 1, 64},
		// The 64-byte object, and the Task's waiters (32) and channel (96)
		// for the error.
		{"Submit whose fn fails", plain(submit(fail)), 3, 192},
		// The same object: the caller's ctx is an interface in fn's.
		{"Submit with a ctx that can end", plain(func() error {
			_, err := e.Submit(cancelable, "k", nop)
			return err
		}), 1, 64},
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

// TestBytesPerWaitingKey: what a key with one task waiting costs the heap,
// after GC: its mailbox and table entry, its place in the ready queue, and
// the task. Over these 20,000 keys that is 119 B with a plain Go (whose ctx
// is made only as it runs) and 199 B with a plain Submit (bench's
// BytesPerWaitingKey, over 100,000 keys: 112 and 192 B, the tables' growth
// steps falling differently).
func TestBytesPerWaitingKey(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation")
	}
	const n = 20000
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprintf("key-%06d", i)
	}
	for _, tc := range []struct {
		name  string
		queue func(e *executor.Executor[string], key string, fn func(context.Context) error) error
		bytes float64
	}{
		{"Go", func(e *executor.Executor[string], key string, fn func(context.Context) error) error {
			return e.Go(context.Background(), key, fn)
		}, 119},
		{"Submit", func(e *executor.Executor[string], key string, fn func(context.Context) error) error {
			_, err := e.Submit(context.Background(), key, fn)
			return err
		}, 199},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newExec[string](t, executor.WithWorkers(1))
			g, _ := block(t, e, "blocker") // the only worker: every key waits
			var ran sync.WaitGroup
			ran.Add(n)
			fn := func(context.Context) error { ran.Done(); return nil }
			before := liveHeap()
			for _, k := range ks {
				if err := tc.queue(e, k, fn); err != nil {
					t.Fatal(err)
				}
			}
			per := float64(liveHeap()-before) / n
			g.open()
			done := make(chan struct{})
			go func() { ran.Wait(); close(done) }()
			recv(t, "the waiting tasks to run", done)
			t.Logf("%s: %.1f B per waiting key", tc.name, per)
			// Slack for a shard count other than this machine's (16 per
			// P), whose tables' growth steps fall elsewhere: 8 bytes per
			// key for Go, 12 for Submit.
			if per > tc.bytes*1.06 {
				t.Errorf("%s: %.1f B per waiting key; want at most %v", tc.name, per, tc.bytes)
			}
		})
	}
}

// liveHeap is the heap in use after a full GC.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
