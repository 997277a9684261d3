package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perkey/perkey/executor"
)

// The batch workload: batchKeys keys with batchPerKey messages each, all
// submitted up front, to a sink that costs batchCall per call plus
// batchPerMsg per message (a bulk write: a round trip, then per-row work).
const (
	batchKeys   = 100
	batchPerKey = 1000
	batchMax    = 100
	batchCall   = time.Millisecond
	batchPerMsg = 10 * time.Microsecond
)

// sink sleeps as the batch workload's sink costs for n messages.
func sink(n int) { time.Sleep(batchCall + time.Duration(n)*batchPerMsg) }

// execGate queues a benchmark's gate task on e.
func execGate(e *executor.Executor[string]) func(key string, fn func()) error {
	return func(key string, fn func()) error {
		return e.Go(context.Background(), key, func(context.Context) error { fn(); return nil })
	}
}

// BenchmarkBatchSink runs the batch workload with a Batcher (max 100), with
// per-message Go (one sink call per message), with the floor (the smallest
// batcher that keeps what a Batcher.Submit message pays for, see
// floorBatcher, on as many workers), and the ideal: each key's
// messages in batchPerKey/batchMax calls of batchMax back to back, on a
// goroutine per key (about 10 calls of 2 ms, so about 20 ms). Reports ms/op.
//
// "Submitted up front": the clock starts once every message is queued
// (behind a gate task per key, opened when the clock starts), so the figure
// is the executor's, not the submitting goroutine's.
//
// The Batcher also reports calls/key (10 when every call gets batchMax
// messages) and first-ms/op: how long after the gates open the last key's
// first call starts (the ideal's is about 0), which is what cutting the
// first batches costs before any sink call can hide it.
func BenchmarkBatchSink(b *testing.B) {
	ks := keys(batchKeys)
	ctx := context.Background()
	// run times the workload: each round queues a closed-gate task on every
	// key, waits until every gate task runs, submits every message with
	// submit (done counts them down as the sink handles them), starts the
	// clock, calls opening (if not nil) and opens the gates.
	run := func(b *testing.B, goGate func(key string, fn func()) error, done *sync.WaitGroup, opening func(), submit func(key string, msg int) error) {
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			gate := make(chan struct{})
			var started sync.WaitGroup
			started.Add(batchKeys)
			for _, k := range ks {
				if err := goGate(k, func() { started.Done(); <-gate }); err != nil {
					b.Fatal(err)
				}
			}
			// Every gate runs (a worker per key) before any message comes:
			// no drive loop can take messages into the batch it cut for its
			// gate, so each key's messages are cut once the gates open.
			started.Wait()
			done.Add(batchKeys * batchPerKey)
			for i := range batchPerKey {
				for _, k := range ks {
					if err := submit(k, i); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StartTimer()
			if opening != nil {
				opening()
			}
			close(gate)
			done.Wait()
		}
		b.StopTimer()
		reportMillis(b)
	}
	// A consumer loop's messages carry its ctx, which can end: impl=batcher
	// and impl=floor run with context.Background(), their -cancelable twins
	// with one cancelable ctx for every message.
	loop, stop := context.WithCancel(context.Background())
	defer stop()
	batcher := func(b *testing.B, msgCtx context.Context) {
		e, _ := executor.New[string](executor.WithWorkers(batchKeys))
		var done sync.WaitGroup
		var calls atomic.Int64
		// Each round, a key's first call notes when it started; the
		// latest of those adds up in firsts.
		var opened time.Time
		var last, firsts time.Duration
		var mu sync.Mutex
		started := make(map[string]bool, batchKeys)
		bt, _ := executor.NewBatcher(e, func(_ context.Context, k string, msgs []int) error {
			calls.Add(1)
			mu.Lock()
			if !started[k] {
				started[k] = true
				last = max(last, time.Since(opened))
			}
			mu.Unlock()
			sink(len(msgs))
			done.Add(-len(msgs))
			return nil
		}, executor.WithMaxBatch(batchMax))
		opening := func() {
			mu.Lock()
			firsts += last
			last = 0
			clear(started)
			opened = time.Now()
			mu.Unlock()
		}
		defer e.Close(ctx)
		run(b, execGate(e), &done, opening, func(k string, i int) error { _, err := bt.Submit(msgCtx, k, i); return err })
		mu.Lock()
		firsts += last
		mu.Unlock()
		b.ReportMetric(float64(calls.Load())/float64(b.N*batchKeys), "calls/key")
		b.ReportMetric(float64(firsts)/float64(b.N)/float64(time.Millisecond), "first-ms/op")
	}
	b.Run("impl=batcher", func(b *testing.B) { batcher(b, ctx) })
	b.Run("impl=batcher-cancelable", func(b *testing.B) { batcher(b, loop) })
	b.Run("impl=per-message", func(b *testing.B) {
		e, _ := executor.New[string](executor.WithWorkers(batchKeys))
		var done sync.WaitGroup
		fn := func(context.Context) error { sink(1); done.Done(); return nil }
		defer e.Close(ctx)
		run(b, execGate(e), &done, nil, func(k string, _ int) error { return e.Go(ctx, k, fn) })
	})
	floor := func(b *testing.B, msgCtx context.Context) {
		var done sync.WaitGroup
		f := newFloorBatcher(batchKeys, batchMax, func(_ context.Context, _ string, msgs []int) error {
			sink(len(msgs))
			done.Add(-len(msgs))
			return nil
		})
		defer f.Close()
		gate := func(k string, fn func()) error { f.Go(k, fn); return nil }
		run(b, gate, &done, nil, func(k string, i int) error { f.Submit(msgCtx, k, i); return nil })
	}
	b.Run("impl=floor", func(b *testing.B) { floor(b, ctx) })
	b.Run("impl=floor-cancelable", func(b *testing.B) { floor(b, loop) })
	b.Run("impl=ideal", func(b *testing.B) {
		for range b.N {
			var wg sync.WaitGroup
			for range ks {
				wg.Go(func() {
					for range batchPerKey / batchMax {
						sink(batchMax)
					}
				})
			}
			wg.Wait()
		}
		reportMillis(b)
	})
}
