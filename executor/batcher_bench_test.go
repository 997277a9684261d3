package executor_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

// BenchmarkBatcherSubmit is Batcher.Submit from 2 goroutines per core,
// each alternating between 2 keys, whose runs of up to 1,000 messages go
// to a 20 µs sink: the cost per message of queueing and running it. Under
// MaxQueueDelay every Submit also asks for its key's oldest waiting task
// while a run of up to 1,000 messages executes (Mailbox.OldestStamp). The
// ctx is context.Background() or one cancelable ctx for every message.
// Completion is counted once per run by the sink and once per producer,
// so that no word is written by every message.
func BenchmarkBatcherSubmit(b *testing.B) {
	for _, policy := range []string{"maxqueuedelay", "nopolicy"} {
		for _, kind := range []string{"background", "cancel-shared"} {
			b.Run("policy="+policy+"/ctx="+kind, func(b *testing.B) {
				opts := []executor.Option{executor.WithWorkers(2)}
				if policy == "maxqueuedelay" {
					opts = append(opts, executor.WithMaxQueuePerKey(1<<22), executor.WithPolicy(backpressure.MaxQueueDelay(time.Hour)))
				}
				e, _ := executor.New[int](opts...)
				defer e.Close(context.Background())
				ctx := context.Background()
				if kind == "cancel-shared" {
					c, cancel := context.WithCancel(ctx)
					defer cancel()
					ctx = c
				}
				var ran, submitted atomic.Int64
				bt, _ := executor.NewBatcher(e, func(_ context.Context, _ int, msgs []int) error {
					time.Sleep(20 * time.Microsecond)
					ran.Add(int64(len(msgs)))
					return nil
				}, executor.WithMaxBatch(1000))
				b.SetParallelism(2)
				b.RunParallel(func(pb *testing.PB) {
					k, n := 0, int64(0)
					for pb.Next() {
						if _, err := bt.Submit(ctx, k%2, 1); err != nil {
							b.Error(err)
						} else {
							n++
						}
						k++
					}
					submitted.Add(n)
				})
				for ran.Load() < submitted.Load() {
					runtime.Gosched()
				}
			})
		}
	}
}
