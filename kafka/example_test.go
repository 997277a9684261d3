package kafka_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/perkey/perkey/kafka"
)

// A consumer on an in-process kfake cluster: two keys, each handled in
// offset order, the two in parallel.
func ExampleConsumer() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "payments"))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()

	producer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.DefaultProduceTopic("payments"))
	if err != nil {
		panic(err)
	}
	for i := 1; i <= 3; i++ {
		for _, account := range []string{"alice", "bob"} {
			r := &kgo.Record{Key: []byte(account), Value: fmt.Appendf(nil, "%s-%d", account, i)}
			if err := producer.ProduceSync(context.Background(), r).FirstErr(); err != nil {
				panic(err)
			}
		}
	}
	producer.Close()

	var (
		mu   sync.Mutex
		seen = map[string][]string{}
		left = 6
		done = make(chan struct{})
	)
	c, err := kafka.NewConsumer(kafka.Config{
		Brokers: cluster.ListenAddrs(),
		Group:   "ledger",
		Topics:  []string{"payments"},
		Workers: 8,
		Handler: func(ctx context.Context, r *kgo.Record) error {
			time.Sleep(time.Millisecond) // the work; alice and bob run in parallel
			mu.Lock()
			defer mu.Unlock()
			seen[string(r.Key)] = append(seen[string(r.Key)], string(r.Value))
			if left--; left == 0 {
				close(done)
			}
			return nil
		},
	})
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	go func() { <-done; stop() }()
	if err := c.Run(ctx); err != nil { // drains, commits, leaves the group
		panic(err)
	}
	fmt.Println("alice:", seen["alice"])
	fmt.Println("bob:", seen["bob"])
	fmt.Println("handled:", c.Stats().Handled)
	// Output:
	// alice: [alice-1 alice-2 alice-3]
	// bob: [bob-1 bob-2 bob-3]
	// handled: 6
}

// A batch handler for a sink that is cheaper in bulk: each call gets the
// ready records of one key (here at most 4), in offset order, and the calls
// of one key never overlap.
func ExampleConsumer_batches() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events"))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()

	producer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.DefaultProduceTopic("events"))
	if err != nil {
		panic(err)
	}
	var recs []*kgo.Record
	for i := 1; i <= 10; i++ {
		for _, user := range []string{"alice", "bob"} {
			recs = append(recs, &kgo.Record{Key: []byte(user), Value: fmt.Appendf(nil, "%d", i)})
		}
	}
	if err := producer.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		panic(err)
	}
	producer.Close()

	var (
		mu      sync.Mutex
		rows    = map[string][]string{}
		largest int
		left    = len(recs)
		done    = make(chan struct{})
	)
	c, err := kafka.NewConsumer(kafka.Config{
		Brokers:  cluster.ListenAddrs(),
		Group:    "indexer",
		Topics:   []string{"events"},
		MaxBatch: 4,
		BatchHandler: func(ctx context.Context, recs []*kgo.Record) error {
			mu.Lock() // one bulk write per call
			defer mu.Unlock()
			key := string(recs[0].Key) // every record of a batch has the same key
			for _, r := range recs {
				rows[key] = append(rows[key], string(r.Value))
			}
			largest = max(largest, len(recs))
			if left -= len(recs); left == 0 {
				close(done)
			}
			return nil // every record of the batch is done
		},
	})
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	go func() { <-done; stop() }()
	if err := c.Run(ctx); err != nil {
		panic(err)
	}
	fmt.Println("alice:", rows["alice"])
	fmt.Println("bob:", rows["bob"])
	fmt.Println("at most 4 per call:", largest <= 4)
	// Output:
	// alice: [1 2 3 4 5 6 7 8 9 10]
	// bob: [1 2 3 4 5 6 7 8 9 10]
	// at most 4 per call: true
}
