package executor_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

// TestDoManyTransfers moves money between 10 accounts with random
// concurrent DoMany transfers mixed with single-key Do deposits and
// withdrawals. Balances are plain ints: the race detector proves no account
// is ever held twice at once, and the total proves nothing was lost.
func TestDoManyTransfers(t *testing.T) {
	for _, workers := range []int{1, 2, 16} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			e := newExec[int](t, executor.WithWorkers(workers))
			const accounts, transfers = 10, 1000
			var balance [accounts]int
			var inside [accounts]atomic.Int32
			for i := range balance {
				balance[i] = 1000
			}
			enter := func(keys ...int) {
				for _, k := range keys {
					if inside[k].Add(1) != 1 {
						t.Errorf("account %d held twice", k)
					}
				}
			}
			leave := func(keys ...int) {
				for _, k := range keys {
					inside[k].Add(-1)
				}
			}
			ctx := context.Background()
			var wg sync.WaitGroup
			for i := range transfers {
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(i), 7))
					a, b := r.IntN(accounts), r.IntN(accounts)
					amount := r.IntN(100)
					if i%5 == 0 {
						// A single-key "audit" that must see no transfer half done.
						if err := e.Do(ctx, a, func(context.Context) error {
							enter(a)
							defer leave(a)
							balance[a] += 0
							return nil
						}); err != nil {
							t.Errorf("Do: %v", err)
						}
						return
					}
					err := e.DoMany(ctx, []int{a, b, a}, func(context.Context) error {
						if a == b {
							enter(a)
							defer leave(a)
							return nil
						}
						enter(a, b)
						defer leave(a, b)
						balance[a] -= amount
						balance[b] += amount
						return nil
					})
					if err != nil {
						t.Errorf("DoMany: %v", err)
					}
				})
			}
			waitAll(t, &wg)
			total := 0
			for _, v := range balance {
				total += v
			}
			if total != accounts*1000 {
				t.Errorf("total balance = %d; want %d", total, accounts*1000)
			}
			waitIdle(t, e)
			checkBalanced(t, e)
		})
	}
}

type point struct{ X, Y int }

// TestDoManyAnyKeys holds keys of mixed dynamic types at once: no ordering
// of K is needed, and opposite-order requests do not deadlock.
func TestDoManyAnyKeys(t *testing.T) {
	e := newExec[any](t, executor.WithWorkers(2))
	keys := []any{1, "one", point{1, 1}}
	rev := []any{point{1, 1}, "one", 1}
	var inside atomic.Int32
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			ks := keys
			if i%2 == 1 {
				ks = rev
			}
			err := e.DoMany(context.Background(), ks, func(context.Context) error {
				if inside.Add(1) != 1 {
					t.Error("two multi-key tasks on the same keys overlapped")
				}
				inside.Add(-1)
				return nil
			})
			if err != nil {
				t.Errorf("DoMany: %v", err)
			}
		})
	}
	waitAll(t, &wg)
	waitIdle(t, e)
}

func TestDoManyInput(t *testing.T) {
	e := newExec[string](t)
	ctx := context.Background()
	if err := e.DoMany(ctx, nil, func(context.Context) error { return nil }); !errors.Is(err, executor.ErrNoKeys) {
		t.Errorf("DoMany(no keys) = %v; want ErrNoKeys", err)
	}
	if err := e.DoMany(ctx, []string{"a"}, nil); !errors.Is(err, executor.ErrNilFunc) {
		t.Errorf("DoMany(nil fn) = %v; want ErrNilFunc", err)
	}
	ran := 0
	if err := e.DoMany(ctx, []string{"a", "a", "b", "a"}, func(context.Context) error { ran++; return nil }); err != nil || ran != 1 {
		t.Errorf("DoMany(duplicates) = %v, ran %d; want nil, 1", err, ran)
	}
}

// TestDoManyCap: a key at its cap refuses the whole multi-key task and
// leaves nothing queued on the other keys.
func TestDoManyCap(t *testing.T) {
	e := newExec[string](t, executor.WithMaxQueuePerKey(1))
	ctx := context.Background()
	release := make(chan struct{})
	started := make(chan struct{})
	task, err := e.Submit(ctx, "b", func(context.Context) error { close(started); <-release; return nil })
	if err != nil {
		t.Fatal(err)
	}
	<-started
	err = e.DoMany(ctx, []string{"a", "b", "c"}, func(context.Context) error { return nil })
	var be *backpressure.BusyError
	if !errors.As(err, &be) || be.Key != "b" || be.Limit != 1 {
		t.Fatalf("DoMany on a full key = %v; want BusyError naming %q", err, "b")
	}
	for _, k := range []string{"a", "c"} {
		for _, hk := range e.HotKeys(10) {
			if hk.Key == k {
				t.Errorf("key %q left pending %d after a refused DoMany", k, hk.Pending)
			}
		}
	}
	eventually(t, "only b to stay active", func() bool { return e.ActiveKeys() == 1 })
	close(release)
	if err := task.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, e)
	checkBalanced(t, e)
	if s := e.Stats(); s.Rejected != 1 || s.Submitted != 1 {
		t.Errorf("Stats = %+v; want 1 submitted, 1 rejected", s)
	}
}

// TestDoManyCancelPartial cancels a multi-key task granted on one key and
// queued on another: both keys are freed at once.
func TestDoManyCancelPartial(t *testing.T) {
	e := newExec[string](t, executor.WithWorkers(4))
	bg := context.Background()
	release := make(chan struct{})
	started := make(chan struct{})
	holder, _ := e.Submit(bg, "b", func(context.Context) error { close(started); <-release; return nil })
	<-started
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() {
		done <- e.DoMany(ctx, []string{"a", "b"}, func(context.Context) error {
			t.Error("canceled DoMany ran")
			return nil
		})
	}()
	// Wait until the DoMany holds "a" (granted) and waits on "b".
	eventually(t, "the DoMany to hold a and wait on b", func() bool { return pendingOf(e, "a") == 1 && pendingOf(e, "b") == 2 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("DoMany = %v; want context.Canceled", err)
	}
	// "a" is free at once, while "b"'s holder still runs.
	if err := e.Do(bg, "a", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if p := pendingOf(e, "b"); p != 1 {
		t.Errorf("pending on b = %d; want 1", p)
	}
	close(release)
	holder.Wait(bg)
	waitIdle(t, e)
	checkBalanced(t, e)
}

func TestDoManyNested(t *testing.T) {
	e := newExec[string](t, executor.WithWorkers(1))
	ctx := context.Background()
	err := e.DoMany(ctx, []string{"a", "b"}, func(ctx context.Context) error {
		if err := e.DoMany(ctx, []string{"b", "c"}, func(context.Context) error { return nil }); !errors.Is(err, executor.ErrReentrant) {
			t.Errorf("nested DoMany on a held key = %v; want ErrReentrant", err)
		}
		return e.DoMany(ctx, []string{"c", "d"}, func(ctx context.Context) error {
			return e.Do(ctx, "e", func(context.Context) error { return nil })
		})
	})
	if err != nil {
		t.Fatalf("nested DoMany on disjoint keys = %v; want nil", err)
	}
	re := newExec[string](t, executor.WithWorkers(1), executor.WithReentrant())
	ran := false
	err = re.DoMany(ctx, []string{"a", "b"}, func(ctx context.Context) error {
		return re.DoMany(ctx, []string{"b", "a"}, func(context.Context) error { ran = true; return nil })
	})
	if err != nil || !ran {
		t.Errorf("reentrant DoMany = %v, ran=%v; want nil, true", err, ran)
	}
}

func pendingOf[K comparable](e *executor.Executor[K], key K) int {
	for _, hk := range e.HotKeys(1 << 20) {
		if hk.Key == key {
			return hk.Pending
		}
	}
	return 0
}

// TestNestedBehindDoMany: a nested call that would wait behind a DoMany
// that itself waits for a key the calling task holds would wait forever (the
// DoMany holds the other key while it waits); it is refused with
// ErrReentrant at once, for Do, DoMany and Task.Wait alike, and everything
// completes. A nested call behind a DoMany that waits for someone else's key
// waits.
func TestNestedBehindDoMany(t *testing.T) {
	for _, c := range []struct {
		name string
		call func(e *executor.Executor[string], ctx context.Context) error
	}{
		{"Do", func(e *executor.Executor[string], ctx context.Context) error { return e.Do(ctx, "b", nop) }},
		{"DoMany", func(e *executor.Executor[string], ctx context.Context) error {
			return e.DoMany(ctx, []string{"c", "b"}, nop)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, _ := executor.New[string](executor.WithWorkers(4))
				defer e.Close(context.Background())
				nested, outer, many := nestBehindDoMany(e, []string{"a", "b"},
					func(ctx context.Context) error { return c.call(e, ctx) })
				select {
				case err := <-nested:
					if !errors.Is(err, executor.ErrReentrant) {
						t.Errorf("nested %s behind the DoMany = %v; want ErrReentrant", c.name, err)
					}
				default:
					t.Fatalf("nested %s waits behind a DoMany that waits for its own task", c.name)
				}
				if err := <-outer; err != nil {
					t.Errorf("outer Do = %v", err)
				}
				if err := <-many; err != nil {
					t.Errorf("DoMany = %v", err)
				}
				if s := e.Stats(); s.Rejected != 0 || s.Submitted != 2 || s.Completed != 2 {
					t.Errorf("Stats = %+v; want the refused call counted nowhere", s)
				}
			})
		})
	}
	for _, lane := range submitLanes {
		t.Run("Submit+Wait/"+lane, func(t *testing.T) { nestedWaitBehindDoMany(t, lane) })
	}
	t.Run("other key", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e, _ := executor.New[string](executor.WithWorkers(4))
			defer e.Close(context.Background())
			holdC := make(chan struct{})
			go e.Do(context.Background(), "c", func(context.Context) error { <-holdC; return nil })
			synctest.Wait()
			// The DoMany holds b and waits for c, not for a.
			nested, outer, many := nestBehindDoMany(e, []string{"c", "b"},
				func(ctx context.Context) error { return e.Do(ctx, "b", nop) })
			select {
			case err := <-nested:
				t.Fatalf("nested Do behind a DoMany waiting for another key returned %v; want it to wait", err)
			default:
			}
			close(holdC)
			for _, ch := range []chan error{nested, outer, many} {
				if err := <-ch; err != nil {
					t.Errorf("got %v; want nil", err)
				}
			}
		})
	})
}

// nestBehindDoMany, in a synctest bubble, starts a task on key a, queues a
// DoMany on manyKeys (one of them b) once the task runs, then lets the task
// make nested with its own ctx, and returns when every goroutine is blocked
// or done. The channels carry nested's, the task's and the DoMany's results.
func nestBehindDoMany(e *executor.Executor[string], manyKeys []string,
	nested func(ctx context.Context) error) (inner, outer, many chan error) {
	bg := context.Background()
	nest := make(chan struct{})
	inner, outer, many = make(chan error, 1), make(chan error, 1), make(chan error, 1)
	go func() {
		outer <- e.Do(bg, "a", func(ctx context.Context) error {
			<-nest
			inner <- nested(ctx)
			return nil
		})
	}()
	synctest.Wait()
	go func() { many <- e.DoMany(bg, manyKeys, nop) }()
	synctest.Wait() // the DoMany holds b and waits for its other key
	close(nest)
	synctest.Wait()
	return inner, outer, many
}

// nestedWaitBehindDoMany: a Wait from inside a task on a submission (in
// lane, see submitCtx) queued behind a DoMany that waits for the task's key is
// refused with ErrReentrant at once; the submission itself runs.
func nestedWaitBehindDoMany(t *testing.T, lane string) {
	synctest.Test(t, func(t *testing.T) {
		sctx := submitCtx(t, lane)
		e, _ := executor.New[string](executor.WithWorkers(4))
		defer e.Close(context.Background())
		var task *executor.Task
		waited, outer, many := nestBehindDoMany(e, []string{"a", "b"}, func(ctx context.Context) error {
			var err error
			if task, err = e.Submit(sctx, "b", nop); err != nil {
				return err
			}
			return task.Wait(ctx) // queued behind the DoMany
		})
		select {
		case err := <-waited:
			if !errors.Is(err, executor.ErrReentrant) {
				t.Errorf("nested Wait behind the DoMany = %v; want ErrReentrant", err)
			}
		default:
			t.Fatal("nested Wait waits for a task behind a DoMany that waits for its own task")
		}
		for _, ch := range []chan error{outer, many} {
			if err := <-ch; err != nil {
				t.Errorf("got %v; want nil", err)
			}
		}
		if err := task.Wait(context.Background()); err != nil {
			t.Errorf("the submitted task = %v; want nil: only the nested Wait was refused", err)
		}
	})
}
