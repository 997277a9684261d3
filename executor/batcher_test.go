package executor_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"

	"github.com/perkey/perkey/executor"
)

// batchLog records the batches a Batcher's fn got, and checks that no two
// tasks of one key overlap.
type batchLog struct {
	mu      sync.Mutex
	batches map[string][][]int
	occ     occupancies[string]
}

func (l *batchLog) fn(ctx context.Context, key string, msgs []int) error {
	o := l.occ.of(key)
	o.enter(false)
	defer o.exit(false)
	l.mu.Lock()
	if l.batches == nil {
		l.batches = make(map[string][][]int)
	}
	l.batches[key] = append(l.batches[key], slices.Clone(msgs))
	l.mu.Unlock()
	return nil
}

func (l *batchLog) of(key string) [][]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.batches[key]
}

func newBatcher(t *testing.T, e *executor.Executor[string], fn executor.BatchFunc[string, int], opts ...executor.BatchOption) *executor.Batcher[string, int] {
	t.Helper()
	b, err := executor.NewBatcher(e, fn, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBatcherBatches: messages queued behind a busy key go to one call, in
// order, at most WithMaxBatch at a time, and each message counts as one
// task in Stats.
func TestBatcherBatches(t *testing.T) {
	e := newExec[string](t, executor.WithWorkers(2))
	var l batchLog
	b := newBatcher(t, e, l.fn, executor.WithMaxBatch(4))
	g, _ := block(t, e, "k")
	var tasks []*executor.Task
	for i := range 10 {
		task, err := b.Submit(context.Background(), "k", i)
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, task)
	}
	if s := e.Stats(); s.Queued != 10 {
		t.Errorf("Stats.Queued with 10 messages queued: got %d; want 10", s.Queued)
	}
	g.open()
	for i, task := range tasks {
		if _, err := attempt(t, "Wait", func() error { return task.Wait(context.Background()) }); err != nil {
			t.Errorf("message %d: got %v; want nil", i, err)
		}
	}
	if got, want := fmt.Sprint(l.of("k")), "[[0 1 2 3] [4 5 6 7] [8 9]]"; got != want {
		t.Errorf("batches: got %s; want %s", got, want)
	}
	if s := waitIdle(t, e); s.Completed != 11 || s.Submitted != 11 {
		t.Errorf("Stats: got %+v; want 11 submitted and completed (10 messages, 1 blocker)", s)
	}
}

// TestBatcherSplitAndOrder: another task of the key queued between two
// messages splits them, and runs between the two batches; a DoMany on the
// key waits its turn.
func TestBatcherSplitAndOrder(t *testing.T) {
	e := newExec[string](t, executor.WithWorkers(2))
	var mu sync.Mutex
	var order []string
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	b := newBatcher(t, e, func(ctx context.Context, key string, msgs []int) error {
		note(fmt.Sprint(msgs))
		return nil
	})
	g, _ := block(t, e, "k")
	bg := context.Background()
	var tasks []*executor.Task
	sub := func(i int) {
		task, err := b.Submit(bg, "k", i)
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, task)
	}
	sub(1)
	sub(2)
	do, _ := e.Submit(bg, "k", func(context.Context) error { note("submit"); return nil })
	sub(3)
	many := make(chan error, 1)
	go func() {
		many <- e.DoMany(bg, []string{"k", "other"}, func(context.Context) error { note("many"); return nil })
	}()
	eventually(t, "the DoMany to queue", func() bool { return e.Stats().Queued == 5 })
	sub(4)
	sub(5)
	g.open()
	for _, task := range append(tasks, do) {
		attempt(t, "Wait", func() error { return task.Wait(bg) })
	}
	recv(t, "DoMany", many)
	if got, want := fmt.Sprint(order), "[[1 2] submit [3] many [4 5]]"; got != want {
		t.Errorf("order: got %s; want %s", got, want)
	}
}

// TestBatcherOutcomes: fn fails single messages with BatchErrors or the
// whole batch with another error; a panic fails every message with the
// *PanicError; a message whose ctx ended while queued is left out.
func TestBatcherOutcomes(t *testing.T) {
	bg := context.Background()
	errOdd := errors.New("odd")
	errAll := errors.New("all")
	tests := []struct {
		name string
		fn   executor.BatchFunc[string, int]
		want func(msg int, err error) bool
	}{
		{"per message", func(_ context.Context, _ string, msgs []int) error {
			errs := make(executor.BatchErrors, len(msgs))
			for i, m := range msgs {
				if m%2 == 1 {
					errs[i] = errOdd
				}
			}
			return errs
		}, func(m int, err error) bool { return (m%2 == 1) == errors.Is(err, errOdd) && (m%2 == 1 || err == nil) }},
		{"whole batch", func(context.Context, string, []int) error { return errAll },
			func(_ int, err error) bool { return errors.Is(err, errAll) }},
		{"wrong length", func(context.Context, string, []int) error { return executor.BatchErrors{nil} },
			func(_ int, err error) bool { return err != nil }},
		{"panic", func(context.Context, string, []int) error { panic("boom") },
			func(_ int, err error) bool {
				var pe *executor.PanicError
				return errors.As(err, &pe) && pe.Value == "boom"
			}},
		{"Goexit", func(context.Context, string, []int) error { runtime.Goexit(); return nil },
			func(_ int, err error) bool { return errors.Is(err, executor.ErrGoexit) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newExec[string](t, executor.WithLogger(zap.NewNop()), executor.WithWorkers(1))
			b := newBatcher(t, e, tt.fn)
			g, _ := block(t, e, "k")
			ctx, cancel := context.WithCancel(bg)
			var tasks []*executor.Task
			for i := range 6 {
				c := bg
				if i == 2 {
					c = ctx
				}
				task, err := b.Submit(c, "k", i)
				if err != nil {
					t.Fatal(err)
				}
				tasks = append(tasks, task)
			}
			cancel()
			g.open()
			for i, task := range tasks {
				_, err := attempt(t, "Wait", func() error { return task.Wait(bg) })
				if i == 2 {
					if !errors.Is(err, context.Canceled) {
						t.Errorf("message 2, its ctx canceled while queued: got %v; want context.Canceled", err)
					}
					continue
				}
				if !tt.want(i, err) {
					t.Errorf("message %d: got %v", i, err)
				}
			}
			if err := e.Do(bg, "k", nop); err != nil {
				t.Errorf("the key after the batch: got %v; want nil", err)
			}
			waitIdle(t, e)
		})
	}
}

// TestBatcherCapsAndNesting: messages count against the per-key cap, Do
// waits for its message's outcome and runs alone on an idle key, and a
// Batcher.Do nested on a key its task holds is ErrReentrant.
func TestBatcherCapsAndNesting(t *testing.T) {
	bg := context.Background()
	e := newExec[string](t, executor.WithMaxQueuePerKey(3))
	var l batchLog
	b := newBatcher(t, e, l.fn)
	if err := b.Do(bg, "idle", 7); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(l.of("idle")); got != "[[7]]" {
		t.Errorf("Do on an idle key: batches %s; want [[7]]", got)
	}
	g, _ := block(t, e, "k")
	for i := range 2 {
		if _, err := b.Submit(bg, "k", i); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Submit(bg, "k", 9); !errors.Is(err, executor.ErrBusy) {
		t.Errorf("a message past the cap: got %v; want ErrBusy", err)
	}
	g.open()
	waitIdle(t, e)
	err := e.Do(bg, "outer", func(ctx context.Context) error { return b.Do(ctx, "outer", 1) })
	if !errors.Is(err, executor.ErrReentrant) {
		t.Errorf("Batcher.Do on a held key: got %v; want ErrReentrant", err)
	}
	if err := e.Do(bg, "outer", func(ctx context.Context) error { return b.Do(ctx, "k", 5) }); err != nil {
		t.Errorf("nested Batcher.Do on another key: got %v; want nil", err)
	}
	waitIdle(t, e)
}

// TestBatcherStress: many producers on few keys; every message is handled
// once, in per-producer order, no two tasks of a key overlap (messages and
// Dos mixed), and Stats add up.
func TestBatcherStress(t *testing.T) {
	e := newExec[string](t, executor.WithWorkers(4), executor.WithThroughput(3))
	var l batchLog
	b := newBatcher(t, e, l.fn, executor.WithMaxBatch(8))
	const producers, per, keys = 8, 300, 3
	var wg sync.WaitGroup
	var handledDo atomic.Int64
	for p := range producers {
		wg.Go(func() {
			for i := range per {
				key := fmt.Sprint("k", (p+i)%keys)
				msg := p*per + i
				switch i % 5 {
				case 0:
					b.Do(context.Background(), key, msg)
				case 1:
					e.Do(context.Background(), key, func(context.Context) error {
						o := l.occ.of(key)
						o.enter(false)
						handledDo.Add(1)
						o.exit(false)
						return nil
					})
				default:
					b.Submit(context.Background(), key, msg)
				}
			}
		})
	}
	waitAll(t, &wg)
	waitIdle(t, e)
	if n := l.occ.overlaps(); n != 0 {
		t.Errorf("overlaps: %d; want 0", n)
	}
	seen := make(map[int]int)
	last := make(map[[2]int]int) // (producer, key) -> last msg seen
	for k := range keys {
		for _, batch := range l.of(fmt.Sprint("k", k)) {
			if len(batch) > 8 {
				t.Errorf("a batch of %d; want at most 8", len(batch))
			}
			for _, m := range batch {
				seen[m]++
				p := m / per
				if prev, ok := last[[2]int{p, k}]; ok && prev >= m {
					t.Errorf("key k%d: message %d after %d from producer %d; want FIFO", k, m, prev, p)
				}
				last[[2]int{p, k}] = m
			}
		}
	}
	want := producers * per * 4 / 5
	if len(seen) != want {
		t.Errorf("messages handled: %d; want %d", len(seen), want)
	}
	for m, n := range seen {
		if n != 1 {
			t.Errorf("message %d handled %d times", m, n)
		}
	}
}

// TestNewBatcherErrors: bad arguments are errors, never panics.
func TestNewBatcherErrors(t *testing.T) {
	e := newExec[string](t)
	fn := func(context.Context, string, []int) error { return nil }
	if _, err := executor.NewBatcher[string, int](nil, fn); !errors.Is(err, executor.ErrNilExecutor) {
		t.Errorf("nil executor: got %v", err)
	}
	if _, err := executor.NewBatcher[string, int](e, nil); !errors.Is(err, executor.ErrNilFunc) {
		t.Errorf("nil fn: got %v", err)
	}
	for _, o := range []executor.BatchOption{executor.WithMaxBatch(0), executor.WithMaxBatch(-1), nil} {
		if _, err := executor.NewBatcher(e, fn, o); err == nil {
			t.Errorf("bad option: got nil error")
		}
	}
	var nb *executor.Batcher[string, int]
	if err := nb.Do(context.Background(), "k", 1); !errors.Is(err, executor.ErrNilBatcher) {
		t.Errorf("nil Batcher Do: got %v", err)
	}
}

// TestBatcherClose: Close drains queued messages through the BatchFunc; a
// Close that gives up ends the messages not started with ErrClosed.
func TestBatcherClose(t *testing.T) {
	bg := context.Background()
	for _, giveUp := range []bool{false, true} {
		e, err := executor.New[string](executor.WithWorkers(1))
		if err != nil {
			t.Fatal(err)
		}
		var l batchLog
		b := newBatcher(t, e, l.fn)
		g, _ := block(t, e, "k")
		var tasks []*executor.Task
		for i := range 5 {
			task, _ := b.Submit(bg, "k", i)
			tasks = append(tasks, task)
		}
		ctx, cancel := context.WithCancel(bg)
		if giveUp {
			cancel()
		}
		closed := make(chan error, 1)
		go func() { closed <- e.Close(ctx) }()
		if giveUp {
			if err := recv(t, "Close", closed); !errors.Is(err, context.Canceled) {
				t.Errorf("giving-up Close: got %v; want context.Canceled", err)
			}
		}
		g.open()
		for i, task := range tasks {
			_, err := attempt(t, "Wait", func() error { return task.Wait(bg) })
			if giveUp && !errors.Is(err, executor.ErrClosed) || !giveUp && err != nil {
				t.Errorf("giveUp %v, message %d: got %v", giveUp, i, err)
			}
		}
		if !giveUp {
			if err := recv(t, "Close", closed); err != nil {
				t.Errorf("draining Close: got %v; want nil", err)
			}
			if got := fmt.Sprint(l.of("k")); got != "[[0 1 2 3 4]]" {
				t.Errorf("drained batches: %s; want [[0 1 2 3 4]]", got)
			}
		} else if err := e.Close(bg); err != nil {
			t.Errorf("Close after giving up: got %v; want nil", err)
		}
		cancel()
		checkBalanced(t, e)
	}
}

// TestBatcherStripedKeys: in striped mode, messages of keys that share a
// stripe and are queued back to back go to one call per key, in order; a
// batch holds messages of Submit and Do alike; fn's ctx carries the values
// of the batch's first message's ctx, and a message whose ctx ended while
// queued is left out.
func TestBatcherStripedKeys(t *testing.T) {
	e := newExec[string](t, executor.WithWorkers(2), executor.WithStripes(1))
	type ctxKey struct{}
	var mu sync.Mutex
	var calls []string
	b := newBatcher(t, e, func(ctx context.Context, key string, msgs []int) error {
		mu.Lock()
		calls = append(calls, fmt.Sprintf("%s%v:%v", key, msgs, ctx.Value(ctxKey{})))
		mu.Unlock()
		return nil
	})
	g, _ := block(t, e, "any") // one stripe: every key waits behind it
	bg := context.Background()
	tagged := context.WithValue(bg, ctxKey{}, "tag")
	gone, cancel := context.WithCancel(bg)
	var tasks []*executor.Task
	sub := func(ctx context.Context, key string, msg int) *executor.Task {
		task, err := b.Submit(ctx, key, msg)
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, task)
		return task
	}
	sub(bg, "a", 1)
	sub(bg, "a", 2)
	sub(tagged, "b", 3)
	left := sub(gone, "b", 4)
	sub(bg, "b", 5)
	dos := make(chan error, 1)
	go func() { dos <- b.Do(bg, "b", 6) }()
	eventually(t, "the Do to queue", func() bool { return e.Stats().Queued == 6 })
	sub(bg, "a", 7)
	cancel()
	g.open()
	for _, task := range tasks {
		err := task.Wait(bg)
		if task == left {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("message with an ended ctx: got %v; want context.Canceled", err)
			}
		} else if err != nil {
			t.Errorf("message: got %v; want nil", err)
		}
	}
	if err := recv(t, "Do", dos); err != nil {
		t.Errorf("Do: got %v; want nil", err)
	}
	mu.Lock()
	got := fmt.Sprint(calls)
	mu.Unlock()
	if want := "[a[1 2]:<nil> b[3 5 6]:tag a[7]:<nil>]"; got != want {
		t.Errorf("calls: got %s; want %s", got, want)
	}
	waitIdle(t, e)
}
