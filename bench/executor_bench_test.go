package bench

import (
	"context"
	"fmt"
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
			k := im.make()
			defer k.Close()
			t := newTally(1, false)
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
			k := im.make()
			defer k.Close()
			t := newTally(1, false)
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

// BenchmarkSubmitThroughput is 8 producers pushing 1,000,000 trivial tasks
// round-robin over N keys, then waiting for all of them, on a fresh
// implementation each time. perkey uses Submit (perkey-go: Go) and the actor
// its inbox (both fire and forget); the locks run each task inline. One b.N
// iteration is one such burst; tasks/s is the figure to compare.
func BenchmarkSubmitThroughput(b *testing.B) {
	for _, n := range []int{1, 16, 1024, 100_000} {
		ims := withPeers(cpuWorkers())
		ims = append(ims[:1], append([]impl{perkeyGoImpl("perkey-go", executor.WithWorkers(runtime.GOMAXPROCS(0)))}, ims[1:]...)...)
		ims = append(ims, impl{"floor-go", func() keyed { return newFloorQueue(runtime.GOMAXPROCS(0)) }})
		for _, im := range ims {
			b.Run(fmt.Sprintf("keys=%d/impl=%s", n, im.name), func(b *testing.B) {
				produceBursts(b, im.make, keys(n), producers)
			})
		}
	}
}

// BenchmarkScaling64Producers is 64 goroutines calling Do (synchronously)
// over 100,000 keys: many callers, little contention per key.
func BenchmarkScaling64Producers(b *testing.B) {
	for _, im := range withPeers(cpuWorkers()) {
		b.Run("impl="+im.name, func(b *testing.B) {
			k := im.make()
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
			t := newTally(len(ks), false)
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
