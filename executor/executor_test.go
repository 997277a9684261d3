package executor_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alitto/pond/v2"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

var errTask = errors.New("task failed")

func nop(context.Context) error { return nil }

// ---------------------------------------------------------------------------
// Bad input

func TestNewRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opt  executor.Option
	}{
		{"nil option", nil},
		{"WithWorkers(0)", executor.WithWorkers(0)},
		{"WithWorkers(-1)", executor.WithWorkers(-1)},
		{"WithMaxQueuePerKey(-1)", executor.WithMaxQueuePerKey(-1)},
		{"WithMaxPending(-1)", executor.WithMaxPending(-1)},
		{"WithThroughput(0)", executor.WithThroughput(0)},
		{"WithThroughput(-3)", executor.WithThroughput(-3)},
		{"WithStripes(0)", executor.WithStripes(0)},
		{"WithStripes(-1)", executor.WithStripes(-1)},
		{"WithLogger(nil)", executor.WithLogger(nil)},
		{"WithPool(nil)", executor.WithPool(nil)},
		{"WithPolicy(nil)", executor.WithPolicy(nil)},
		{"WithObserver(nil)", executor.WithObserver(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				e   *executor.Executor[string]
				err error
			)
			func() {
				defer func() {
					if v := recover(); v != nil {
						t.Fatalf("New(%s) panicked: %v; want an error", tt.name, v)
					}
				}()
				e, err = executor.New[string](executor.WithWorkers(2), tt.opt)
			}()
			if err == nil {
				t.Fatalf("New(%s): got nil error; want an error", tt.name)
			}
			if e != nil {
				t.Errorf("New(%s): got a non-nil executor with error %v; want nil", tt.name, err)
			}
			if err.Error() == "" {
				t.Errorf("New(%s): got an empty error message; want a description", tt.name)
			}
		})
	}
}

func TestNewAcceptsGoodOptions(t *testing.T) {
	pool := pond.NewPool(0)
	defer pool.StopAndWait()
	tests := []struct {
		name string
		opts []executor.Option
	}{
		{"defaults", nil},
		{"caps zero", []executor.Option{executor.WithMaxQueuePerKey(0), executor.WithMaxPending(0)}},
		{"everything", []executor.Option{
			executor.WithWorkers(1), executor.WithMaxQueuePerKey(1), executor.WithMaxPending(1),
			executor.WithThroughput(1), executor.WithLogger(zap.NewNop()), executor.WithStripes(1),
			executor.WithReentrant(), executor.WithPool(pool), executor.WithPolicy(backpressure.FailFast()),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newExec[string](t, tt.opts...)
			if err := e.Do(context.Background(), "k", nop); err != nil {
				t.Errorf("Do: got %v; want nil", err)
			}
		})
	}
}

// TestBadArguments checks that every entry point refuses nil arguments with
// its sentinel, at once, and counts nothing.
func TestBadArguments(t *testing.T) {
	e := newExec[string](t, executor.WithWorkers(2))
	bg := context.Background()
	var nilCtx context.Context
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"Do nil fn", func() error { return e.Do(bg, "k", nil) }, executor.ErrNilFunc},
		{"Do nil ctx", func() error { return e.Do(nilCtx, "k", nop) }, executor.ErrNilContext},
		{"DoShared nil fn", func() error { return e.DoShared(bg, "k", nil) }, executor.ErrNilFunc},
		{"DoShared nil ctx", func() error { return e.DoShared(nilCtx, "k", nop) }, executor.ErrNilContext},
		{"Submit nil fn", func() error { _, err := e.Submit(bg, "k", nil); return err }, executor.ErrNilFunc},
		{"Submit nil ctx", func() error { _, err := e.Submit(nilCtx, "k", nop); return err }, executor.ErrNilContext},
		{"DoMany nil fn", func() error { return e.DoMany(bg, []string{"a", "b"}, nil) }, executor.ErrNilFunc},
		{"DoMany nil ctx", func() error { return e.DoMany(nilCtx, []string{"a", "b"}, nop) }, executor.ErrNilContext},
		{"DoMany nil keys", func() error { return e.DoMany(bg, nil, nop) }, executor.ErrNoKeys},
		{"DoMany empty keys", func() error { return e.DoMany(bg, []string{}, nop) }, executor.ErrNoKeys},
		{"Call nil fn", func() error {
			_, err := executor.Call[string, int](bg, e, "k", nil)
			return err
		}, executor.ErrNilFunc},
		{"Call nil ctx", func() error {
			_, err := executor.Call(nilCtx, e, "k", func(context.Context) (int, error) { return 1, nil })
			return err
		}, executor.ErrNilContext},
		{"nil Task Wait", func() error { var task *executor.Task; return task.Wait(bg) }, executor.ErrNilTask},
		{"Close nil ctx", func() error { return e.Close(nilCtx) }, executor.ErrNilContext},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, tt.want) {
				t.Errorf("got %v; want %v", err, tt.want)
			}
			if s := e.Stats(); s != (executor.Stats{}) {
				t.Errorf("Stats after a refused call: got %+v; want all zero", s)
			}
		})
	}
	t.Run("Wait nil ctx", func(t *testing.T) {
		task, err := e.Submit(bg, "k", nop)
		if err != nil {
			t.Fatalf("Submit: got %v; want nil", err)
		}
		if err := task.Wait(nilCtx); !errors.Is(err, executor.ErrNilContext) {
			t.Errorf("Wait(nil): got %v; want %v", err, executor.ErrNilContext)
		}
		if err := task.Wait(bg); err != nil {
			t.Errorf("Wait: got %v; want nil", err)
		}
	})
	t.Run("nil Task Done", func(t *testing.T) {
		var task *executor.Task
		select {
		case <-task.Done():
		default:
			t.Errorf("(*Task)(nil).Done(): got an open channel; want a closed one")
		}
	})
	t.Run("HotKeys n<=0", func(t *testing.T) {
		g, _ := block(t, e, "busy")
		defer g.open()
		for _, n := range []int{0, -1, -100} {
			if got := e.HotKeys(n); got != nil {
				t.Errorf("HotKeys(%d): got %v; want nil", n, got)
			}
		}
	})
}

// ---------------------------------------------------------------------------
// 1. Per-key order

// TestPerKeyFIFO submits from one goroutine per key (so submissions are
// ordered by happens-before) and checks that every key's tasks start in
// submission order and never overlap. Every tenth submission is a Do, which
// must find every earlier task of its key already done.
func TestPerKeyFIFO(t *testing.T) {
	tests := []struct {
		name       string
		workers    int
		throughput int
		keys       int
		perKey     int
	}{
		{"one worker one key", 1, 32, 1, 300},
		{"one worker many keys", 1, 4, 8, 100},
		{"two workers", 2, 32, 8, 100},
		{"many workers throughput 1", 16, 1, 16, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newExec[int](t, executor.WithWorkers(tt.workers), executor.WithThroughput(tt.throughput))
			var occ occupancies[int]
			order := make([][]int, tt.keys)
			var mu sync.Mutex // guards order
			var wg sync.WaitGroup
			for k := range tt.keys {
				wg.Go(func() {
					o := occ.of(k)
					var tasks []*executor.Task
					for i := range tt.perKey {
						fn := func(context.Context) error {
							o.enter(false)
							defer o.exit(false)
							mu.Lock()
							defer mu.Unlock()
							if i%10 == 9 && len(order[k]) != i {
								t.Errorf("key %d: Do #%d started with %d earlier tasks done; want %d", k, i, len(order[k]), i)
							}
							order[k] = append(order[k], i)
							return nil
						}
						if i%10 == 9 {
							if err := e.Do(context.Background(), k, fn); err != nil {
								t.Errorf("Do: got %v; want nil", err)
							}
							continue
						}
						task, err := e.Submit(context.Background(), k, fn)
						if err != nil {
							t.Errorf("Submit: got %v; want nil", err)
							continue
						}
						tasks = append(tasks, task)
					}
					for _, task := range tasks {
						if err := task.Wait(context.Background()); err != nil {
							t.Errorf("Wait: got %v; want nil", err)
						}
					}
				})
			}
			wg.Wait()
			for k, got := range order {
				if len(got) != tt.perKey {
					t.Errorf("key %d: got %d tasks run; want %d", k, len(got), tt.perKey)
				}
				for i, seq := range got {
					if seq != i {
						t.Errorf("key %d: task #%d started at position %d; want FIFO order", k, seq, i)
						break
					}
				}
			}
			if n := occ.overlaps(); n != 0 {
				t.Errorf("got %d overlapping runs within a key; want 0", n)
			}
			s := waitIdle(t, e)
			if want := uint64(tt.keys * tt.perKey); s.Submitted != want || s.Completed != want {
				t.Errorf("Stats: got Submitted %d, Completed %d; want %d each", s.Submitted, s.Completed, want)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// 2. Parallel across keys

// TestReferenceWorkload is the contract's workload on the real clock: 1,000
// tasks of 1 ms over 50 keys with 64 workers. Ideal is ~20 ms; one global
// lock would take ~1 s. The bound is loose because the machine is shared.
func TestReferenceWorkload(t *testing.T) {
	const (
		keys  = 50
		ops   = 1000
		bound = time.Second
	)
	e := newExec[int](t, executor.WithWorkers(64))
	var occ occupancies[int]
	var ran atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for c := range 100 { // 100 callers, 10 Do each
		wg.Go(func() {
			for i := range ops / 100 {
				k := (c*(ops/100) + i) % keys
				o := occ.of(k)
				err := e.Do(context.Background(), k, func(context.Context) error {
					o.enter(false)
					defer o.exit(false)
					time.Sleep(time.Millisecond)
					ran.Add(1)
					return nil
				})
				if err != nil {
					t.Errorf("Do: got %v; want nil", err)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if got := ran.Load(); got != ops {
		t.Errorf("tasks run: got %d; want %d", got, ops)
	}
	if n := occ.overlaps(); n != 0 {
		t.Errorf("got %d overlapping runs within a key; want 0", n)
	}
	if elapsed >= bound {
		t.Errorf("1,000 × 1 ms over 50 keys took %v; want < %v (ideal ~20 ms)", elapsed, bound)
	}
	t.Logf("reference workload: %v", elapsed)
	waitIdle(t, e)
}

// TestParallelFakeClock runs workloads of sleeping tasks on synctest's fake
// clock, where the elapsed time is exact: keys run in parallel up to the
// worker bound and no further.
func TestParallelFakeClock(t *testing.T) {
	tests := []struct {
		name          string
		workers, keys int
		perKey        int
		throughput    int
		async         bool
		want          time.Duration // exact on the fake clock
	}{
		// 50 keys × 20 tasks × 1 ms, every key at once: 20 ms.
		{"reference Submit", 64, 50, 20, 32, true, 20 * time.Millisecond},
		{"reference Do", 64, 50, 20, 32, false, 20 * time.Millisecond},
		// 10 workers: 1,000 ms of work / 10 = 100 ms, never less.
		{"ten workers", 10, 50, 20, 32, true, 100 * time.Millisecond},
		{"ten workers throughput 3", 10, 50, 20, 3, true, 100 * time.Millisecond},
		// One worker: fully serial.
		{"one worker", 1, 5, 10, 2, true, 50 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, err := executor.New[int](executor.WithWorkers(tt.workers), executor.WithThroughput(tt.throughput))
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				defer e.Close(context.Background())
				var occ occupancies[int]
				var conc concurrency
				fn := func(k int) func(context.Context) error {
					o := occ.of(k)
					return func(context.Context) error {
						o.enter(false)
						conc.enter()
						time.Sleep(time.Millisecond)
						conc.exit()
						o.exit(false)
						return nil
					}
				}
				start := time.Now()
				if tt.async {
					var tasks []*executor.Task
					for i := range tt.perKey {
						for k := range tt.keys {
							_ = i
							task, err := e.Submit(context.Background(), k, fn(k))
							if err != nil {
								t.Fatalf("Submit: got %v; want nil", err)
							}
							tasks = append(tasks, task)
						}
					}
					for _, task := range tasks {
						if err := task.Wait(context.Background()); err != nil {
							t.Errorf("Wait: got %v; want nil", err)
						}
					}
				} else {
					var wg sync.WaitGroup
					for k := range tt.keys {
						wg.Go(func() {
							for range tt.perKey {
								if err := e.Do(context.Background(), k, fn(k)); err != nil {
									t.Errorf("Do: got %v; want nil", err)
								}
							}
						})
					}
					wg.Wait()
				}
				if got := time.Since(start); got != tt.want {
					t.Errorf("elapsed on the fake clock: got %v; want %v", got, tt.want)
				}
				if got, limit := conc.peak.Load(), int64(min(tt.workers, tt.keys)); got != limit {
					t.Errorf("peak concurrency: got %d; want %d", got, limit)
				}
				if n := occ.overlaps(); n != 0 {
					t.Errorf("got %d overlapping runs within a key; want 0", n)
				}
				if err := e.Close(context.Background()); err != nil {
					t.Errorf("Close: got %v; want nil", err)
				}
				if s := e.Stats(); s.ActiveKeys != 0 || !balanced(s) || s.Completed != uint64(tt.keys*tt.perKey) {
					t.Errorf("Stats after Close: got %+v; want ActiveKeys 0, Completed %d, balanced", s, tt.keys*tt.perKey)
				}
			})
		})
	}
}

// ---------------------------------------------------------------------------
// 3. Bounded

// TestBounded runs a mix of Do, Submit, DoShared, DoMany and nested calls and
// checks that no more than WithWorkers bodies execute at once. A body blocked
// in a nested call lends its slot, so it is not counted while it waits.
//
// Nesting is kept free of the cycles the contract calls unresolvable: the
// outer tasks (Do, DoShared, Submit, DoMany on keys 0-7) nest only into keys
// 8-15, those nest only into higher keys of 8-15 or into a DoMany on keys
// 16-23, whose bodies do not nest.
func TestBounded(t *testing.T) {
	const (
		outer  = 0  // keys 0-7: called from outside
		middle = 8  // keys 8-15: nested calls, nesting upwards
		leaf   = 16 // keys 16-23: nested DoMany, no further nesting
		span   = 8
	)
	for _, workers := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			e := newExec[int](t, executor.WithWorkers(workers), executor.WithThroughput(2))
			var conc concurrency
			var nested atomic.Int64
			var body func(k int, r *rand.Rand) func(context.Context) error
			body = func(k int, r *rand.Rand) func(context.Context) error {
				var call func(ctx context.Context) error
				switch {
				case k >= leaf || r.IntN(3) == 0:
					// A leaf.
				case k < middle || k == middle+span-1 || r.IntN(4) == 0:
					ks := []int{leaf + r.IntN(span-1)}
					ks = append(ks, ks[0]+1)
					sub := body(leaf, r)
					call = func(ctx context.Context) error { return e.DoMany(ctx, ks, sub) }
				default:
					next := k + 1 + r.IntN(middle+span-1-k)
					if k < middle {
						next = middle + r.IntN(span)
					}
					sub := body(next, r)
					switch r.IntN(3) {
					case 0:
						call = func(ctx context.Context) error { return e.Do(ctx, next, sub) }
					case 1:
						call = func(ctx context.Context) error { return e.DoShared(ctx, next, sub) }
					default:
						call = func(ctx context.Context) error {
							task, err := e.Submit(ctx, next, sub)
							if err != nil {
								return err
							}
							return task.Wait(ctx)
						}
					}
				}
				return func(ctx context.Context) error {
					conc.enter()
					defer conc.exit()
					runtime.Gosched()
					if call == nil {
						return nil
					}
					nested.Add(1)
					conc.exit() // the slot is lent while the nested call waits
					defer conc.enter()
					return call(ctx)
				}
			}
			var wg sync.WaitGroup
			for c := range 8 {
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(c), uint64(workers)))
					var tasks []*executor.Task
					for range 50 {
						k := outer + r.IntN(span)
						fn := body(k, r)
						var err error
						switch r.IntN(4) {
						case 0:
							err = e.Do(context.Background(), k, fn)
						case 1:
							err = e.DoShared(context.Background(), k, fn)
						case 2:
							err = e.DoMany(context.Background(), []int{k, outer + (k+1)%span}, fn)
						default:
							var task *executor.Task
							if task, err = e.Submit(context.Background(), k, fn); err == nil {
								tasks = append(tasks, task)
							}
						}
						if err != nil {
							t.Errorf("call: got %v; want nil", err)
						}
					}
					for _, task := range tasks {
						if err := task.Wait(context.Background()); err != nil {
							t.Errorf("Wait: got %v; want nil", err)
						}
					}
				})
			}
			wg.Wait()
			if got := conc.peak.Load(); got > int64(workers) {
				t.Errorf("peak concurrent bodies: got %d; want <= %d", got, workers)
			}
			t.Logf("peak concurrent bodies: %d of %d, nested calls: %d", conc.peak.Load(), workers, nested.Load())
			waitIdle(t, e)
		})
	}
}

// TestBoundedInline checks that runs on callers' goroutines count against
// WithWorkers: with every slot held by pooled tasks, a Do on an idle key
// waits instead of running inline.
func TestBoundedInline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, err := executor.New[int](executor.WithWorkers(2))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		defer e.Close(context.Background())
		g1, g2 := newGate(), newGate()
		if _, err := e.Submit(context.Background(), 1, g1.fn); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Submit(context.Background(), 2, g2.fn); err != nil {
			t.Fatal(err)
		}
		<-g1.started
		<-g2.started
		var ran atomic.Bool
		done := make(chan error)
		go func() {
			done <- e.Do(context.Background(), 3, func(context.Context) error { ran.Store(true); return nil })
		}()
		synctest.Wait()
		if ran.Load() {
			t.Errorf("Do on an idle key ran with every slot taken; want it to wait for a slot")
		}
		g1.open()
		if err := <-done; err != nil || !ran.Load() {
			t.Errorf("Do after a slot freed: got err %v, ran %v; want nil, true", err, ran.Load())
		}
		g2.open()
	})
}

// ---------------------------------------------------------------------------
// 4. Retirement

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
				<-task.Done()
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
			wg.Wait()
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
	wg.Wait()
	if got := ran.Load(); got != callers*each {
		t.Errorf("tasks run: got %d; want %d", got, callers*each)
	}
	if n := occ.overlaps(); n != 0 {
		t.Errorf("got %d overlapping runs within a key; want 0", n)
	}
	waitIdle(t, e)
}

// ---------------------------------------------------------------------------
// 5. Fail fast

func TestFailFast(t *testing.T) {
	const limit, total = 100, 1000
	e := newExec[string](t, executor.WithWorkers(4), executor.WithMaxQueuePerKey(limit))
	g, first := block(t, e, "hot")
	tasks := []*executor.Task{first}
	var busy []error
	var ran atomic.Int64
	for i := 1; i < total; i++ {
		task, err := e.Submit(context.Background(), "hot", func(context.Context) error { ran.Add(1); return nil })
		if err != nil {
			busy = append(busy, err)
			continue
		}
		tasks = append(tasks, task)
	}
	if len(tasks) != limit || len(busy) != total-limit {
		t.Fatalf("got %d accepted, %d refused; want %d, %d", len(tasks), len(busy), limit, total-limit)
	}
	for _, err := range busy {
		var be *backpressure.BusyError
		switch {
		case !errors.Is(err, executor.ErrBusy) || !errors.Is(err, backpressure.ErrBusy):
			t.Fatalf("refusal: got %v; want errors.Is ErrBusy", err)
		case !errors.As(err, &be):
			t.Fatalf("refusal: got %T; want *backpressure.BusyError", err)
		case be.Key != "hot" || be.Pending != limit || be.Limit != limit || be.Scope != backpressure.ScopeKey:
			t.Fatalf("BusyError: got Key %v, Pending %d, Limit %d, Scope %v; want hot, %d, %d, key",
				be.Key, be.Pending, be.Limit, be.Scope, limit, limit)
		}
	}
	// Blocking entry points refuse at once too: the blocker still holds the
	// key, so a Do that waited would not return here.
	if err := e.Do(context.Background(), "hot", nop); !errors.Is(err, executor.ErrBusy) {
		t.Errorf("Do on a full key: got %v; want ErrBusy", err)
	}
	if err := e.DoShared(context.Background(), "hot", nop); !errors.Is(err, executor.ErrBusy) {
		t.Errorf("DoShared on a full key: got %v; want ErrBusy", err)
	}
	if err := e.DoMany(context.Background(), []string{"cold", "hot"}, nop); !errors.Is(err, executor.ErrBusy) {
		t.Errorf("DoMany with a full key: got %v; want ErrBusy", err)
	}
	// Other keys are unaffected, and DoMany left nothing behind on "cold".
	if err := e.Do(context.Background(), "cold", nop); err != nil {
		t.Errorf("Do on another key: got %v; want nil", err)
	}
	s := e.Stats()
	if want := uint64(total - limit + 3); s.Rejected != want {
		t.Errorf("Stats.Rejected: got %d; want %d", s.Rejected, want)
	}
	if s.Submitted != limit+1 || s.Queued != limit-1 || s.Running != 1 {
		t.Errorf("Stats: got %+v; want Submitted %d, Queued %d, Running 1", s, limit+1, limit-1)
	}
	if hot := e.HotKeys(5); len(hot) != 1 || hot[0] != (executor.KeyLoad[string]{Key: "hot", Pending: limit}) {
		t.Errorf("HotKeys: got %v; want [{hot %d}]", hot, limit)
	}
	g.open()
	for _, task := range tasks {
		if err := task.Wait(context.Background()); err != nil {
			t.Errorf("Wait: got %v; want nil", err)
		}
	}
	if got := ran.Load(); got != limit-1 {
		t.Errorf("accepted tasks run: got %d; want %d", got, limit-1)
	}
	waitIdle(t, e)
	// The key has room again.
	if err := e.Do(context.Background(), "hot", nop); err != nil {
		t.Errorf("Do after draining: got %v; want nil", err)
	}
}

func TestFailFastGlobal(t *testing.T) {
	e := newExec[string](t, executor.WithWorkers(4), executor.WithMaxPending(3))
	g, _ := block(t, e, "a")
	for _, k := range []string{"b", "c"} {
		if _, err := e.Submit(context.Background(), k, func(context.Context) error { <-g.release; return nil }); err != nil {
			t.Fatalf("Submit %s: got %v; want nil", k, err)
		}
	}
	err := e.Do(context.Background(), "d", nop)
	var be *backpressure.BusyError
	if !errors.As(err, &be) || be.Key != nil || be.Scope != backpressure.ScopeGlobal || be.Limit != 3 || be.Pending != 3 {
		t.Errorf("Do past the global cap: got %#v; want a global *BusyError with Pending 3, Limit 3", err)
	}
	if err := e.DoMany(context.Background(), []string{"x", "y"}, nop); !errors.Is(err, executor.ErrBusy) {
		t.Errorf("DoMany past the global cap: got %v; want ErrBusy", err)
	}
	g.open()
	waitIdle(t, e)
	// A DoMany counts once against the global cap.
	g2, _ := block(t, e, "a")
	if err := e.DoMany(context.Background(), []string{"x", "y", "z"}, nop); err != nil {
		t.Errorf("DoMany with room for one task: got %v; want nil", err)
	}
	g2.open()
}

// shedAll is a policy that refuses everything, to check that a policy can
// shed below the caps.
type shedAll struct{}

func (shedAll) Decide(backpressure.Load) backpressure.Verdict { return backpressure.Reject }

func TestCustomPolicy(t *testing.T) {
	e := newExec[string](t, executor.WithMaxQueuePerKey(10), executor.WithPolicy(shedAll{}))
	if err := e.Do(context.Background(), "k", nop); !errors.Is(err, executor.ErrBusy) {
		t.Errorf("Do under a shed-all policy: got %v; want ErrBusy", err)
	}
	if s := e.Stats(); s.Rejected != 1 || s.Submitted != 0 {
		t.Errorf("Stats: got %+v; want Rejected 1, Submitted 0", s)
	}
	waitIdle(t, e)
}

// ---------------------------------------------------------------------------
// 6. Context

// caller is one way of submitting a task and waiting for it.
type caller struct {
	name string
	call func(e *executor.Executor[string], ctx context.Context, key string, fn func(context.Context) error) error
}

var callers = []caller{
	{"Do", func(e *executor.Executor[string], ctx context.Context, key string, fn func(context.Context) error) error {
		return e.Do(ctx, key, fn)
	}},
	{"DoShared", func(e *executor.Executor[string], ctx context.Context, key string, fn func(context.Context) error) error {
		return e.DoShared(ctx, key, fn)
	}},
	{"DoMany", func(e *executor.Executor[string], ctx context.Context, key string, fn func(context.Context) error) error {
		return e.DoMany(ctx, []string{key, key + "'"}, fn)
	}},
	{"Submit+Wait", func(e *executor.Executor[string], ctx context.Context, key string, fn func(context.Context) error) error {
		task, err := e.Submit(ctx, key, fn)
		if err != nil {
			return err
		}
		return task.Wait(context.Background())
	}},
	{"Call", func(e *executor.Executor[string], ctx context.Context, key string, fn func(context.Context) error) error {
		_, err := executor.Call(ctx, e, key, func(ctx context.Context) (int, error) { return 7, fn(ctx) })
		return err
	}},
}

// TestContextQueuedCanceled: a task whose ctx ends while it is queued never
// runs, its call returns ctx's error at once (while the key is still held),
// and the key's next task does not wait for it.
func TestContextQueuedCanceled(t *testing.T) {
	for _, c := range callers {
		t.Run(c.name, func(t *testing.T) {
			e := newExec[string](t, executor.WithWorkers(4))
			g, _ := block(t, e, "k")
			ctx, cancel := context.WithCancel(context.Background())
			var ran atomic.Bool
			done := make(chan error, 1)
			go func() { done <- c.call(e, ctx, "k", func(context.Context) error { ran.Store(true); return nil }) }()
			eventually(t, "the task to queue", func() bool { return e.Stats().Queued == 1 })
			next, err := e.Submit(context.Background(), "k", nop)
			if err != nil {
				t.Fatalf("Submit next: got %v; want nil", err)
			}
			cancel()
			// The blocker still holds "k": the call must return without it.
			if err := recv(t, "the canceled call to return", done); !errors.Is(err, ctx.Err()) || !errors.Is(err, context.Canceled) {
				t.Errorf("canceled call: got %v; want errors.Is(err, %v)", err, ctx.Err())
			}
			if s := e.Stats(); s.Canceled != 1 || s.Queued != 1 || !balanced(s) {
				t.Errorf("Stats after the cancel: got %+v; want Canceled 1, Queued 1 (the next task), balanced", s)
			}
			g.open()
			if err := next.Wait(context.Background()); err != nil {
				t.Errorf("next task: got %v; want nil", err)
			}
			if ran.Load() {
				t.Errorf("the canceled task ran; want it never to run")
			}
			waitIdle(t, e)
		})
	}
}

// TestContextGivesPlaceBack: a canceled queued task stops counting against
// the per-key cap at once.
func TestContextGivesPlaceBack(t *testing.T) {
	e := newExec[string](t, executor.WithWorkers(2), executor.WithMaxQueuePerKey(3))
	g, _ := block(t, e, "k")
	ctx, cancel := context.WithCancel(context.Background())
	a, err := e.Submit(ctx, "k", func(context.Context) error { t.Error("canceled task ran"); return nil })
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.Submit(context.Background(), "k", nop)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Submit(context.Background(), "k", nop); !errors.Is(err, executor.ErrBusy) {
		t.Fatalf("Submit on a full key: got %v; want ErrBusy", err)
	}
	cancel()
	<-a.Done()
	if err := a.Wait(context.Background()); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled task's Wait: got %v; want %v", err, context.Canceled)
	}
	if hot := e.HotKeys(1); len(hot) != 1 || hot[0].Pending != 2 {
		t.Errorf("HotKeys after the cancel: got %v; want [{k 2}]", hot)
	}
	c, err := e.Submit(context.Background(), "k", nop)
	if err != nil {
		t.Errorf("Submit into the freed place: got %v; want nil", err)
	}
	g.open()
	for _, task := range []*executor.Task{b, c} {
		if err := task.Wait(context.Background()); err != nil {
			t.Errorf("Wait: got %v; want nil", err)
		}
	}
	waitIdle(t, e)
}

// TestContextAlreadyEnded: a call whose ctx already ended is refused with
// ctx's error and counts nowhere.
func TestContextAlreadyEnded(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, ctx := range []context.Context{canceled, expired} {
		for _, c := range callers {
			t.Run(fmt.Sprintf("%s/%v", c.name, ctx.Err()), func(t *testing.T) {
				e := newExec[string](t, executor.WithWorkers(2))
				err := c.call(e, ctx, "k", func(context.Context) error { t.Error("fn ran"); return nil })
				if !errors.Is(err, ctx.Err()) {
					t.Errorf("got %v; want %v", err, ctx.Err())
				}
				if s := e.Stats(); s != (executor.Stats{}) {
					t.Errorf("Stats: got %+v; want all zero", s)
				}
			})
		}
	}
}

type ctxKey struct{}

// TestContextDerived: fn's ctx carries the caller's values and deadline and
// is canceled with the caller's ctx.
func TestContextDerived(t *testing.T) {
	for _, c := range callers {
		t.Run(c.name, func(t *testing.T) {
			e := newExec[string](t, executor.WithWorkers(2))
			deadline := time.Now().Add(time.Hour)
			parent, cancel := context.WithDeadline(context.WithValue(context.Background(), ctxKey{}, "v"), deadline)
			defer cancel()
			err := c.call(e, parent, "k", func(ctx context.Context) error {
				if got := ctx.Value(ctxKey{}); got != "v" {
					t.Errorf("ctx.Value: got %v; want v", got)
				}
				if got, ok := ctx.Deadline(); !ok || !got.Equal(deadline) {
					t.Errorf("ctx.Deadline: got %v, %v; want %v, true", got, ok, deadline)
				}
				if err := ctx.Err(); err != nil {
					t.Errorf("ctx.Err while running: got %v; want nil", err)
				}
				cancel()
				select {
				case <-ctx.Done():
				case <-time.After(patience):
					t.Fatalf("fn's ctx was not canceled with the caller's")
				}
				if err := ctx.Err(); !errors.Is(err, context.Canceled) {
					t.Errorf("ctx.Err after the caller's cancel: got %v; want %v", err, context.Canceled)
				}
				return errTask
			})
			// Once fn has started, the call waits for it and returns its error.
			if !errors.Is(err, errTask) {
				t.Errorf("got %v; want fn's error %v", err, errTask)
			}
			waitIdle(t, e)
		})
	}
}

// TestContextWaitsForRunningFn: if ctx ends while fn runs, Do does not
// return before fn does.
func TestContextWaitsForRunningFn(t *testing.T) {
	for _, c := range callers {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, err := executor.New[string](executor.WithWorkers(2))
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close(context.Background())
				ctx, cancel := context.WithCancel(context.Background())
				started, proceed := make(chan struct{}), make(chan struct{})
				done := make(chan error, 1)
				go func() {
					done <- c.call(e, ctx, "k", func(ctx context.Context) error {
						close(started)
						<-ctx.Done()
						<-proceed
						return errTask
					})
				}()
				<-started
				cancel()
				synctest.Wait()
				select {
				case err := <-done:
					t.Fatalf("call returned %v while fn was still running; want it to wait", err)
				default:
				}
				close(proceed)
				if err := <-done; !errors.Is(err, errTask) {
					t.Errorf("got %v; want fn's error %v", err, errTask)
				}
			})
		})
	}
}

// TestContextDeadline uses the fake clock: a task queued behind a busy key
// with a 10 ms timeout gives up after exactly 10 ms.
func TestContextDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, err := executor.New[string](executor.WithWorkers(2))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close(context.Background())
		release := make(chan struct{})
		if _, err := e.Submit(context.Background(), "k", func(context.Context) error { <-release; return nil }); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		start := time.Now()
		err = e.Do(ctx, "k", func(context.Context) error { t.Error("fn ran"); return nil })
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Do: got %v; want %v", err, context.DeadlineExceeded)
		}
		if got := time.Since(start); got != 10*time.Millisecond {
			t.Errorf("Do gave up after %v; want 10ms", got)
		}
		task, err := e.Submit(context.Background(), "k", nop)
		if err != nil {
			t.Fatal(err)
		}
		// A Wait whose own ctx ends returns ctx's error and leaves the task be.
		wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer wcancel()
		if err := task.Wait(wctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Wait with an expiring ctx: got %v; want %v", err, context.DeadlineExceeded)
		}
		close(release)
		if err := task.Wait(context.Background()); err != nil {
			t.Errorf("Wait after the key freed: got %v; want nil (the task is unaffected by a waiter giving up)", err)
		}
		if s := e.Stats(); s.Canceled != 1 || s.Completed != 2 || !balanced(s) {
			t.Errorf("Stats: got %+v; want Canceled 1, Completed 2, balanced", s)
		}
	})
}

// ---------------------------------------------------------------------------
// 7. Panics

func TestPanic(t *testing.T) {
	sentinel := errors.New("sentinel")
	values := []struct {
		name  string
		value any
	}{
		{"string", "boom"},
		{"error", sentinel},
		{"int", 42},
	}
	for _, c := range callers {
		for _, v := range values {
			t.Run(c.name+"/"+v.name, func(t *testing.T) {
				core, logs := observer.New(zapcore.DebugLevel)
				e := newExec[string](t, executor.WithWorkers(2), executor.WithLogger(zap.New(core)))
				err := c.call(e, context.Background(), "k", func(context.Context) error { panic(v.value) })
				var pe *executor.PanicError
				if !errors.As(err, &pe) {
					t.Fatalf("got %v (%T); want a *PanicError", err, err)
				}
				if pe.Value != v.value {
					t.Errorf("PanicError.Value: got %v; want %v", pe.Value, v.value)
				}
				if len(pe.Stack) == 0 || !bytes.Contains(pe.Stack, []byte("executor_test")) {
					t.Errorf("PanicError.Stack: got %q; want the panicking goroutine's stack", pe.Stack)
				}
				if v.value == sentinel && !errors.Is(err, sentinel) {
					t.Errorf("errors.Is(%v, sentinel): got false; want true", err)
				}
				// Logged, and counted, by the time the call returns.
				entries := logs.FilterLevelExact(zapcore.ErrorLevel).All()
				if len(entries) != 1 {
					t.Fatalf("error-level log entries: got %d; want 1 (%v)", len(entries), logs.All())
				}
				fields := entries[0].ContextMap()
				key, hasKey := fields["key"]
				keys, hasKeys := fields["keys"]
				if !(hasKey && key == "k") && !(hasKeys && fmt.Sprint(keys) == "[k k']") {
					t.Errorf("panic log fields: got %v; want the key k", fields)
				}
				if s := e.Stats(); s.Panicked != 1 || s.Completed != 1 || !balanced(s) {
					t.Errorf("Stats: got %+v; want Panicked 1, Completed 1, balanced", s)
				}
				// The key's next task runs normally.
				if err := c.call(e, context.Background(), "k", nop); err != nil {
					t.Errorf("next task: got %v; want nil", err)
				}
				waitIdle(t, e)
			})
		}
	}
}

// TestPanicQueued: a panic in a pooled task (not the inline fast path)
// leaves the mailbox running its queue.
func TestPanicQueued(t *testing.T) {
	e := newExec[string](t, executor.WithWorkers(1), executor.WithThroughput(2))
	g, _ := block(t, e, "k")
	var tasks []*executor.Task
	var ran atomic.Int64
	for i := range 10 {
		task, err := e.Submit(context.Background(), "k", func(context.Context) error {
			ran.Add(1)
			if i%2 == 0 {
				panic(i)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, task)
	}
	g.open()
	for i, task := range tasks {
		err := task.Wait(context.Background())
		var pe *executor.PanicError
		if i%2 == 0 && (!errors.As(err, &pe) || pe.Value != i) {
			t.Errorf("task %d: got %v; want a *PanicError with value %d", i, err, i)
		}
		if i%2 == 1 && err != nil {
			t.Errorf("task %d: got %v; want nil", i, err)
		}
	}
	if got := ran.Load(); got != 10 {
		t.Errorf("tasks run: got %d; want 10", got)
	}
	if s := waitIdle(t, e); s.Panicked != 5 {
		t.Errorf("Stats.Panicked: got %d; want 5", s.Panicked)
	}
}

// ---------------------------------------------------------------------------
// 8. Re-entry

// TestReentrantRefused: a nested call on a key the task holds returns
// ErrReentrant at once instead of deadlocking, whatever the entry point and
// however the ctx was derived.
func TestReentrantRefused(t *testing.T) {
	nested := []struct {
		name string
		call func(e *executor.Executor[string], ctx context.Context) error
	}{
		{"Do", func(e *executor.Executor[string], ctx context.Context) error { return e.Do(ctx, "a", nop) }},
		{"DoShared", func(e *executor.Executor[string], ctx context.Context) error { return e.DoShared(ctx, "a", nop) }},
		{"DoMany all held", func(e *executor.Executor[string], ctx context.Context) error {
			return e.DoMany(ctx, []string{"a", "a"}, nop)
		}},
		{"DoMany one held", func(e *executor.Executor[string], ctx context.Context) error {
			return e.DoMany(ctx, []string{"b", "a"}, nop)
		}},
		{"Call", func(e *executor.Executor[string], ctx context.Context) error {
			_, err := executor.Call(ctx, e, "a", func(context.Context) (int, error) { return 0, nil })
			return err
		}},
		{"derived ctx", func(e *executor.Executor[string], ctx context.Context) error {
			ctx, cancel := context.WithTimeout(context.WithValue(ctx, ctxKey{}, 1), time.Hour)
			defer cancel()
			return e.Do(ctx, "a", nop)
		}},
		{"two levels down", func(e *executor.Executor[string], ctx context.Context) error {
			return e.Do(ctx, "b", func(ctx context.Context) error { return e.Do(ctx, "a", nop) })
		}},
	}
	outers := []struct {
		name string
		run  func(e *executor.Executor[string], fn func(context.Context) error) error
	}{
		{"Do", func(e *executor.Executor[string], fn func(context.Context) error) error {
			return e.Do(context.Background(), "a", fn)
		}},
		{"DoShared", func(e *executor.Executor[string], fn func(context.Context) error) error {
			return e.DoShared(context.Background(), "a", fn)
		}},
		{"DoMany", func(e *executor.Executor[string], fn func(context.Context) error) error {
			return e.DoMany(context.Background(), []string{"a", "c"}, fn)
		}},
		{"Submit", func(e *executor.Executor[string], fn func(context.Context) error) error {
			task, err := e.Submit(context.Background(), "a", fn)
			if err != nil {
				return err
			}
			return task.Wait(context.Background())
		}},
	}
	for _, o := range outers {
		for _, n := range nested {
			t.Run(o.name+"/"+n.name, func(t *testing.T) {
				e := newExec[string](t, executor.WithWorkers(1))
				err := o.run(e, func(ctx context.Context) error { return n.call(e, ctx) })
				if !errors.Is(err, executor.ErrReentrant) {
					t.Errorf("got %v; want ErrReentrant", err)
				}
				if s := waitIdle(t, e); s.Submitted != s.Completed {
					t.Errorf("Stats: got %+v; want every accepted task completed", s)
				}
			})
		}
	}
}

// TestReentrantInline: under WithReentrant, a nested call on held keys runs
// fn inline, at once, on the calling goroutine; a DoMany with only some of
// its keys held still fails.
func TestReentrantInline(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	e := newExec[string](t, executor.WithWorkers(1), executor.WithReentrant(), executor.WithLogger(zap.New(core)))
	var trace []string
	err := e.DoMany(context.Background(), []string{"a", "b"}, func(ctx context.Context) error {
		trace = append(trace, "outer")
		if err := e.Do(ctx, "a", func(ctx context.Context) error {
			trace = append(trace, "Do a")
			return e.DoShared(ctx, "b", func(context.Context) error {
				trace = append(trace, "DoShared b")
				return nil
			})
		}); err != nil {
			return err
		}
		if err := e.DoMany(ctx, []string{"b", "a", "b"}, func(context.Context) error {
			trace = append(trace, "DoMany b a")
			return errTask
		}); !errors.Is(err, errTask) {
			t.Errorf("inline DoMany: got %v; want fn's error %v", err, errTask)
		}
		if err := e.DoMany(ctx, []string{"a", "z"}, nop); !errors.Is(err, executor.ErrReentrant) {
			t.Errorf("DoMany with one key not held: got %v; want ErrReentrant", err)
		}
		// A panic in an inline fn is recovered like any other: the nested
		// call returns a *PanicError and the outer task carries on.
		var pe *executor.PanicError
		if err := e.Do(ctx, "a", func(context.Context) error { panic("inner") }); !errors.As(err, &pe) || pe.Value != "inner" {
			t.Errorf("inline Do whose fn panics: got %v; want a *PanicError with value inner", err)
		}
		if err := e.DoMany(ctx, []string{"a", "b"}, func(context.Context) error { panic("inner many") }); !errors.As(err, &pe) || pe.Value != "inner many" {
			t.Errorf("inline DoMany whose fn panics: got %v; want a *PanicError with value inner many", err)
		}
		trace = append(trace, "end")
		return nil
	})
	if err != nil {
		t.Errorf("outer: got %v; want nil", err)
	}
	if n := logs.FilterMessage("task panicked").FilterLevelExact(zapcore.ErrorLevel).Len(); n != 2 {
		t.Errorf("inline panics logged at error level: got %d; want 2", n)
	}
	if want := []string{"outer", "Do a", "DoShared b", "DoMany b a", "end"}; fmt.Sprint(trace) != fmt.Sprint(want) {
		t.Errorf("trace: got %v; want %v", trace, want)
	}
	if s := waitIdle(t, e); s.Submitted != 1 {
		t.Errorf("Stats.Submitted: got %d; want 1 (inline calls are part of their task)", s.Submitted)
	}
}

// TestNestedOtherKey: a nested call on another key completes with a single
// worker, even several levels deep and behind queued work on that key.
func TestNestedOtherKey(t *testing.T) {
	const depth = 6
	keyOf := func(i int) string { return fmt.Sprint("k", i) }
	kinds := []struct {
		name string
		call func(e *executor.Executor[string], ctx context.Context, key string, fn func(context.Context) error) error
	}{
		{"Do", func(e *executor.Executor[string], ctx context.Context, key string, fn func(context.Context) error) error {
			return e.Do(ctx, key, fn)
		}},
		{"DoShared", func(e *executor.Executor[string], ctx context.Context, key string, fn func(context.Context) error) error {
			return e.DoShared(ctx, key, fn)
		}},
		{"DoMany", func(e *executor.Executor[string], ctx context.Context, key string, fn func(context.Context) error) error {
			return e.DoMany(ctx, []string{key, key + "'"}, fn)
		}},
		{"Submit+Wait", func(e *executor.Executor[string], ctx context.Context, key string, fn func(context.Context) error) error {
			task, err := e.Submit(ctx, key, fn)
			if err != nil {
				return err
			}
			return task.Wait(ctx)
		}},
	}
	for _, kind := range kinds {
		for _, queued := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/queued=%v", kind.name, queued), func(t *testing.T) {
				e := newExec[string](t, executor.WithWorkers(1))
				var conc concurrency
				var reached atomic.Int64
				var level func(i int) func(context.Context) error
				level = func(i int) func(context.Context) error {
					return func(ctx context.Context) error {
						conc.enter()
						defer conc.exit()
						reached.Store(int64(i))
						if i == depth {
							return nil
						}
						if queued {
							// Work queued from outside on the next key
							// must run first (FIFO) on the lent slot.
							for range 3 {
								if _, err := e.Submit(context.Background(), keyOf(i+1), nop); err != nil {
									return err
								}
							}
						}
						conc.exit()
						defer conc.enter()
						return kind.call(e, ctx, keyOf(i+1), level(i+1))
					}
				}
				done := make(chan error, 1)
				go func() { done <- e.Do(context.Background(), keyOf(0), level(0)) }()
				if err := recv(t, "the nested calls to complete", done); err != nil {
					t.Errorf("got %v; want nil", err)
				}
				if got := reached.Load(); got != depth {
					t.Errorf("deepest level reached: got %d; want %d", got, depth)
				}
				if got := conc.peak.Load(); got != 1 {
					t.Errorf("peak concurrent bodies: got %d; want 1", got)
				}
				waitIdle(t, e)
			})
		}
	}
}

// TestNestedAcrossExecutors: holding a key of one executor says nothing
// about another executor's keys.
func TestNestedAcrossExecutors(t *testing.T) {
	e1 := newExec[string](t, executor.WithWorkers(1))
	e2 := newExec[string](t, executor.WithWorkers(1))
	err := e1.Do(context.Background(), "a", func(ctx context.Context) error {
		return e2.Do(ctx, "a", func(ctx context.Context) error {
			if err := e1.Do(ctx, "a", nop); !errors.Is(err, executor.ErrReentrant) {
				t.Errorf("e1.Do on a key held further out: got %v; want ErrReentrant", err)
			}
			return e1.Do(ctx, "b", nop)
		})
	})
	if err != nil {
		t.Errorf("got %v; want nil", err)
	}
	waitIdle(t, e1)
	waitIdle(t, e2)
}

// TestCloseFromTask: Close called from inside a task returns ErrReentrant
// and closes nothing.
func TestCloseFromTask(t *testing.T) {
	e := newExec[string](t, executor.WithWorkers(1))
	err := e.Do(context.Background(), "a", func(ctx context.Context) error {
		if err := e.Close(ctx); !errors.Is(err, executor.ErrReentrant) {
			t.Errorf("Close from a task: got %v; want ErrReentrant", err)
		}
		return e.Do(ctx, "b", func(ctx context.Context) error {
			return e.Close(context.WithValue(ctx, ctxKey{}, 1))
		})
	})
	if !errors.Is(err, executor.ErrReentrant) {
		t.Errorf("Close from a nested task: got %v; want ErrReentrant", err)
	}
	if err := e.Do(context.Background(), "a", nop); err != nil {
		t.Errorf("Do after a refused Close: got %v; want nil (nothing closed)", err)
	}
}

// TestWaitFromTask: Task.Wait from inside a task on a task queued behind a
// key the task holds returns ErrReentrant at once; on another key it lends
// the slot and completes.
func TestWaitFromTask(t *testing.T) {
	e := newExec[string](t, executor.WithWorkers(1))
	var behind *executor.Task
	err := e.Do(context.Background(), "a", func(ctx context.Context) error {
		var err error
		behind, err = e.Submit(context.Background(), "a", nop)
		if err != nil {
			return err
		}
		if err := behind.Wait(ctx); !errors.Is(err, executor.ErrReentrant) {
			t.Errorf("Wait on a task behind a held key: got %v; want ErrReentrant", err)
		}
		many, err := e.Submit(context.Background(), "b", nop)
		if err != nil {
			return err
		}
		if err := many.Wait(ctx); err != nil {
			t.Errorf("Wait on a task of another key: got %v; want nil", err)
		}
		return nil
	})
	if err != nil {
		t.Errorf("got %v; want nil", err)
	}
	if err := behind.Wait(context.Background()); err != nil {
		t.Errorf("the task behind, waited from outside: got %v; want nil", err)
	}
	waitIdle(t, e)
}

// ---------------------------------------------------------------------------
// 11. Fairness

// TestFairness: with one worker and a hot key holding thousands of queued
// tasks, a task for another key starts after at most WithThroughput further
// tasks of the hot key.
func TestFairness(t *testing.T) {
	for _, throughput := range []int{1, 4, 16} {
		t.Run(fmt.Sprintf("throughput=%d", throughput), func(t *testing.T) {
			const hot = 3000
			e := newExec[string](t, executor.WithWorkers(1), executor.WithThroughput(throughput))
			g, _ := block(t, e, "hot")
			var hotStarted atomic.Int64
			var last *executor.Task
			for range hot {
				task, err := e.Submit(context.Background(), "hot", func(context.Context) error {
					hotStarted.Add(1)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				last = task
			}
			before := hotStarted.Load() // 0: the blocker holds the only worker
			var seen int64
			cold, err := e.Submit(context.Background(), "cold", func(context.Context) error {
				seen = hotStarted.Load()
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			g.open()
			if err := cold.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := seen - before; got > int64(throughput) {
				t.Errorf("hot-key tasks started before the cold key's: got %d; want <= %d", got, throughput)
			}
			if err := last.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
			// A cold task submitted mid-stream also waits at most one turn.
			waitIdle(t, e)
		})
	}
}

// TestFairnessManyKeys: with one worker, keys take turns: between two
// consecutive tasks of one key, no key runs more than throughput tasks.
func TestFairnessManyKeys(t *testing.T) {
	const keys, each, throughput = 5, 40, 3
	e := newExec[int](t, executor.WithWorkers(1), executor.WithThroughput(throughput))
	g, _ := block(t, e, -1)
	var mu sync.Mutex
	var trace []int
	var tasks []*executor.Task
	for i := range each {
		for k := range keys {
			_ = i
			task, err := e.Submit(context.Background(), k, func(context.Context) error {
				mu.Lock()
				trace = append(trace, k)
				mu.Unlock()
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			tasks = append(tasks, task)
		}
	}
	g.open()
	for _, task := range tasks {
		_ = task.Wait(context.Background())
	}
	// Runs of one key are at most throughput long, and while any other key
	// has work left no key gets two turns in a row.
	run := 0
	for i := range trace {
		if i > 0 && trace[i] == trace[i-1] {
			run++
		} else {
			run = 1
		}
		if run > throughput {
			t.Fatalf("key %d ran %d tasks in a row at %d; want <= %d (trace %v)", trace[i], run, i, throughput, trace)
		}
	}
	waitIdle(t, e)
}

// ---------------------------------------------------------------------------
// 12. Close

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
	wg.Wait()
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

// ---------------------------------------------------------------------------
// 13. Nothing lost: counters

// countingObserver counts task events.
type countingObserver struct {
	accepted, started, finished, canceled, panicked, failed atomic.Int64
	rejected                                                [8]atomic.Int64
}

func (o *countingObserver) TaskAccepted()                  { o.accepted.Add(1) }
func (o *countingObserver) TaskRejected(r executor.Reason) { o.rejected[r].Add(1) }
func (o *countingObserver) TaskStarted(time.Duration)      { o.started.Add(1) }
func (o *countingObserver) TaskCanceled()                  { o.canceled.Add(1) }
func (o *countingObserver) TaskFinished(_ time.Duration, out executor.Outcome) {
	o.finished.Add(1)
	switch out {
	case executor.Panicked:
		o.panicked.Add(1)
	case executor.Failed:
		o.failed.Add(1)
	}
}

// TestCountersWhenCallReturns: by the time a call (or Wait) returns, Stats
// and the observer already account for its task, whatever its fate.
func TestCountersWhenCallReturns(t *testing.T) {
	bg := context.Background()
	tests := []struct {
		name string
		// run makes one call on an otherwise idle executor (with "busy"
		// held by a blocker and capped at 2 pending) and returns its error.
		run  func(e *executor.Executor[string]) error
		want executor.Stats // the delta the call must leave
		err  error
	}{
		{"Do inline ok", func(e *executor.Executor[string]) error { return e.Do(bg, "k", nop) },
			executor.Stats{Submitted: 1, Completed: 1}, nil},
		{"Do inline error", func(e *executor.Executor[string]) error {
			return e.Do(bg, "k", func(context.Context) error { return errTask })
		}, executor.Stats{Submitted: 1, Completed: 1}, errTask},
		{"Do inline panic", func(e *executor.Executor[string]) error {
			return e.Do(bg, "k", func(context.Context) error { panic(errTask) })
		}, executor.Stats{Submitted: 1, Completed: 1, Panicked: 1}, errTask},
		{"Submit ok", func(e *executor.Executor[string]) error {
			task, err := e.Submit(bg, "k", nop)
			if err != nil {
				return err
			}
			return task.Wait(bg)
		}, executor.Stats{Submitted: 1, Completed: 1}, nil},
		{"Submit panic", func(e *executor.Executor[string]) error {
			task, err := e.Submit(bg, "k", func(context.Context) error { panic(errTask) })
			if err != nil {
				return err
			}
			<-task.Done() // Done, like Wait, comes after the accounting
			return task.Wait(bg)
		}, executor.Stats{Submitted: 1, Completed: 1, Panicked: 1}, errTask},
		{"DoShared ok", func(e *executor.Executor[string]) error { return e.DoShared(bg, "k", nop) },
			executor.Stats{Submitted: 1, Completed: 1}, nil},
		{"DoMany error", func(e *executor.Executor[string]) error {
			return e.DoMany(bg, []string{"k", "j"}, func(context.Context) error { return errTask })
		}, executor.Stats{Submitted: 1, Completed: 1}, errTask},
		{"queued Do canceled", func(e *executor.Executor[string]) error {
			ctx, cancel := context.WithCancel(bg)
			go func() {
				for e.Stats().Queued == 0 {
					runtime.Gosched()
				}
				cancel()
			}()
			return e.Do(ctx, "busy", nop)
		}, executor.Stats{Submitted: 1, Canceled: 1}, context.Canceled},
		{"queued DoMany canceled", func(e *executor.Executor[string]) error {
			ctx, cancel := context.WithCancel(bg)
			go func() {
				for e.Stats().Queued == 0 {
					runtime.Gosched()
				}
				cancel()
			}()
			return e.DoMany(ctx, []string{"k", "busy"}, nop)
		}, executor.Stats{Submitted: 1, Canceled: 1}, context.Canceled},
		{"queued Submit canceled", func(e *executor.Executor[string]) error {
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			task, err := e.Submit(ctx, "busy", nop)
			if err != nil {
				return err
			}
			cancel()
			return task.Wait(bg)
		}, executor.Stats{Submitted: 1, Canceled: 1}, context.Canceled},
		{"rejected", func(e *executor.Executor[string]) error {
			if _, err := e.Submit(bg, "busy", nop); err != nil { // fills the cap
				return err
			}
			return e.Do(bg, "busy", nop)
		}, executor.Stats{Submitted: 1, Queued: 1, Rejected: 1}, executor.ErrBusy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := new(countingObserver)
			e := newExec[string](t, executor.WithWorkers(4), executor.WithMaxQueuePerKey(2), executor.WithObserver(obs))
			g, _ := block(t, e, "busy")
			defer g.open()
			before := e.Stats()
			err := tt.run(e)
			after := e.Stats()
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Errorf("call: got %v; want %v", err, tt.err)
			}
			got := executor.Stats{
				Queued:    after.Queued - before.Queued,
				Running:   after.Running - before.Running,
				Submitted: after.Submitted - before.Submitted,
				Completed: after.Completed - before.Completed,
				Rejected:  after.Rejected - before.Rejected,
				Canceled:  after.Canceled - before.Canceled,
				Panicked:  after.Panicked - before.Panicked,
			}
			if got != tt.want {
				t.Errorf("Stats change when the call returned: got %+v; want %+v", got, tt.want)
			}
			if !balanced(after) {
				t.Errorf("Stats when the call returned: got %+v; want Submitted == Completed+Canceled+Queued+Running", after)
			}
			// The observer saw the same events (the blocker adds one
			// acceptance and one start).
			if a := obs.accepted.Load(); a != int64(after.Submitted) {
				t.Errorf("observer acceptances: got %d; want %d", a, after.Submitted)
			}
			if c := obs.canceled.Load(); c != int64(after.Canceled) {
				t.Errorf("observer cancellations: got %d; want %d", c, after.Canceled)
			}
			if f := obs.finished.Load(); f != int64(after.Completed) {
				t.Errorf("observer finishes: got %d; want %d", f, after.Completed)
			}
			if s := obs.started.Load(); s != int64(after.Completed)+int64(after.Running) {
				t.Errorf("observer starts: got %d; want %d", s, int64(after.Completed)+int64(after.Running))
			}
			if p := obs.panicked.Load(); p != int64(after.Panicked) {
				t.Errorf("observer panics: got %d; want %d", p, after.Panicked)
			}
			if r := obs.rejected[executor.ReasonKey].Load(); r != int64(after.Rejected) {
				t.Errorf("observer rejections (key): got %d; want %d", r, after.Rejected)
			}
			g.open()
			waitIdle(t, e)
		})
	}
}

// ---------------------------------------------------------------------------
// Stats, ActiveKeys, HotKeys, Call

func TestStatsActiveKeysHotKeys(t *testing.T) {
	e := newExec[string](t, executor.WithWorkers(4))
	if s := e.Stats(); s != (executor.Stats{}) {
		t.Errorf("Stats of a new executor: got %+v; want zero", s)
	}
	var gates []*gate
	var tasks []*executor.Task
	for i, k := range []string{"one", "two", "three"} {
		g, _ := block(t, e, k)
		gates = append(gates, g)
		for range i {
			task, err := e.Submit(context.Background(), k, nop)
			if err != nil {
				t.Fatal(err)
			}
			tasks = append(tasks, task)
		}
	}
	if got := e.ActiveKeys(); got != 3 {
		t.Errorf("ActiveKeys: got %d; want 3", got)
	}
	want := executor.Stats{ActiveKeys: 3, Queued: 3, Running: 3, Submitted: 6}
	if s := e.Stats(); s != want {
		t.Errorf("Stats: got %+v; want %+v", s, want)
	}
	tests := []struct {
		n    int
		want []executor.KeyLoad[string]
	}{
		{1, []executor.KeyLoad[string]{{Key: "three", Pending: 3}}},
		{2, []executor.KeyLoad[string]{{Key: "three", Pending: 3}, {Key: "two", Pending: 2}}},
		{3, []executor.KeyLoad[string]{{Key: "three", Pending: 3}, {Key: "two", Pending: 2}, {Key: "one", Pending: 1}}},
		{100, []executor.KeyLoad[string]{{Key: "three", Pending: 3}, {Key: "two", Pending: 2}, {Key: "one", Pending: 1}}},
	}
	for _, tt := range tests {
		if got := e.HotKeys(tt.n); fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("HotKeys(%d): got %v; want %v", tt.n, got, tt.want)
		}
	}
	for _, g := range gates {
		g.open()
	}
	for _, task := range tasks {
		_ = task.Wait(context.Background())
	}
	s := waitIdle(t, e)
	if want := (executor.Stats{Submitted: 6, Completed: 6}); s != want {
		t.Errorf("Stats when idle: got %+v; want %+v", s, want)
	}
	if got := e.HotKeys(3); len(got) != 0 {
		t.Errorf("HotKeys when idle: got %v; want none", got)
	}
}

func TestCall(t *testing.T) {
	e := newExec[int](t, executor.WithWorkers(2))
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		fn      func(context.Context) (string, error)
		want    string
		wantErr error
	}{
		{"value", context.Background(), func(context.Context) (string, error) { return "v", nil }, "v", nil},
		{"value and error", context.Background(), func(context.Context) (string, error) { return "partial", errTask }, "partial", errTask},
		{"panic", context.Background(), func(context.Context) (string, error) { panic(errTask) }, "", errTask},
		{"canceled", canceled, func(context.Context) (string, error) { return "v", nil }, "", context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := executor.Call(tt.ctx, e, 1, tt.fn)
			if got != tt.want || !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Errorf("Call: got %q, %v; want %q, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
	t.Run("ordered with Do", func(t *testing.T) {
		n := 0
		for i := range 50 {
			if i%2 == 0 {
				_ = e.Do(context.Background(), 2, func(context.Context) error { n++; return nil })
				continue
			}
			got, err := executor.Call(context.Background(), e, 2, func(context.Context) (int, error) { n++; return n, nil })
			if err != nil || got != i+1 {
				t.Fatalf("Call #%d: got %d, %v; want %d, nil", i, got, err, i+1)
			}
		}
	})
	waitIdle(t, e)
}

// ---------------------------------------------------------------------------
// 14. Stripes

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
		wg.Wait()
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
