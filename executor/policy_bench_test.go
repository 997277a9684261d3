package executor_test

import (
	"context"
	"errors"
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

// BenchmarkRefusalAtCap is the cost of a refusal under FailFast at a full
// cap (a key's, or the executor's) whose queued tasks each carry their own
// cancelable ctx, or context.Background(): Go on the full key from one
// goroutine, every call refused. Before refusing, a cap drops its queued
// tasks whose ctx has ended (a sweep); a scope holding more than
// CapSweepSmall tasks is swept at most once per CapSweepEvery.
func BenchmarkRefusalAtCap(b *testing.B) {
	bg := context.Background()
	nop := func(context.Context) error { return nil }
	for _, scope := range []string{"key", "executor"} {
		for _, size := range []int{64, 10_000} {
			for _, ctxKind := range []string{"background", "cancel-per-task"} {
				b.Run(fmt.Sprintf("scope=%s/queued=%d/ctx=%s", scope, size, ctxKind), func(b *testing.B) {
					opt := executor.WithMaxQueuePerKey(size)
					if scope == "executor" {
						opt = executor.WithMaxPending(size)
					}
					// The queued tasks never run: their ctxs end first.
					quiet := executor.WithErrorHandler(func(any, error) {})
					e, _ := executor.New[string](executor.WithWorkers(1), opt, quiet)
					gate := make(chan struct{})
					defer func() { close(gate); e.Close(bg) }()
					if err := e.Go(bg, "k", func(context.Context) error { <-gate; return nil }); err != nil {
						b.Fatal(err)
					}
					var cancels []context.CancelFunc
					defer func() {
						for _, c := range cancels {
							c()
						}
					}()
					for range size - 1 {
						ctx := bg
						if ctxKind != "background" {
							var cancel context.CancelFunc
							ctx, cancel = context.WithCancel(bg)
							cancels = append(cancels, cancel)
						}
						if err := e.Go(ctx, "k", nop); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportAllocs()
					b.ResetTimer()
					for range b.N {
						if err := e.Go(bg, "k", nop); !errors.Is(err, executor.ErrBusy) {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// BenchmarkWaitWithdraw is a Submit whose ctx ends while its Wait waits,
// behind queued tasks on a key whose running task never ends: the Wait
// withdraws it, found where it was queued: it costs the same however much
// is queued ahead.
func BenchmarkWaitWithdraw(b *testing.B) {
	bg := context.Background()
	nop := func(context.Context) error { return nil }
	for _, queued := range []int{10, 1_000, 10_000} {
		b.Run(fmt.Sprintf("queued=%d", queued), func(b *testing.B) {
			e, _ := executor.New[string](executor.WithWorkers(1))
			gate := make(chan struct{})
			defer func() { close(gate); e.Close(bg) }()
			if err := e.Go(bg, "k", func(context.Context) error { <-gate; return nil }); err != nil {
				b.Fatal(err)
			}
			for range queued {
				if err := e.Go(bg, "k", nop); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				ctx, cancel := context.WithCancel(bg)
				task, err := e.Submit(ctx, "k", nop)
				if err != nil {
					b.Fatal(err)
				}
				cancel()
				if err := task.Wait(bg); !errors.Is(err, context.Canceled) {
					b.Fatal(err)
				}
			}
		})
	}
}
