// Command kafka consumes one keyed topic three ways and compares them:
//
//   - serial per partition: the classic consumer, one goroutine per
//     partition, each handling its records one by one (ordered, but no more
//     parallel than the partition count);
//   - key-ordered with perkey: package kafka, records of one key in offset
//     order, different keys in parallel up to -workers;
//   - unordered: a pool of -workers goroutines that ignores keys (fast,
//     but a key's records overtake each other).
//
// For each it prints the time taken and how many records were handled out
// of their key's order. By default it starts an in-process kfake cluster;
// with -brokers it uses a real one, on a topic it creates and deletes.
//
// Usage:
//
//	go run ./examples/kafka [-brokers host:9092] [-records 5000] [-keys 500]
//	    [-partitions 4] [-workers 64] [-work 2ms]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/perkey/perkey/kafka"
)

// config is what the flags set.
type config struct {
	brokers    string        // comma-separated; "" starts kfake
	records    int           // records to produce
	keys       int           // distinct keys
	partitions int           // topic partitions
	workers    int           // handler concurrency for perkey and the pool
	work       time.Duration // mean handler time (uniform in [0, 2×work))
}

func main() {
	var cfg config
	flag.StringVar(&cfg.brokers, "brokers", "", "Kafka brokers, comma-separated (default: an in-process kfake cluster)")
	flag.IntVar(&cfg.records, "records", 5000, "records to produce")
	flag.IntVar(&cfg.keys, "keys", 500, "distinct keys")
	flag.IntVar(&cfg.partitions, "partitions", 4, "topic partitions")
	flag.IntVar(&cfg.workers, "workers", 64, "handler concurrency (perkey and unordered)")
	flag.DurationVar(&cfg.work, "work", 2*time.Millisecond, "mean handler time")
	flag.Parse()
	if cfg.records < 1 || cfg.keys < 1 || cfg.partitions < 1 || cfg.workers < 1 || cfg.work < 0 {
		log.Fatal("-records, -keys, -partitions and -workers must be at least 1, -work not negative")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := run(ctx, cfg, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// result is one mode's outcome.
type result struct {
	mode       string
	join       time.Duration // from start to the first record handled
	handling   time.Duration // from the first record handled to the last
	violations int64         // records handled before an earlier record of their key
}

// run sets up the cluster and topic, produces, consumes three ways and
// prints the table to out.
func run(ctx context.Context, cfg config, out io.Writer) ([]result, error) {
	topic := fmt.Sprintf("perkey-example-%d", time.Now().UnixNano())
	var brokers []string
	if cfg.brokers == "" {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(cfg.partitions), topic))
		if err != nil {
			return nil, fmt.Errorf("kfake: %w", err)
		}
		defer c.Close()
		brokers = c.ListenAddrs()
		fmt.Fprintf(out, "in-process kfake cluster at %s\n", strings.Join(brokers, ","))
	} else {
		brokers = strings.Split(cfg.brokers, ",")
	}

	admCl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	var groups []string
	if cfg.brokers != "" {
		if _, err := adm.CreateTopic(ctx, int32(cfg.partitions), -1, nil, topic); err != nil {
			return nil, fmt.Errorf("create topic: %w", err)
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _ = adm.DeleteGroups(cctx, groups...)
			_, _ = adm.DeleteTopics(cctx, topic)
		}()
	}

	if err := produce(ctx, brokers, topic, cfg); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "produced %d records, %d keys, %d partitions; handlers take %v on average\n\n",
		cfg.records, cfg.keys, cfg.partitions, cfg.work)

	modes := []struct {
		name string
		fn   func(ctx context.Context, brokers []string, group, topic string, cfg config, h *handler) error
	}{
		{"serial per partition", consumeSerial},
		{"key-ordered (perkey)", consumePerkey},
		{"unordered pool", consumeUnordered},
	}
	var results []result
	for i, m := range modes {
		group := fmt.Sprintf("%s-g%d", topic, i)
		groups = append(groups, group)
		h := newHandler(cfg)
		mctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() { errc <- m.fn(mctx, brokers, group, topic, cfg, h) }()
		select {
		case <-h.allDone:
		case err := <-errc:
			cancel()
			return results, fmt.Errorf("%s: stopped early: %w", m.name, err)
		case <-ctx.Done():
		}
		cancel()
		if err := <-errc; err != nil && !errors.Is(err, context.Canceled) {
			return results, fmt.Errorf("%s: %w", m.name, err)
		}
		if ctx.Err() != nil {
			return results, ctx.Err()
		}
		results = append(results, h.result(m.name))
	}

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "mode\tjoin\thandling\trecords/s\tout of key order")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%v\t%v\t%.0f\t%d\n", r.mode, r.join.Round(time.Millisecond),
			r.handling.Round(time.Millisecond), float64(cfg.records)/r.handling.Seconds(), r.violations)
	}
	return results, tw.Flush()
}

// produce writes cfg.records records; each value is the record's sequence
// number within its key, so a consumer can check per-key order.
func produce(ctx context.Context, brokers []string, topic string, cfg config) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	seq := make(map[int]int)
	recs := make([]*kgo.Record, 0, 1000)
	for i := range cfg.records {
		k := rng.IntN(cfg.keys)
		seq[k]++
		recs = append(recs, &kgo.Record{
			Key:   []byte("key-" + strconv.Itoa(k)),
			Value: []byte(strconv.Itoa(seq[k])),
		})
		if len(recs) == cap(recs) || i == cfg.records-1 {
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				return fmt.Errorf("produce: %w", err)
			}
			recs = recs[:0]
		}
	}
	return nil
}

// handler does the simulated work and checks per-key order.
type handler struct {
	total   int64
	work    time.Duration
	start   time.Time
	allDone chan struct{}

	mu         sync.Mutex
	last       map[string]int // key -> highest sequence handled
	first, end time.Time
	violations int64
	handled    atomic.Int64
}

func newHandler(cfg config) *handler {
	return &handler{total: int64(cfg.records), work: cfg.work, start: time.Now(),
		allDone: make(chan struct{}), last: make(map[string]int)}
}

// handle simulates the work for r and records its place in its key's order.
func (h *handler) handle(r *kgo.Record) {
	h.mu.Lock()
	if h.first.IsZero() {
		h.first = time.Now()
	}
	h.mu.Unlock()
	if h.work > 0 {
		time.Sleep(rand.N(2 * h.work))
	}
	seq, _ := strconv.Atoi(string(r.Value))
	h.mu.Lock()
	k := string(r.Key)
	if seq != h.last[k]+1 {
		h.violations++
	}
	h.last[k] = max(h.last[k], seq)
	h.end = time.Now()
	h.mu.Unlock()
	if h.handled.Add(1) == h.total {
		close(h.allDone)
	}
}

func (h *handler) result(mode string) result {
	h.mu.Lock()
	defer h.mu.Unlock()
	return result{mode: mode, join: h.first.Sub(h.start), handling: h.end.Sub(h.first), violations: h.violations}
}

// consumePerkey is the key-ordered consumer: package kafka. (For a sink
// cheaper in bulk, Config.BatchHandler takes a key's ready records in one
// call.)
func consumePerkey(ctx context.Context, brokers []string, group, topic string, cfg config, h *handler) error {
	c, err := kafka.NewConsumer(kafka.Config{
		Brokers: brokers,
		Group:   group,
		Topics:  []string{topic},
		Workers: cfg.workers,
		Handler: func(_ context.Context, r *kgo.Record) error {
			h.handle(r)
			return nil
		},
	})
	if err != nil {
		return err
	}
	return c.Run(ctx)
}

// consumeSerial is the classic consumer: each poll's partitions are handled
// in parallel, each partition's records one by one.
func consumeSerial(ctx context.Context, brokers []string, group, topic string, _ config, h *handler) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var wg sync.WaitGroup
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			wg.Go(func() {
				for _, r := range p.Records {
					h.handle(r)
				}
			})
		})
		wg.Wait()
	}
}

// consumeUnordered hands records to a pool of goroutines with no regard
// for keys.
func consumeUnordered(ctx context.Context, brokers []string, group, topic string, cfg config, h *handler) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	recs := make(chan *kgo.Record, cfg.workers)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(recs)
	for range cfg.workers {
		wg.Go(func() {
			for r := range recs {
				h.handle(r)
			}
		})
	}
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		for it := fs.RecordIter(); !it.Done(); {
			select {
			case recs <- it.Next():
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}
