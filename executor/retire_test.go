package executor_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perkey/perkey/executor"
)

// TestRetirement checks that every key's mailbox retires once nothing is
// pending, whatever happened on it.
func TestRetirement(t *testing.T) {
	bg := context.Background()
	canceled, cancel := context.WithCancel(bg)
	cancel()
	tests := []struct {
		name string
		opts []executor.Option
		run  func(t *testing.T, e *executor.Executor[string])
	}{
		{"success", nil, func(t *testing.T, e *executor.Executor[string]) {
			for i := range 20 {
				_ = e.Do(bg, fmt.Sprint(i), nop)
			}
		}},
		{"errors", nil, func(t *testing.T, e *executor.Executor[string]) {
			for i := range 20 {
				if err := e.Do(bg, fmt.Sprint(i%3), func(context.Context) error { return errTask }); !errors.Is(err, errTask) {
					t.Errorf("Do: got %v; want %v", err, errTask)
				}
			}
		}},
		{"panics", nil, func(t *testing.T, e *executor.Executor[string]) {
			for i := range 20 {
				task, _ := e.Submit(bg, fmt.Sprint(i%3), func(context.Context) error { panic("boom") })
				var pe *executor.PanicError
				if err := task.Wait(bg); !errors.As(err, &pe) {
					t.Errorf("Wait: got %v; want a *PanicError", err)
				}
			}
		}},
		{"already canceled ctx", nil, func(t *testing.T, e *executor.Executor[string]) {
			_ = e.Do(canceled, "a", nop)
			_, _ = e.Submit(canceled, "a", nop)
			_ = e.DoShared(canceled, "a", nop)
			_ = e.DoMany(canceled, []string{"a", "b"}, nop)
		}},
		{"canceled while queued", nil, func(t *testing.T, e *executor.Executor[string]) {
			g, _ := block(t, e, "a")
			ctx, cancel := context.WithCancel(bg)
			var tasks []*executor.Task
			for range 5 {
				task, err := e.Submit(ctx, "a", nop)
				if err != nil {
					t.Fatal(err)
				}
				tasks = append(tasks, task)
			}
			many := make(chan error)
			go func() { many <- e.DoMany(ctx, []string{"a", "b"}, nop) }()
			eventually(t, "the DoMany to queue", func() bool { return e.Stats().Queued == 6 })
			cancel()
			for _, task := range tasks {
				// Wait notices the task's ctx at once; Done alone would
				// close only once the task reached the head (lazily).
				if _, err := attempt(t, "Wait", func() error { return task.Wait(bg) }); !errors.Is(err, context.Canceled) {
					t.Errorf("Wait: got %v; want %v", err, context.Canceled)
				}
			}
			<-many
			g.open()
		}},
		{"timeouts", nil, func(t *testing.T, e *executor.Executor[string]) {
			g, _ := block(t, e, "a")
			ctx, cancel := context.WithTimeout(bg, time.Millisecond)
			defer cancel()
			if err := e.Do(ctx, "a", nop); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Do: got %v; want %v", err, context.DeadlineExceeded)
			}
			g.open()
		}},
		{"rejections", []executor.Option{executor.WithMaxQueuePerKey(1)}, func(t *testing.T, e *executor.Executor[string]) {
			g, _ := block(t, e, "a")
			for range 10 {
				if err := e.Do(bg, "a", nop); !errors.Is(err, executor.ErrBusy) {
					t.Errorf("Do: got %v; want ErrBusy", err)
				}
				if err := e.DoMany(bg, []string{"b", "a"}, nop); !errors.Is(err, executor.ErrBusy) {
					t.Errorf("DoMany: got %v; want ErrBusy", err)
				}
			}
			g.open()
		}},
		{"global rejections", []executor.Option{executor.WithMaxPending(1)}, func(t *testing.T, e *executor.Executor[string]) {
			g, _ := block(t, e, "a")
			for range 10 {
				if err := e.Do(bg, "b", nop); !errors.Is(err, executor.ErrBusy) {
					t.Errorf("Do: got %v; want ErrBusy", err)
				}
			}
			g.open()
		}},
		{"reentrant refusals", nil, func(t *testing.T, e *executor.Executor[string]) {
			_ = e.Do(bg, "a", func(ctx context.Context) error {
				if err := e.Do(ctx, "a", nop); !errors.Is(err, executor.ErrReentrant) {
					t.Errorf("nested Do: got %v; want ErrReentrant", err)
				}
				return e.Do(ctx, "b", nop)
			})
		}},
		{"shared and many", nil, func(t *testing.T, e *executor.Executor[string]) {
			var wg sync.WaitGroup
			for i := range 20 {
				wg.Go(func() {
					if i%2 == 0 {
						_ = e.DoShared(bg, "a", nop)
					} else {
						_ = e.DoMany(bg, []string{"a", "b", "c"}, nop)
					}
				})
			}
			waitAll(t, &wg)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newExec[string](t, append([]executor.Option{executor.WithWorkers(2)}, tt.opts...)...)
			tt.run(t, e)
			waitIdle(t, e)
			if hot := e.HotKeys(10); len(hot) != 0 {
				t.Errorf("HotKeys when idle: got %v; want none", hot)
			}
		})
	}
}

// TestRetireRace submits to keys that are retiring all the time: each
// submission either finds the live mailbox or makes a new one, and is never
// lost or run beside another task of its key.
func TestRetireRace(t *testing.T) {
	e := newExec[int](t, executor.WithWorkers(4))
	var occ occupancies[int]
	var ran atomic.Int64
	const callers, each = 8, 300
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := range each {
				k := (c + i) % 3
				o := occ.of(k)
				fn := func(context.Context) error {
					o.enter(false)
					ran.Add(1)
					o.exit(false)
					return nil
				}
				if i%2 == 0 {
					if err := e.Do(context.Background(), k, fn); err != nil {
						t.Errorf("Do: got %v; want nil", err)
					}
				} else if task, err := e.Submit(context.Background(), k, fn); err != nil {
					t.Errorf("Submit: got %v; want nil", err)
				} else if err := task.Wait(context.Background()); err != nil {
					t.Errorf("Wait: got %v; want nil", err)
				}
			}
		})
	}
	waitAll(t, &wg)
	if got := ran.Load(); got != callers*each {
		t.Errorf("tasks run: got %d; want %d", got, callers*each)
	}
	if n := occ.overlaps(); n != 0 {
		t.Errorf("got %d overlapping runs within a key; want 0", n)
	}
	waitIdle(t, e)
}

// TestUncontendedDoRetires: a Do that finds its key idle gives its hold
// back without the shard lock when nobody came for the key (a fast hold);
// the key counts as retired at once all the same, and whoever comes for
// the key while fn runs, to queue or to wait for room, is handed the key
// when fn returns.
func TestUncontendedDoRetires(t *testing.T) {
	bg := context.Background()

	t.Run("at once", func(t *testing.T) {
		e := newExec[string](t)
		for i := range 200 {
			if err := e.Do(bg, fmt.Sprint(i%7), nop); err != nil {
				t.Fatal(err)
			}
			if n := e.ActiveKeys(); n != 0 {
				t.Fatalf("ActiveKeys right after Do %d returned: %d; want 0", i, n)
			}
		}
		if s := e.Stats(); s.Submitted != 200 || s.Completed != 200 || !balanced(s) {
			t.Errorf("Stats: %+v; want 200 submitted and completed, balanced", s)
		}
	})

	t.Run("queued behind it", func(t *testing.T) {
		e := newExec[string](t, executor.WithWorkers(2))
		inside, release := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- e.Do(bg, "a", func(context.Context) error { close(inside); <-release; return nil })
		}()
		recv(t, "the first Do to start", inside)
		ran := make(chan struct{})
		if err := e.Go(bg, "a", func(context.Context) error { close(ran); return nil }); err != nil {
			t.Fatal(err)
		}
		task, err := e.Submit(bg, "a", nop)
		if err != nil {
			t.Fatal(err)
		}
		close(release)
		if err := recv(t, "the first Do", done); err != nil {
			t.Fatal(err)
		}
		recv(t, "the Go queued behind it", ran)
		ctx, cancel := context.WithTimeout(bg, patience) // a wedged key fails, not hangs
		defer cancel()
		if err := task.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		waitIdle(t, e)
	})

	t.Run("waiting for room behind it", func(t *testing.T) {
		parks := new(parkingPolicy)
		e := newExec[string](t, executor.WithWorkers(2), executor.WithMaxQueuePerKey(1),
			executor.WithPolicy(parks))
		inside, release := make(chan struct{}), make(chan struct{})
		done := make(chan error, 2)
		go func() {
			done <- e.Do(bg, "a", func(context.Context) error { close(inside); <-release; return nil })
		}()
		recv(t, "the first Do to start", inside)
		go func() { done <- e.Do(bg, "a", nop) }()
		// Block's Wait verdict is given under the key's lock, and the first
		// Do's hold is given back under it too once revoked: the second
		// parks before the first can hand the key on.
		eventually(t, "the second Do to wait for room", func() bool { return parks.waits.Load() == 1 })
		close(release)
		for range 2 {
			if err := recv(t, "both Dos", done); err != nil {
				t.Fatal(err)
			}
		}
		waitIdle(t, e)
	})
}
