package executor_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

// ring runs n tasks, task i holding key i; once all hold their keys, each
// makes a nested call on key i+1 (mod n) with call. It returns how many of
// the nested calls were refused with ErrDeadlock, failing the test on any
// other error or if the tasks do not all end.
func ring(t *testing.T, e *executor.Executor[string], n int, call func(ctx context.Context, i int, next string) error) int {
	t.Helper()
	var started sync.WaitGroup
	started.Add(n)
	barrier := make(chan struct{})
	var refused atomic.Int64
	tasks := make([]*executor.Task, n)
	for i := range n {
		key := fmt.Sprint("k", i)
		next := fmt.Sprint("k", (i+1)%n)
		task, err := e.Submit(context.Background(), key, func(ctx context.Context) error {
			started.Done()
			<-barrier
			err := call(ctx, i, next)
			if errors.Is(err, executor.ErrDeadlock) {
				refused.Add(1)
				return nil
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		tasks[i] = task
	}
	waitAll(t, &started)
	close(barrier)
	for i, task := range tasks {
		if _, err := attempt(t, fmt.Sprint("ring task ", i), func() error { return task.Wait(context.Background()) }); err != nil {
			t.Errorf("ring of %d, task %d: got %v; want nil or ErrDeadlock from its nested call", n, i, err)
		}
	}
	return int(refused.Load())
}

// TestDeadlockRings: rings of 2, 3 and 5 tasks calling into each other's
// keys end with exactly one ErrDeadlock, and every other task goes ahead,
// whether the workers are as many as the ring or more, in many rounds.
func TestDeadlockRings(t *testing.T) {
	rounds := 30
	if testing.Short() || raceEnabled {
		rounds = 10
	}
	for _, n := range []int{2, 3, 5} {
		for _, workers := range []int{n, 2 * n} {
			t.Run(fmt.Sprintf("ring=%d/workers=%d", n, workers), func(t *testing.T) {
				e := newExec[string](t, executor.WithWorkers(workers))
				for round := range rounds {
					got := ring(t, e, n, func(ctx context.Context, _ int, next string) error {
						return e.Do(ctx, next, nop)
					})
					if got != 1 {
						t.Fatalf("round %d: %d of the ring's nested calls refused with ErrDeadlock; want exactly 1", round, got)
					}
				}
				s := waitIdle(t, e)
				if s.Canceled != uint64(rounds) {
					t.Errorf("Stats.Canceled: got %d; want %d (each refused Do never ran)", s.Canceled, rounds)
				}
			})
		}
	}
}

// TestDeadlockKinds: cycles through every kind of nested wait.
func TestDeadlockKinds(t *testing.T) {
	tests := []struct {
		name string
		opts []executor.Option
		call func(e *executor.Executor[string]) func(ctx context.Context, i int, next string) error
	}{
		{"DoShared", nil, func(e *executor.Executor[string]) func(context.Context, int, string) error {
			return func(ctx context.Context, _ int, next string) error { return e.DoShared(ctx, next, nop) }
		}},
		{"DoMany", nil, func(e *executor.Executor[string]) func(context.Context, int, string) error {
			return func(ctx context.Context, i int, next string) error {
				return e.DoMany(ctx, []string{next, fmt.Sprint("free", i)}, nop)
			}
		}},
		{"Submit+Wait", nil, func(e *executor.Executor[string]) func(context.Context, int, string) error {
			return func(ctx context.Context, _ int, next string) error {
				task, err := e.Submit(ctx, next, nop)
				if err != nil {
					return err
				}
				if err := task.Wait(ctx); errors.Is(err, executor.ErrDeadlock) {
					return err
				}
				// The task waited for stays queued; it runs once the
				// ring breaks. Wait for it from outside the ring.
				return nil
			}
		}},
		{"Block room", []executor.Option{executor.WithMaxQueuePerKey(1), executor.WithPolicy(backpressure.Block())},
			func(e *executor.Executor[string]) func(context.Context, int, string) error {
				return func(ctx context.Context, _ int, next string) error { return e.Do(ctx, next, nop) }
			}},
		{"stripes", []executor.Option{executor.WithStripes(1 << 16)}, func(e *executor.Executor[string]) func(context.Context, int, string) error {
			return func(ctx context.Context, _ int, next string) error { return e.Do(ctx, next, nop) }
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newExec[string](t, tt.opts...)
			for round := range 10 {
				for _, n := range []int{2, 3} {
					if got := ring(t, e, n, tt.call(e)); got != 1 {
						t.Fatalf("round %d, ring of %d: %d refused with ErrDeadlock; want 1", round, n, got)
					}
				}
			}
			waitIdle(t, e)
		})
	}
}

// TestNoFalseDeadlock: waits that close no cycle are never refused: chains
// (a waits for b, which waits for c), waits behind queued tasks, a shared
// call joining a shared holder, and many tasks waiting on one busy key.
func TestNoFalseDeadlock(t *testing.T) {
	bg := context.Background()
	t.Run("chain", func(t *testing.T) {
		e := newExec[string](t, executor.WithWorkers(3))
		for round := range 20 {
			gate := make(chan struct{})
			var started sync.WaitGroup
			started.Add(3)
			var tasks []*executor.Task
			for i, k := range []string{"a", "b", "c"} {
				next := []string{"b", "c", ""}[i]
				task, _ := e.Submit(bg, k, func(ctx context.Context) error {
					started.Done()
					<-gate
					if next == "" {
						return nil
					}
					return e.Do(ctx, next, nop)
				})
				tasks = append(tasks, task)
			}
			waitAll(t, &started)
			close(gate)
			for _, task := range tasks {
				if _, err := attempt(t, "chain", func() error { return task.Wait(bg) }); err != nil {
					t.Fatalf("round %d: chain a->b->c: got %v; want nil", round, err)
				}
			}
		}
	})
	t.Run("shared joins shared", func(t *testing.T) {
		e := newExec[string](t)
		gate := make(chan struct{})
		var started sync.WaitGroup
		started.Add(2)
		a, _ := e.Submit(bg, "x", func(ctx context.Context) error {
			started.Done()
			<-gate
			return e.DoShared(ctx, "y", nop)
		})
		done := make(chan error, 1)
		go func() {
			done <- e.DoShared(bg, "y", func(ctx context.Context) error {
				started.Done()
				<-gate
				return e.DoShared(ctx, "x", nop) // x is held exclusively: waits, no cycle through a shared y
			})
		}()
		waitAll(t, &started)
		close(gate)
		if _, err := attempt(t, "a", func() error { return a.Wait(bg) }); err != nil {
			t.Errorf("task on x: got %v; want nil (its shared call joins y's shared group)", err)
		}
		if err := recv(t, "y", done); err != nil {
			t.Errorf("shared task on y: got %v; want nil", err)
		}
	})
	t.Run("many waiters", func(t *testing.T) {
		e := newExec[string](t, executor.WithWorkers(4))
		g, _ := block(t, e, "hot")
		var tasks []*executor.Task
		for i := range 20 {
			task, _ := e.Submit(bg, fmt.Sprint("w", i), func(ctx context.Context) error { return e.Do(ctx, "hot", nop) })
			tasks = append(tasks, task)
		}
		eventually(t, "the waiters to queue", func() bool { return e.Stats().Queued == 20 })
		g.open()
		for i, task := range tasks {
			if _, err := attempt(t, "waiter", func() error { return task.Wait(bg) }); err != nil {
				t.Errorf("waiter %d: got %v; want nil", i, err)
			}
		}
	})
}

// TestDeadlockThroughDoMany: a DoMany from outside, holding one key while
// it waits for another, is an edge of the graph: a task waiting behind it
// and the task it waits for close a cycle.
func TestDeadlockThroughDoMany(t *testing.T) {
	bg := context.Background()
	e := newExec[string](t, executor.WithWorkers(4))
	gate := make(chan struct{})
	bStarted := make(chan struct{})
	// Task B holds b.
	bTask, _ := e.Submit(bg, "b", func(ctx context.Context) error {
		close(bStarted)
		<-gate
		return e.Do(ctx, "x", nop) // waits for A's key: A -> Q -> B -> A
	})
	<-bStarted
	// Q, from outside, takes a at once and waits for b.
	qDone := make(chan error, 1)
	go func() { qDone <- e.DoMany(bg, []string{"a", "b"}, nop) }()
	eventually(t, "Q to queue", func() bool { return e.Stats().Queued == 1 })
	// Task A holds x and waits for a, behind Q.
	aErr := make(chan error, 1)
	aTask, _ := e.Submit(bg, "x", func(ctx context.Context) error {
		err := e.Do(ctx, "a", nop)
		aErr <- err
		return nil
	})
	eventually(t, "A's nested call to queue", func() bool { return e.Stats().Queued == 2 })
	close(gate)
	_, errB := attempt(t, "B", func() error { return bTask.Wait(bg) })
	_, _ = attempt(t, "A", func() error { return aTask.Wait(bg) })
	errA := recv(t, "A's nested call", aErr)
	// Whichever of the two waits is checked second closes the cycle (A's
	// may be queued before it is checked): exactly one is refused.
	if errors.Is(errA, executor.ErrDeadlock) == errors.Is(errB, executor.ErrDeadlock) ||
		(errA != nil && !errors.Is(errA, executor.ErrDeadlock)) || (errB != nil && !errors.Is(errB, executor.ErrDeadlock)) {
		t.Errorf("A's call: %v, B's call: %v; want ErrDeadlock for exactly one, nil for the other", errA, errB)
	}
	if err := recv(t, "Q", qDone); err != nil {
		t.Errorf("Q: got %v; want nil", err)
	}
	waitIdle(t, e)
}

// TestDeadlockOutsideCallsUnchecked: a call from outside any task is never
// refused, however the keys are held.
func TestDeadlockOutsideCallsUnchecked(t *testing.T) {
	e := newExec[string](t)
	g, _ := block(t, e, "a")
	done := make(chan error, 1)
	go func() { done <- e.Do(context.Background(), "a", nop) }()
	eventually(t, "the call to queue", func() bool { return e.Stats().Queued == 1 })
	g.open()
	if err := recv(t, "Do", done); err != nil {
		t.Errorf("outside Do: got %v; want nil", err)
	}
}

// TestDeadlockThroughBatch: task O on "a" waits (Task.Wait, its own
// ctx) for a Batcher message M that runs in a batch; the batch's fn then
// calls Do on "a". That closes a cycle (O -> M's batch -> O): the batch runs
// under a context of its own, so the search finds its wait through the key
// the running message holds.
func TestDeadlockThroughBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bg := context.Background()
		e, _ := executor.New[string](executor.WithWorkers(4))
		gate := make(chan struct{})
		batchStarted := make(chan struct{})
		batchErr := make(chan error, 1)
		b, _ := executor.NewBatcher(e, func(ctx context.Context, key string, msgs []int) error {
			close(batchStarted)
			<-gate
			batchErr <- e.Do(ctx, "a", func(context.Context) error { return nil })
			return nil
		})
		msgc := make(chan *executor.Task, 1)
		waitErr := make(chan error, 1)
		wctx, cancel := context.WithTimeout(bg, time.Minute) // bounds the hang
		defer cancel()
		o, _ := e.Submit(bg, "a", func(ctx context.Context) error {
			m := <-msgc
			ctx, stop := context.WithCancel(ctx)
			defer stop()
			context.AfterFunc(wctx, stop)
			waitErr <- m.Wait(ctx)
			return nil
		})
		m, _ := b.Submit(bg, "k", 1)
		<-batchStarted
		msgc <- m
		synctest.Wait() // O waits for M
		close(gate)     // the batch calls Do(a): a cycle
		errO := <-waitErr
		errB := <-batchErr
		_ = o.Wait(bg)
		if !errors.Is(errO, executor.ErrDeadlock) && !errors.Is(errB, executor.ErrDeadlock) {
			t.Errorf("O's Wait: %v; the batch's Do: %v; want ErrDeadlock for one of them (they waited until a ctx ended)", errO, errB)
		}
		_ = e.Close(bg)
	})
}

// TestNoFalseDeadlockSharedJoin: a nested DoShared queued behind a
// shared call that waits only for a worker joins the shared group as soon
// as a worker drives the key; it waits for no task, so it is not refused,
// although the group's holder S is blocked on the caller's key.
func TestNoFalseDeadlockSharedJoin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bg := context.Background()
		e, _ := executor.New[string](executor.WithWorkers(2))
		aGo := make(chan struct{})
		aErr := make(chan error, 1)
		// A holds x (worker 1).
		a, _ := e.Submit(bg, "x", func(ctx context.Context) error {
			<-aGo
			aErr <- e.DoShared(ctx, "y", nop)
			return nil
		})
		synctest.Wait()
		// S holds y shared, inline on its caller (worker 2), and calls
		// Do(x): it waits for A and lends its worker.
		sErr := make(chan error, 1)
		go func() { sErr <- e.DoShared(bg, "y", func(ctx context.Context) error { return e.Do(ctx, "x", nop) }) }()
		synctest.Wait()
		// B takes the lent worker.
		bGo := make(chan struct{})
		bt, _ := e.Submit(bg, "z", func(context.Context) error { <-bGo; return nil })
		synctest.Wait()
		// T2, a shared call on y from outside, finds no worker: it is
		// queued, waiting only for one.
		t2 := make(chan error, 1)
		go func() { t2 <- e.DoShared(bg, "y", nop) }()
		synctest.Wait()
		// A's DoShared(y) queues behind T2; it will join S's group.
		close(aGo)
		synctest.Wait()
		close(bGo)
		if err := <-aErr; err != nil {
			t.Errorf("A's nested DoShared on y, which joins a shared group: got %v; want nil", err)
		}
		_ = a.Wait(bg)
		_ = bt.Wait(bg)
		<-sErr
		<-t2
		_ = e.Close(bg)
	})
}

// TestDeadlockThroughCallersTask: task X (on "x") waits with its own
// ctx for the Task of task O (on "a"); then O calls Do on "x". That closes
// a cycle (O -> X -> O): the search meets X's wait on O's running turn,
// which is the caller's own task (not filed yet: its wait is the one being
// checked). In the other order (O's Do first, then X's Wait) X's Wait is
// refused.
func TestDeadlockThroughCallersTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bg := context.Background()
		e, _ := executor.New[string](executor.WithWorkers(4))
		wctx, cancel := context.WithTimeout(bg, time.Minute) // bounds the hang
		defer cancel()
		bounded := func(ctx context.Context) (context.Context, func()) {
			ctx, stop := context.WithCancel(ctx)
			context.AfterFunc(wctx, stop)
			return ctx, stop
		}
		oGo := make(chan struct{})
		oErr := make(chan error, 1)
		o, _ := e.Submit(bg, "a", func(ctx context.Context) error {
			<-oGo
			ctx, stop := bounded(ctx)
			defer stop()
			oErr <- e.Do(ctx, "x", nop)
			return nil
		})
		xErr := make(chan error, 1)
		x, _ := e.Submit(bg, "x", func(ctx context.Context) error {
			ctx, stop := bounded(ctx)
			defer stop()
			xErr <- o.Wait(ctx)
			return nil
		})
		synctest.Wait() // X waits for O
		close(oGo)      // O calls into x: a cycle
		errO := <-oErr
		errX := <-xErr
		_, _ = o.Wait(bg), x.Wait(bg)
		if !errors.Is(errO, executor.ErrDeadlock) && !errors.Is(errX, executor.ErrDeadlock) {
			t.Errorf("O's Do: %v; X's Wait: %v; want ErrDeadlock for one of them (they waited until a ctx ended)", errO, errX)
		}
		_ = e.Close(bg)
	})
}

// TestNoFalseDeadlockParkedShared: under Block, a nested DoShared that
// waits for key room on a key two shared calls hold, one of them (S1)
// blocked on the caller's key, closes no cycle: once S2 returns there is
// room, and the call joins S1's shared group without waiting for S1. It is
// not refused.
func TestNoFalseDeadlockParkedShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bg := context.Background()
		e, _ := executor.New[string](executor.WithWorkers(4), executor.WithMaxQueuePerKey(2),
			executor.WithPolicy(backpressure.Block()))
		aGo := make(chan struct{})
		aErr := make(chan error, 1)
		a, _ := e.Submit(bg, "x", func(ctx context.Context) error {
			<-aGo
			aErr <- e.DoShared(ctx, "y", nop) // waits for room on y
			return nil
		})
		synctest.Wait()
		s1 := make(chan error, 1)
		go func() { s1 <- e.DoShared(bg, "y", func(ctx context.Context) error { return e.Do(ctx, "x", nop) }) }()
		synctest.Wait() // S1 holds y shared and waits for A
		s2Go := make(chan struct{})
		s2 := make(chan error, 1)
		go func() { s2 <- e.DoShared(bg, "y", func(context.Context) error { <-s2Go; return nil }) }()
		synctest.Wait() // S2 joins S1: y is at its cap
		close(aGo)
		synctest.Wait() // A's DoShared waits for room on y
		close(s2Go)     // room: A's call can join S1's group
		if err := <-aErr; err != nil {
			t.Errorf("A's nested DoShared on y, which gets room once S2 returns and then joins S1: got %v; want nil", err)
		}
		_ = a.Wait(bg)
		<-s1
		<-s2
		_ = e.Close(bg)
	})
}

// TestNoFalseDeadlockAfterWaitEnds: task O (on "a") waits with its ctx
// for task X's Task, lending its worker, which B takes; O's ctx ends, so
// its Wait returns, and O waits for a worker again (X and B have both). X
// then calls Do on "a": it waits for O, and O waits only for a worker (B
// will give one back). No cycle: O's wait is unfiled as soon as it ends,
// before O takes its worker back, so X's call is not refused.
func TestNoFalseDeadlockAfterWaitEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bg := context.Background()
		e, _ := executor.New[string](executor.WithWorkers(2))
		xGo := make(chan struct{})
		xErr := make(chan error, 1)
		x, _ := e.Submit(bg, "x", func(ctx context.Context) error {
			<-xGo
			xErr <- e.Do(ctx, "a", nop)
			return nil
		})
		oCtx, oCancel := context.WithCancel(bg)
		oErr := make(chan error, 1)
		o, _ := e.Submit(bg, "a", func(ctx context.Context) error {
			ctx, stop := context.WithCancel(ctx)
			defer stop()
			context.AfterFunc(oCtx, stop)
			oErr <- x.Wait(ctx)
			return nil
		})
		synctest.Wait() // O waits for X, its worker lent
		bGo := make(chan struct{})
		b, _ := e.Submit(bg, "b", func(context.Context) error { <-bGo; return nil })
		synctest.Wait() // B has O's worker
		oCancel()
		synctest.Wait() // O's Wait has ended; O waits for a worker
		close(xGo)
		synctest.Wait()
		close(bGo)
		if err := <-xErr; err != nil {
			t.Errorf("X's nested Do on a, whose holder O waits only for a worker: got %v; want nil", err)
		}
		<-oErr
		_, _, _ = o.Wait(bg), x.Wait(bg), b.Wait(bg)
		_ = e.Close(bg)
	})
}

// TestDeadlockParkedBehindDoMany: under Block with WithMaxQueuePerKey(2),
// task B holds z and waits for x, which task A holds; a DoMany M on y and z
// holds y (granted there) and waits for z behind B; U is queued on y behind
// M, so y is at its cap. A then calls Do on y and waits for room: room
// comes only once M or U leaves, and both wait (through B) for A. A cycle,
// which a wait for room behind an exclusive holder does not see: it follows
// the holder's filed waits, and M, not running, has none (before 20a3139
// the multi-key turn holding y was followed).
func TestDeadlockParkedBehindDoMany(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bg := context.Background()
		e, _ := executor.New[string](executor.WithWorkers(4), executor.WithMaxQueuePerKey(2),
			executor.WithPolicy(backpressure.Block()))
		wctx, cancel := context.WithTimeout(bg, time.Minute) // bounds the hang
		defer cancel()
		bounded := func(ctx context.Context) (context.Context, func()) {
			ctx, stop := context.WithCancel(ctx)
			context.AfterFunc(wctx, stop)
			return ctx, stop
		}
		aGo := make(chan struct{})
		aErr := make(chan error, 1)
		a, _ := e.Submit(bg, "x", func(ctx context.Context) error {
			<-aGo
			ctx, stop := bounded(ctx)
			defer stop()
			aErr <- e.Do(ctx, "y", nop) // waits for room on y
			return nil
		})
		b, _ := e.Submit(bg, "z", func(ctx context.Context) error {
			ctx, stop := bounded(ctx)
			defer stop()
			return e.Do(ctx, "x", nop) // waits for A
		})
		synctest.Wait()
		m := make(chan error, 1)
		go func() { m <- e.DoMany(bg, []string{"y", "z"}, nop) }()
		synctest.Wait() // M holds y, queued on z behind B
		u := make(chan error, 1)
		go func() { u <- e.Do(bg, "y", nop) }()
		synctest.Wait() // U queued on y behind M: y at its cap
		close(aGo)
		errA := <-aErr
		errB := b.Wait(bg)
		if !errors.Is(errA, executor.ErrDeadlock) && !errors.Is(errB, executor.ErrDeadlock) {
			t.Errorf("A's nested Do on y, waiting for room behind M, which waits (through B) for A: got %v (B's: %v); want ErrDeadlock", errA, errB)
		}
		_ = a.Wait(bg)
		<-m
		<-u
		_ = e.Close(bg)
	})
}
