package executor_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

// TestBlockFIFO: with Block, submissions at a key's cap wait and get room
// in the order they arrived; none is refused.
func TestBlockFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := executor.New[string](executor.WithMaxQueuePerKey(2), executor.WithPolicy(backpressure.Block()))
		defer e.Close(context.Background())
		bg := context.Background()
		release := make(chan struct{})
		var order []int
		var mu sync.Mutex
		run := func(i int) func(context.Context) error {
			return func(context.Context) error {
				<-release
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				return nil
			}
		}
		var wg sync.WaitGroup
		for i := range 6 {
			wg.Go(func() {
				if err := e.Do(bg, "k", run(i)); err != nil {
					t.Errorf("Do %d: %v", i, err)
				}
			})
			synctest.Wait() // i is queued or parked before i+1 arrives
		}
		if s := e.Stats(); s.Submitted != 2 || s.Rejected != 0 {
			t.Errorf("Stats = %+v; want 2 accepted, 4 parked, none rejected", s)
		}
		close(release)
		wg.Wait()
		for i, v := range order {
			if v != i {
				t.Fatalf("order = %v; want 0..5", order)
			}
		}
	})
}

// TestBlockCancelLeavesNothing: a parked submission whose ctx ends returns
// ctx's error, was never accepted, and does not hold back the one behind it.
func TestBlockCancelLeavesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := executor.New[string](executor.WithMaxQueuePerKey(1), executor.WithPolicy(backpressure.Block()))
		defer e.Close(context.Background())
		bg := context.Background()
		release := make(chan struct{})
		go e.Do(bg, "k", func(context.Context) error { <-release; return nil })
		synctest.Wait()
		ctx, cancel := context.WithCancel(bg)
		parked := make(chan error, 1)
		go func() {
			parked <- e.Do(ctx, "k", func(context.Context) error { t.Error("canceled waiter ran"); return nil })
		}()
		synctest.Wait()
		third := make(chan error, 1)
		go func() { third <- e.Do(bg, "k", func(context.Context) error { return nil }) }()
		synctest.Wait()
		cancel()
		if err := <-parked; !errors.Is(err, context.Canceled) {
			t.Errorf("parked Do = %v; want context.Canceled", err)
		}
		close(release)
		if err := <-third; err != nil {
			t.Errorf("third Do = %v; want nil", err)
		}
		synctest.Wait()
		s := e.Stats()
		if s.Submitted != 2 || s.Canceled != 0 || s.ActiveKeys != 0 {
			t.Errorf("Stats = %+v; want 2 submitted, 0 canceled, 0 active keys", s)
		}
	})
}

// TestBlockGlobal: Block also waits at WithMaxPending, across keys, and
// Close sends parked submitters away with ErrClosed.
func TestBlockGlobal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := executor.New[int](executor.WithMaxPending(2), executor.WithPolicy(backpressure.Block()))
		bg := context.Background()
		release := make(chan struct{})
		for k := range 2 {
			go e.Do(bg, k, func(context.Context) error { <-release; return nil })
		}
		synctest.Wait()
		got := make(chan error, 2)
		go func() { got <- e.Do(bg, 7, func(context.Context) error { return nil }) }()
		synctest.Wait()
		if s := e.Stats(); s.Submitted != 2 {
			t.Fatalf("Submitted = %d; want 2 with the third parked", s.Submitted)
		}
		close(release)
		if err := <-got; err != nil {
			t.Errorf("parked Do = %v; want nil once room appears", err)
		}
		// Fill again, park one, and close.
		block := make(chan struct{})
		for k := range 2 {
			go e.Do(bg, k, func(context.Context) error { <-block; return nil })
		}
		synctest.Wait()
		go func() { got <- e.Do(bg, 9, func(context.Context) error { return nil }) }()
		synctest.Wait()
		closed := make(chan error, 1)
		go func() { closed <- e.Close(bg) }()
		if err := <-got; !errors.Is(err, executor.ErrClosed) {
			t.Errorf("parked Do at Close = %v; want ErrClosed", err)
		}
		close(block)
		if err := <-closed; err != nil {
			t.Errorf("Close = %v", err)
		}
	})
}

// TestMaxQueueDelay: a slow key is shed once its oldest queued task has
// waited longer than d, even far below its length cap; a fast key with a
// long queue is not.
func TestMaxQueueDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := executor.New[string](executor.WithWorkers(4), executor.WithMaxQueuePerKey(1000),
			executor.WithPolicy(backpressure.MaxQueueDelay(10*time.Millisecond)))
		defer e.Close(context.Background())
		bg := context.Background()
		// Slow key: 20 ms per task; after the head has waited 10 ms, shed.
		for range 3 {
			if _, err := e.Submit(bg, "slow", func(context.Context) error { time.Sleep(20 * time.Millisecond); return nil }); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(15 * time.Millisecond)
		_, err := e.Submit(bg, "slow", func(context.Context) error { return nil })
		var be *backpressure.BusyError
		if !errors.As(err, &be) || be.Scope != backpressure.ScopeDelay || be.Wait <= 10*time.Millisecond {
			t.Fatalf("Submit on a slow key = %v; want a delay BusyError", err)
		}
		if be.RetryAfter() <= 0 {
			t.Errorf("RetryAfter = %v; want an estimate > 0", be.RetryAfter())
		}
		// Fast key: 100 queued tasks of 10 µs: the head never ages past d.
		for i := range 100 {
			if _, err := e.Submit(bg, "fast", func(context.Context) error { time.Sleep(10 * time.Microsecond); return nil }); err != nil {
				t.Fatalf("Submit %d on a fast key: %v", i, err)
			}
		}
		synctest.Wait()
	})
}

// TestRetryAfter: a key at its cap suggests a retry delay near one task's
// service time, measured while its queue stood, whether the queue holds
// jobs (a Submit whose ctx can end) or plain tasks (a Submit or Go whose
// ctx never ends).
func TestRetryAfter(t *testing.T) {
	for _, kind := range []string{"Submit/job", "Submit", "Go"} {
		synctest.Test(t, func(t *testing.T) {
			e, _ := executor.New[string](executor.WithMaxQueuePerKey(4))
			defer e.Close(context.Background())
			bg := context.Background()
			sctx := bg
			if kind == "Submit/job" {
				var cancel context.CancelFunc
				sctx, cancel = context.WithCancel(bg)
				defer cancel()
			}
			queue := func(fn func(context.Context) error) error {
				if kind == "Go" {
					return e.Go(bg, "k", fn)
				}
				_, err := e.Submit(sctx, "k", fn)
				return err
			}
			for range 4 {
				queue(func(context.Context) error { time.Sleep(10 * time.Millisecond); return nil })
			}
			time.Sleep(25 * time.Millisecond) // two finished while a queue stood
			for range 2 {
				if err := queue(func(context.Context) error { return nil }); err != nil {
					t.Fatalf("%s with room: %v", kind, err)
				}
			}
			err := queue(func(context.Context) error { return nil })
			var be *backpressure.BusyError
			if !errors.As(err, &be) {
				t.Fatalf("%s at cap = %v; want BusyError", kind, err)
			}
			if got := be.RetryAfter(); got < 5*time.Millisecond || got > 20*time.Millisecond {
				t.Errorf("%s: RetryAfter = %v; want about one 10ms task", kind, got)
			}
			synctest.Wait()
		})
	}
}

// everyOther rejects every second submission: a custom policy.
type everyOther struct {
	mu sync.Mutex
	n  int
}

func (p *everyOther) Decide(l backpressure.Load) backpressure.Verdict {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n++; p.n%2 == 0 {
		return backpressure.Reject
	}
	return backpressure.Admit
}

// TestCustomPolicyEveryOther: a stateful user policy sheds below the caps.
func TestCustomPolicyEveryOther(t *testing.T) {
	p := &everyOther{}
	e := newExec[string](t, executor.WithMaxQueuePerKey(100), executor.WithPolicy(p))
	bg := context.Background()
	var busy int
	for range 10 {
		if err := e.Do(bg, "k", func(context.Context) error { return nil }); errors.Is(err, executor.ErrBusy) {
			busy++
		}
	}
	if busy != 5 {
		t.Errorf("rejections = %d; want 5", busy)
	}
	if s := e.Stats(); s.Rejected != 5 || s.Submitted != 5 {
		t.Errorf("Stats = %+v; want 5 rejected, 5 submitted", s)
	}
}

// TestBlockNestedGlobal: under Block, a nested call at the global cap is
// refused at once instead of waiting: the room it would wait for is held by
// its own task (and here by the only other one), given back only once it
// returns. A call from outside still waits.
func TestBlockNestedGlobal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := executor.New[int](executor.WithWorkers(4), executor.WithMaxPending(2), executor.WithPolicy(backpressure.Block()))
		defer e.Close(context.Background())
		bg := context.Background()
		release, nest := make(chan struct{}), make(chan struct{})
		nested := make(chan error, 2)
		go e.Do(bg, 1, func(context.Context) error { <-release; return nil })
		outer := make(chan error, 1)
		go func() {
			outer <- e.Do(bg, 0, func(ctx context.Context) error {
				<-nest
				nested <- e.Do(ctx, 5, func(context.Context) error { return nil })
				_, err := e.Submit(ctx, 6, func(context.Context) error { return nil })
				nested <- err
				return nil
			})
		}()
		synctest.Wait()
		outside := make(chan error, 1)
		go func() { outside <- e.Do(bg, 7, func(context.Context) error { return nil }) }()
		close(nest)
		synctest.Wait()
		for _, call := range []string{"Do", "Submit"} {
			select {
			case err := <-nested:
				var be *backpressure.BusyError
				if !errors.As(err, &be) || be.Scope != backpressure.ScopeGlobal {
					t.Errorf("nested %s at the global cap = %v; want a global *BusyError", call, err)
				}
			default:
				t.Fatalf("nested %s at the global cap is waiting for room its own task holds", call)
			}
		}
		if err := <-outer; err != nil {
			t.Errorf("outer Do = %v; want nil", err)
		}
		close(release)
		if err := <-outside; err != nil {
			t.Errorf("Do from outside = %v; want nil: it waits for room", err)
		}
		if s := e.Stats(); s.Rejected != 2 || s.Submitted != 3 {
			t.Errorf("Stats = %+v; want 2 rejected, 3 submitted", s)
		}
	})
}

// TestBlockNestedOwnKey: under Block, a nested Submit on a key its task
// holds, at that key's cap, is refused at once: the room is given back only
// once the task ends.
func TestBlockNestedOwnKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := executor.New[int](executor.WithMaxQueuePerKey(1), executor.WithPolicy(backpressure.Block()))
		defer e.Close(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- e.Do(context.Background(), 0, func(ctx context.Context) error {
				_, err := e.Submit(ctx, 0, func(context.Context) error { return nil })
				return err
			})
		}()
		synctest.Wait()
		select {
		case err := <-done:
			var be *backpressure.BusyError
			if !errors.As(err, &be) || be.Scope != backpressure.ScopeKey || be.Key != 0 {
				t.Errorf("nested Submit on its own full key = %v; want a *BusyError for key 0", err)
			}
		default:
			t.Fatal("nested Submit on its own full key is waiting for its own task to end")
		}
	})
}

// TestBlockNestedLendsSlot: a nested call waiting for room on another key
// lends its task's execution slot, as a nested call waiting for its turn
// does: with one worker, the task that holds the room needs that slot.
func TestBlockNestedLendsSlot(t *testing.T) {
	calls := []struct {
		name string
		call func(e *executor.Executor[int], ctx context.Context) error
	}{
		{"Do", func(e *executor.Executor[int], ctx context.Context) error {
			return e.Do(ctx, 1, func(context.Context) error { return nil })
		}},
		{"Submit", func(e *executor.Executor[int], ctx context.Context) error {
			task, err := e.Submit(ctx, 1, func(context.Context) error { return nil })
			if err != nil {
				return err
			}
			return task.Wait(ctx)
		}},
		{"DoMany", func(e *executor.Executor[int], ctx context.Context) error {
			return e.DoMany(ctx, []int{1, 2}, func(context.Context) error { return nil })
		}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, _ := executor.New[int](executor.WithWorkers(1), executor.WithMaxQueuePerKey(1),
					executor.WithPolicy(backpressure.Block()))
				defer e.Close(context.Background())
				bg := context.Background()
				nest := make(chan struct{})
				done := make(chan error, 1)
				go func() {
					done <- e.Do(bg, 0, func(ctx context.Context) error { <-nest; return c.call(e, ctx) })
				}()
				synctest.Wait()
				// Key 1 is full, its task queued for the one slot task 0 has.
				if _, err := e.Submit(bg, 1, func(context.Context) error { return nil }); err != nil {
					t.Fatal(err)
				}
				close(nest)
				time.Sleep(time.Second) // a DoMany polls: let its backoff run
				synctest.Wait()
				select {
				case err := <-done:
					if err != nil {
						t.Errorf("outer Do = %v; want nil", err)
					}
				default:
					t.Fatalf("nested %s waiting for room kept the only slot: deadlock", c.name)
				}
				if s := e.Stats(); s.Completed != 3 || s.Rejected != 0 {
					t.Errorf("Stats = %+v; want 3 completed, none rejected", s)
				}
			})
		})
	}
}

// TestBlockNestedAdmittedWithdrawn: a nested call admitted from the waiting
// room while every slot is busy is still withdrawn at once when its ctx
// ends: it keeps its task's slot lent until it is queued and watched.
func TestBlockNestedAdmittedWithdrawn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := executor.New[int](executor.WithWorkers(1), executor.WithMaxQueuePerKey(1),
			executor.WithThroughput(1), executor.WithPolicy(backpressure.Block()))
		defer e.Close(context.Background())
		bg := context.Background()
		startNest, gate0, gate1, gate2 := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
		cancels, nested, outer := make(chan context.CancelFunc, 1), make(chan error, 1), make(chan error, 1)
		go func() {
			outer <- e.Do(bg, 0, func(ctx context.Context) error {
				<-startNest
				ctx, cancel := context.WithCancel(ctx)
				cancels <- cancel
				nested <- e.Do(ctx, 1, func(context.Context) error { return nil })
				<-gate0
				return nil
			})
		}()
		synctest.Wait()
		// Key 1 is full with a task waiting for the one slot; the nested
		// call waits for its room and lends the slot to it.
		if _, err := e.Submit(bg, 1, func(context.Context) error { <-gate1; return nil }); err != nil {
			t.Fatal(err)
		}
		close(startNest)
		synctest.Wait()
		// Key 2's task takes the slot when key 1's ends and admits the call.
		if _, err := e.Submit(bg, 2, func(context.Context) error { <-gate2; return nil }); err != nil {
			t.Fatal(err)
		}
		close(gate1)
		synctest.Wait()
		(<-cancels)()
		synctest.Wait()
		if s := e.Stats(); s.Canceled != 1 {
			t.Errorf("Stats after the admitted nested call's ctx ended: %+v; want it withdrawn (Canceled 1) with the slot still busy", s)
		}
		close(gate2)
		if err := <-nested; !errors.Is(err, context.Canceled) {
			t.Errorf("nested Do = %v; want context.Canceled", err)
		}
		close(gate0)
		if err := <-outer; err != nil {
			t.Errorf("outer Do = %v", err)
		}
	})
}

// TestBlockDoManyRetryGiveUp: under Block a DoMany that meets a full key
// withdraws and tries again later. A giving-up Close lists the tasks it finds
// queued, then cancels them unlocked, so it may hold a DoMany's task from an
// attempt that was queued for an instant. The next attempt must not reuse
// that task: rewriting it raced with Close's reads (the race detector saw it
// in a soak), and Close could cancel, count and settle the new attempt as if
// it had been accepted, giving its reservation back twice.
func TestBlockDoManyRetryGiveUp(t *testing.T) {
	for round := range 30 {
		e, err := executor.New[int](executor.WithMaxQueuePerKey(1), executor.WithPolicy(backpressure.Block()),
			executor.WithWorkers(2))
		if err != nil {
			t.Fatal(err)
		}
		bg := context.Background()
		hold := make(chan struct{})
		held := make(chan struct{})
		// Key 0 is full while its task runs: every DoMany below polls.
		go e.Do(bg, 0, func(context.Context) error { close(held); <-hold; return nil })
		<-held
		const polling = 40
		var wg sync.WaitGroup
		for i := range polling {
			wg.Go(func() {
				err := e.DoMany(bg, []int{1 + i, 0}, func(context.Context) error { return nil })
				if !errors.Is(err, executor.ErrClosed) {
					t.Errorf("round %d: DoMany polling while Close gives up: got %v; want ErrClosed", round, err)
				}
			})
		}
		// Not synchronisation: rounds vary how far the DoManys got before
		// Close (none started, or each polling at some backoff). Every
		// assertion below holds at any point.
		time.Sleep(time.Duration(round%5) * 100 * time.Microsecond)
		ctx, cancel := context.WithCancel(bg)
		cancel()
		closed := make(chan error, 1)
		go func() { closed <- e.Close(ctx) }()
		waitAll(t, &wg)
		select {
		case err := <-closed:
			// Key 0's task holds its reservation until hold is closed, so
			// Close can only give up.
			if !errors.Is(err, context.Canceled) {
				t.Errorf("round %d: Close: got %v; want context.Canceled", round, err)
			}
		case <-time.After(patience):
			t.Fatalf("round %d: Close did not return", round)
		}
		close(hold) // Close returned while key 0's task ran, as its ctx had ended
		if err := e.Close(bg); err != nil {
			t.Errorf("round %d: Close once nothing runs: got %v; want nil", round, err)
		}
		if s := e.Stats(); !balanced(s) || s.Submitted != 1 || s.Canceled != 0 || s.Completed != 1 {
			t.Errorf("round %d: Stats = %+v; want the one Do accepted and completed, nothing canceled", round, s)
		}
	}
}
