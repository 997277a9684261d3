package executor_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perkey/perkey/executor"
)

// patience bounds every wait in the tests. It is not a timing assertion:
// it only turns a deadlock into a failure instead of a hung test binary.
const patience = 20 * time.Second

// newExec builds an executor and closes it when the test ends.
func newExec[K comparable](t testing.TB, opts ...executor.Option) *executor.Executor[K] {
	t.Helper()
	e, err := executor.New[K](opts...)
	if err != nil {
		t.Fatalf("New: got error %v; want nil", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			t.Errorf("Close at cleanup: got %v; want nil", err)
		}
	})
	return e
}

// eventually polls cond until it holds, failing the test after patience.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for d := 10 * time.Microsecond; !cond(); d = min(2*d, 5*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(d)
	}
}

// recv waits for ch, failing the test after patience.
func recv[T any](t testing.TB, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(patience):
		t.Fatalf("gave up waiting for %s", what)
		var zero T
		return zero
	}
}

// waitAll waits for wg, failing the test if that takes longer than a
// generous multiple of patience: goroutines stuck in a wedged executor must
// fail the test, not hang the suite.
func waitAll(t testing.TB, wg *sync.WaitGroup) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * patience):
		buf := make([]byte, 8<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("gave up after %v waiting for the test's goroutines: the executor is wedged; every goroutine:\n%s", 3*patience, buf)
	}
}

// balanced reports whether Submitted == Completed + Canceled + Queued + Running.
func balanced(s executor.Stats) bool {
	return s.Submitted == s.Completed+s.Canceled+uint64(s.Queued)+uint64(s.Running)
}

func checkBalanced(t testing.TB, e interface{ Stats() executor.Stats }) {
	t.Helper()
	if s := e.Stats(); !balanced(s) {
		t.Errorf("Stats do not add up: got %+v; want Submitted == Completed+Canceled+Queued+Running", s)
	}
}

// waitIdle waits until nothing is queued or running and every mailbox has
// retired, then checks that the counters add up.
func waitIdle[K comparable](t testing.TB, e *executor.Executor[K]) executor.Stats {
	t.Helper()
	eventually(t, "the executor to go idle", func() bool {
		s := e.Stats()
		return s.ActiveKeys == 0 && s.Queued == 0 && s.Running == 0 && e.ActiveKeys() == 0
	})
	s := e.Stats()
	if !balanced(s) {
		t.Errorf("idle Stats do not add up: got %+v; want Submitted == Completed+Canceled", s)
	}
	return s
}

// gate is a task body that reports that it started and then waits to be
// released (or for its ctx to end).
type gate struct {
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func newGate() *gate {
	return &gate{started: make(chan struct{}), release: make(chan struct{})}
}

func (g *gate) fn(ctx context.Context) error {
	close(g.started)
	<-g.release
	return nil
}

func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

// block submits a gate on key, waits until it runs and returns it; the gate
// is opened when the test ends at the latest.
func block[K comparable](t testing.TB, e *executor.Executor[K], key K) (*gate, *executor.Task) {
	t.Helper()
	g := newGate()
	task, err := e.Submit(context.Background(), key, g.fn)
	if err != nil {
		t.Fatalf("Submit blocker on %v: got %v; want nil", key, err)
	}
	t.Cleanup(g.open)
	recv(t, fmt.Sprintf("the blocker on %v to start", key), g.started)
	return g, task
}

// occupancy checks mutual exclusion on one key: exclusive holders exclude
// everyone, shared holders exclude exclusive ones.
type occupancy struct {
	mu         sync.Mutex
	readers    int
	writers    int
	violations int
}

func (o *occupancy) enter(shared bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.writers > 0 || (!shared && o.readers > 0) {
		o.violations++
	}
	if shared {
		o.readers++
	} else {
		o.writers++
	}
}

func (o *occupancy) exit(shared bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if shared {
		o.readers--
	} else {
		o.writers--
	}
}

func (o *occupancy) overlaps() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.violations
}

// occupancies is an occupancy per key.
type occupancies[K comparable] struct {
	mu sync.Mutex
	m  map[K]*occupancy
}

func (os *occupancies[K]) of(k K) *occupancy {
	os.mu.Lock()
	defer os.mu.Unlock()
	if os.m == nil {
		os.m = make(map[K]*occupancy)
	}
	o := os.m[k]
	if o == nil {
		o = new(occupancy)
		os.m[k] = o
	}
	return o
}

func (os *occupancies[K]) overlaps() int {
	os.mu.Lock()
	defer os.mu.Unlock()
	n := 0
	for _, o := range os.m {
		n += o.overlaps()
	}
	return n
}

// concurrency tracks how many task bodies execute at once.
type concurrency struct {
	cur, peak atomic.Int64
}

func (c *concurrency) enter() {
	n := c.cur.Add(1)
	for {
		p := c.peak.Load()
		if n <= p || c.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

func (c *concurrency) exit() { c.cur.Add(-1) }

// exits runs f on a goroutine of its own and reports whether that goroutine
// exited without f returning (runtime.Goexit); it fails the test if f does
// neither within patience.
func exits(t *testing.T, what string, f func()) bool {
	t.Helper()
	returned := make(chan bool, 2) // true, then false, if f returns
	go func() {
		defer func() { returned <- false }()
		f()
		returned <- true
	}()
	return !recv(t, what, returned)
}

// doEach checks that a Do on each key runs, within patience.
func doEach(t *testing.T, e *executor.Executor[string], keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, err := attempt(t, "Do "+k, func() error { return e.Do(context.Background(), k, nop) }); err != nil {
			t.Errorf("Do(%s) after the Goexit: got %v; want nil", k, err)
		}
	}
}
