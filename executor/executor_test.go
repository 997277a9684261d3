package executor_test

import (
	"context"
	"errors"
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
