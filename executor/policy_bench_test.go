package executor_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

// BenchmarkPolicyOverhead is the cost of admission: Do on an idle key (one
// goroutine) and on 64 keys from parallel goroutines, with no cap, with a
// per-key cap under each policy. The caps are never reached: this is what
// every admitted task pays.
func BenchmarkPolicyOverhead(b *testing.B) {
	configs := []struct {
		name string
		opts []executor.Option
	}{
		{"nocap", nil},
		{"failfast", []executor.Option{executor.WithMaxQueuePerKey(1 << 20)}},
		{"block", []executor.Option{executor.WithMaxQueuePerKey(1 << 20), executor.WithPolicy(backpressure.Block())}},
		{"maxqueuedelay", []executor.Option{executor.WithMaxQueuePerKey(1 << 20), executor.WithPolicy(backpressure.MaxQueueDelay(time.Second))}},
		{"globalcap", []executor.Option{executor.WithMaxPending(1 << 20)}},
	}
	nop := func(context.Context) error { return nil }
	for _, c := range configs {
		opts := append([]executor.Option{executor.WithWorkers(runtime.GOMAXPROCS(0))}, c.opts...)
		b.Run("policy="+c.name+"/serial", func(b *testing.B) {
			e, _ := executor.New[int](opts...)
			defer e.Close(context.Background())
			b.ReportAllocs()
			for range b.N {
				e.Do(context.Background(), 1, nop)
			}
		})
		b.Run("policy="+c.name+"/parallel", func(b *testing.B) {
			e, _ := executor.New[int](opts...)
			defer e.Close(context.Background())
			b.ReportAllocs()
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) {
				k := 0
				for pb.Next() {
					e.Do(context.Background(), k%64, nop)
					k++
				}
			})
		})
	}
}

// BenchmarkHotKeys is HotKeys(10) with 100,000 keys active (one blocked
// task each, plus a queue on a few hot ones): its cost grows with the
// active keys, so call it per scrape, not per request.
func BenchmarkHotKeys(b *testing.B) {
	for _, active := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("active=%d", active), func(b *testing.B) {
			e, _ := executor.New[int](executor.WithWorkers(1))
			release := make(chan struct{})
			ctx := context.Background()
			e.Submit(ctx, -1, func(context.Context) error { <-release; return nil }) // hold the only worker
			for k := range active {
				e.Submit(ctx, k, func(context.Context) error { return nil })
			}
			for k := range 10 {
				for range k {
					e.Submit(ctx, k, func(context.Context) error { return nil })
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if hk := e.HotKeys(10); len(hk) != 10 || hk[0].Pending != 10 {
					b.Fatalf("HotKeys = %v; want 10 keys, the first with 10 pending", hk)
				}
			}
			b.StopTimer()
			close(release)
			e.Close(ctx)
		})
	}
}
