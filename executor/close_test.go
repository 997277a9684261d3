package executor_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alitto/pond/v2"
	"go.uber.org/goleak"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

// TestCloseDrains: Close refuses new work at once, runs every accepted task
// and returns nil.
func TestCloseDrains(t *testing.T) {
	e, err := executor.New[string](executor.WithWorkers(2), executor.WithThroughput(3))
	if err != nil {
		t.Fatal(err)
	}
	g := newGate()
	if _, err := e.Submit(context.Background(), "0", g.fn); err != nil {
		t.Fatal(err)
	}
	<-g.started
	const n = 200
	var ran atomic.Int64
	var tasks []*executor.Task
	for i := range n {
		task, err := e.Submit(context.Background(), fmt.Sprint(i%7), func(context.Context) error { ran.Add(1); return nil })
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, task)
	}
	closed := make(chan error, 1)
	go func() { closed <- e.Close(context.Background()) }()
	// Once Close has begun, every entry point refuses with ErrClosed and
	// counts nothing.
	extra := 0 // submissions that beat Close
	eventually(t, "Close to refuse new work", func() bool {
		task, err := e.Submit(context.Background(), "new", func(context.Context) error { ran.Add(1); return nil })
		if err == nil {
			extra++
			tasks = append(tasks, task)
		}
		return errors.Is(err, executor.ErrClosed)
	})
	for _, c := range callers {
		if err := c.call(e, context.Background(), "new", nop); !errors.Is(err, executor.ErrClosed) {
			t.Errorf("%s while closing: got %v; want ErrClosed", c.name, err)
		}
	}
	g.open()
	if err := recv(t, "Close to return", closed); err != nil {
		t.Errorf("Close: got %v; want nil", err)
	}
	if got := ran.Load(); got != int64(n+extra) {
		t.Errorf("accepted tasks run by the time Close returned: got %d; want %d", got, n+extra)
	}
	for _, task := range tasks {
		if err := task.Wait(context.Background()); err != nil {
			t.Errorf("Wait: got %v; want nil", err)
		}
	}
	if s, want := e.Stats(), uint64(n+extra+1); s.Submitted != want || s.Completed != want || s.ActiveKeys != 0 || s.Rejected != 0 || !balanced(s) {
		t.Errorf("Stats after Close: got %+v; want Submitted = Completed = %d, Rejected 0, ActiveKeys 0", s, want)
	}
	for _, c := range callers {
		if err := c.call(e, context.Background(), "new", nop); !errors.Is(err, executor.ErrClosed) {
			t.Errorf("%s after Close: got %v; want ErrClosed", c.name, err)
		}
	}
	if err := e.Close(context.Background()); err != nil {
		t.Errorf("second Close: got %v; want nil", err)
	}
}

// TestCloseWaitsForInlineDo uses the fake clock: a Do that finds its key
// idle runs fn on its caller's goroutine, and without a global cap it holds
// only its execution slot, no reservation (see leanSlot); Close still waits
// for it to return, refusing new work meanwhile, and so it does when a
// global cap makes the Do reserve.
func TestCloseWaitsForInlineDo(t *testing.T) {
	for name, opts := range map[string][]executor.Option{
		"no global cap": nil,
		"global cap":    {executor.WithMaxPending(10)},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, err := executor.New[string](opts...)
				if err != nil {
					t.Fatal(err)
				}
				g := newGate()
				defer g.open()
				did := make(chan error, 1)
				go func() { did <- e.Do(context.Background(), "k", g.fn) }()
				<-g.started
				closed := make(chan error, 1)
				go func() { closed <- e.Close(context.Background()) }()
				synctest.Wait() // Close is blocked, or has returned
				if err, ok := returned(closed); ok {
					t.Fatalf("Close returned %v while a Do's fn ran", err)
				}
				if err := e.Do(context.Background(), "other", nop); !errors.Is(err, executor.ErrClosed) {
					t.Errorf("Do while closing: got %v; want ErrClosed", err)
				}
				g.open()
				synctest.Wait()
				wantReturned(t, "the running Do", did)
				wantReturned(t, "Close", closed)
				if s := e.Stats(); s.Submitted != 1 || s.Completed != 1 || !balanced(s) {
					t.Errorf("Stats after Close: got %+v; want Submitted = Completed = 1", s)
				}
			})
		})
	}
}

// TestCloseWaitsForInlineDoLending uses the fake clock: a Do running at
// once on its caller's goroutine, with no reservation, whose fn waits in a
// nested Do on a busy key lends its execution slot meanwhile; Close, begun
// during that wait, still waits for the outer Do, after the nested one and
// the task it waited for have ended.
func TestCloseWaitsForInlineDoLending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, err := executor.New[string](executor.WithWorkers(2))
		if err != nil {
			t.Fatal(err)
		}
		busy, last := newGate(), newGate()
		defer busy.open()
		defer last.open()
		if _, err := e.Submit(context.Background(), "b", busy.fn); err != nil {
			t.Fatal(err)
		}
		<-busy.started
		nested := make(chan error, 1)
		did := make(chan error, 1)
		go func() {
			did <- e.Do(context.Background(), "a", func(ctx context.Context) error {
				nested <- e.Do(ctx, "b", nop) // queues behind busy: lends the slot
				return last.fn(ctx)
			})
		}()
		synctest.Wait()
		closed := make(chan error, 1)
		go func() { closed <- e.Close(context.Background()) }()
		synctest.Wait()
		busy.open()
		synctest.Wait() // busy and the nested Do end; the outer Do waits on last
		if err := <-nested; err != nil {
			t.Errorf("nested Do: got %v; want nil", err)
		}
		if err, ok := returned(closed); ok {
			t.Fatalf("Close returned %v while the outer Do's fn ran", err)
		}
		last.open()
		synctest.Wait()
		wantReturned(t, "the outer Do", did)
		wantReturned(t, "Close", closed)
	})
}

// returned reports what a call that sends its result on ch returned, if it
// has (in a synctest bubble, after synctest.Wait).
func returned(ch chan error) (error, bool) {
	select {
	case err := <-ch:
		return err, true
	default:
		return nil, false
	}
}

// wantReturned fails t unless the call that sends on ch has returned nil.
func wantReturned(t *testing.T, name string, ch chan error) {
	t.Helper()
	if err, ok := returned(ch); !ok {
		t.Errorf("%s has not returned", name)
	} else if err != nil {
		t.Errorf("%s: got %v; want nil", name, err)
	}
}

// TestCloseGivesUp uses the fake clock: when Close's ctx ends first, tasks
// that have not started fail with ErrClosed, the running one sees its ctx
// canceled, and Close returns ctx's error once it has returned.
func TestCloseGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, err := executor.New[string](executor.WithWorkers(2))
		if err != nil {
			t.Fatal(err)
		}
		started, proceed := make(chan struct{}), make(chan struct{})
		var sawCancel atomic.Bool
		running, err := e.Submit(context.Background(), "a", func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			sawCancel.Store(errors.Is(ctx.Err(), context.Canceled))
			<-proceed // keeps running a while after the cancel
			return errTask
		})
		if err != nil {
			t.Fatal(err)
		}
		<-started
		var ran atomic.Int64
		count := func(context.Context) error { ran.Add(1); return nil }
		var queued []*executor.Task
		for range 5 {
			task, err := e.Submit(context.Background(), "a", count)
			if err != nil {
				t.Fatal(err)
			}
			queued = append(queued, task)
		}
		doErr := make(chan error, 2)
		go func() { doErr <- e.Do(context.Background(), "a", count) }()
		go func() { doErr <- e.DoMany(context.Background(), []string{"b", "a"}, count) }()
		synctest.Wait() // both callers queued
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		closed := make(chan error, 1)
		go func() { closed <- e.Close(ctx) }()
		time.Sleep(50 * time.Millisecond) // on the fake clock: exactly until the deadline
		synctest.Wait()
		if !sawCancel.Load() {
			t.Errorf("running task's ctx after Close gave up: not canceled; want canceled")
		}
		// Close keeps its deadline: it returns while the task still runs.
		select {
		case err := <-closed:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Close: got %v; want %v", err, context.DeadlineExceeded)
			}
		default:
			t.Fatalf("Close still blocked at its deadline while a task ignores its ctx; want it to return")
		}
		if got := time.Since(start); got != 50*time.Millisecond {
			t.Errorf("Close returned after %v; want exactly its 50ms deadline (fake clock)", got)
		}
		for i, task := range queued {
			if err := task.Wait(context.Background()); !errors.Is(err, executor.ErrClosed) {
				t.Errorf("queued task %d: got %v; want ErrClosed", i, err)
			}
		}
		for range 2 {
			if err := <-doErr; !errors.Is(err, executor.ErrClosed) {
				t.Errorf("queued Do/DoMany: got %v; want ErrClosed", err)
			}
		}
		close(proceed)
		if err := running.Wait(context.Background()); !errors.Is(err, errTask) {
			t.Errorf("running task: got %v; want its own error %v", err, errTask)
		}
		if got := ran.Load(); got != 0 {
			t.Errorf("unstarted tasks run: got %d; want 0", got)
		}
		// A Task ends once its key has room again; the drive loop retires
		// the key's mailbox just after that, so let it get there.
		synctest.Wait()
		if s := e.Stats(); s.Canceled != 7 || s.Completed != 1 || s.ActiveKeys != 0 || !balanced(s) {
			t.Errorf("Stats: got %+v; want Canceled 7, Completed 1, ActiveKeys 0, balanced", s)
		}
		if err := e.Close(context.Background()); err != nil {
			t.Errorf("Close again: got %v; want nil", err)
		}
	})
}

// TestCloseConcurrent: Close is idempotent and safe to call from many
// goroutines at once; all of them wait for the drain.
func TestCloseConcurrent(t *testing.T) {
	e, err := executor.New[int](executor.WithWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int64
	for i := range 100 {
		if _, err := e.Submit(context.Background(), i%5, func(context.Context) error {
			runtime.Gosched()
			ran.Add(1)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := e.Close(context.Background()); err != nil {
				t.Errorf("Close: got %v; want nil", err)
			}
			if got := ran.Load(); got != 100 {
				t.Errorf("tasks run when Close returned: got %d; want 100", got)
			}
		})
	}
	waitAll(t, &wg)
	if err := e.Close(context.Background()); err != nil {
		t.Errorf("Close again: got %v; want nil", err)
	}
}

// TestCloseCallerPool: Close does not stop a pool the caller owns.
func TestCloseCallerPool(t *testing.T) {
	pool := pond.NewPool(8)
	defer pool.StopAndWait()
	e, err := executor.New[int](executor.WithWorkers(4), executor.WithPool(pool))
	if err != nil {
		t.Fatal(err)
	}
	var tasks []*executor.Task
	for i := range 50 {
		task, err := e.Submit(context.Background(), i%5, nop)
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, task)
	}
	if err := e.Close(context.Background()); err != nil {
		t.Errorf("Close: got %v; want nil", err)
	}
	for _, task := range tasks {
		if err := task.Wait(context.Background()); err != nil {
			t.Errorf("Wait: got %v; want nil", err)
		}
	}
	if pool.Stopped() {
		t.Fatalf("caller's pool after Close: stopped; want running")
	}
	if err := pool.Submit(func() {}).Wait(); err != nil {
		t.Errorf("caller's pool after Close: got %v; want it to run tasks", err)
	}
}

// TestCloseLeavesNoGoroutine: once Close returns, the executor has no
// goroutine left, even after nested calls, parked waiters and a give-up.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, giveUp := range []bool{false, true} {
		e, err := executor.New[int](executor.WithWorkers(2))
		if err != nil {
			t.Fatal(err)
		}
		g := newGate()
		task, err := e.Submit(context.Background(), 0, func(ctx context.Context) error {
			return e.Do(ctx, 1, func(ctx context.Context) error {
				close(g.started)
				select {
				case <-g.release:
				case <-ctx.Done():
				}
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		<-g.started
		for i := range 20 {
			if _, err := e.Submit(context.Background(), i%3, nop); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		if giveUp {
			cancel()
		} else {
			g.open()
		}
		err = e.Close(ctx)
		cancel()
		if giveUp != (err != nil) {
			t.Errorf("Close (give up %v): got %v", giveUp, err)
		}
		_ = task.Wait(context.Background())
		g.open()
	}
}

// TestCloseRacesSubmit: submissions racing with a Close that gives up at
// once. A task accepted on an idle key may be withdrawn by Close before its
// submitter has spawned the key's drive loop; Close must still not return
// before that loop has run and retired the mailbox. (Under -race, a loop
// spawned after Close shows up as a WaitGroup race; without it, as a live
// mailbox once Close has returned.)
func TestCloseRacesSubmit(t *testing.T) {
	runs := 150
	if testing.Short() {
		runs = 30
	}
	for range runs {
		e, err := executor.New[string](executor.WithWorkers(4))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for c := range 3 {
			wg.Go(func() {
				for n := 0; ; n++ {
					if _, err := e.Submit(context.Background(), fmt.Sprint(c, "-", n), nop); errors.Is(err, executor.ErrClosed) {
						return
					}
				}
			})
		}
		eventually(t, "some submissions", func() bool { return e.Stats().Submitted >= 20 })
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := e.Close(ctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Close: got %v; want nil or %v", err, context.Canceled)
		} else if err != nil {
			// It gave up and did not wait for the running tasks: the
			// next Close waits for them.
			if err := e.Close(context.Background()); err != nil {
				t.Errorf("Close after giving up: got %v; want nil", err)
			}
		}
		if s := e.Stats(); s.ActiveKeys != 0 || s.Queued != 0 || s.Running != 0 || !balanced(s) {
			t.Fatalf("Stats right after Close returned: got %+v; want no live key, nothing queued or running, balanced", s)
		}
		waitAll(t, &wg)
	}
}

// TestCloseIdleEndedCtx: Close with a ctx that already ended, on an executor
// with nothing pending, has nothing to give up and returns nil, every time
// (it used to pick nil or ctx's error at random).
func TestCloseIdleEndedCtx(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 100 {
		e, err := executor.New[int](executor.WithWorkers(2))
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			_ = e.Do(context.Background(), 1, nop) // used, then idle
		}
		if err := e.Close(ctx); err != nil {
			t.Fatalf("run %d: Close(ended ctx) with nothing pending: got %v; want nil", i, err)
		}
	}
}

// TestCloseRacesPlain: plain Gos and Submits (context.Background(), no
// global cap: their reservations are their router shard's counts, see
// admitPlain) racing with a Close that waits, on an executor without caps,
// and on one whose per-key cap parks submissions (Block) or refuses them
// (FailFast). Each submission is accepted, or fails with ErrClosed (or, at
// the cap under FailFast, ErrBusy), and every accepted task has run by the
// time Close returns: one accepted as Close seals the executor must not
// be missed by its drain, and then lost or run after it.
func TestCloseRacesPlain(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []executor.Option
	}{
		{"no caps", nil},
		{"cap Block", []executor.Option{executor.WithMaxQueuePerKey(4), executor.WithPolicy(backpressure.Block())}},
		{"cap FailFast", []executor.Option{executor.WithMaxQueuePerKey(4)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs := 200
			if testing.Short() {
				runs = 40
			}
			for run := range runs {
				closeRacingPlain(t, run, append([]executor.Option{executor.WithWorkers(2)}, tc.opts...))
			}
		})
	}
}

// closeRacingPlain is one round of TestCloseRacesPlain, closing once run%5
// tasks have run, so that Close finds the queues at different depths.
func closeRacingPlain(t *testing.T, run int, opts []executor.Option) {
	e, err := executor.New[int](opts...)
	if err != nil {
		t.Fatal(err)
	}
	var ran, accepted atomic.Int64
	task := func(context.Context) error { ran.Add(1); return nil }
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Go(func() {
			for n := 0; ; n++ {
				key := (p*7 + n) % 64 // spread over the router's shards
				var err error
				if n%2 == 0 {
					err = e.Go(context.Background(), key, task)
				} else {
					_, err = e.Submit(context.Background(), key, task)
				}
				switch {
				case err == nil:
					accepted.Add(1)
				case errors.Is(err, executor.ErrClosed):
					return
				case !errors.Is(err, executor.ErrBusy):
					t.Errorf("submission: got %v; want nil, ErrClosed or ErrBusy", err)
					return
				}
			}
		})
	}
	eventually(t, "some tasks to run", func() bool { return ran.Load() >= int64(run%5) })
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	err = e.Close(ctx)
	cancel()
	ranAtClose := ran.Load()
	if err != nil {
		t.Fatalf("Close: got %v; want nil", err)
	}
	waitAll(t, &wg)
	if got, want := ranAtClose, accepted.Load(); got != want {
		t.Fatalf("run %d: %d tasks had run when Close returned; want all %d accepted", run, got, want)
	}
	if s := e.Stats(); s.Submitted != uint64(accepted.Load()) || s.Completed != s.Submitted || !balanced(s) {
		t.Fatalf("Stats after Close: got %+v; want %d submitted, all completed, balanced", s, accepted.Load())
	}
}

// TestCloseGivesUpOnBatch: when Close gives up, every task that has not
// started ends with ErrClosed at once, those a drive loop has already
// taken from the queue into a batch, behind a task that ignores its ctx,
// included (contract item 12). Each ctx kind takes the queue its tasks
// take: context.Background() and a ctx that never ends, a cancelable one.
func TestCloseGivesUpOnBatch(t *testing.T) {
	cancelable, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
	}{
		{"background", context.Background()},
		{"never ends", context.WithValue(context.Background(), ctxKey{}, 1)},
		{"cancelable", cancelable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			handled := make(chan error, 16)
			e, err := executor.New[string](executor.WithWorkers(1), executor.WithThroughput(64),
				executor.WithErrorHandler(func(_ any, err error) { handled <- err }))
			if err != nil {
				t.Fatal(err)
			}
			// The only worker is busy on "other" while "a" queues its
			// stuck task and those behind it, so that "a"'s loop takes
			// them all in one batch once the worker is free.
			release := occupy(t, e, "other")
			started, stuck := make(chan struct{}), make(chan struct{})
			unstick := sync.OnceFunc(func() { close(stuck) })
			defer unstick()
			if err := e.Go(tc.ctx, "a", func(context.Context) error { close(started); <-stuck; return nil }); err != nil {
				t.Fatal(err)
			}
			var tasks []*executor.Task
			for range 3 {
				task, err := e.Submit(tc.ctx, "a", func(context.Context) error { t.Error("a task behind the stuck one ran"); return nil })
				if err != nil {
					t.Fatal(err)
				}
				tasks = append(tasks, task)
				if err := e.Go(tc.ctx, "a", func(context.Context) error { t.Error("a Go behind the stuck one ran"); return nil }); err != nil {
					t.Fatal(err)
				}
			}
			release()
			recv(t, "the stuck task to start", started)
			short, cancelClose := context.WithTimeout(context.Background(), 10*time.Millisecond)
			defer cancelClose()
			if err := e.Close(short); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Close: got %v; want %v", err, context.DeadlineExceeded)
			}
			// No waiting for the stuck task: each ends now.
			for i, task := range tasks {
				if _, err := attempt(t, "Wait", func() error { return task.Wait(context.Background()) }); !errors.Is(err, executor.ErrClosed) {
					t.Errorf("task %d: got %v; want ErrClosed", i, err)
				}
			}
			for i := range 3 {
				if err := recv(t, "the error handler", handled); !errors.Is(err, executor.ErrClosed) {
					t.Errorf("Go %d: the error handler got %v; want ErrClosed", i, err)
				}
			}
			if s := e.Stats(); s.Queued != 0 || s.Running != 1 || s.Canceled != 6 || !balanced(s) {
				t.Errorf("Stats: got %+v; want Queued 0, Running 1 (the stuck task), Canceled 6, balanced", s)
			}
			unstick()
			closeWithin(t, e) // nothing runs now: a later Close returns nil
		})
	}
}
