package bench

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/perkey/perkey/executor"
)

// The reference workload: refOps tasks of refSleep over refKeys keys, each
// submitted from a goroutine of its own (impl=perkey and the locks), or all
// from one goroutine (impl=*-submit).
const (
	refOps   = 1000
	refKeys  = 50
	refSleep = time.Millisecond
)

// BenchmarkReferenceWorkload runs the reference workload through each
// implementation; impl=ideal is each key's refOps/refKeys sleeps back to back
// on a goroutine per key, which no implementation can beat. Reports ms/op.
func BenchmarkReferenceWorkload(b *testing.B) {
	ks := keys(refKeys)
	sleep := func(context.Context) error { time.Sleep(refSleep); return nil }
	for _, im := range withPeers(perkeyImpl("perkey", executor.WithWorkers(64))) {
		b.Run("impl="+im.name, func(b *testing.B) {
			k := prepared(im, ks)
			defer k.Close()
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				var wg sync.WaitGroup
				for i := range refOps {
					wg.Go(func() {
						if err := k.Do(ctx, ks[i%refKeys], sleep); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
			}
			b.StopTimer()
			reportMillis(b)
		})
	}
	// The same workload submitted by one goroutine, for the implementations
	// whose Submit queues (the locks' runs fn inline, one task after another).
	for _, im := range []impl{perkeyImpl("perkey-submit", executor.WithWorkers(64)),
		perkeyGoImpl("perkey-go", executor.WithWorkers(64)), renamed(peer("actor"), "actor-submit")} {
		b.Run("impl="+im.name, func(b *testing.B) {
			k := prepared(im, ks)
			defer k.Close()
			ctx := context.Background()
			var wg sync.WaitGroup
			fn := func(ctx context.Context) error { defer wg.Done(); return sleep(ctx) }
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				wg.Add(refOps)
				for i := range refOps {
					if err := k.Submit(ctx, ks[i%refKeys], fn); err != nil {
						b.Fatal(err)
					}
				}
				wg.Wait()
			}
			b.StopTimer()
			reportMillis(b)
		})
	}
	b.Run("impl=ideal", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var wg sync.WaitGroup
			for range refKeys {
				wg.Go(func() {
					for range refOps / refKeys {
						time.Sleep(refSleep)
					}
				})
			}
			wg.Wait()
		}
		reportMillis(b)
	})
}

// reportMillis reports the time per iteration in milliseconds.
func reportMillis(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(time.Millisecond), "ms/op")
}
