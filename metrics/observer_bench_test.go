package metrics_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perkey/perkey/executor"
	"github.com/perkey/perkey/metrics"
)

// BenchmarkObserverOverhead runs the same Do with no observer and with a
// Collector. "inline" is one goroutine on an idle key, where Do runs fn on
// the caller's goroutine: the cheapest path, so the observer's share is as
// large as it gets. "parallel" has every goroutine on its own key, so the
// Collector's shared counters and histograms are contended.
func BenchmarkObserverOverhead(b *testing.B) {
	for _, obs := range []struct {
		name string
		opts func() []executor.Option
	}{
		{"none", func() []executor.Option { return nil }},
		{"collector", func() []executor.Option {
			return []executor.Option{executor.WithObserver(metrics.New("perkey"))}
		}},
	} {
		newExecutor := func(b *testing.B) *executor.Executor[string] {
			e, err := executor.New[string](obs.opts()...)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = e.Close(context.Background()) })
			return e
		}
		fn := func(context.Context) error { return nil }
		b.Run("inline/"+obs.name, func(b *testing.B) {
			e := newExecutor(b)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := e.Do(ctx, "k", fn); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("parallel/"+obs.name, func(b *testing.B) {
			e := newExecutor(b)
			var id atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				key := "k" + strconv.FormatInt(id.Add(1), 10)
				ctx := context.Background()
				for pb.Next() {
					if err := e.Do(ctx, key, fn); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkCollectorEvents is the Collector's own share of a task's cost:
// the three events of a task that runs, without the executor or its clock
// reads.
func BenchmarkCollectorEvents(b *testing.B) {
	m := metrics.New("perkey")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.TaskAccepted()
			m.TaskStarted(300 * time.Microsecond)
			m.TaskFinished(2*time.Millisecond, executor.OK)
		}
	})
}
