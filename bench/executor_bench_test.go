package bench

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/perkey/perkey/executor"
)

// cpuWorkers is perkey as these benchmarks run it: trivial CPU-bound tasks,
// so as many workers as Ps (the executor's docs advise this for CPU work).
func cpuWorkers() impl {
	return perkeyImpl("perkey", executor.WithWorkers(runtime.GOMAXPROCS(0)))
}

// BenchmarkUncontendedDo is the fixed cost of one call: one goroutine, one
// idle key, a trivial task. For the locks it is Lock, fn, Unlock.
//
// impl=floor is not an alternative but a measuring stick: the smallest Do
// with the guarantees an uncontended perkey Do keeps (see floorExec), so
// the gap between it and perkey is what everything else perkey does costs.
func BenchmarkUncontendedDo(b *testing.B) {
	floor := impl{"floor", func() keyed { return newFloor(runtime.GOMAXPROCS(0)) }}
	for _, im := range append(withPeers(cpuWorkers()), floor) {
		b.Run("impl="+im.name, func(b *testing.B) {
			k := prepared(im, keys(1))
			defer k.Close()
			t := newTally(1)
			ctx, key, fn := context.Background(), keys(1)[0], t.fns[0]
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := k.Do(ctx, key, fn); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			t.check(b, b.N)
		})
	}
}

// BenchmarkHotKey is Do on one key from about 8 goroutines at once.
func BenchmarkHotKey(b *testing.B) {
	for _, im := range withPeers(cpuWorkers()) {
		b.Run("impl="+im.name, func(b *testing.B) {
			k := prepared(im, keys(1))
			defer k.Close()
			t := newTally(1)
			ctx, key, fn := context.Background(), keys(1)[0], t.fns[0]
			b.SetParallelism(parallelism())
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := k.Do(ctx, key, fn); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			t.check(b, b.N)
		})
	}
}

// BenchmarkScaling64Producers is 64 goroutines calling Do (synchronously)
// over 100,000 keys: many callers, little contention per key.
func BenchmarkScaling64Producers(b *testing.B) {
	for _, im := range withPeers(cpuWorkers()) {
		b.Run("impl="+im.name, func(b *testing.B) {
			k := prepared(im, keys(100_000))
			defer k.Close()
			produce(b, k, keys(100_000), 64)
		})
	}
}

// BenchmarkStripes compares perkey's striped mode, 1,024 fixed mailboxes,
// with the same number of hashed mutexes (k8s.io/utils/keymutex), and with
// dynamic perkey: about 8 goroutines calling Do over 100,000 keys.
func BenchmarkStripes(b *testing.B) {
	impls := []impl{
		perkeyImpl("perkey-stripes", executor.WithStripes(1024), executor.WithWorkers(runtime.GOMAXPROCS(0))),
		peer("keymutex"), // NewHashed(1024)
		cpuWorkers(),
	}
	ks := keys(100_000)
	for _, im := range impls {
		b.Run("impl="+im.name, func(b *testing.B) {
			k := im.make()
			defer k.Close()
			t := newTally(len(ks))
			ctx := context.Background()
			var next atomic.Int64 // gives each goroutine its own start in ks
			b.SetParallelism(parallelism())
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(1)) * 7919
				for pb.Next() {
					i++
					ki := i % len(ks)
					if err := k.Do(ctx, ks[ki], t.fns[ki]); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			t.check(b, b.N)
		})
	}
}
