package executor_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/perkey/perkey/executor"
)

// Named regression tests: each guards against a failure class that other
// executors and actor runtimes have shipped.

// TestRegressionLastTaskLostOnIdle guards against netty #8230: the last task
// is lost when the executor decides it is idle while a submitter is
// appending (the retire-vs-submit race, PITFALLS 1). Submissions land
// exactly as the previous task ends and its mailbox retires; every one must
// run, never beside another task of its key, and nothing may be left.
func TestRegressionLastTaskLostOnIdle(t *testing.T) {
	e := newExec[int](t, executor.WithWorkers(2), executor.WithThroughput(1))
	const keys, rounds, submitters = 4, 2000, 4
	var ran atomic.Int64
	var occ occupancies[int]
	var wg sync.WaitGroup
	for s := range submitters {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(s), 8230))
			for range rounds {
				k := r.IntN(keys)
				body := func(context.Context) error {
					occ.of(k).enter(false)
					defer occ.of(k).exit(false)
					ran.Add(1)
					return nil
				}
				// Half the time async (the mailbox drains on a worker while
				// we move on), half sync (it drains on our goroutine).
				if r.IntN(2) == 0 {
					task, err := e.Submit(context.Background(), k, body)
					if err != nil {
						t.Errorf("Submit: got %v; want nil", err)
						return
					}
					if r.IntN(4) == 0 {
						task.Wait(context.Background())
					}
				} else if err := e.Do(context.Background(), k, body); err != nil {
					t.Errorf("Do: got %v; want nil", err)
				}
			}
		})
	}
	waitAll(t, &wg)
	s := waitIdle(t, e)
	if got, want := ran.Load(), int64(submitters*rounds); got != want || s.Completed != uint64(want) {
		t.Errorf("tasks run: got %d (Completed %d); want %d: a task was lost at the idle transition", got, s.Completed, want)
	}
	if n := occ.overlaps(); n != 0 {
		t.Errorf("overlaps within a key: got %d; want 0", n)
	}
}

// TestRegressionMailboxLeakUnderLoad guards against hollywood #43: mailboxes
// leaking under load. Tasks on many keys end in every possible way (errors,
// panics, cancellations before and while queued, rejections, Close giving
// up is covered elsewhere); afterwards no mailbox may remain and the heap
// must come back.
func TestRegressionMailboxLeakUnderLoad(t *testing.T) {
	e := newExec[string](t, executor.WithWorkers(4), executor.WithMaxQueuePerKey(3))
	heap0 := heapInUse()
	var wg sync.WaitGroup
	for p := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(p), 43))
			for i := range 3000 {
				key := fmt.Sprintf("k%d", r.IntN(2000))
				ctx, cancel := context.WithCancel(context.Background())
				if r.IntN(5) == 0 {
					cancel()
				}
				fn := func(context.Context) error {
					switch i % 4 {
					case 0:
						return errors.New("task error")
					case 1:
						panic("task panic")
					}
					return nil
				}
				task, err := e.Submit(ctx, key, fn)
				if err == nil && r.IntN(3) == 0 {
					cancel() // maybe while queued
					task.Wait(context.Background())
				}
				cancel()
			}
		})
	}
	waitAll(t, &wg)
	waitIdle(t, e)
	if grew := int64(heapInUse()) - int64(heap0); grew > 2<<20 {
		t.Errorf("heap after the load: grew %d bytes; want < 2 MiB", grew)
	}
}

// TestRegressionCancelQueuedNoDeadlock guards against pond #138: a deadlock
// when contexts are canceled with tasks still queued. Every waiter returns,
// the key runs on, and Close returns.
func TestRegressionCancelQueuedNoDeadlock(t *testing.T) {
	e, err := executor.New[int](executor.WithWorkers(1))
	if err != nil {
		t.Fatal(err)
	}
	g, _ := block(t, e, 0)
	ctx, cancel := context.WithCancel(context.Background())
	var tasks []*executor.Task
	for i := range 500 {
		task, err := e.Submit(ctx, i%3, func(context.Context) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, task)
	}
	cancel()
	// A Wait notices the task's ctx at once, even behind the blocker.
	for _, task := range tasks {
		_, err := attempt(t, "a canceled queued task's Wait", func() error { return task.Wait(context.Background()) })
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Wait: got %v; want nil or context.Canceled", err)
		}
	}
	g.open()
	closed := make(chan error, 1)
	go func() { closed <- e.Close(context.Background()) }()
	if err := recv(t, "Close to return", closed); err != nil {
		t.Errorf("Close: got %v; want nil", err)
	}
	if s := e.Stats(); !balanced(s) || s.Queued != 0 || s.Running != 0 {
		t.Errorf("Stats after Close: got %+v; want balanced and idle", s)
	}
}

// TestRegressionNoPassivationMidWork guards against akka #29964: a busy
// entity passivated in the middle of its work. A key's mailbox must stay
// live while a task runs or waits, however long, so that a submission
// during the run queues behind it instead of opening a second mailbox.
func TestRegressionNoPassivationMidWork(t *testing.T) {
	e := newExec[string](t, executor.WithWorkers(4))
	var occ occupancy
	release := make(chan struct{})
	started := make(chan struct{})
	long, err := e.Submit(context.Background(), "busy", func(context.Context) error {
		occ.enter(false)
		defer occ.exit(false)
		close(started)
		<-release
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	// Churn on other keys, GC, time passing: nothing may retire "busy".
	for i := range 2000 {
		e.Do(context.Background(), fmt.Sprint(i), func(context.Context) error { return nil })
	}
	runtime.GC()
	if got := e.ActiveKeys(); got != 1 {
		t.Fatalf("ActiveKeys during the long task: got %d; want 1", got)
	}
	follow, err := e.Submit(context.Background(), "busy", func(context.Context) error {
		occ.enter(false)
		defer occ.exit(false)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if hk := e.HotKeys(1); len(hk) != 1 || hk[0].Key != "busy" || hk[0].Pending != 2 {
		t.Errorf("HotKeys during the long task: got %+v; want busy with 2 pending", hk)
	}
	close(release)
	long.Wait(context.Background())
	follow.Wait(context.Background())
	if n := occ.overlaps(); n != 0 {
		t.Errorf("overlaps: got %d; want 0", n)
	}
	waitIdle(t, e)
}
