package executor_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

// BenchmarkBatcherSubmit is Batcher.Submit from 2 goroutines onto 2 keys,
// whose runs of up to 1,000 messages go to a 20 µs sink: the cost per
// message of queueing and running it. Under MaxQueueDelay every Submit also
// asks for its key's oldest waiting task while a run of up to 1,000
// messages executes (Mailbox.OldestStamp).
func BenchmarkBatcherSubmit(b *testing.B) {
	for _, name := range []string{"maxqueuedelay", "nopolicy"} {
		b.Run(name, func(b *testing.B) {
			opts := []executor.Option{executor.WithWorkers(2)}
			if name == "maxqueuedelay" {
				opts = append(opts, executor.WithMaxQueuePerKey(1<<22), executor.WithPolicy(backpressure.MaxQueueDelay(time.Hour)))
			}
			e, _ := executor.New[int](opts...)
			defer e.Close(context.Background())
			var wg sync.WaitGroup
			bt, _ := executor.NewBatcher(e, func(_ context.Context, _ int, msgs []int) error {
				time.Sleep(20 * time.Microsecond)
				for range msgs {
					wg.Done()
				}
				return nil
			}, executor.WithMaxBatch(1000))
			b.SetParallelism(2)
			b.RunParallel(func(pb *testing.PB) {
				k := 0
				for pb.Next() {
					wg.Add(1)
					if _, err := bt.Submit(context.Background(), k%2, 1); err != nil {
						b.Error(err)
						wg.Done()
					}
					k++
				}
			})
			wg.Wait()
		})
	}
}
