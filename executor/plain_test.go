package executor_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

// A Go whose ctx never ends is queued as a plain task (no job of its own)
// on an executor without ages or stripes. These tests pin what that lane
// must keep of Go's contract; the fuzzer and the soak mix it with the rest.

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

// TestPlainGoOrder: plain Go tasks interleaved with Submit and Do on one
// key run in the order they were accepted, one at a time.
func TestPlainGoOrder(t *testing.T) {
	e := newExec[string](t, executor.WithWorkers(2))
	bg := context.Background()
	var mu sync.Mutex
	var got []int
	var occ occupancy
	note := func(i int) func(context.Context) error {
		return func(context.Context) error {
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
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// TestPlainGoGiveUp: a Close that gives up ends the plain tasks queued
// behind a task that ignores its ctx before it returns: each reaches the
// error handler with ErrClosed and counts as canceled; the stuck task
// keeps its key until it returns, and then a second Close returns nil.
func TestPlainGoGiveUp(t *testing.T) {
	var h handled
	e, err := executor.New[string](executor.WithWorkers(2), executor.WithErrorHandler(h.handle))
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
	for i := range 5 {
		if err := e.Go(bg, "k", func(context.Context) error { ran <- i; return nil }); err != nil {
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
	if s := e.Stats(); s.Canceled != 5 || s.Running != 1 || s.Queued != 0 || !balanced(s) {
		t.Errorf("Stats after giving up: %+v; want 5 canceled, 1 running, 0 queued, adding up", s)
	}
	release <- struct{}{}
	ctx2, cancel2 := context.WithTimeout(bg, patience)
	defer cancel2()
	if err := e.Close(ctx2); err != nil {
		t.Fatalf("second Close: got %v; want nil", err)
	}
	select {
	case i := <-ran:
		t.Errorf("task %d, queued when Close gave up, ran", i)
	default:
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
