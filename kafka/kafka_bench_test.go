package kafka_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/perkey/perkey/kafka"
)

// BenchmarkParallelConsumerWorkload reproduces the workload of Confluent
// parallel-consumer's published benchmark (KEY ordering): 10,000 messages
// on one partition, 0–5 ms of random work each (seeded), 100 workers, with
// 1 to 10,000 keys.
//
// Reported per run: s/run, from the first handler start to the last
// handler end (the group join before it is excluded); ideal-s, the least
// time any scheduler could take with 100 workers and per-key order:
// max(total work / 100, the busiest key's total work); x-ideal, their
// ratio. parallel-consumer reports 2.06 s for 1,000 keys (ideal 0.25 s).
//
// time.Sleep overshoots (by about 0.6 ms per call on a small VM), which
// no scheduler can recover; x-slept divides s/run by the same ideal
// computed from the durations the handlers actually slept, so it shows
// the consumer's own overhead. The sleep-floor sub-benchmark runs the same
// sleeps on 100 plain goroutines, with no Kafka and no ordering: its
// x-ideal is the best any consumer can show on this machine.
func BenchmarkParallelConsumerWorkload(b *testing.B) {
	const (
		records = 10_000
		workers = 100
		maxWork = 5 * time.Millisecond
	)
	b.Run("sleep-floor", func(b *testing.B) {
		rng := rand.New(rand.NewPCG(42, 1000))
		work := make([]time.Duration, records)
		var total time.Duration
		for i := range work {
			work[i] = time.Duration(rng.Int64N(int64(maxWork)))
			total += work[i]
		}
		var elapsed time.Duration
		runs := 0
		for b.Loop() {
			runs++
			next := make(chan time.Duration, records)
			for _, w := range work {
				next <- w
			}
			close(next)
			start := time.Now()
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for w := range next {
						time.Sleep(w)
					}
				})
			}
			wg.Wait()
			elapsed += time.Since(start)
		}
		s := elapsed.Seconds() / float64(runs)
		ideal := (total / workers).Seconds()
		b.ReportMetric(s, "s/run")
		b.ReportMetric(ideal, "ideal-s")
		b.ReportMetric(s/ideal, "x-ideal")
	})
	for _, nkeys := range []int{1, 10, 100, 1000, 10_000} {
		b.Run(fmt.Sprintf("keys=%d", nkeys), func(b *testing.B) {
			e := newEnv(b, 1)
			p := e.produce(records, nkeys, 0, uint64(nkeys))
			rng := rand.New(rand.NewPCG(42, uint64(nkeys)))
			work := make([]time.Duration, records) // by offset: one partition, offsets 0..records-1
			var total time.Duration
			for i := range work {
				work[i] = time.Duration(rng.Int64N(int64(maxWork)))
				total += work[i]
			}
			ideal := total / workers
			for _, ps := range p.keyOffs {
				var sum time.Duration
				for _, q := range ps {
					sum += work[q.offset]
				}
				ideal = max(ideal, sum)
			}

			var elapsed, slept time.Duration
			runs := 0
			for b.Loop() {
				runs++
				el, sl := consumeTimed(b, e, fmt.Sprintf("%s-run%d", e.group, runs), work, workers)
				elapsed += el
				slept += sl
			}
			s := elapsed.Seconds() / float64(runs)
			b.ReportMetric(s, "s/run")
			b.ReportMetric(ideal.Seconds(), "ideal-s")
			b.ReportMetric(s/ideal.Seconds(), "x-ideal")
			b.ReportMetric(elapsed.Seconds()/slept.Seconds(), "x-slept")
		})
	}
}

// consumeTimed consumes the env's topic once with a fresh group, each
// record sleeping work[offset]. It returns the time from the first handler
// start to the last handler end, and the ideal time for the durations
// actually slept.
func consumeTimed(b *testing.B, e *env, group string, work []time.Duration, workers int) (elapsed, sleptIdeal time.Duration) {
	b.Helper()
	if e.fake == nil {
		b.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _ = e.admin.DeleteGroups(ctx, group)
		})
	}
	var (
		once       sync.Once
		first      time.Time
		mu         sync.Mutex
		last       time.Time
		sleptTotal time.Duration
		perKey     = make(map[string]time.Duration)
		handled    atomic.Int64
		allDone    = make(chan struct{})
		totalRecs  = int64(len(work))
	)
	cfg := kafka.Config{
		Brokers: e.brokers,
		Group:   group,
		Topics:  []string{e.topic},
		Workers: workers,
		Handler: func(ctx context.Context, r *kgo.Record) error {
			once.Do(func() { first = time.Now() })
			t0 := time.Now()
			time.Sleep(work[r.Offset])
			now := time.Now()
			mu.Lock()
			if now.After(last) {
				last = now
			}
			perKey[string(r.Key)] += now.Sub(t0)
			sleptTotal += now.Sub(t0)
			mu.Unlock()
			if handled.Add(1) == totalRecs {
				close(allDone)
			}
			return nil
		},
	}
	c, err := kafka.NewConsumer(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	select {
	case <-allDone:
	case err := <-done:
		cancel()
		b.Fatalf("Run returned early: %v", err)
	case <-time.After(5 * time.Minute):
		cancel()
		<-done
		b.Fatalf("not done after 5 minutes: %+v", c.Stats())
	}
	cancel()
	if err := <-done; err != nil {
		b.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	sleptIdeal = sleptTotal / time.Duration(workers)
	for _, d := range perKey {
		sleptIdeal = max(sleptIdeal, d)
	}
	return last.Sub(first), sleptIdeal
}
