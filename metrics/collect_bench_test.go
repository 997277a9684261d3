package metrics_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/perkey/perkey/executor"
	"github.com/perkey/perkey/metrics"
)

// BenchmarkCollect is one scrape of a Collector whose executor has 10,000
// live keys: "held" has every key held by a running task; "queued" has 16
// running and the rest queued, each key's task waiting its turn. A scrape
// visits every key twice: MaxKeyPending and Ages.
func BenchmarkCollect(b *testing.B) {
	const keys = 10_000
	for _, c := range []struct {
		name    string
		workers int
	}{{"held", keys}, {"queued", 16}} {
		b.Run(c.name, func(b *testing.B) {
			m := metrics.New("perkey")
			e, err := executor.New[string](executor.WithObserver(m), executor.WithWorkers(c.workers))
			if err != nil {
				b.Fatal(err)
			}
			release := make(chan struct{})
			for k := range keys {
				if err := e.Go(context.Background(), strconv.Itoa(k), func(context.Context) error { <-release; return nil }); err != nil {
					b.Fatal(err)
				}
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(m)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := reg.Gather(); err != nil {
					b.Fatal(err)
				}
			}
			close(release)
			if err := e.Close(context.Background()); err != nil {
				b.Fatal(err)
			}
		})
	}
}
