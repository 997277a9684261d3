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
				tm := consumeTimed(b, e, fmt.Sprintf("%s-run%d", e.group, runs), workers, records,
					func(cfg *kafka.Config, tm *timer) {
						cfg.Handler = func(ctx context.Context, r *kgo.Record) error {
							tm.sleep([]*kgo.Record{r}, work[r.Offset])
							return nil
						}
					})
				elapsed += tm.elapsed()
				slept += tm.sleptIdeal(workers)
			}
			s := elapsed.Seconds() / float64(runs)
			b.ReportMetric(s, "s/run")
			b.ReportMetric(ideal.Seconds(), "ideal-s")
			b.ReportMetric(s/ideal.Seconds(), "x-ideal")
			b.ReportMetric(elapsed.Seconds()/slept.Seconds(), "x-slept")
		})
	}
}

// BenchmarkBatchSink runs parallel-consumer's workload shape (10,000
// records on one partition, 100 workers) against a sink that costs 1 ms
// per call plus 10 µs per record (time.Sleep), as a bulk insert or a bulk
// request does, with 1,000 keys and a hot variant with 10. per-record
// handles it with a Handler: one call, 1.01 ms, per record. batched uses a
// BatchHandler with MaxBatch 100: one call per batch, 1 ms + 10 µs per
// record; held1000 with the default MaxHeld, held10000 with MaxHeld
// 10,000, enough to hold the whole partition. A batch holds only the
// key's records fetched and waiting, so with 1,000 keys the default
// MaxHeld leaves about one record per key: batches stay small.
//
// Reported per run, as in BenchmarkParallelConsumerWorkload: s/run, from
// the first handler start to the last handler end; ideal-s, the least time
// any scheduler could take with 100 workers, per-key order and at most
// MaxBatch records a call: max(every key's cost / 100, the busiest key's
// cost), where a key of n records costs n × 1.01 ms per record, and
// ⌈n/100⌉ × 1 ms + n × 10 µs batched (all of its records in full
// batches); x-ideal, their ratio; x-slept, s/run over the same ideal
// computed from the calls as made and the time they actually slept (the
// consumer's own overhead, given its batches); recs/call, the mean batch.
func BenchmarkBatchSink(b *testing.B) {
	const (
		records   = 10_000
		workers   = 100
		maxBatch  = 100
		perCall   = time.Millisecond
		perRecord = 10 * time.Microsecond
	)
	cost := func(n int) time.Duration { return perCall + time.Duration(n)*perRecord }
	for _, nkeys := range []int{1000, 10} {
		b.Run(fmt.Sprintf("keys=%d", nkeys), func(b *testing.B) {
			e := newEnv(b, 1)
			p := e.produce(records, nkeys, 0, uint64(nkeys))
			groups := 0 // every run a fresh group: -count runs the variants again on this env
			for _, v := range []struct {
				name    string
				batched bool
				held    int // Config.MaxHeld
			}{{"per-record", false, 0}, {"batched-held1000", true, 0}, {"batched-held10000", true, 10_000}} {
				batched := v.batched
				var total, busiest time.Duration
				for _, ps := range p.keyOffs {
					n := len(ps)
					k := time.Duration(n) * cost(1)
					if batched {
						k = time.Duration((n+maxBatch-1)/maxBatch)*perCall + time.Duration(n)*perRecord
					}
					total += k
					busiest = max(busiest, k)
				}
				ideal := max(total/workers, busiest)
				b.Run(v.name, func(b *testing.B) {
					set := func(cfg *kafka.Config, tm *timer) {
						cfg.Handler = func(ctx context.Context, r *kgo.Record) error {
							tm.sleep([]*kgo.Record{r}, cost(1))
							return nil
						}
					}
					if batched {
						set = func(cfg *kafka.Config, tm *timer) {
							cfg.MaxBatch, cfg.MaxHeld = maxBatch, v.held
							cfg.BatchHandler = func(ctx context.Context, recs []*kgo.Record) error {
								tm.sleep(recs, cost(len(recs)))
								return nil
							}
						}
					}
					var elapsed, slept time.Duration
					runs, calls := 0, 0
					for b.Loop() {
						runs++
						groups++
						tm := consumeTimed(b, e, fmt.Sprintf("%s-%d", e.group, groups), workers, records, set)
						elapsed += tm.elapsed()
						slept += tm.sleptIdeal(workers)
						calls += tm.calls
					}
					s := elapsed.Seconds() / float64(runs)
					b.ReportMetric(s, "s/run")
					b.ReportMetric(ideal.Seconds(), "ideal-s")
					b.ReportMetric(s/ideal.Seconds(), "x-ideal")
					b.ReportMetric(elapsed.Seconds()/slept.Seconds(), "x-slept")
					b.ReportMetric(float64(runs*records)/float64(calls), "recs/call")
				})
			}
		})
	}
}

// timer times one consume run: handler calls sleep through it.
type timer struct {
	total   int64
	handled atomic.Int64
	allDone chan struct{}
	once    sync.Once
	first   time.Time // the first call's start

	mu     sync.Mutex
	last   time.Time // the last call's end
	slept  time.Duration
	perKey map[string]time.Duration
	calls  int
}

// sleep is a handler call on recs, records of one key: it sleeps d.
func (t *timer) sleep(recs []*kgo.Record, d time.Duration) {
	t.once.Do(func() { t.first = time.Now() })
	t0 := time.Now()
	time.Sleep(d)
	now := time.Now()
	t.mu.Lock()
	if now.After(t.last) {
		t.last = now
	}
	t.perKey[string(recs[0].Key)] += now.Sub(t0)
	t.slept += now.Sub(t0)
	t.calls++
	t.mu.Unlock()
	if t.handled.Add(int64(len(recs))) == t.total {
		close(t.allDone)
	}
}

// elapsed is the time from the first call's start to the last one's end.
func (t *timer) elapsed() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last.Sub(t.first)
}

// sleptIdeal is the least time the calls as made could take on workers,
// with the durations they actually slept: max(all of it / workers, the
// busiest key's).
func (t *timer) sleptIdeal(workers int) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	ideal := t.slept / time.Duration(workers)
	for _, d := range t.perKey {
		ideal = max(ideal, d)
	}
	return ideal
}

// consumeTimed consumes the env's topic's records (all of them) once with
// a fresh group, on workers workers, with the handler that set puts in the
// Config; the handler calls the returned timer's sleep.
func consumeTimed(b *testing.B, e *env, group string, workers, records int, set func(*kafka.Config, *timer)) *timer {
	b.Helper()
	if e.fake == nil {
		b.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _ = e.admin.DeleteGroups(ctx, group)
		})
	}
	tm := &timer{total: int64(records), allDone: make(chan struct{}), perKey: make(map[string]time.Duration)}
	cfg := kafka.Config{
		Brokers: e.brokers,
		Group:   group,
		Topics:  []string{e.topic},
		Workers: workers,
	}
	set(&cfg, tm)
	c, err := kafka.NewConsumer(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	select {
	case <-tm.allDone:
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
	return tm
}
