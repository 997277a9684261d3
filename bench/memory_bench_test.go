package bench

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perkey/perkey/executor"
)

// waitingKeys is how many keys BenchmarkBytesPerWaitingKey keeps waiting.
const waitingKeys = 100_000

// BenchmarkBytesPerWaitingKey measures what one key with one task waiting
// costs: heap plus goroutine stacks, after GC, per key.
//
// perkey runs with one worker, blocked by a task on a key of its own, and
// then takes one Submit (perkey-go: one Go) on each of waitingKeys keys:
// every key has a live mailbox and a queued task. The actor has no worker to block: each key gets
// its own goroutine, parked inside its task until the measurement is taken.
func BenchmarkBytesPerWaitingKey(b *testing.B) {
	ks := keys(waitingKeys)
	b.Run("impl=perkey", func(b *testing.B) {
		waitingPerkey(b, ks, false, executor.WithWorkers(1))
	})
	b.Run("impl=perkey-go", func(b *testing.B) {
		waitingPerkey(b, ks, true, executor.WithWorkers(1))
	})
	b.Run("impl=perkey-stripes", func(b *testing.B) {
		waitingPerkey(b, ks, false, executor.WithWorkers(1), executor.WithStripes(1024))
	})
	b.Run("impl=actor-retiring", func(b *testing.B) {
		var heap, stack float64
		for range b.N {
			a := &actors{m: make(map[string]*actor)}
			var inside atomic.Int64
			gate := make(chan struct{})
			park := func(context.Context) error { inside.Add(1); <-gate; return nil }
			h0, s0 := liveMemory()
			for _, k := range ks {
				_ = a.Submit(context.Background(), k, park) // never fails
			}
			for inside.Load() < int64(len(ks)) {
				runtime.Gosched()
			}
			h1, s1 := liveMemory()
			heap += float64(h1) - float64(h0)
			stack += float64(s1) - float64(s0)
			close(gate)
			a.Close()
		}
		reportPerKey(b, heap, stack, len(ks))
	})
}

// waitingPerkey is BytesPerWaitingKey for perkey with opts, queueing with
// Go if useGo, else with Submit.
func waitingPerkey(b *testing.B, ks []string, useGo bool, opts ...executor.Option) {
	var heap, stack float64
	ctx := context.Background()
	for range b.N {
		e, err := executor.New[string](opts...)
		if err != nil {
			b.Fatal(err)
		}
		started, gate := make(chan struct{}), make(chan struct{})
		_, err = e.Submit(ctx, "blocker", func(context.Context) error {
			close(started)
			<-gate
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		<-started
		var wg sync.WaitGroup
		wg.Add(len(ks))
		fn := func(context.Context) error { wg.Done(); return nil }
		h0, s0 := liveMemory()
		for _, k := range ks {
			if useGo {
				err = e.Go(ctx, k, fn)
			} else {
				_, err = e.Submit(ctx, k, fn)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		h1, s1 := liveMemory()
		heap += float64(h1) - float64(h0)
		stack += float64(s1) - float64(s0)
		close(gate)
		wg.Wait()
		if err := e.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
	reportPerKey(b, heap, stack, len(ks))
}

// reportPerKey reports heap+stack and stack bytes per key, averaged over b.N
// rounds of keys keys each.
func reportPerKey(b *testing.B, heap, stack float64, keys int) {
	n := float64(b.N) * float64(keys)
	b.ReportMetric((heap+stack)/n, "B/key")
	b.ReportMetric(stack/n, "stack-B/key")
}

// churnKeys is how many distinct keys BenchmarkIdleMemory pushes through.
const churnKeys = 1_000_000

// BenchmarkIdleMemory pushes one task on each of churnKeys distinct keys
// through an implementation (8 producers; perkey and the actor
// asynchronously), lets it go idle, and reports what it retains against the
// start: heap after GC (B-retained), goroutines (goroutines-left), and
// entries in its key table (keys-left, -1 if it has none). Each b.N
// iteration is one pass over the keys; the figures are taken after the last.
// The global mutex and keymutex are left out: they have no per-key state.
func BenchmarkIdleMemory(b *testing.B) {
	ks := makeKeys(churnKeys) // before the baseline, so not counted
	for _, im := range []impl{cpuWorkers(), peer("mutexmap"), peer("locker"), peer("actor-retiring")} {
		b.Run("impl="+im.name, func(b *testing.B) {
			var done sync.WaitGroup
			fn := func(context.Context) error { done.Done(); return nil }
			k := im.make()
			defer k.Close()
			h0, _ := liveMemory()
			g0 := runtime.NumGoroutine()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				done.Add(len(ks))
				var prod sync.WaitGroup
				for j := range producers {
					prod.Go(func() {
						for _, key := range ks[j*len(ks)/producers : (j+1)*len(ks)/producers] {
							if err := k.Submit(context.Background(), key, fn); err != nil {
								b.Error(err)
								done.Done()
							}
						}
					})
				}
				prod.Wait()
				done.Wait()
			}
			b.StopTimer()
			// A mailbox or actor retires just after its last task: poll.
			await(5*time.Second, k.Drained)
			await(time.Second, func() bool { return runtime.NumGoroutine() <= g0 })
			h1, _ := liveMemory()
			b.ReportMetric(float64(h1)-float64(h0), "B-retained")
			b.ReportMetric(float64(runtime.NumGoroutine()-g0), "goroutines-left")
			b.ReportMetric(float64(k.Left()), "keys-left")
		})
	}
}
