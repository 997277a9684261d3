package bench

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

// The throughput harness: trivial tasks from 8 producer goroutines, string
// keys, each task bumping its own key's padded counter and nothing else, and
// completion measured through Close on every side. One cell is one api, one
// feed, one ctx kind, one key count and one implementation; its sub-benchmark
// name says which, as
//
//	Throughput/api=Go/feed=owned/ctx=cancel-shared/keys=1024/impl=perkey
//
// so that benchstat -col /impl sets perkey beside the actor, cell by cell.
// One op is one task: ns/op, B/op and allocs/op are per task (the last two
// rounded down by the testing package; allocs/task is not rounded), and
// tasks/s is b.N over the timed wall time.

// Dimensions of the harness, in the order of the sub-benchmark names.
var (
	throughputAPIs  = []string{"Go", "Submit"}
	throughputFeeds = []feedKind{feedOwned, feedShared}
	throughputCtxs  = []ctxKind{ctxBackground, ctxCancelShared, ctxCancelPerTask}
	throughputKeys  = []int{1, 16, 1024, 100_000}
	throughputImpls = []string{"actor", "perkey", "floor", "actor-ctx"} // the base first; the sticks (goOnly) in api=Go only

	// BenchmarkThroughputBounded's: perkey bounded as a user bounds a
	// producer that outruns the workers, beside the actor and unbounded
	// perkey, at the key counts where the bound binds.
	throughputBoundedImpls = []string{"actor", "perkey", "perkey-bounded", "perkey-keycap"}
	throughputBoundedKeys  = []int{1, 16, 1024}

	// boundedMaxPending is impl=perkey-bounded's executor-wide cap (a test
	// lowers it, so that its few tasks meet it).
	boundedMaxPending = 10_000
)

// feedKind is how producers spread their tasks over the keys.
type feedKind string

const (
	// feedOwned: each producer feeds its own disjoint set of keys, as one
	// consumer per partition does. Producer j of q = min(producers, keys)
	// owns the keys k with k%q == j and cycles through them; with fewer
	// keys than producers only q producers run (1 key: one producer feeds
	// every task), since a key fed by two producers is not owned.
	feedOwned feedKind = "owned"
	// feedShared: every producer cycles through every key, as HTTP
	// handlers do: producer j takes the j-th contiguous share of the task
	// numbers, and task i goes to key i%keys.
	feedShared feedKind = "shared"
)

// ctxKind is the ctx every task is given.
type ctxKind string

const (
	// ctxBackground: context.Background(), a ctx that never ends.
	ctxBackground ctxKind = "background"
	// ctxCancelShared: one context.WithCancel, made before the run, given
	// to every task: a consumer loop's or a server's ctx.
	ctxCancelShared ctxKind = "cancel-shared"
	// ctxCancelPerTask: a distinct context.WithCancel per task, all made
	// before the timed region: a request's ctx. Distinct, not a pool cycled
	// over the tasks, because a pool would let an implementation that
	// watches each distinct ctx once watch far fewer than one per task.
	ctxCancelPerTask ctxKind = "cancel-per-task"
)

// burstTasks bounds how many tasks one instance of an implementation takes.
// A run of b.N tasks is cut into bursts of at most burstTasks; each burst
// gets a fresh executor (or actor set) and, for ctx=cancel-per-task, its
// own burstTasks fresh ctxs, all made before the clock starts and dropped
// after it stops. The bound keeps the memory the per-task ctxs take, and
// the backlog perkey's unbounded queues build up (the actor's producers
// block on full channels instead), the same whatever b.N the benchmark
// settles on: run with -benchtime Nx, N a multiple of -burst, so that
// every burst is full (make bench-throughput does).
var burstTasks = flag.Int("burst", 1_000_000, "most tasks one executor or actor set takes in BenchmarkThroughput")

// BenchmarkThroughput is the throughput harness (see the package doc).
func BenchmarkThroughput(b *testing.B) { benchCells(b, throughputKeys, throughputImpls) }

// benchCells runs the harness's cells of every api, feed and ctx kind at
// each of keys for each of impls.
func benchCells(b *testing.B, keys []int, impls []string) {
	for _, api := range throughputAPIs {
		for _, feed := range throughputFeeds {
			for _, ck := range throughputCtxs {
				for _, n := range keys {
					for _, im := range impls {
						if goOnly(im) && api != "Go" {
							continue // a measuring stick for Go
						}
						c := cell{api: api, feed: feed, ctx: ck, keys: n, impl: im}
						b.Run(c.String(), func(b *testing.B) { benchCell(b, c) })
					}
				}
			}
		}
	}
}

// BenchmarkThroughputBounded runs the harness's cells at 1, 16 and 1,024
// keys for perkey bounded two ways, each waiting for room under
// backpressure.Block(), as a send on a full channel does: impl=perkey-keycap
// caps each key as the actor's channel does, WithMaxQueuePerKey(64) (the
// README's advice); impl=perkey-bounded caps the whole executor,
// WithMaxPending(10_000). The actor and unbounded perkey run beside them.
// Every producer outruns the workers here, so once the bound binds, every
// submission waits for room.
func BenchmarkThroughputBounded(b *testing.B) {
	benchCells(b, throughputBoundedKeys, throughputBoundedImpls)
}

// BenchmarkThroughputStriped runs the harness's cells for perkey in
// striped mode (WithStripes(64)): every key hashes onto one of 64 fixed
// mailboxes, so a stripe's queue holds many keys' tasks. It has no actor
// beside it (a striped actor is the plain one with 64 keys); it is there
// to measure striped mode's Go and Submit from one commit to the next
// (scripts/ab.sh). The owned feed at 1,024 and 100,000 keys: many keys per
// stripe.
func BenchmarkThroughputStriped(b *testing.B) {
	for _, api := range throughputAPIs {
		for _, ck := range throughputCtxs {
			for _, n := range []int{1024, 100_000} {
				c := cell{api: api, feed: feedOwned, ctx: ck, keys: n, impl: "perkey-stripes"}
				b.Run(c.String(), func(b *testing.B) { benchCell(b, c) })
			}
		}
	}
}

// cell is one combination of the harness's dimensions.
type cell struct {
	api  string // "Go" or "Submit"
	feed feedKind
	ctx  ctxKind
	keys int
	impl string // "actor", "perkey", "perkey-stripes", "perkey-bounded", "perkey-keycap", "floor" or "actor-ctx"
}

// goOnly reports whether impl is a measuring stick for Go's cells, not an
// alternative to perkey: the floor, which has no Task, and the actor
// giving each fn the ctx a Go gives it.
func goOnly(impl string) bool { return impl == "floor" || impl == "actor-ctx" }

func (c cell) String() string {
	return fmt.Sprintf("api=%s/feed=%s/ctx=%s/keys=%d/impl=%s", c.api, c.feed, c.ctx, c.keys, c.impl)
}

// benchCell runs b.N tasks of cell c in bursts (see burstTasks), timing
// only each burst's feeding and its Close, and checks after every burst
// that each key ran exactly the tasks fed to it.
func benchCell(b *testing.B, c cell) {
	if *burstTasks < 1 {
		b.Fatalf("-burst %d: a burst needs at least one task", *burstTasks)
	}
	b.StopTimer()
	ks := keys(c.keys)
	t := newTally(len(ks))
	var (
		elapsed       time.Duration
		mallocs       uint64
		before, after runtime.MemStats
	)
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(b.N-done, *burstTasks)
		r := newRun(c, ks, t.fns, n, newTarget)
		// Start from a collected heap: the garbage of the cell or burst
		// before is not this burst's to collect.
		runtime.GC()
		runtime.ReadMemStats(&before)
		b.StartTimer()
		start := time.Now()
		err := r.run()
		elapsed += time.Since(start)
		b.StopTimer()
		runtime.ReadMemStats(&after)
		mallocs += after.Mallocs - before.Mallocs
		r.release()
		if err != nil {
			b.Fatal(err)
		}
		if err := r.check(t.ran); err != nil {
			b.Fatal(err)
		}
		t.reset()
		done += n
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "tasks/s")
	// allocs/op is rounded down to a whole number; the targets are per task.
	b.ReportMetric(float64(mallocs)/float64(b.N), "allocs/task")
}

// target is one instance of an implementation under the harness.
type target interface {
	// send queues fn on key with ctx; it may return before fn runs.
	send(ctx context.Context, key string, fn func(context.Context) error) error
	// close returns once every task sent has run and every goroutine the
	// target started has exited.
	close() error
}

// run is one burst of one cell: the target, the ctxs, the plan.
type run struct {
	c    cell
	ks   []string
	fns  []func(context.Context) error // fns[k] bumps key k's counter
	n    int                           // tasks in the burst
	p    int                           // producers that run
	tg   target
	ctx  context.Context   // every task's, unless ctxs is set
	ctxs []context.Context // task i's ctx is ctxs[i] (ctx=cancel-per-task)
	stop []context.CancelFunc
}

// newRun makes everything a burst of n tasks needs before the clock starts:
// the ctxs and a fresh target made by mk (newTarget), its per-key state
// started ahead if it has any.
func newRun(c cell, ks []string, fns []func(context.Context) error, n int,
	mk func(ctx context.Context, c cell, ks []string) target) *run {
	r := &run{c: c, ks: ks, fns: fns, n: n, p: producers, ctx: context.Background()}
	if c.feed == feedOwned {
		r.p = min(producers, len(ks))
	}
	switch c.ctx {
	case ctxBackground:
	case ctxCancelShared:
		ctx, cancel := context.WithCancel(context.Background())
		r.ctx, r.stop = ctx, []context.CancelFunc{cancel}
	case ctxCancelPerTask:
		r.ctx = nil
		r.ctxs, r.stop = make([]context.Context, n), make([]context.CancelFunc, n)
		for i := range n {
			r.ctxs[i], r.stop[i] = context.WithCancel(context.Background())
		}
	default:
		panic("bench: unknown ctx kind " + string(c.ctx))
	}
	r.tg = mk(r.ctx, c, ks)
	return r
}

// newTarget makes a fresh instance of c's implementation for keys ks.
// ctx is every task's ctx, or nil if each task has its own.
func newTarget(ctx context.Context, c cell, ks []string) target {
	switch c.impl {
	case "actor":
		if ctx != nil {
			return newSameCtxActor(ctx, ks)
		}
		return newCtxActor(ks)
	case "actor-ctx":
		return newFreshCtxActor(ks)
	case "floor":
		return floorGoTarget{newFloorGo(runtime.GOMAXPROCS(0))}
	case "perkey", "perkey-stripes", "perkey-bounded", "perkey-keycap":
		opts := []executor.Option{executor.WithWorkers(runtime.GOMAXPROCS(0))}
		switch c.impl {
		case "perkey-stripes":
			opts = append(opts, executor.WithStripes(64))
		case "perkey-bounded":
			opts = append(opts, executor.WithMaxPending(boundedMaxPending), executor.WithPolicy(backpressure.Block()))
		case "perkey-keycap":
			// The actor's bound: a producer waits once its key has
			// throughputInbox tasks queued, where the actor's blocks on a full
			// channel (the README's advice for a producer faster than
			// its workers).
			opts = append(opts, executor.WithMaxQueuePerKey(throughputInbox), executor.WithPolicy(backpressure.Block()))
		}
		e, err := executor.New[string](opts...)
		if err != nil {
			panic(err)
		}
		switch c.api {
		case "Go":
			return perkeyGoTarget{e}
		case "Submit":
			return perkeySubmitTarget{e}
		}
		panic("bench: unknown api " + c.api)
	}
	panic("bench: unknown impl " + c.impl)
}

// tasks returns the task numbers producer j feeds: [lo, hi).
func (r *run) tasks(j int) (lo, hi int) { return j * r.n / r.p, (j + 1) * r.n / r.p }

// cursor walks the keys producer j feeds, one task at a time.
type cursor struct{ k, step, first, end int }

// next returns the key index of the producer's next task.
func (c *cursor) next() int {
	k := c.k
	if c.k += c.step; c.k >= c.end {
		c.k = c.first
	}
	return k
}

// cursor returns producer j's cursor: owned, its keys j, j+p, j+2p, ...
// in turn; shared, every key in turn from key lo%keys, so that task i
// goes to key i%keys.
func (r *run) cursor(j int) cursor {
	if r.c.feed == feedOwned {
		return cursor{k: j, step: r.p, first: j, end: len(r.ks)}
	}
	lo, _ := r.tasks(j)
	return cursor{k: lo % len(r.ks), step: 1, first: 0, end: len(r.ks)}
}

// run feeds the burst from r.p producers, then closes the target, which
// returns once every task has run. It is the timed part of a burst.
func (r *run) run() error {
	var (
		prod sync.WaitGroup
		errs = make([]error, r.p)
	)
	for j := range r.p {
		prod.Go(func() {
			lo, hi := r.tasks(j)
			cur := r.cursor(j)
			ctx := r.ctx
			for i := lo; i < hi; i++ {
				k := cur.next()
				if r.ctxs != nil {
					ctx = r.ctxs[i]
				}
				if err := r.tg.send(ctx, r.ks[k], r.fns[k]); err != nil {
					errs[j] = fmt.Errorf("task %d on key %s: %w", i, r.ks[k], err)
					return
				}
			}
		})
	}
	prod.Wait()
	if err := r.tg.close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// release cancels the burst's ctxs and lets them go (after the clock).
func (r *run) release() {
	for _, cancel := range r.stop {
		cancel()
	}
	r.ctx, r.ctxs, r.stop, r.tg = nil, nil, nil, nil
}

// want returns how many tasks the plan sends to each key.
func (r *run) want() []int {
	w := make([]int, len(r.ks))
	for j := range r.p {
		lo, hi := r.tasks(j)
		cur := r.cursor(j)
		for range hi - lo {
			w[cur.next()]++
		}
	}
	return w
}

// check returns an error unless every key of the burst ran exactly the
// tasks the plan sent it, ran(k) being how many key k ran: a count off means
// a task lost or run twice, or two tasks of the key overlapping (the
// tally's counter is not atomic).
func (r *run) check(ran func(k int) int) error {
	var bad []string
	for k, w := range r.want() {
		if got := ran(k); got != w {
			if len(bad) < 5 {
				bad = append(bad, fmt.Sprintf("key %s ran %d tasks, want %d", r.ks[k], got, w))
			} else {
				bad = append(bad, "...")
				break
			}
		}
	}
	if bad != nil {
		return fmt.Errorf("%v: %v", r.c, bad)
	}
	return nil
}

// ran returns how many tasks key k ran.
func (t *tally) ran(k int) int { return t.counts[k].n }

// reset zeroes every key's counter.
func (t *tally) reset() {
	for i := range t.counts {
		t.counts[i].n = 0
	}
}

// perkeyGoTarget feeds perkey with Go.
type perkeyGoTarget struct{ e *executor.Executor[string] }

func (p perkeyGoTarget) send(ctx context.Context, key string, fn func(context.Context) error) error {
	return p.e.Go(ctx, key, fn)
}

func (p perkeyGoTarget) close() error { return p.e.Close(context.Background()) }

// perkeySubmitTarget feeds perkey with Submit; the Task is dropped, as a
// caller that only wants the work queued drops it.
type perkeySubmitTarget struct{ e *executor.Executor[string] }

func (p perkeySubmitTarget) send(ctx context.Context, key string, fn func(context.Context) error) error {
	_, err := p.e.Submit(ctx, key, fn)
	return err
}

func (p perkeySubmitTarget) close() error { return p.e.Close(context.Background()) }

// throughputInbox is the capacity of each actor's channel.
const throughputInbox = 64

// sameCtxActor is the plain actor as code bases write it for a consumer
// loop or a server, where every task has the same ctx: a goroutine per key,
// started (and run up to its first receive) before the run, ranging over a channel of funcs (64 slots) and
// calling each with that ctx; the senders find the channel in a map built
// before the run that nothing writes during it, so no lock is taken. The
// task's ctx is passed to fn (it is the one ctx); the actor does not look
// at it, as such actors do not. It serves api=Go and api=Submit alike: it
// has nothing like a Task to give.
type sameCtxActor struct {
	ctx     context.Context
	inboxes map[string]chan func(context.Context) error
	wg      sync.WaitGroup
}

func newSameCtxActor(ctx context.Context, ks []string) *sameCtxActor {
	a := &sameCtxActor{ctx: ctx, inboxes: make(map[string]chan func(context.Context) error, len(ks))}
	var started sync.WaitGroup
	started.Add(len(ks))
	for _, k := range ks {
		ch := make(chan func(context.Context) error, throughputInbox)
		a.wg.Go(func() {
			started.Done()
			for fn := range ch {
				_ = fn(ctx) // the tasks here return nil
			}
		})
		a.inboxes[k] = ch
	}
	started.Wait() // every goroutine has run: none starts on the clock
	return a
}

func (a *sameCtxActor) send(_ context.Context, key string, fn func(context.Context) error) error {
	a.inboxes[key] <- fn
	return nil
}

// close closes every channel and waits for every goroutine to drain its
// channel and exit.
func (a *sameCtxActor) close() error {
	for _, ch := range a.inboxes {
		close(ch)
	}
	a.wg.Wait()
	return nil
}

// ctxActor is sameCtxActor for tasks that each bring their own ctx: the
// channel carries the func and its ctx (24 bytes, no allocation), and the
// goroutine calls fn with the task's ctx.
type ctxActor struct {
	inboxes map[string]chan ctxTask
	wg      sync.WaitGroup
}

type ctxTask struct {
	ctx context.Context
	fn  func(context.Context) error
}

func newCtxActor(ks []string) *ctxActor {
	return startCtxActor(ks, func(_ string, ch <-chan ctxTask) {
		for t := range ch {
			_ = t.fn(t.ctx) // the tasks here return nil
		}
	})
}

// startCtxActor starts a goroutine per key, running serve on the key's
// channel, and returns once each has started.
func startCtxActor(ks []string, serve func(key string, ch <-chan ctxTask)) *ctxActor {
	a := &ctxActor{inboxes: make(map[string]chan ctxTask, len(ks))}
	var started sync.WaitGroup
	started.Add(len(ks))
	for _, k := range ks {
		ch := make(chan ctxTask, throughputInbox)
		a.wg.Go(func() {
			started.Done()
			serve(k, ch)
		})
		a.inboxes[k] = ch
	}
	started.Wait()
	return a
}

func (a *ctxActor) send(ctx context.Context, key string, fn func(context.Context) error) error {
	a.inboxes[key] <- ctxTask{ctx, fn}
	return nil
}

func (a *ctxActor) close() error {
	for _, ch := range a.inboxes {
		close(ch)
	}
	a.wg.Wait()
	return nil
}

// newFreshCtxActor (impl=actor-ctx) is ctxActor paying for what the
// contract asks of fn's ctx and nothing else: each fn gets a fresh context
// that names its key and records its end (the floor's, carved 8 to a block),
// and a task whose ctx ended does not run. It measures how much of the
// distance between the plain actor and any executor of the contract that ctx
// alone is, not an alternative: it has no bound on its goroutines, no
// retirement, no caps. It serves every ctx kind.
func newFreshCtxActor(ks []string) *ctxActor {
	return startCtxActor(ks, func(key string, ch <-chan ctxTask) {
		var carver floorCarver
		for t := range ch {
			c := carver.ctx(key, t.ctx)
			if t.ctx.Err() == nil {
				_ = t.fn(c)
			}
			c.ended.Store(1)
		}
	})
}
