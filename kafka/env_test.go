package kafka_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/perkey/perkey/kafka"
)

// env is a cluster for one test: an in-process kfake cluster, or the
// cluster named by KAFKA_BROKERS with a topic and group unique to the test.
type env struct {
	t       testing.TB
	brokers []string
	fake    *kfake.Cluster // nil on a real cluster
	admin   *kadm.Client
	topic   string
	group   string
}

var envSeq atomic.Int64

// newEnv makes a cluster with one topic of the given partitions.
func newEnv(t testing.TB, partitions int32) *env {
	t.Helper()
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	suffix := fmt.Sprintf("%s-%d-%d", name, time.Now().UnixNano()%1e9, envSeq.Add(1))
	e := &env{t: t, topic: "perkey-" + suffix, group: "perkey-g-" + suffix}
	if b := os.Getenv("KAFKA_BROKERS"); b != "" {
		e.brokers = strings.Split(b, ",")
	} else {
		c, err := kfake.NewCluster(
			kfake.NumBrokers(1),
			kfake.SeedTopics(partitions, e.topic),
			kfake.GroupMinSessionTimeout(100*time.Millisecond),
		)
		if err != nil {
			t.Fatalf("kfake.NewCluster: %v", err)
		}
		t.Cleanup(c.Close)
		e.fake = c
		e.brokers = c.ListenAddrs()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...))
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	e.admin = kadm.NewClient(cl)
	if e.fake == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := e.admin.CreateTopics(ctx, partitions, -1, nil, e.topic); err != nil {
			t.Fatalf("CreateTopics: %v", err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _ = e.admin.DeleteGroups(ctx, e.group)
			_, _ = e.admin.DeleteTopics(ctx, e.topic)
		})
	}
	return e
}

// groupOpts are the kgo options every test member uses: fast heartbeats so
// rebalances start at once, and short sessions where the cluster allows.
func (e *env) groupOpts() []kgo.Opt {
	session := 6 * time.Second // Kafka's default group.min.session.timeout.ms
	if e.fake != nil {
		session = 1500 * time.Millisecond
	}
	return []kgo.Opt{
		kgo.HeartbeatInterval(100 * time.Millisecond),
		kgo.SessionTimeout(session),
		kgo.RebalanceTimeout(20 * time.Second),
		kgo.FetchMaxWait(100 * time.Millisecond),
	}
}

// config returns a Config for the env's topic and group, with no handler
// (see mode.use).
func (e *env) config() kafka.Config {
	return kafka.Config{
		Brokers:        e.brokers,
		Group:          e.group,
		Topics:         []string{e.topic},
		Workers:        16,
		MaxHeld:        64,
		MaxPollRecords: 32,
		CommitInterval: 100 * time.Millisecond,
		Backoff:        time.Millisecond,
		MaxBackoff:     5 * time.Millisecond,
	}
}

// produced describes what a test wrote.
type produced struct {
	total   int
	keyOffs map[string][]pos // per record key ("" = nil key, scoped by partition), in offset order
	ends    map[int32]int64  // end offset per partition
}

type pos struct {
	partition int32
	offset    int64
}

// produce writes n records with keys drawn from nkeys keys (key "k<i>"),
// plus one nil-key record in every nilEvery (0: none). Each key lands on
// one partition (the default partitioner hashes it).
func (e *env) produce(n, nkeys, nilEvery int, seed uint64) produced {
	e.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.DefaultProduceTopic(e.topic),
		kgo.ProducerLinger(5*time.Millisecond), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		e.t.Fatalf("producer: %v", err)
	}
	defer cl.Close()
	rng := rand.New(rand.NewPCG(seed, 1))
	recs := make([]*kgo.Record, n)
	for i := range recs {
		r := &kgo.Record{Value: fmt.Appendf(nil, "v%d", i)}
		if nilEvery == 0 || i%nilEvery != 0 {
			r.Key = fmt.Appendf(nil, "k%d", rng.IntN(nkeys))
		}
		recs[i] = r
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := 0; i < n; i += 1000 {
		if err := cl.ProduceSync(ctx, recs[i:min(i+1000, n)]...).FirstErr(); err != nil {
			e.t.Fatalf("produce: %v", err)
		}
	}
	p := produced{total: n, keyOffs: make(map[string][]pos), ends: make(map[int32]int64)}
	for _, r := range recs {
		k := ledgerKey(r)
		p.keyOffs[k] = append(p.keyOffs[k], pos{r.Partition, r.Offset})
		p.ends[r.Partition] = max(p.ends[r.Partition], r.Offset+1)
	}
	for k := range p.keyOffs {
		slices.SortFunc(p.keyOffs[k], func(a, b pos) int { return int(a.offset - b.offset) })
	}
	return p
}

// ledgerKey is the record's ordering key as the consumer sees it: its key,
// or its partition for a nil key.
func ledgerKey(r *kgo.Record) string {
	if r.Key == nil {
		return fmt.Sprintf("<nil>@%d", r.Partition)
	}
	return string(r.Key)
}

// committed returns the group's committed offset per partition (absent:
// none).
func (e *env) committed() map[int32]int64 {
	e.t.Helper()
	out := make(map[int32]int64)
	for p, o := range e.commits() {
		out[p] = o.At
	}
	return out
}

// commits returns the group's commits (offset and metadata) per partition.
func (e *env) commits() map[int32]kadm.Offset {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	os, err := e.admin.FetchOffsets(ctx, e.group)
	if err != nil {
		e.t.Fatalf("FetchOffsets: %v", err)
	}
	out := make(map[int32]kadm.Offset)
	for _, ps := range os {
		for p, o := range ps {
			if o.Err != nil {
				e.t.Fatalf("FetchOffsets partition %d: %v", p, o.Err)
			}
			out[p] = o.Offset
		}
	}
	return out
}

// ledger checks what handlers did against what was produced: per-key
// order (a record is done only after every earlier record of its key),
// no key in two handlers at once (whichever members they run on), the
// shape of every batch, and how many times each record was done.
type ledger struct {
	t *testing.T
	p produced

	mu     sync.Mutex
	index  map[pos]int       // record -> its index in its key's list
	key    map[pos]string    // record -> its ledger key
	prefix map[string]int    // key -> how many of its first records are done
	count  map[pos]int       // record -> times done
	inside map[string]string // key -> member running it now
	errs   []string
	done   int // distinct records done
	calls  int // handler calls begun
	most   int // records of the largest call
}

func newLedger(t *testing.T, p produced) *ledger {
	l := &ledger{t: t, p: p, index: make(map[pos]int), key: make(map[pos]string),
		prefix: make(map[string]int), count: make(map[pos]int), inside: make(map[string]string)}
	for k, ps := range p.keyOffs {
		for i, q := range ps {
			l.index[q] = i
			l.key[q] = k
		}
	}
	return l
}

func (l *ledger) errorf(format string, args ...any) {
	if len(l.errs) < 20 {
		l.errs = append(l.errs, fmt.Sprintf(format, args...))
	}
}

// begin records that member started a handler call on recs (one record,
// or a batch), and checks the batch: 1 to most records, all of one key and
// partition, in offset order, and skipping over no record of the key that
// is not done yet (records done before, as the offset map skips them, may
// fall between two).
func (l *ledger) begin(member string, recs []*kgo.Record, most int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	l.most = max(l.most, len(recs))
	if len(recs) == 0 || len(recs) > most {
		l.errorf("%s: a call with %d records; want 1 to %d", member, len(recs), most)
		if len(recs) == 0 {
			return
		}
	}
	k := ledgerKey(recs[0])
	for i, r := range recs[1:] {
		prev := recs[i]
		a, okA := l.index[pos{prev.Partition, prev.Offset}]
		b, okB := l.index[pos{r.Partition, r.Offset}]
		switch {
		case ledgerKey(r) != k || r.Partition != recs[0].Partition:
			l.errorf("%s: a batch of key %s also holds %d@%d of key %s", member, k, r.Partition, r.Offset, ledgerKey(r))
		case !okA || !okB || b <= a:
			l.errorf("key %s: %s got a batch with %d@%d after %d@%d", k, member, r.Partition, r.Offset, prev.Partition, prev.Offset)
		default:
			for _, q := range l.p.keyOffs[k][a+1 : b] {
				if l.count[q] == 0 {
					l.errorf("key %s: %s got a batch with offset %d after %d, skipping %d (not done)",
						k, member, r.Offset, prev.Offset, q.offset)
				}
			}
		}
	}
	if who, busy := l.inside[k]; busy {
		l.errorf("key %s: %s started offset %d while %s was inside", k, member, recs[0].Offset, who)
	}
	l.inside[k] = member
}

// end records that member's handler call on recs returned; ok means recs
// are done.
func (l *ledger) end(member string, recs []*kgo.Record, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(recs) == 0 {
		return
	}
	if k := ledgerKey(recs[0]); l.inside[k] == member {
		delete(l.inside, k)
	}
	if ok {
		for _, r := range recs {
			l.doneLocked(r)
		}
	}
}

// markDone records r as done outside a handler (dead-lettered).
func (l *ledger) markDone(r *kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.doneLocked(r)
}

func (l *ledger) doneLocked(r *kgo.Record) {
	q := pos{r.Partition, r.Offset}
	k, known := l.key[q]
	if !known {
		l.errorf("unknown record %d@%d", r.Partition, r.Offset)
		return
	}
	if k != ledgerKey(r) {
		l.errorf("record %d@%d: key %q, produced as %q", r.Partition, r.Offset, ledgerKey(r), k)
	}
	i := l.index[q]
	switch {
	case i > l.prefix[k]:
		l.errorf("key %s: offset %d done before offset %d", k, r.Offset, l.p.keyOffs[k][l.prefix[k]].offset)
	case i == l.prefix[k]:
		l.prefix[k]++
	}
	if l.count[q] == 0 {
		l.done++
	}
	l.count[q]++
}

// doneCount is how many distinct records are done.
func (l *ledger) doneCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done
}

// check fails the test on any order or overlap violation, and on any
// record not done. It returns the records done more than once.
func (l *ledger) check() (dups []pos) {
	l.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.errs {
		l.t.Error(e)
	}
	missing := 0
	for q := range l.key {
		switch n := l.count[q]; {
		case n == 0:
			if missing++; missing <= 5 {
				l.t.Errorf("record %d@%d never done", q.partition, q.offset)
			}
		case n > 1:
			dups = append(dups, q)
		}
	}
	if missing > 0 {
		l.t.Errorf("%d of %d records never done; want 0", missing, l.p.total)
	}
	return dups
}

// batches returns how many handler calls began and the records of the
// largest.
func (l *ledger) batches() (calls, most int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls, l.most
}

// mode is how a test's members get their records: a Handler call per
// record, or BatchHandler calls of up to batch records.
type mode struct {
	name  string
	batch int // Config.MaxBatch; 0: a Handler
}

var modes = []mode{{"record", 0}, {"batch", 8}}

// forModes runs f in a subtest for each mode.
func forModes(t *testing.T, f func(t *testing.T, m mode)) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { f(t, m) })
	}
}

// work is what a test's handler does with the records of one call (one
// record, or a batch); nil means they are done.
type work func(ctx context.Context, recs []*kgo.Record) error

// sleeper works for up to maxWork (random) per record of the call.
func sleeper(maxWork time.Duration) work {
	return func(_ context.Context, recs []*kgo.Record) error {
		if maxWork > 0 {
			time.Sleep(rand.N(maxWork * time.Duration(len(recs))))
		}
		return nil
	}
}

// use sets cfg's handler for m: every call logs into l as member (begin,
// then end once w returned, or called runtime.Goexit), with the records
// done if w returned nil.
func (m mode) use(cfg *kafka.Config, l *ledger, member string, w work) {
	call := func(ctx context.Context, recs []*kgo.Record) error {
		l.begin(member, recs, max(m.batch, 1))
		ok := false
		defer func() { l.end(member, recs, ok) }()
		err := w(ctx, recs)
		ok = err == nil
		return err
	}
	cfg.Handler, cfg.BatchHandler, cfg.MaxBatch = nil, nil, m.batch
	if m.batch == 0 {
		cfg.Handler = func(ctx context.Context, r *kgo.Record) error { return call(ctx, []*kgo.Record{r}) }
	} else {
		cfg.BatchHandler = call
	}
}

// waitFor polls cond every 5ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// running is a Consumer started by start.
type running struct {
	c      *kafka.Consumer
	cancel context.CancelFunc
	done   chan error
}

// start creates a Consumer and runs it on a goroutine.
func start(t *testing.T, cfg kafka.Config, opts ...kgo.Opt) *running {
	t.Helper()
	c, err := kafka.NewConsumer(cfg, opts...)
	if err != nil {
		t.Fatalf("NewConsumer: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{c: c, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(60 * time.Second):
			t.Errorf("Run did not return within 60s of its ctx ending")
		}
	})
	return r
}

// runToEnd runs a member with cfg until every record is done in l, stops
// it, and checks that Run returned nil, that l saw no fault and no record
// done twice, and that everything is committed.
func runToEnd(t *testing.T, e *env, l *ledger, cfg kafka.Config) *running {
	t.Helper()
	r := start(t, cfg, e.groupOpts()...)
	waitFor(t, 60*time.Second, "every record done", func() bool { return l.doneCount() == l.p.total })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v; want nil", err)
	}
	if dups := l.check(); len(dups) > 0 {
		t.Errorf("%d records done twice, first %v; want none", len(dups), dups[0])
	}
	checkCommittedToEnd(t, e, l.p)
	return r
}

// stop cancels Run and returns its error.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	return r.wait(t)
}

// wait waits for Run to return, for up to 60s.
func (r *running) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(60 * time.Second):
		t.Fatalf("Run did not return within 60s")
		return nil
	}
}

// size picks the full size, or the small one under -short.
func size(full, short int) int {
	if testing.Short() {
		return short
	}
	return full
}
