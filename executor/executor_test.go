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
	"testing/synctest"
	"time"

	"github.com/alitto/pond/v2"
	"go.uber.org/zap"

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
