package bench

import (
	"context"
	"errors"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// floorBatcher is the smallest batcher that keeps what a perkey
// Batcher.Submit message pays for, written to show what those guarantees
// cost in BenchmarkBatchSink (impl=floor). It keeps:
//
//   - floorGo's table (a key's queue made on demand and deleted once it
//     drains, one idle entry kept per shard), its fixed workers and its
//     FIFO ready queue;
//   - per key, a FIFO queue run one batch at a time: a batch is the
//     consecutive messages at the head of the queue, at most max, cut under
//     one lock round trip;
//   - one allocation per message, its record, which is what Submit returns
//     for its Task: the message, the caller's ctx, its outcome and whether
//     it ended;
//   - a message whose ctx ended before its batch starts left out of it,
//     and ended with ctx's error;
//   - each message ended with the batch's outcome, a panic in fn recovered;
//   - a fresh msgs slice per call, which fn may keep.
//
// It leaves out everything else: caps and backpressure, Batcher.Do, a Wait
// that blocks (a record says only whether it ended), nested calls, a Close
// that gives up (no message is taken out of a running batch), stripes,
// observers, Stats, the error handler, ages, per-message errors. Besides
// messages, a queue holds plain tasks (Go), which the benchmark's gates
// are; a task ends a batch. It is a measuring stick, not an alternative.
type floorBatcher struct {
	seed   maphash.Seed
	shards [64]floorBatchShard
	ready  chan *floorQueue // keys with queued work and no worker, FIFO
	max    int
	fn     func(ctx context.Context, key string, msgs []int) error
	wg     sync.WaitGroup
}

type floorBatchShard struct {
	mu   sync.Mutex
	m    map[string]*floorQueue // guarded by mu
	idle *floorQueue            // drained, left in m until the next drain; guarded by mu
	_    [40]byte               // keeps neighbouring shard locks off one cache line
}

// floorQueue is one key's queue; guarded by its shard's mu.
type floorQueue struct {
	key       string
	shard     *floorBatchShard
	ring      []floorItem // len is 0 or a power of two
	head, n   int
	scheduled bool // in the ready queue or held by a worker
}

// floorItem is a queued message or, if task is set, a plain task.
type floorItem struct {
	task func()
	msg  *floorMsg
}

// floorMsg is a message and its outcome: the Task a Submit returns.
type floorMsg struct {
	ctx   context.Context
	msg   int
	err   error // written before ended is set
	ended atomic.Bool
}

var errFloorPanic = errors.New("floor: fn panicked")

func newFloorBatcher(workers, max int, fn func(ctx context.Context, key string, msgs []int) error) *floorBatcher {
	f := &floorBatcher{seed: maphash.MakeSeed(), ready: make(chan *floorQueue, floorReady), max: max, fn: fn}
	for i := range f.shards {
		f.shards[i].m = make(map[string]*floorQueue)
	}
	for range workers {
		f.wg.Go(f.work)
	}
	return f
}

// Submit queues msg on key and returns its record.
func (f *floorBatcher) Submit(ctx context.Context, key string, msg int) *floorMsg {
	m := &floorMsg{ctx: ctx, msg: msg}
	f.push(key, floorItem{msg: m})
	return m
}

// Go queues a plain task on key.
func (f *floorBatcher) Go(key string, task func()) { f.push(key, floorItem{task: task}) }

func (f *floorBatcher) push(key string, it floorItem) {
	s := &f.shards[maphash.String(f.seed, key)&uint64(len(f.shards)-1)]
	s.mu.Lock()
	q := s.m[key]
	switch {
	case q == nil:
		q = &floorQueue{key: key, shard: s}
		s.m[key] = q
	case q == s.idle:
		s.idle = nil
	}
	if q.n == len(q.ring) {
		ring := make([]floorItem, max(8, 2*len(q.ring)))
		for i := range q.n {
			ring[i] = q.ring[(q.head+i)&(len(q.ring)-1)]
		}
		q.ring, q.head = ring, 0
	}
	q.ring[(q.head+q.n)&(len(q.ring)-1)] = it
	q.n++
	wake := !q.scheduled
	q.scheduled = true
	s.mu.Unlock()
	if wake {
		f.ready <- q
	}
}

// take cuts the next batch off q's head (locked): one plain task, or up to
// f.max consecutive messages.
func (f *floorBatcher) take(q *floorQueue, batch []*floorMsg) (task func(), n int) {
	mask := len(q.ring) - 1
	if it := &q.ring[q.head]; it.task != nil {
		task, *it = it.task, floorItem{}
		q.head, q.n = (q.head+1)&mask, q.n-1
		return task, 0
	}
	for n < q.n && n < f.max {
		it := &q.ring[(q.head+n)&mask]
		if it.task != nil {
			break
		}
		batch[n], *it = it.msg, floorItem{}
		n++
	}
	q.head, q.n = (q.head+n)&mask, q.n-n
	return nil, n
}

// work runs batches of the keys in the ready queue until Close closes it.
func (f *floorBatcher) work() {
	batch, live := make([]*floorMsg, f.max), make([]*floorMsg, 0, f.max)
	for q := range f.ready {
		s := q.shard
		s.mu.Lock()
		task, n := f.take(q, batch)
		s.mu.Unlock()
		if task != nil {
			task()
		} else {
			f.run(q.key, batch[:n], live)
			clear(batch[:n])
			clear(live[:n])
		}
		s.mu.Lock()
		if q.n > 0 {
			s.mu.Unlock()
			f.ready <- q // to the tail: other keys first
			continue
		}
		q.scheduled = false
		if old := s.idle; old != nil {
			delete(s.m, old.key)
		}
		s.idle = q
		s.mu.Unlock()
	}
}

// run calls fn once on the messages of batch whose ctx has not ended, and
// ends every message of batch; live is scratch, of batch's capacity.
func (f *floorBatcher) run(key string, batch, live []*floorMsg) {
	msgs := make([]int, 0, len(batch))
	live = live[:0]
	for _, m := range batch {
		if err := m.ctx.Err(); err != nil {
			m.err = err
			m.ended.Store(true)
			continue
		}
		msgs = append(msgs, m.msg)
		live = append(live, m)
	}
	if len(live) == 0 {
		return
	}
	err := func() (err error) {
		defer func() {
			if recover() != nil {
				err = errFloorPanic
			}
		}()
		// The first message's ctx, as perkey's batch ctx derives from it.
		return f.fn(live[0].ctx, key, msgs)
	}()
	for _, m := range live {
		m.err = err
		m.ended.Store(true)
	}
}

// Close stops the workers once nothing is queued or running.
func (f *floorBatcher) Close() {
	for busy := true; busy; {
		busy = false
		for i := range f.shards {
			s := &f.shards[i]
			s.mu.Lock()
			for _, q := range s.m {
				busy = busy || q.scheduled
			}
			s.mu.Unlock()
		}
		if busy {
			time.Sleep(100 * time.Microsecond)
		}
	}
	close(f.ready)
	f.wg.Wait()
}

// TestFloorBatcher checks that the floor keeps what it claims: each key's
// messages reach fn in the order they were queued, in batches of at most
// max that never overlap on a key, each ends with its batch's outcome, a
// message whose ctx ended is left out, a panic is survived, and the table
// drains to one idle entry per shard at most.
func TestFloorBatcher(t *testing.T) {
	const nkeys, perKey, maxBatch = 5, 2000, 7
	ks := keys(nkeys)
	var (
		mu      sync.Mutex
		next    = map[string]int{}
		running = map[string]bool{}
	)
	fn := func(_ context.Context, key string, msgs []int) error {
		mu.Lock()
		if running[key] {
			t.Errorf("key %s: two batches at once", key)
		}
		running[key] = true
		if len(msgs) > maxBatch {
			t.Errorf("key %s: a batch of %d, max %d", key, len(msgs), maxBatch)
		}
		for _, m := range msgs {
			if m < next[key] {
				t.Errorf("key %s: message %d after %d", key, m, next[key])
			}
			next[key] = m + 1
		}
		running[key] = false
		mu.Unlock()
		if slices.Contains(msgs, 1) {
			panic("boom")
		}
		return nil
	}
	f := newFloorBatcher(3, maxBatch, fn)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	var all []*floorMsg
	for i := range perKey {
		for _, k := range ks {
			ctx := context.Background()
			if i == 5 {
				ctx = ended
			}
			all = append(all, f.Submit(ctx, k, i))
		}
	}
	done := make(chan struct{})
	go func() { f.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("floor: Close still waiting after a minute")
	}
	panicked := 0
	for i, m := range all {
		switch {
		case !m.ended.Load():
			t.Fatalf("message %d never ended", i)
		case m.msg == 5 && !errors.Is(m.err, context.Canceled):
			t.Errorf("message %d with an ended ctx: %v", i, m.err)
		case m.msg == 1 && m.err != errFloorPanic:
			t.Errorf("message %d in a batch that panicked: %v", i, m.err)
		case m.msg != 5 && m.err != nil && m.err != errFloorPanic:
			t.Errorf("message %d: %v", i, m.err)
		case m.err == errFloorPanic:
			panicked++
		}
	}
	if panicked > nkeys*maxBatch {
		t.Errorf("%d messages ended with the panic, more than one batch per key", panicked)
	}
	for _, k := range ks {
		if next[k] != perKey {
			t.Errorf("key %s: fn saw messages up to %d, want %d", k, next[k]-1, perKey-1)
		}
	}
	for i := range f.shards {
		if n := len(f.shards[i].m); n > 1 {
			t.Errorf("shard %d holds %d entries after the drain, want at most 1", i, n)
		}
	}
}
