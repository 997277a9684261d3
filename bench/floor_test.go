package bench

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// floorExec is the smallest Do that keeps what an uncontended perkey Do pays
// for, written to show what those guarantees cost
// (BenchmarkUncontendedDo/impl=floor). It keeps:
//
//   - a sharded table whose entry for a key is made on demand and deleted
//     once the key drains, one idle entry kept per shard (as perkey's router
//     does);
//   - one hold per key, passed to waiting callers in FIFO order;
//   - a bound on how many tasks run at once (slots);
//   - a fresh context per task that names its key and records its end;
//   - a panic in fn recovered into an error;
//   - exact counters of tasks submitted, started and completed.
//
// It leaves out all the rest of what perkey does: backpressure policies and
// per-key caps, nested calls and deadlock detection, Close and its drain,
// observers, Stats by key, Go and Submit; and a caller that has to wait runs
// its own task once its turn comes, as with a lock, instead of handing it to
// a pool. It is a measuring stick, not an alternative.
type floorExec struct {
	seed   maphash.Seed
	shards [64]floorShard

	slots     atomic.Int32 // running now
	maxSlots  int32
	slotMu    sync.Mutex
	slotQueue []chan struct{} // callers waiting for a slot, FIFO; guarded by slotMu

	submitted, started, completed atomic.Uint64
}

type floorShard struct {
	mu   sync.Mutex
	m    map[string]*floorKey // guarded by mu
	idle *floorKey            // drained, left in m until the next drain; guarded by mu
	_    [40]byte             // keeps neighbouring shard locks off one cache line
}

// floorKey is a key's hold and the callers waiting for it; guarded by its
// shard's mu.
type floorKey struct {
	key     string
	held    bool
	pending int             // the holder and the waiters
	waiters []chan struct{} // FIFO
}

// floorCtx is a task's context: the caller's, marked with the key.
type floorCtx struct {
	context.Context
	key   string
	ended atomic.Bool
}

func newFloor(slots int) *floorExec {
	f := &floorExec{seed: maphash.MakeSeed(), maxSlots: int32(slots)}
	for i := range f.shards {
		f.shards[i].m = make(map[string]*floorKey)
	}
	return f
}

func (f *floorExec) Do(ctx context.Context, key string, fn func(context.Context) error) (err error) {
	s := &f.shards[maphash.String(f.seed, key)&uint64(len(f.shards)-1)]
	s.mu.Lock()
	k := s.m[key]
	switch {
	case k == nil:
		k = &floorKey{key: key}
		s.m[key] = k
	case k == s.idle:
		s.idle = nil
	}
	k.pending++
	f.submitted.Add(1)
	if !k.held {
		k.held = true
		s.mu.Unlock()
	} else {
		ch := make(chan struct{})
		k.waiters = append(k.waiters, ch)
		s.mu.Unlock()
		<-ch // the hold is passed on to us
	}
	f.acquireSlot()
	c := &floorCtx{Context: ctx, key: key}
	f.started.Add(1)
	func() {
		defer func() {
			if v := recover(); v != nil {
				err = fmt.Errorf("floor: task panicked: %v", v)
			}
		}()
		err = fn(c)
	}()
	c.ended.Store(true)
	f.completed.Add(1)
	f.releaseSlot()

	s.mu.Lock()
	k.pending--
	switch {
	case len(k.waiters) > 0:
		ch := k.waiters[0]
		k.waiters = k.waiters[1:]
		close(ch)
	default:
		k.held = false
		if old := s.idle; old != nil {
			delete(s.m, old.key)
		}
		s.idle = k
	}
	s.mu.Unlock()
	return err
}

func (f *floorExec) acquireSlot() {
	for {
		n := f.slots.Load()
		if n >= f.maxSlots {
			break
		}
		if f.slots.CompareAndSwap(n, n+1) {
			return
		}
	}
	f.slotMu.Lock()
	if f.slots.Add(1) <= f.maxSlots { // one was released meanwhile
		f.slotMu.Unlock()
		return
	}
	f.slots.Add(-1)
	ch := make(chan struct{})
	f.slotQueue = append(f.slotQueue, ch)
	f.slotMu.Unlock()
	<-ch // a releaser passed its slot on to us
}

func (f *floorExec) releaseSlot() {
	if f.slots.Load() < f.maxSlots {
		f.slots.Add(-1) // nobody can be queued: a queued caller saw every slot taken
		return
	}
	f.slotMu.Lock()
	if len(f.slotQueue) > 0 {
		ch := f.slotQueue[0]
		f.slotQueue = f.slotQueue[1:]
		f.slotMu.Unlock()
		close(ch) // the slot passes on: the count stays
		return
	}
	f.slots.Add(-1)
	f.slotMu.Unlock()
}

func (f *floorExec) Submit(ctx context.Context, key string, fn func(context.Context) error) error {
	return f.Do(ctx, key, fn)
}

func (f *floorExec) Left() int {
	n := 0
	for i := range f.shards {
		s := &f.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

func (f *floorExec) Drained() bool {
	for i := range f.shards {
		s := &f.shards[i]
		s.mu.Lock()
		busy := len(s.m) > 1 || (len(s.m) == 1 && s.idle == nil)
		s.mu.Unlock()
		if busy {
			return false
		}
	}
	return true
}

func (f *floorExec) Close() {}

// TestFloor checks that the floor keeps what it claims under contention:
// no two tasks of a key overlap (the tally, and the race detector), none is
// lost, the counters add up, a panic comes back as an error, and the table
// drains.
func TestFloor(t *testing.T) {
	f := newFloor(2)
	const callers, calls, nkeys = 8, 2000, 3
	tl := newTally(nkeys)
	ks := keys(nkeys)
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for i := range calls {
				k := (g + i) % nkeys
				if err := f.Do(context.Background(), ks[k], tl.fns[k]); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("floor: callers still waiting after a minute")
	}
	tl.check(t, callers*calls)
	err := f.Do(context.Background(), ks[0], func(context.Context) error { panic("boom") })
	if err == nil {
		t.Error("a panicking task returned nil")
	}
	const n = callers*calls + 1
	if s, st, c := f.submitted.Load(), f.started.Load(), f.completed.Load(); s != n || st != n || c != n {
		t.Errorf("submitted, started, completed = %d, %d, %d; want %d each", s, st, c, n)
	}
	if !f.Drained() || f.slots.Load() != 0 {
		t.Errorf("after the work: drained %v, slots taken %d", f.Drained(), f.slots.Load())
	}
}
