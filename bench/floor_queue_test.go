package bench

import (
	"context"
	"hash/maphash"
	"runtime"
	"sync"
	"sync/atomic"
)

// floorQueue is the smallest fire-and-forget executor that keeps what a
// plain perkey Go keeps on the throughput path, written to show what those
// guarantees cost (BenchmarkSubmitThroughput/impl=floor-go). It keeps:
//
//   - a sharded table whose entry (a mailbox) for a key is made on demand
//     and deleted once the key drains, a few drained ones kept per shard
//     for the next keys;
//   - the key's tasks in FIFO order, one at a time;
//   - a bounded set of workers shared by all keys, a key giving its worker
//     back after a batch of floorBatch tasks if more keys wait;
//   - a fresh context per task that names its key;
//   - exact counters of tasks submitted and completed.
//
// It leaves out all the rest of what perkey does: backpressure, caps,
// cancellation, waits on a Task, nested calls and deadlock detection,
// panics and runtime.Goexit in fn, observers, ages, Close and its drain.
// It is a measuring stick, not an alternative.
type floorQueue struct {
	seed   maphash.Seed
	shards [64]floorQShard
	ready  chan *floorBox // mailboxes with tasks and no worker
	done   sync.WaitGroup // the workers

	submitted, completed paddedCount
}

type paddedCount struct {
	atomic.Uint64
	_ [56]byte
}

type floorQShard struct {
	mu    sync.Mutex
	m     map[string]*floorBox // guarded by mu
	spare []*floorBox          // drained mailboxes to reuse; guarded by mu
	_     [24]byte             // keeps neighbouring shard locks off one cache line
}

// floorBox is a key's mailbox; guarded by its shard's mu, but for the batch
// its worker runs.
type floorBox struct {
	key     string
	sh      *floorQShard
	q       []floorTask // queued, FIFO from head
	head    int
	running bool // a worker has it, or it is in ready
}

type floorTask struct {
	fn     func(context.Context) error
	parent context.Context
}

// floorQCtx is a task's context: the caller's, marked with the key.
type floorQCtx struct {
	context.Context
	key string
}

// floorBatch is how many tasks a mailbox runs before its worker moves on,
// as perkey's DefaultThroughput.
const floorBatch = 32

func newFloorQueue(workers int) *floorQueue {
	f := &floorQueue{seed: maphash.MakeSeed(), ready: make(chan *floorBox, 1<<17)}
	for i := range f.shards {
		f.shards[i].m = make(map[string]*floorBox)
	}
	for range workers {
		f.done.Go(f.work)
	}
	return f
}

// Submit queues fn on key; it never refuses. ready has room for a mailbox
// per key of the benchmarks (at most 100,000), each queued at most once.
func (f *floorQueue) Submit(ctx context.Context, key string, fn func(context.Context) error) error {
	s := &f.shards[maphash.String(f.seed, key)&uint64(len(f.shards)-1)]
	s.mu.Lock()
	b := s.m[key]
	if b == nil {
		if n := len(s.spare); n > 0 {
			b, s.spare = s.spare[n-1], s.spare[:n-1]
		} else {
			b = &floorBox{sh: s}
		}
		b.key = key
		s.m[key] = b
	}
	b.q = append(b.q, floorTask{fn, ctx})
	wake := !b.running
	b.running = true
	s.mu.Unlock()
	f.submitted.Add(1)
	if wake {
		f.ready <- b
	}
	return nil
}

// work runs mailboxes from ready, a batch at a time, until ready closes.
func (f *floorQueue) work() {
	var batch [floorBatch]floorTask
	for b := range f.ready {
		s := b.sh
		s.mu.Lock()
		n := copy(batch[:], b.q[b.head:])
		clear(b.q[b.head : b.head+n])
		b.head += n
		s.mu.Unlock()
		for i := range n {
			t := &batch[i]
			_ = t.fn(&floorQCtx{t.parent, b.key})
			f.completed.Add(1)
			*t = floorTask{}
		}
		s.mu.Lock()
		if b.head < len(b.q) {
			s.mu.Unlock()
			f.ready <- b // behind the keys that wait
			continue
		}
		b.q, b.head, b.running = b.q[:0], 0, false
		delete(s.m, b.key)
		if len(s.spare) < 8 {
			s.spare = append(s.spare, b)
		}
		s.mu.Unlock()
	}
}

func (f *floorQueue) Do(ctx context.Context, key string, fn func(context.Context) error) error {
	done := make(chan error, 1)
	if err := f.Submit(ctx, key, func(ctx context.Context) error { err := fn(ctx); done <- err; return err }); err != nil {
		return err
	}
	return <-done
}

func (f *floorQueue) Left() int {
	n := 0
	for i := range f.shards {
		s := &f.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

func (f *floorQueue) Drained() bool { return f.Left() == 0 }

// Close stops the workers once every task submitted so far has run.
func (f *floorQueue) Close() {
	for f.completed.Load() != f.submitted.Load() {
		runtime.Gosched()
	}
	close(f.ready)
	f.done.Wait()
}
