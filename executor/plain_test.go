package executor_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

// A Go or a Submit whose ctx never ends is queued as a plain task (no job
// of its own) on an executor without stripes. These tests pin what that
// lane must keep of Go's and Submit's contract; the fuzzer and the soak mix
// it with the rest.

// submitLanes names the two lanes a Submit can take, and submitCtx makes
// the ctx that takes one (make it where it is used: inside a synctest
// bubble, if the test has one): a ctx that never ends queues a plain task,
// one that can end (though it never does here) a job.
var submitLanes = []string{"plain", "job"}

func submitCtx(t *testing.T, lane string) context.Context {
	if lane == "plain" {
		return context.Background()
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

// handled records what the error handler was given.
type handled struct {
	mu   sync.Mutex
	errs []error
	keys []any
}

func (h *handled) handle(key any, err error) {
	h.mu.Lock()
	h.keys, h.errs = append(h.keys, key), append(h.errs, err)
	h.mu.Unlock()
}

func (h *handled) count(target error) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, err := range h.errs {
		if errors.Is(err, target) {
			n++
		}
	}
	return n
}

// TestPlainGoOrder: plain Go tasks, with context.Background() (whose
// contexts are made as they run) and with a ctx of values (whose contexts
// are made as they are queued), interleaved with Submit and Do on one key
// run in the order they were accepted, one at a time, each with its
// caller's values.
func TestPlainGoOrder(t *testing.T) {
	e := newExec[string](t, executor.WithWorkers(2))
	bg := context.Background()
	var mu sync.Mutex
	var got []int
	var occ occupancy
	var lost atomic.Int32
	note := func(i int) func(context.Context) error {
		return func(ctx context.Context) error {
			if v, ok := ctx.Value(ctxKey{}).(int); (i%7 == 5) != (ok && v == i) {
				lost.Add(1)
			}
			occ.enter(false)
			defer occ.exit(false)
			mu.Lock()
			got = append(got, i)
			mu.Unlock()
			return nil
		}
	}
	g, _ := block(t, e, "k")
	const n = 400
	for i := range n {
		var err error
		switch i % 7 {
		case 3:
			_, err = e.Submit(bg, "k", note(i))
		case 5:
			err = e.Go(context.WithValue(bg, ctxKey{}, i), "k", note(i))
		default:
			err = e.Go(bg, "k", note(i))
		}
		if err != nil {
			t.Fatalf("task %d: %v", i, err)
		}
	}
	g.open()
	if err := e.Do(bg, "k", note(n)); err != nil {
		t.Fatalf("Do behind them: %v", err)
	}
	waitIdle(t, e)
	if want := seq(n + 1); !slices.Equal(got, want) {
		t.Fatalf("run order %v; want 0..%d in order", got, n)
	}
	if o := occ.overlaps(); o != 0 {
		t.Errorf("%d overlapping runs on one key", o)
	}
	if n := lost.Load(); n != 0 {
		t.Errorf("%d tasks saw another's ctx values, or none of their own", n)
	}
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// TestPlainGoGiveUp: a Close that gives up ends the plain tasks that have
// not started, both those queued behind a task that ignores its ctx on its
// key and those waiting on keys of their own for the only worker, which
// that task holds: each reaches the error handler with ErrClosed and its own
// key (its ctx is made only as it ends: see goCtx) and counts as canceled;
// the stuck task keeps its key until it returns, and then a second Close
// returns nil.
func TestPlainGoGiveUp(t *testing.T) {
	for _, tc := range []struct {
		name    string
		workers int
		key     func(i int) string
	}{
		{"behind it", 2, func(int) string { return "k" }},
		{"waiting for a worker", 1, func(i int) string { return fmt.Sprintf("w%d", i) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h handled
			e, err := executor.New[string](executor.WithWorkers(tc.workers), executor.WithErrorHandler(h.handle))
			if err != nil {
				t.Fatal(err)
			}
			bg := context.Background()
			stuck, release := make(chan struct{}), make(chan struct{})
			defer close(release)
			if err := e.Go(bg, "k", func(context.Context) error { close(stuck); <-release; return nil }); err != nil {
				t.Fatal(err)
			}
			recv(t, "the stuck task to start", stuck)
			ran := make(chan int, 8)
			var want []any
			for i := range 5 {
				want = append(want, tc.key(i))
				ctx := bg // made as it ends
				if i%2 == 1 {
					ctx = context.WithValue(bg, ctxKey{}, i) // made as it is queued
				}
				if err := e.Go(ctx, tc.key(i), func(context.Context) error { ran <- i; return nil }); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(bg, time.Millisecond)
			defer cancel()
			if err := e.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Close with a stuck task: got %v; want DeadlineExceeded", err)
			}
			if n := h.count(executor.ErrClosed); n != 5 {
				t.Errorf("when Close returned, %d tasks were reported ErrClosed; want 5", n)
			}
			h.mu.Lock()
			got := slices.Clone(h.keys)
			h.mu.Unlock()
			slices.SortFunc(got, func(a, b any) int { return strings.Compare(a.(string), b.(string)) })
			if !slices.Equal(got, want) {
				t.Errorf("error handler heard of keys %v; want %v", got, want)
			}
			afterGiveUp(t, e, release)
			select {
			case i := <-ran:
				t.Errorf("task %d, queued when Close gave up, ran", i)
			default:
			}
		})
	}
}

// TestPlainGoKeys: a plain Go's ctx, made only as the task runs, is its own
// key's, though mailboxes are reused from key to key: fn's error reaches
// the error handler with its key, and a nested Do is ErrReentrant on that
// key and on no other. (TestPlainGoGiveUp checks the keys of tasks a
// giving-up Close ends.)
func TestPlainGoKeys(t *testing.T) {
	bg := context.Background()
	nop := func(context.Context) error { return nil }
	var h handled
	e := newExec[string](t, executor.WithWorkers(2), executor.WithErrorHandler(h.handle))
	const n = 3000
	var wrong atomic.Int32
	for i := range n {
		key := fmt.Sprintf("k%d", i%257)
		ctx := bg // the task's ctx is made as it runs
		if i%3 == 0 {
			ctx = context.WithValue(bg, ctxKey{}, i) // as it is queued
		}
		if err := e.Go(ctx, key, func(ctx context.Context) error {
			if err := e.Do(ctx, key, nop); !errors.Is(err, executor.ErrReentrant) {
				wrong.Add(1)
			}
			if err := e.Do(ctx, "other-"+key, nop); err != nil {
				wrong.Add(1)
			}
			return errors.New(key)
		}); err != nil {
			t.Fatal(err)
		}
		if i%100 == 0 {
			waitIdle(t, e) // let mailboxes retire, to be reused for other keys
		}
	}
	waitIdle(t, e)
	if w := wrong.Load(); w != 0 {
		t.Errorf("%d nested Dos saw another key as their task's", w)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.errs) != n {
		t.Fatalf("error handler heard of %d tasks; want %d", len(h.errs), n)
	}
	for i, err := range h.errs {
		if h.keys[i] != err.Error() {
			t.Fatalf("error handler: key %v for the task of key %v", h.keys[i], err)
		}
	}
}

// TestPlainGoNested: a plain task's ctx marks its key while fn runs (a
// nested Do on it is ErrReentrant; on another key it runs, lending the
// slot), and no longer once fn has returned.
func TestPlainGoNested(t *testing.T) {
	e := newExec[string](t, executor.WithWorkers(1))
	bg := context.Background()
	type result struct{ same, other error }
	res := make(chan result, 1)
	kept := make(chan context.Context, 1)
	err := e.Go(bg, "a", func(ctx context.Context) error {
		var r result
		r.same = e.Do(ctx, "a", func(context.Context) error { return nil })
		r.other = e.Do(ctx, "b", func(context.Context) error { return nil })
		res <- r
		kept <- ctx
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r := recv(t, "the nested calls", res)
	if !errors.Is(r.same, executor.ErrReentrant) || r.other != nil {
		t.Errorf("nested Do: same key %v, other key %v; want ErrReentrant, nil", r.same, r.other)
	}
	ctx := recv(t, "the task's ctx", kept)
	waitIdle(t, e)
	if ctx.Err() == nil {
		t.Errorf("a plain task's ctx after fn returned: Err() = nil; want canceled")
	}
	if err := e.Do(context.WithoutCancel(ctx), "a", func(context.Context) error { return nil }); err != nil {
		t.Errorf("Do on the key with (an uncanceled child of) the ended task's ctx: %v; want it to run, the ctx holds nothing now", err)
	}
}

// TestPlainGoCallerCtx: a Go queued with its caller's ctx alone gets, as
// it runs, a ctx of its own that carries the caller's values and ends with
// it; a Go made with a running task's own ctx (a nested Go) is that
// task's child, and is withdrawn, unrun, when the task's fn returns first.
func TestPlainGoCallerCtx(t *testing.T) {
	type ctxKey struct{}
	handled := make(chan error, 1)
	e := newExec[string](t, executor.WithWorkers(2),
		executor.WithErrorHandler(func(_ any, err error) { handled <- err }))
	bg := context.Background()

	caller, cancel := context.WithCancel(context.WithValue(bg, ctxKey{}, "v"))
	g, _ := block(t, e, "k") // the Go waits in the queue, as a slot
	seen := make(chan string, 1)
	ended := make(chan struct{})
	err := e.Go(caller, "k", func(ctx context.Context) error {
		v, _ := ctx.Value(ctxKey{}).(string)
		seen <- v
		cancel() // the caller's ctx ends while fn runs
		<-ctx.Done()
		close(ended)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	g.open()
	if v := recv(t, "the Go to run", seen); v != "v" {
		t.Errorf("fn's ctx carries %q; want the caller's value", v)
	}
	recv(t, "fn's ctx to end with the caller's", ended)

	hold, _ := block(t, e, "b") // the nested Go waits behind it
	ran := make(chan struct{}, 1)
	outer := make(chan error, 1)
	err = e.Go(bg, "a", func(ctx context.Context) error {
		outer <- e.Go(ctx, "b", func(context.Context) error { ran <- struct{}{}; return nil })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := recv(t, "the nested Go", outer); err != nil {
		t.Fatalf("nested Go: %v", err)
	}
	eventually(t, "the outer task to end", func() bool { return e.Stats().Running == 1 }) // the blocker only
	hold.open()
	if err := recv(t, "the withdrawn Go's error", handled); !errors.Is(err, context.Canceled) {
		t.Errorf("the nested Go's error: %v; want context.Canceled, its task's ctx ended", err)
	}
	waitIdle(t, e)
	select {
	case <-ran:
		t.Error("the nested Go ran after its task's fn returned; want it withdrawn")
	default:
	}
}

// TestPlainGoBlocksAtCap: at a key's cap under Block, a Go with a ctx that
// never ends waits for room, like any Go, and runs in its turn.
func TestPlainGoBlocksAtCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newExec[string](t, executor.WithWorkers(1), executor.WithMaxQueuePerKey(1),
			executor.WithPolicy(backpressure.Block()))
		bg := context.Background()
		g, _ := block(t, e, "k")
		returned := make(chan error, 1)
		ran := make(chan struct{})
		go func() { returned <- e.Go(bg, "k", func(context.Context) error { close(ran); return nil }) }()
		synctest.Wait() // the Go is durably blocked, or it returned
		select {
		case err := <-returned:
			t.Fatalf("Go at the key's cap returned %v before room came; want it to wait", err)
		default:
		}
		g.open()
		if err := recv(t, "Go to be admitted", returned); err != nil {
			t.Fatalf("Go admitted after waiting: %v", err)
		}
		recv(t, "the task to run", ran)
		waitIdle(t, e)
	})
}

// TestPlainSubmitOutcomes: a plain Submit's Task reports fn's error, its
// panic as a *PanicError and runtime.Goexit as ErrGoexit, in the order the
// tasks were queued, and Stats add up once every Task has ended.
func TestPlainSubmitOutcomes(t *testing.T) {
	e := newExec[string](t, executor.WithWorkers(2))
	bg := context.Background()
	g, _ := block(t, e, "k") // queue them all behind it, as plain slots
	boom := errors.New("boom")
	fns := []func(context.Context) error{
		func(context.Context) error { return nil },
		func(context.Context) error { return boom },
		func(context.Context) error { panic("bang") },
		func(context.Context) error { runtime.Goexit(); return nil },
		func(context.Context) error { return nil },
	}
	tasks := make([]*executor.Task, len(fns))
	for i, fn := range fns {
		var err error
		if tasks[i], err = e.Submit(bg, "k", fn); err != nil {
			t.Fatal(err)
		}
	}
	g.open()
	var pe *executor.PanicError
	for i, check := range []func(error) bool{
		func(err error) bool { return err == nil },
		func(err error) bool { return errors.Is(err, boom) },
		func(err error) bool { return errors.As(err, &pe) && pe.Value == "bang" },
		func(err error) bool { return errors.Is(err, executor.ErrGoexit) },
		func(err error) bool { return err == nil },
	} {
		_, err := attempt(t, fmt.Sprint("Wait ", i), func() error { return tasks[i].Wait(bg) })
		if !check(err) {
			t.Errorf("task %d: got %v", i, err)
		}
	}
	if s := waitIdle(t, e); s.Completed != 6 || s.Panicked != 1 || !balanced(s) {
		t.Errorf("Stats = %+v; want 6 completed, 1 panicked, adding up", s)
	}
}

// TestPlainSubmitGiveUp: a Close that gives up ends the plain Submits
// queued behind a task that ignores its ctx before it returns: each Task
// has ended with ErrClosed, and none runs.
func TestPlainSubmitGiveUp(t *testing.T) {
	e, err := executor.New[string](executor.WithWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	stuck, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	if _, err := e.Submit(bg, "k", func(context.Context) error { close(stuck); <-release; return nil }); err != nil {
		t.Fatal(err)
	}
	recv(t, "the stuck task to start", stuck)
	var ran atomic.Int32
	tasks := make([]*executor.Task, 5)
	for i := range tasks {
		if tasks[i], err = e.Submit(bg, "k", func(context.Context) error { ran.Add(1); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(bg, time.Millisecond)
	defer cancel()
	if err := e.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with a stuck task: got %v; want DeadlineExceeded", err)
	}
	for i, task := range tasks {
		select {
		case <-task.Done():
			if err := task.Wait(bg); !errors.Is(err, executor.ErrClosed) {
				t.Errorf("task %d: got %v; want ErrClosed", i, err)
			}
		default:
			t.Errorf("task %d had not ended when Close gave up", i)
		}
	}
	afterGiveUp(t, e, release)
	if n := ran.Load(); n != 0 {
		t.Errorf("%d tasks queued when Close gave up ran", n)
	}
}

// TestPlainSubmitDeadlock: a wait on a plain Submit takes part in the
// cycle check whether the task still waits in its queue or was taken into
// a running batch: task A on x waits for P, a plain Submit on b behind
// task B, which holds b and then calls Do on x. Whichever of the two waits
// is checked second closes the cycle: exactly one is refused with
// ErrDeadlock, and everything ends. Rounds vary which one it is.
func TestPlainSubmitDeadlock(t *testing.T) {
	for _, batched := range []bool{false, true} {
		t.Run(fmt.Sprint("batched=", batched), func(t *testing.T) {
			for round := range 20 {
				plainDeadlockRound(t, round, batched)
			}
		})
	}
}

func plainDeadlockRound(t *testing.T, round int, batched bool) {
	e := newExec[string](t, executor.WithWorkers(4))
	bg := context.Background()
	var g *gate
	if batched {
		// B and P queue behind a blocker, so that one batch takes both.
		g, _ = block(t, e, "b")
	}
	gate, bStarted, aStarted := make(chan struct{}), make(chan struct{}), make(chan struct{})
	aErr, bErr := make(chan error, 1), make(chan error, 1)
	bTask, err := e.Submit(bg, "b", func(ctx context.Context) error {
		close(bStarted)
		<-gate
		bErr <- e.Do(ctx, "x", nop)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !batched {
		recv(t, "B to start", bStarted) // P queues behind B's batch
	}
	p, err := e.Submit(bg, "b", nop)
	if err != nil {
		t.Fatal(err)
	}
	if batched {
		g.open()
		recv(t, "B to start", bStarted)
	}
	aTask, err := e.Submit(bg, "x", func(ctx context.Context) error {
		close(aStarted)
		if round%2 == 0 {
			<-gate // B's call and A's wait race
		}
		aErr <- p.Wait(ctx)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	recv(t, "A to start", aStarted)
	close(gate)
	errA, errB := recv(t, "A's wait", aErr), recv(t, "B's call", bErr)
	if errors.Is(errA, executor.ErrDeadlock) == errors.Is(errB, executor.ErrDeadlock) ||
		(errA != nil && !errors.Is(errA, executor.ErrDeadlock)) || (errB != nil && !errors.Is(errB, executor.ErrDeadlock)) {
		t.Errorf("round %d: A's wait: %v, B's call: %v; want ErrDeadlock for exactly one, nil for the other", round, errA, errB)
	}
	for _, task := range []*executor.Task{aTask, bTask, p} {
		if _, err := attempt(t, "a task of the cycle", func() error { return task.Wait(bg) }); err != nil {
			t.Errorf("round %d: task: %v; want nil", round, err)
		}
	}
	waitIdle(t, e)
}

// afterGiveUp checks an executor whose Close gave up on one stuck task and
// ended the 5 queued behind it, then lets the stuck task return (release)
// and checks that a second Close returns nil.
func afterGiveUp(t *testing.T, e *executor.Executor[string], release chan<- struct{}) {
	t.Helper()
	if s := e.Stats(); s.Canceled != 5 || s.Running != 1 || s.Queued != 0 || !balanced(s) {
		t.Errorf("Stats after giving up: %+v; want 5 canceled, 1 running, 0 queued, adding up", s)
	}
	release <- struct{}{}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := e.Close(ctx); err != nil {
		t.Fatalf("second Close: got %v; want nil", err)
	}
}

// TestPlainSubmitResult: a plain Submit's Task keeps fn's error whenever
// its waiters are made: by Done before the task runs, by Done or Wait
// racing with its end, or not until after it ended (a failing task makes
// them itself). Tasks alternate between success and distinct errors, so a
// result read from the wrong place, or lost, shows.
func TestPlainSubmitResult(t *testing.T) {
	const keys, per = 4, 64
	e := newExec[int](t, executor.WithWorkers(keys)) // a blocker on every key runs at once
	bg := context.Background()
	for round := range 20 {
		var gates []*gate
		for k := range keys {
			g, _ := block(t, e, k)
			gates = append(gates, g)
		}
		type sub struct {
			task *executor.Task
			want error
		}
		subs := make([]sub, 0, keys*per)
		for i := range keys * per {
			var want error
			if i%2 == 1 {
				want = fmt.Errorf("round %d task %d", round, i)
			}
			task, err := e.Submit(bg, i%keys, func(context.Context) error { return want })
			if err != nil {
				t.Fatal(err)
			}
			subs = append(subs, sub{task, want})
		}
		// A third ask Done while queued; a third are waited for while
		// they run; the rest only once all have ended.
		for i := 0; i < len(subs); i += 3 {
			_ = subs[i].task.Done()
		}
		var wg sync.WaitGroup
		results := make([]error, len(subs))
		for i := 1; i < len(subs); i += 3 {
			wg.Go(func() { results[i] = subs[i].task.Wait(bg) })
		}
		for _, g := range gates {
			g.open()
		}
		waitAll(t, &wg)
		waitIdle(t, e)
		for i, s := range subs {
			if i%3 != 1 {
				_, results[i] = attempt(t, fmt.Sprint("Wait ", i), func() error { return s.task.Wait(bg) })
			}
			if results[i] != s.want {
				t.Fatalf("round %d, task %d: Wait = %v; want %v", round, i, results[i], s.want)
			}
			select {
			case <-s.task.Done():
			default:
				t.Fatalf("round %d, task %d: Done not closed after Wait returned", round, i)
			}
		}
	}
}

// TestWaitEndedTaskEndedCtx: Wait on a task that has ended returns the
// task's result even if its ctx has ended too, every time, on both lanes,
// for a task that failed, one that panicked, and one that succeeded after
// its Done was asked for while it ran (the three whose Task keeps waiters
// with a closed channel, where a select between it and ctx's would pick
// either at random).
func TestWaitEndedTaskEndedCtx(t *testing.T) {
	boom := errors.New("boom")
	for _, lane := range submitLanes {
		for _, tc := range []struct {
			name string
			fn   func(context.Context) error
			want error
		}{
			{"failed", func(context.Context) error { return boom }, boom},
			{"panicked", func(context.Context) error { panic("boom") }, new(executor.PanicError)},
			{"succeeded", func(context.Context) error { return nil }, nil},
		} {
			t.Run(lane+"/"+tc.name, func(t *testing.T) {
				e := newExec[string](t, executor.WithLogger(zap.NewNop()))
				canceled, cancel := context.WithCancel(context.Background())
				cancel()
				for i := range 50 {
					task, err := e.Submit(submitCtx(t, lane), fmt.Sprint("k", i), tc.fn)
					if err != nil {
						t.Fatalf("Submit: %v", err)
					}
					task.Done() // its waiters are made, whatever the outcome
					recv(t, "the task to end", task.Done())
					err = task.Wait(canceled)
					var pe *executor.PanicError
					switch {
					case tc.want == nil && err != nil,
						tc.want == boom && !errors.Is(err, boom),
						tc.want != nil && tc.want != boom && !errors.As(err, &pe):
						t.Fatalf("round %d: Wait with an ended ctx on an ended task: got %v; want the task's result (%s)", i, err, tc.name)
					}
				}
			})
		}
	}
}

// TestGoReportsItsOwnKey: a Go's failure is reported with the key it was
// called with, not the equal key that made its key's mailbox: +0.0 and
// -0.0 are one key for ordering, and still two keys to the caller.
func TestGoReportsItsOwnKey(t *testing.T) {
	negZero := math.Copysign(0, -1)
	for _, tc := range []struct {
		name string
		ctx  context.Context
	}{
		{"background", context.Background()},
		{"never ends", context.WithValue(context.Background(), ctxKey{}, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys := make(chan any, 1)
			e, err := executor.New[float64](executor.WithWorkers(1),
				executor.WithErrorHandler(func(k any, _ error) { keys <- k }))
			if err != nil {
				t.Fatal(err)
			}
			g, _ := block(t, e, 0.0) // the mailbox is made by +0.0
			if err := e.Go(tc.ctx, negZero, func(context.Context) error { return errors.New("fails") }); err != nil {
				t.Fatal(err)
			}
			g.open()
			if k, ok := recv(t, "the error handler", keys).(float64); !ok || !math.Signbit(k) {
				t.Errorf("the error handler got key %#v; want -0.0, the key Go was called with", k)
			}
			closeWithin(t, e)
		})
	}
}

// TestParkedEntersAsPlainSlot: a Go or Submit that waited in its key's
// waiting room enters the queue as a plain slot, as one that never waited
// does: its turn serves only while it waits.
func TestParkedEntersAsPlainSlot(t *testing.T) {
	for _, api := range []string{"Go", "Submit"} {
		t.Run(api, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, err := executor.New[string](executor.WithWorkers(2), executor.WithMaxQueuePerKey(3),
					executor.WithPolicy(backpressure.Block()))
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close(context.Background())
				bg := context.Background()
				gate := make(chan struct{})
				if err := e.Go(bg, "k", func(context.Context) error { <-gate; return nil }); err != nil {
					t.Fatal(err)
				}
				synctest.Wait() // it runs, and holds one of k's three places
				doomed, cancel := context.WithCancel(bg)
				defer cancel()
				if err := e.Go(bg, "k", nop); err != nil {
					t.Fatal(err)
				}
				if err := e.Go(doomed, "k", nop); err != nil {
					t.Fatal(err)
				}
				parked := make(chan error, 1)
				go func() {
					if api == "Go" {
						parked <- e.Go(bg, "k", nop)
						return
					}
					_, err := e.Submit(bg, "k", nop)
					parked <- err
				}()
				synctest.Wait()
				select {
				case err := <-parked:
					t.Fatalf("the %s did not wait for room: %v", api, err)
				default:
				}
				cancel() // the doomed Go's place goes to the parked call, while k's first task runs
				synctest.Wait()
				if err := <-parked; err != nil {
					t.Fatalf("the parked %s: %v", api, err)
				}
				if plain, turns := executor.Waiting(e, "k"); plain != 2 || turns != 0 {
					t.Errorf("%d plain slots and %d turns wait; want 2 and 0: the %s let in is a plain slot", plain, turns, api)
				}
				close(gate)
				synctest.Wait()
				if s := e.Stats(); s.Submitted != 4 || s.Completed != 3 || s.Canceled != 1 {
					t.Errorf("Stats %+v; want 4 submitted, 3 completed, 1 canceled", s)
				}
			})
		})
	}
}
