package executor_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

// TestStripesOrderAndMemory: in striped mode every key keeps its order and
// exclusivity, ActiveKeys counts busy stripes, and memory does not grow
// with the number of distinct keys.
func TestStripesOrderAndMemory(t *testing.T) {
	const stripes = 8
	e := newExec[string](t, executor.WithStripes(stripes), executor.WithWorkers(4))
	ctx := context.Background()
	var wg sync.WaitGroup
	var inside sync.Map // key -> *atomic.Int32
	for p := range 16 {
		wg.Go(func() {
			last := -1
			key := fmt.Sprintf("k%d", p)
			v, _ := inside.LoadOrStore(key, new(atomic.Int32))
			in := v.(*atomic.Int32)
			for i := range 200 {
				err := e.Do(ctx, key, func(context.Context) error {
					if in.Add(1) != 1 {
						t.Errorf("key %s overlapped", key)
					}
					defer in.Add(-1)
					if i != last+1 {
						t.Errorf("key %s ran %d after %d", key, i, last)
					}
					last = i
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	waitAll(t, &wg)
	if got := e.ActiveKeys(); got > stripes {
		t.Errorf("ActiveKeys() = %d; want at most %d stripes", got, stripes)
	}
	waitIdle(t, e)

	// 100,000 distinct keys come and go: the heap stays flat.
	before := heapInUse()
	for i := range 100_000 {
		e.Do(ctx, fmt.Sprint(i), func(context.Context) error { return nil })
	}
	if grew := int64(heapInUse()) - int64(before); grew > 1<<20 {
		t.Errorf("heap grew %d bytes over 100,000 keys in striped mode; want < 1 MiB", grew)
	}
	checkBalanced(t, e)
}

// TestStripesShareKeys: keys on one stripe are one key for re-entry and for
// DoMany's duplicate removal, so holding two of them never deadlocks.
func TestStripesShareKeys(t *testing.T) {
	e := newExec[int](t, executor.WithStripes(1), executor.WithWorkers(1))
	ctx := context.Background()
	ran := false
	if err := e.DoMany(ctx, []int{1, 2, 3}, func(context.Context) error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("DoMany on one stripe = %v, ran=%v; want nil, true", err, ran)
	}
	err := e.Do(ctx, 1, func(ctx context.Context) error {
		return e.Do(ctx, 2, func(context.Context) error { return nil })
	})
	if err != executor.ErrReentrant {
		t.Errorf("nested Do on another key of the held stripe = %v; want ErrReentrant", err)
	}
	hot := make(chan struct{})
	started := make(chan struct{})
	task, _ := e.Submit(ctx, 7, func(context.Context) error { close(started); <-hot; return nil })
	<-started
	e.Submit(ctx, 8, func(context.Context) error { return nil })
	if hk := e.HotKeys(5); len(hk) != 1 || hk[0].Pending != 2 {
		t.Errorf("HotKeys = %+v; want one stripe with 2 pending", hk)
	}
	close(hot)
	task.Wait(ctx)
	waitIdle(t, e)
}

func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// probeStripes finds keys on key 0's stripe (a Do on one, nested in a Do on
// 0, is re-entrant), at least n of them besides 0, and at least one key on
// another stripe.
func probeStripes(t *testing.T, e *executor.Executor[int], n int) (same, other []int) {
	t.Helper()
	err := e.Do(context.Background(), 0, func(ctx context.Context) error {
		for k := 1; len(same) < n || len(other) == 0; k++ {
			switch err := e.Do(ctx, k, func(context.Context) error { return nil }); err {
			case executor.ErrReentrant:
				same = append(same, k)
			case nil:
				other = append(other, k)
			default:
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("probing stripes: %v", err)
	}
	return same, other
}

// TestStripesHotKeysNames: in striped mode HotKeys names a busy stripe
// after a key of its oldest task that maps to that stripe: a DoMany queued
// on two stripes is named by its key on each, not by the key that last used
// the stripe nor by its other key.
func TestStripesHotKeysNames(t *testing.T) {
	e := newExec[int](t, executor.WithStripes(2), executor.WithWorkers(2))
	ctx := context.Background()
	same, other := probeStripes(t, e, 1)
	third, far := same[0], other[0]
	gate, started := make(chan struct{}), make(chan struct{}, 2)
	defer close(gate)
	block := func(context.Context) error { started <- struct{}{}; <-gate; return nil }
	for _, k := range []int{0, far} {
		if _, err := e.Submit(ctx, k, block); err != nil {
			t.Fatal(err)
		}
	}
	<-started
	<-started
	many := make(chan error, 1)
	go func() { many <- e.DoMany(ctx, []int{far, 0}, func(context.Context) error { return nil }) }()
	eventually(t, "the DoMany to queue on both stripes", func() bool {
		n := 0
		for _, kl := range e.HotKeys(2) {
			n += kl.Pending
		}
		return n == 4 // two blockers, and the DoMany on each stripe
	})
	if _, err := e.Submit(ctx, third, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	want := map[int]int{0: 3, far: 2} // blocker, DoMany (and third's task on 0's stripe)
	hot := e.HotKeys(2)
	if len(hot) != 2 {
		t.Fatalf("HotKeys = %+v; want two busy stripes", hot)
	}
	for _, kl := range hot {
		if n, ok := want[kl.Key]; !ok || n != kl.Pending {
			t.Errorf("HotKeys = %+v; want stripes named %d (3 pending) and %d (2 pending)", hot, 0, far)
			break
		}
	}
	gate <- struct{}{}
	gate <- struct{}{}
	if err := <-many; err != nil {
		t.Errorf("DoMany = %v; want nil", err)
	}
	waitIdle(t, e)
}

// TestStripesHotKeysNamesOldest: in striped mode a Go or Submit is a plain
// task like any other, and HotKeys names a stripe after its oldest task,
// plain or not: a running plain task's key; on a stripe where nothing runs,
// a queued Do's key when the Do queued before a Submit, the Submit's key
// when it queued first.
func TestStripesHotKeysNamesOldest(t *testing.T) {
	e := newExec[int](t, executor.WithStripes(2), executor.WithWorkers(1))
	ctx := context.Background()
	same, other := probeStripes(t, e, 2)
	name := func() int {
		t.Helper()
		for _, kl := range e.HotKeys(2) {
			if kl.Key != other[0] { // the blocker's stripe is named by it
				return kl.Key
			}
		}
		t.Fatalf("HotKeys = %+v: 0's stripe is not busy", e.HotKeys(2))
		return 0
	}
	// The only worker runs a plain blocker on the other stripe, so that
	// nothing runs on 0's stripe while its tasks queue.
	g, _ := block(t, e, other[0])
	if k := e.HotKeys(2)[0].Key; k != other[0] {
		t.Errorf("HotKeys names the blocker's stripe %d; want %d, the running Submit's key", k, other[0])
	}
	g.open()
	waitIdle(t, e)
	do, sub := same[0], same[1]
	done := make(chan error, 1)
	queueDo := func(queued int) {
		go func() { done <- e.Do(ctx, do, func(context.Context) error { return nil }) }()
		eventually(t, "the Do to queue", func() bool { return e.Stats().Queued == queued })
	}
	queueSubmit := func() {
		if _, err := e.Submit(ctx, sub, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	for _, doFirst := range []bool{true, false} {
		g, _ := block(t, e, other[0])
		want, first := sub, "Submit"
		if doFirst {
			queueDo(1)
			queueSubmit()
			want, first = do, "Do"
		} else {
			queueSubmit()
			queueDo(2)
		}
		if k := name(); k != want {
			t.Errorf("HotKeys names 0's stripe %d; want %d, the key of the %s queued first", k, want, first)
		}
		g.open()
		if err := recv(t, "the Do to return", done); err != nil {
			t.Fatalf("Do = %v", err)
		}
		waitIdle(t, e)
	}
}

// TestStripesCapsAndCounts: in striped mode keys on one stripe share the
// per-key cap, ActiveKeys counts busy stripes and HotKeys names each busy
// stripe by one of its pending keys.
func TestStripesCapsAndCounts(t *testing.T) {
	e := newExec[string](t, executor.WithStripes(1), executor.WithWorkers(4), executor.WithMaxQueuePerKey(3))
	g, _ := block(t, e, "a")
	var tasks []*executor.Task
	for _, k := range []string{"b", "c"} {
		task, err := e.Submit(context.Background(), k, nop)
		if err != nil {
			t.Fatalf("Submit %s: got %v; want nil", k, err)
		}
		tasks = append(tasks, task)
	}
	var be *backpressure.BusyError
	if _, err := e.Submit(context.Background(), "d", nop); !errors.As(err, &be) || be.Pending != 3 || be.Limit != 3 {
		t.Errorf("Submit on a full stripe: got %v; want a *BusyError with Pending 3, Limit 3", err)
	}
	if got := e.ActiveKeys(); got != 1 {
		t.Errorf("ActiveKeys: got %d; want 1 (one busy stripe)", got)
	}
	t.Run("HotKeys names a pending key", func(t *testing.T) {
		hot := e.HotKeys(5)
		if len(hot) != 1 || hot[0].Pending != 3 {
			t.Fatalf("HotKeys: got %v; want one stripe with 3 pending", hot)
		}
		// A rejected submission ("d") must not name the stripe (it once
		// did: the router recorded every key that touched the stripe).
		if k := hot[0].Key; k != "a" && k != "b" && k != "c" {
			t.Errorf("HotKeys: stripe named by %q; want a key pending on it (a, b or c)", k)
		}
	})
	g.open()
	for _, task := range tasks {
		if err := task.Wait(context.Background()); err != nil {
			t.Errorf("Wait: got %v; want nil", err)
		}
	}
	waitIdle(t, e)
}
