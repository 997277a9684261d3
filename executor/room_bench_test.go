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
