package executor_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

// BenchmarkRoomContended is Do from many goroutines on an executor whose
// global cap (WithMaxPending(4), Block) is almost always reached: most
// calls wait in the executor-wide waiting room, which lets them in one at
// a time, in the order they waited.
func BenchmarkRoomContended(b *testing.B) {
	e, err := executor.New[int](executor.WithWorkers(runtime.GOMAXPROCS(0)), executor.WithMaxPending(4),
		executor.WithPolicy(backpressure.Block()))
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close(context.Background())
	nop := func(context.Context) error { return nil }
	var next atomic.Int64
	b.SetParallelism(16)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		k := int(next.Add(1))
		for pb.Next() {
			if err := e.Do(context.Background(), k%64, nop); err != nil {
				b.Error(err)
				return
			}
			k++
		}
	})
}

// BenchmarkRoomWatch is Go from many goroutines at a cap under Block, where
// most calls wait for room: at a key's cap (4 keys, WithMaxQueuePerKey(4))
// or at the executor's (64 keys, WithMaxPending(4)). While a call waits,
// the ctxs of the tasks holding its room are watched (watch.go): with
// context.Background() there is nothing to watch; with one cancelable ctx
// for every task there is one; with a ctx per task, ended by its task as it
// runs (a request's, ending once it is served), there is one per task
// holding room, and each ends while watched.
func BenchmarkRoomWatch(b *testing.B) {
	for _, room := range []string{"key", "global"} {
		for _, kind := range []string{"background", "cancel-shared", "cancel-per-task"} {
			b.Run("room="+room+"/ctx="+kind, func(b *testing.B) {
				opt, keys := executor.WithMaxQueuePerKey(4), 4
				if room == "global" {
					opt, keys = executor.WithMaxPending(4), 64
				}
				e, err := executor.New[int](executor.WithWorkers(runtime.GOMAXPROCS(0)), opt,
					executor.WithPolicy(backpressure.Block()))
				if err != nil {
					b.Fatal(err)
				}
				shared, cancel := context.WithCancel(context.Background())
				defer cancel()
				var next atomic.Int64
				b.SetParallelism(16)
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					k := int(next.Add(1))
					for pb.Next() {
						ctx, fn := context.Background(), func(context.Context) error { return nil }
						switch kind {
						case "cancel-shared":
							ctx = shared
						case "cancel-per-task":
							var end context.CancelFunc
							ctx, end = context.WithCancel(context.Background())
							fn = func(context.Context) error { end(); return nil }
						}
						if err := e.Go(ctx, k%keys, fn); err != nil {
							b.Error(err)
							return
						}
						k++
					}
				})
				if err := e.Close(context.Background()); err != nil {
					b.Error(err)
				}
			})
		}
	}
}
