package bench

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// floorGo is the smallest asynchronous executor that keeps what a perkey Go
// pays for, written to show what those guarantees cost in the throughput
// harness (impl=floor, in the api=Go cells). It keeps:
//
//   - a sharded table whose entry for a key (its queue) is made on demand
//     and deleted once the key drains, one idle entry kept per shard, as
//     perkey's router does;
//   - per key, a FIFO queue (a ring the entry reuses) whose tasks run one
//     at a time;
//   - a fixed set of workers, as many as perkey is given, shared by every
//     key through one FIFO ready queue: a worker takes up to floorBatch of
//     a key's tasks under one lock round trip, runs them, and puts the key
//     back at the tail of the ready queue if more are queued, so that other
//     keys get a worker (contract item 11);
//   - a fresh context per task that names its key and records its end,
//     carved 8 to a block as perkey's are: 32 bytes, or 48 with a ctx other
//     than context.Background(), which needs a home for the caller's;
//   - a task whose ctx ended before it starts is not run (looked at as it
//     would start, as perkey does);
//   - a panic in fn recovered;
//   - exact counts of tasks submitted (per shard, under its lock) and ended
//     (per worker), with no word that every task writes, and a Close that
//     returns once every task has run and every worker has exited.
//
// It leaves out everything else: caps and backpressure, Submit's Task and
// Do, nested calls and deadlock detection, a Close that gives up, shared
// and multi-key holds, observers, Stats, the error handler, ages. Its ready
// queue is a channel as large as the harness's keys, where an executor
// needs one without a bound; submitting after Close is refused, but Close
// must not race with a Go. It is a measuring stick, not an alternative.
type floorGo struct {
	seed    maphash.Seed
	shards  [64]floorGoShard
	ready   chan *floorBox // keys with queued tasks and no worker, FIFO
	workers []floorWorker
	wg      sync.WaitGroup

	// live counts the keys that are in the ready queue or held by a
	// worker. It changes when a key becomes busy or drains, not per task.
	live      atomic.Int64
	closed    atomic.Bool
	drained   chan struct{} // closed when live reaches 0 after Close
	drainOnce sync.Once
}

// floorBatch is how many of a key's tasks a worker takes at once (perkey's
// default WithThroughput).
const floorBatch = 64

// floorReady bounds the ready queue: more than the harness's largest key
// count, so that a send to it never blocks.
const floorReady = 1 << 17

type floorGoShard struct {
	mu        sync.Mutex
	m         map[string]*floorBox // guarded by mu
	idle      *floorBox            // drained, left in m until the next drain; guarded by mu
	submitted uint64               // guarded by mu
	_         [32]byte             // keeps neighbouring shard locks off one cache line
}

// floorBox is one key's queue; guarded by its shard's mu.
type floorBox struct {
	key       string
	shard     *floorGoShard
	ring      []floorGoTask // len is 0 or a power of two
	head, n   int
	scheduled bool // in the ready queue or held by a worker
}

type floorGoTask struct {
	fn  func(context.Context) error
	ctx context.Context
}

func (b *floorBox) push(t floorGoTask) {
	if b.n == len(b.ring) {
		ring := make([]floorGoTask, max(8, 2*len(b.ring)))
		for i := range b.n {
			ring[i] = b.ring[(b.head+i)&(len(b.ring)-1)]
		}
		b.ring, b.head = ring, 0
	}
	b.ring[(b.head+b.n)&(len(b.ring)-1)] = t
	b.n++
}

// take moves up to len(batch) queued tasks into batch, oldest first.
func (b *floorBox) take(batch []floorGoTask) int {
	n := min(b.n, len(batch))
	for i := range n {
		j := (b.head + i) & (len(b.ring) - 1)
		batch[i], b.ring[j] = b.ring[j], floorGoTask{}
	}
	b.head = (b.head + n) & (len(b.ring) - 1)
	b.n -= n
	return n
}

// floorWorker is one worker's own state, on cache lines of its own.
type floorWorker struct {
	_        [64]byte
	ended    uint64 // tasks run or dropped
	panicked uint64
	canceled uint64
	carver   floorCarver
	_        [64]byte
}

// floorCarver carves task contexts 8 to a block, as perkey's are.
type floorCarver struct {
	bg    []floorGoCtx  // block being carved, for Background tasks
	homes []floorGoHome // block being carved, for the others
}

// ctx returns a fresh context for a task of key whose caller passed caller.
func (f *floorCarver) ctx(key string, caller context.Context) *floorGoCtx {
	var c *floorGoCtx
	if caller == floorBackground {
		c = carveFloor(&f.bg)
		c.parent = &floorBackground
	} else {
		h := carveFloor(&f.homes)
		h.caller = caller
		c = &h.c
		c.parent = &h.caller
	}
	c.key = key
	return c
}

// floorGoCtx is a task's context: the caller's, marked with the key, and
// whether the task has ended.
type floorGoCtx struct {
	parent *context.Context
	key    string
	ended  atomic.Uint32
}

// floorGoHome is a floorGoCtx with a place for its caller's ctx.
type floorGoHome struct {
	c      floorGoCtx
	caller context.Context
}

// floorKeyOf is the Value key under which a floorGoCtx gives its key.
type floorKeyOf struct{}

var floorBackground = context.Background()

func (c *floorGoCtx) Deadline() (time.Time, bool) { return (*c.parent).Deadline() }
func (c *floorGoCtx) Done() <-chan struct{}       { return (*c.parent).Done() }
func (c *floorGoCtx) Err() error                  { return (*c.parent).Err() }
func (c *floorGoCtx) Value(k any) any {
	if k == (floorKeyOf{}) {
		return c.key
	}
	return (*c.parent).Value(k)
}

var errFloorClosed = errors.New("floor: closed")

func newFloorGo(workers int) *floorGo {
	f := &floorGo{
		seed:    maphash.MakeSeed(),
		ready:   make(chan *floorBox, floorReady),
		workers: make([]floorWorker, workers),
		drained: make(chan struct{}),
	}
	for i := range f.shards {
		f.shards[i].m = make(map[string]*floorBox)
	}
	for i := range f.workers {
		f.wg.Go(func() { f.work(&f.workers[i]) })
	}
	return f
}

// Go queues fn on key's queue, making the queue if the key has none.
func (f *floorGo) Go(ctx context.Context, key string, fn func(context.Context) error) error {
	if f.closed.Load() {
		return errFloorClosed
	}
	s := &f.shards[maphash.String(f.seed, key)&uint64(len(f.shards)-1)]
	s.mu.Lock()
	b := s.m[key]
	switch {
	case b == nil:
		b = &floorBox{key: key, shard: s}
		s.m[key] = b
	case b == s.idle:
		s.idle = nil
	}
	b.push(floorGoTask{fn, ctx})
	s.submitted++
	wake := !b.scheduled
	b.scheduled = true
	s.mu.Unlock()
	if wake {
		f.live.Add(1)
		f.ready <- b
	}
	return nil
}

// work runs batches of the keys in the ready queue until Close closes it.
func (f *floorGo) work(w *floorWorker) {
	var batch [floorBatch]floorGoTask
	for b := range f.ready {
		s := b.shard
		s.mu.Lock()
		n := b.take(batch[:])
		s.mu.Unlock()
		for i := range batch[:n] {
			f.run(w, b.key, batch[i])
			batch[i] = floorGoTask{}
		}
		s.mu.Lock()
		if b.n > 0 {
			s.mu.Unlock()
			f.ready <- b // to the tail: other keys first
			continue
		}
		b.scheduled = false
		if old := s.idle; old != nil {
			delete(s.m, old.key)
		}
		s.idle = b
		s.mu.Unlock()
		if f.live.Add(-1) == 0 && f.closed.Load() {
			f.drainOnce.Do(func() { close(f.drained) })
		}
	}
}

// run runs one task with a fresh context, unless its ctx has ended.
func (f *floorGo) run(w *floorWorker, key string, t floorGoTask) {
	c := w.carver.ctx(key, t.ctx)
	if t.ctx.Err() != nil {
		w.canceled++
	} else {
		func() {
			defer func() {
				if recover() != nil {
					w.panicked++
				}
			}()
			_ = t.fn(c)
		}()
	}
	c.ended.Store(1)
	w.ended++
}

// carveFloor returns the next item of the block *free, first making a
// block of 8 if it is used up (perkey's carve).
func carveFloor[T any](free *[]T) *T {
	if len(*free) == 0 {
		*free = make([]T, 8)
	}
	c := &(*free)[0]
	if *free = (*free)[1:]; len(*free) == 0 {
		*free = nil
	}
	return c
}

// Close returns once every task submitted has run (or been dropped) and
// every worker has exited, with an error if the counts do not add up.
func (f *floorGo) Close() error {
	f.closed.Store(true)
	if f.live.Load() != 0 {
		<-f.drained
	}
	close(f.ready)
	f.wg.Wait()
	var submitted, ended uint64
	for i := range f.shards {
		s := &f.shards[i]
		s.mu.Lock()
		submitted += s.submitted
		s.mu.Unlock()
	}
	for i := range f.workers {
		ended += f.workers[i].ended
	}
	if submitted != ended {
		return fmt.Errorf("floor: %d tasks submitted, %d ended", submitted, ended)
	}
	return nil
}

// floorGoTarget feeds floorGo in the throughput harness.
type floorGoTarget struct{ f *floorGo }

func (t floorGoTarget) send(ctx context.Context, key string, fn func(context.Context) error) error {
	return t.f.Go(ctx, key, fn)
}

func (t floorGoTarget) close() error { return t.f.Close() }

// TestFloorGo checks that the floor keeps what it claims under contention:
// no two tasks of a key overlap (the tally, and the race detector), each
// key's tasks run in the order one producer queued them, none is lost, the
// counts add up, a panic and an ended ctx are survived, and the table
// drains to one idle entry per shard at most.
func TestFloorGo(t *testing.T) {
	f := newFloorGo(2)
	const producers, tasks, nkeys = 4, 5000, 7
	tl := newTally(nkeys)
	ks := keys(nkeys)
	// Producer g alone feeds keys k with k%producers == g and records the
	// order it queued them in; each task checks it runs next.
	last := make([]int, nkeys)
	var (
		wg   sync.WaitGroup
		sent atomic.Int64
	)
	for g := range producers {
		wg.Go(func() {
			seq := 0
			for i := range tasks {
				k := (g + i*producers) % nkeys
				if k%producers != g {
					continue
				}
				seq++
				want := seq
				err := f.Go(context.Background(), ks[k], func(ctx context.Context) error {
					if want <= last[k] {
						t.Errorf("key %s: task %d ran after %d", ks[k], want, last[k])
					}
					last[k] = want
					if ctx.Value(floorKeyOf{}) != ks[k] {
						t.Errorf("ctx names key %v, want %s", ctx.Value(floorKeyOf{}), ks[k])
					}
					return tl.fns[k](ctx)
				})
				if err != nil {
					t.Error(err)
					return
				}
				sent.Add(1)
			}
		})
	}
	wg.Wait()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.Go(ended, ks[0], func(context.Context) error { t.Error("ran with an ended ctx"); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := f.Go(context.Background(), ks[1], func(context.Context) error { panic("boom") }); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("floor: Close still waiting after a minute")
	}
	ran := 0
	for k := range nkeys {
		ran += tl.ran(k)
	}
	var panicked, canceled uint64
	for i := range f.workers {
		panicked += f.workers[i].panicked
		canceled += f.workers[i].canceled
	}
	if panicked != 1 || canceled != 1 {
		t.Errorf("panicked, canceled = %d, %d; want 1, 1", panicked, canceled)
	}
	for i := range f.shards {
		if n := len(f.shards[i].m); n > 1 {
			t.Errorf("shard %d holds %d entries after the drain, want at most 1", i, n)
		}
	}
	if err := f.Go(context.Background(), ks[0], tl.fns[0]); !errors.Is(err, errFloorClosed) {
		t.Errorf("Go after Close = %v, want errFloorClosed", err)
	}
	if want := int(sent.Load()); ran != want || want == 0 {
		t.Errorf("%d tasks ran, %d sent", ran, want)
	}
}
