package executor_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/perkey/perkey/executor"
)

// inBubble runs f in a synctest bubble with an executor created inside it,
// closing the executor before the bubble ends.
func inBubble(t *testing.T, f func(t *testing.T, e *executor.Executor[string]), opts ...executor.Option) {
	synctest.Test(t, func(t *testing.T) {
		e, err := executor.New[string](opts...)
		if err != nil {
			t.Fatal(err)
		}
		f(t, e)
		if err := e.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
}

// TestSharedReadersTogether: ten readers that each hold across a wait are
// all inside at once.
func TestSharedReadersTogether(t *testing.T) {
	e := newExec[string](t, executor.WithWorkers(16))
	var inside atomic.Int32
	all := make(chan struct{})
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			err := e.DoShared(context.Background(), "k", func(context.Context) error {
				if inside.Add(1) == 10 {
					close(all)
				}
				select {
				case <-all:
					return nil
				case <-time.After(5 * time.Second):
					return errors.New("readers were not all inside at once")
				}
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	waitAll(t, &wg)
	waitIdle(t, e)
}

// TestSharedWriterNotStarved: with ten overlapping 5 ms readers running
// continuously, a writer gets in within about one read's length (a
// reader-preference lock starves it for the whole 500 ms).
func TestSharedWriterNotStarved(t *testing.T) {
	inBubble(t, func(t *testing.T, e *executor.Executor[string]) {
		ctx, stop := context.WithCancel(context.Background())
		var readers sync.WaitGroup
		var inside, writers atomic.Int32
		for i := range 10 {
			readers.Go(func() {
				time.Sleep(time.Duration(i) * 500 * time.Microsecond)
				for ctx.Err() == nil {
					e.DoShared(ctx, "k", func(context.Context) error {
						inside.Add(1)
						defer inside.Add(-1)
						if writers.Load() != 0 {
							t.Error("reader ran alongside the writer")
						}
						time.Sleep(5 * time.Millisecond)
						return nil
					})
				}
			})
		}
		time.Sleep(20 * time.Millisecond)
		wctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		asked := time.Now()
		var waited time.Duration
		err := e.Do(wctx, "k", func(context.Context) error {
			waited = time.Since(asked)
			writers.Add(1)
			defer writers.Add(-1)
			if n := inside.Load(); n != 0 {
				t.Errorf("writer ran alongside %d readers", n)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("writer: %v; want it to get in", err)
		}
		if waited > 6*time.Millisecond {
			t.Errorf("writer waited %v; want at most one read (5ms)", waited)
		}
		stop()
		waitAll(t, &readers)
	}, executor.WithWorkers(16))
}

// TestSharedReaderNotStarved: a reader behind a stream of writers gets in
// after the writers queued ahead of it, not after the stream ends.
func TestSharedReaderNotStarved(t *testing.T) {
	inBubble(t, func(t *testing.T, e *executor.Executor[string]) {
		ctx, stop := context.WithCancel(context.Background())
		var writers sync.WaitGroup
		for range 3 {
			writers.Go(func() {
				for ctx.Err() == nil {
					e.Do(ctx, "k", func(context.Context) error { time.Sleep(5 * time.Millisecond); return nil })
				}
			})
		}
		time.Sleep(12 * time.Millisecond)
		asked := time.Now()
		var waited time.Duration
		if err := e.DoShared(context.Background(), "k", func(context.Context) error {
			waited = time.Since(asked)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if waited > 16*time.Millisecond {
			t.Errorf("reader waited %v; want at most the 3 writers queued ahead (15ms)", waited)
		}
		stop()
		waitAll(t, &writers)
	}, executor.WithWorkers(16))
}

// TestSharedCanceledWriterReleasesReaders: a writer canceled while waiting
// behind a reader lets the readers queued behind it join the running group
// at once.
func TestSharedCanceledWriterReleasesReaders(t *testing.T) {
	inBubble(t, func(t *testing.T, e *executor.Executor[string]) {
		bg := context.Background()
		release := make(chan struct{})
		go e.DoShared(bg, "k", func(context.Context) error { <-release; return nil })
		synctest.Wait()
		wctx, cancel := context.WithCancel(bg)
		werr := make(chan error, 1)
		go func() { werr <- e.Do(wctx, "k", func(context.Context) error { return nil }) }()
		synctest.Wait()
		var joined atomic.Int32
		for range 2 {
			go e.DoShared(bg, "k", func(context.Context) error { joined.Add(1); return nil })
		}
		synctest.Wait()
		if n := joined.Load(); n != 0 {
			t.Fatalf("%d readers passed a queued writer; want 0", n)
		}
		cancel()
		synctest.Wait()
		if n := joined.Load(); n != 2 {
			t.Errorf("after the writer's cancel, %d readers ran; want 2 at once", n)
		}
		if err := <-werr; !errors.Is(err, context.Canceled) {
			t.Errorf("writer = %v; want context.Canceled", err)
		}
		close(release)
		synctest.Wait()
	}, executor.WithWorkers(16))
}
