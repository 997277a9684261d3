package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

// Config is a soak run. Zero fields take the defaults of cmd/perkey-soak.
type Config struct {
	Duration     time.Duration // how long producers run; default 60s
	Producers    int           // concurrent producers; default 32
	Keys         int           // key space, drawn from a Zipf distribution; default 10,000
	Workers      int           // WithWorkers of every generation; default 8
	Seed         uint64        // seeds every random choice; default 1
	RestartEvery time.Duration // how long a generation lives; default 2s
	Policies     []string      // generations rotate through these; default Policies
	Progress     io.Writer     // a line per generation; nil for none
}

// Policies names the backpressure policies a run can rotate through.
var Policies = []string{"FailFast", "Block", "MaxQueueDelay"}

func (c *Config) validate() error {
	for _, p := range c.Policies {
		if !slices.Contains(Policies, p) {
			return fmt.Errorf("soak: unknown policy %q; want one of %v", p, Policies)
		}
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.Duration <= 0 {
		c.Duration = 60 * time.Second
	}
	if c.Producers <= 0 {
		c.Producers = 32
	}
	if c.Keys <= 0 {
		c.Keys = 10_000
	}
	if c.Workers <= 0 {
		c.Workers = 8
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.RestartEvery <= 0 {
		c.RestartEvery = 2 * time.Second
	}
	if len(c.Policies) == 0 {
		c.Policies = Policies
	}
}

// Limits of the run's own checks.
const (
	lostGrace      = 10 * time.Second // a generation's calls must all return within this of its Close
	retireGrace    = 2 * time.Second  // ActiveKeys must reach 0 within this of Close
	waitWatchdog   = 30 * time.Second // a Wait gives up here, so a lost task cannot hang the run
	withdrawLimit  = 5 * time.Second  // a canceled, queued task must free its place within this
	victimPatience = 20 * time.Millisecond
	nestPatience   = 5 * time.Millisecond // a nested call's ctx (see harness.nest)
	nestPercent    = 5                    // of tasks whose fn makes a nested call
	obsPanicEvery  = 1000                 // the observer panics on one event in this many
	goroutineSlack = 2
	heapSlack      = 16 << 20
	sampleEvery    = 5 * time.Millisecond
)

// harness is the state of one run.
type harness struct {
	cfg      Config
	workers  int
	keySpace int // cfg.Keys, then the keys of the ring slots (see ringPool)
	v        violations

	cur  atomic.Pointer[generation] // nil once the run is over
	stop atomic.Bool                // producers finish their current op and exit
	over chan struct{}              // closed when no generation will follow

	nextID atomic.Uint64

	slowest     atomic.Int64 // the longest queue wait of a task that ran, ns
	slowMu      sync.Mutex   // guards slowestTask
	slowestTask string       // which task that was

	// Outcomes, counted by settle and run.
	ok, failed, panics, slow, cut atomic.Int64
	ctxRes, closedRes             atomic.Int64
	rejected                      [4]atomic.Int64 // by backpressure.Scope
	gates, gateVoid               atomic.Int64
	calls                         [numOps]atomic.Int64
	nested, nestRefused           atomic.Int64 // nested calls made from fns, and refused with ErrReentrant
	nestDeadlock                  atomic.Int64 // nested calls (or their Waits) refused with ErrDeadlock
	goexits, goexitRes            atomic.Int64 // fns that called runtime.Goexit; results that were ErrGoexit
	stubborn                      atomic.Int64 // fns that ignored their ctx (stubborn)
	callersGone, aside            atomic.Int64 // calls that never returned (their goroutine exited); calls made from a goroutine of their own
	goCalls                       atomic.Int64 // Go calls, and of those:
	goAccepted                    atomic.Int64 // accepted
	handled                       [numHandled]atomic.Int64
	obsPanics                     atomic.Int64 // observer panics (the executor recovers them)
	closedEarly                   atomic.Int64 // giving-up Closes that returned while fns of theirs still ran
	forced, drained, concurrent   atomic.Int64
	generations                   atomic.Int64
	closeTime                     histogram

	prods    []*producer // the load's producers, then planter
	planter  *producer   // submits plant's tasks; it runs no loop
	plantKey int         // plant's key: no other task uses it
	giveUps  giveUpStats

	rings       ringPool
	ringStat    ringStats
	ringLimit   time.Duration // 0: ringLimit (tests shorten it)
	giveUpWatch time.Duration // 0: giveUpWatch (tests shorten it)
	batchSt     batchStats

	genMu sync.Mutex       // guards gens
	gens  []executor.Stats // each closed generation's final Stats, for the report
}

// generation is one executor's life and what the harness counted on it.
type generation struct {
	n        int
	spec     genSpec
	born     time.Time // just before executor.New
	e        *executor.Executor[int]
	replaced chan struct{} // closed once the next generation is published or the run is over

	calls, returns  atomic.Int64 // calls (blocking ones, Submits, Gos) started and returned (results recorded)
	accepted, ended atomic.Int64 // Submits accepted, and their Waits that returned the task's end
	runs, panics    atomic.Int64 // fns that ran (returned, panicked or exited), fns that panicked
	failedRuns      atomic.Int64 // fns that returned an error or ended through runtime.Goexit
	busy            atomic.Int64 // ErrBusy results

	// Per generation, not per run: once a Close gives up, its tasks may
	// still run beside the next generation's, as Close documents.
	occ     occupancy
	running atomic.Int64 // fns running now, outside nested calls (the worker bound)
	live    atomic.Int64 // fns between their start and their end

	obs observer // the executor's Observer, unless spec.noObserver

	batcher *executor.Batcher[int, *task] // its BatchFunc is harness.runBatch

	// Go: the accepted tasks, and what the error handler was handed that
	// names no task (see handle).
	goexitOn sync.Map // key -> the Go task whose fn just ended through Goexit
	goMu     sync.Mutex
	goTasks  []*task
	notRun   map[int]int // key -> failures of Go tasks that never ran (ctx error, ErrClosed)
	closedGo int         // of those, ErrClosed

	closing  atomic.Bool // a Close of g has begun: calls made since are not tracked (see track)
	stuck    *stuck      // what plant left before a forced Close, if anything
	closeErr error
	gaveUp   bool                 // a Close of g returned its ctx's error
	closedAt time.Time            // when the first Close returned
	left     map[string]*leftover // what checkGaveUp found not ended giveUpLimit after a Close that gave up
	closeDur time.Duration
}

// genSpec is a generation's executor configuration.
type genSpec struct {
	policy     string
	delay      time.Duration // for MaxQueueDelay
	perKey     int
	pending    int
	throughput int
	stripes    int
	forced     bool          // closed with a deadline of at most 1 ms
	closeAfter time.Duration // that deadline
	twoClosers bool          // Close called from two goroutines at once
	noObserver bool          // no WithObserver: the executor's paths without one
}

func (s genSpec) String() string {
	p := s.policy
	if s.policy == "MaxQueueDelay" {
		p = fmt.Sprintf("MaxQueueDelay(%v)", s.delay)
	}
	out := fmt.Sprintf("%s per-key=%d pending=%d throughput=%d", p, s.perKey, s.pending, s.throughput)
	if s.stripes > 0 {
		out += fmt.Sprintf(" stripes=%d", s.stripes)
	}
	if s.noObserver {
		out += " no-observer"
	}
	return out
}

func (s genSpec) options(workers int) []executor.Option {
	var policy backpressure.Policy
	switch s.policy {
	case "Block":
		policy = backpressure.Block()
	case "MaxQueueDelay":
		policy = backpressure.MaxQueueDelay(s.delay)
	default:
		policy = backpressure.FailFast()
	}
	opts := []executor.Option{
		executor.WithWorkers(workers),
		executor.WithMaxQueuePerKey(s.perKey),
		executor.WithMaxPending(s.pending),
		executor.WithThroughput(s.throughput),
		executor.WithPolicy(policy),
	}
	if s.stripes > 0 {
		opts = append(opts, executor.WithStripes(s.stripes))
	}
	return opts
}

// newSpec draws generation n's configuration: the policy rotates through
// policies, the rest is random.
func newSpec(n int, policies []string, r *rand.Rand) genSpec {
	s := genSpec{
		policy:     policies[n%len(policies)],
		delay:      time.Duration(1+r.IntN(5)) * time.Millisecond,
		perKey:     [...]int{0, 4, 16, 64}[r.IntN(4)],
		pending:    [...]int{0, 32, 128}[r.IntN(3)],
		throughput: [...]int{1, 4, 32}[r.IntN(3)],
		forced:     r.IntN(2) == 0,
		closeAfter: time.Duration(r.Int64N(int64(time.Millisecond))),
		twoClosers: r.IntN(5) == 0,
	}
	if r.IntN(4) == 0 {
		s.stripes = 256
	}
	s.noObserver = r.IntN(4) == 0
	return s
}

// Run runs the soak described by cfg and returns its report. ctx ends the
// load early. Violations are in the report, not in the error, which is only
// for a configuration the harness cannot run.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	baseGoroutines := runtime.NumGoroutine()
	h := &harness{
		cfg:     cfg,
		workers: cfg.Workers,
		over:    make(chan struct{}),
	}
	h.rings.init(cfg.Workers)
	h.plantKey = cfg.Keys + h.rings.keys()
	h.keySpace = h.plantKey + 1
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x50a4))
	g, err := h.newGeneration(0, rng)
	if err != nil {
		return nil, err
	}
	h.cur.Store(g)
	prods := make([]*producer, cfg.Producers)
	for i := range prods {
		prods[i] = newProducer(h, i)
	}
	h.planter = newProducer(h, cfg.Producers)
	h.prods = append(slices.Clone(prods), h.planter)
	rep := &Report{Config: cfg, Goroutines: [2]int{baseGoroutines, 0}}
	rep.Heap[0] = heapInUse()
	begin := time.Now()

	var prodWG sync.WaitGroup
	for _, p := range prods {
		prodWG.Go(p.loop)
	}
	loadCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var bgWG sync.WaitGroup // checks of closed generations, and the sampler
	samplerDone := make(chan struct{})
	bgWG.Go(func() { h.sample(&rep.Heap[1], samplerDone) })

	tick := time.NewTicker(cfg.RestartEvery)
	for n := 1; ; n++ {
		select {
		case <-tick.C:
		case <-loadCtx.Done():
		}
		last := loadCtx.Err() != nil
		old := h.cur.Load()
		if last {
			h.stop.Store(true)
		}
		h.close(old, old.spec.forced && !last) // the last Close drains: every accepted task runs
		var next *generation
		if !last {
			if next, err = h.newGeneration(n, rng); err != nil {
				last = true // cannot happen with valid specs; end the run cleanly
				h.stop.Store(true)
			}
		}
		h.cur.Store(next) // nil ends the producers' wait below
		close(old.replaced)
		bgWG.Go(func() { h.check(old) })
		if last {
			break
		}
	}
	tick.Stop()
	elapsed := time.Since(begin)
	close(h.over)
	close(samplerDone)

	prodDone := make(chan struct{})
	go func() { prodWG.Wait(); close(prodDone) }()
	select {
	case <-prodDone:
	case <-time.After(lostGrace + waitWatchdog):
		// Some producer is stuck in a call that never returns; the
		// generation checks count it as lost. Report rather than hang.
		rep.Stuck = true
	}
	bgWG.Wait()

	rep.Goroutines[1] = h.settleGoroutines(baseGoroutines, rep.Stuck)
	rep.Heap[2] = heapInUse()
	rep.Elapsed = elapsed
	h.fill(rep, h.prods)
	return rep, nil
}

func (h *harness) newGeneration(n int, r *rand.Rand) (*generation, error) {
	return h.startGeneration(n, newSpec(n, h.cfg.Policies, r))
}

// startGeneration starts generation n's executor, and its Batcher, as spec says.
func (h *harness) startGeneration(n int, spec genSpec) (*generation, error) {
	g := &generation{n: n, spec: spec, replaced: make(chan struct{}),
		occ: make(occupancy, h.keySpace), notRun: map[int]int{}}
	g.obs.h = h
	opts := append(spec.options(h.workers),
		executor.WithErrorHandler(func(key any, err error) { h.handle(g, key, err) }),
		// fn panics, observer panics and unread failures are the load:
		// the harness counts them, the log would only drown them.
		executor.WithLogger(zap.NewNop()))
	if !spec.noObserver {
		opts = append(opts, executor.WithObserver(&g.obs))
	}
	g.born = time.Now()
	e, err := executor.New[int](opts...)
	if err != nil {
		return nil, fmt.Errorf("soak: generation %d (%s): %w", n, spec, err)
	}
	g.e = e
	g.batcher, err = executor.NewBatcher(e, func(ctx context.Context, key int, msgs []*task) error {
		return h.runBatch(ctx, g, key, msgs)
	}, executor.WithMaxBatch(maxBatch))
	if err != nil {
		e.Close(context.Background())
		return nil, fmt.Errorf("soak: generation %d: NewBatcher: %w", n, err)
	}
	h.generations.Add(1)
	return g, nil
}

// close closes g under load, with a deadline of at most 1 ms if forced,
// else a long one. A Close that drained must leave nothing behind at once;
// one that gave up returns without waiting for running fns, and check
// closes g again once they have ended.
func (h *harness) close(g *generation, forced bool) {
	deadline := 30 * time.Second
	if forced {
		deadline = g.spec.closeAfter
	}
	if forced {
		g.stuck = h.plant(g)
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	g.closing.Store(true)
	start := time.Now()
	var other error
	if g.spec.twoClosers {
		h.concurrent.Add(1)
		var wg sync.WaitGroup
		wg.Go(func() { other = g.e.Close(ctx) })
		g.closeErr = g.e.Close(ctx)
		wg.Wait()
		if other != nil && !errors.Is(other, ctx.Err()) {
			h.v.add(Counters, 1, "gen %d: concurrent Close returned %v", g.n, other)
		}
	} else {
		g.closeErr = g.e.Close(ctx)
	}
	g.closedAt = time.Now()
	g.closeDur = g.closedAt.Sub(start)
	h.closeTime.record(g.closeDur)
	g.gaveUp = g.closeErr != nil || other != nil
	switch {
	case g.closeErr == nil:
		h.drained.Add(1)
	case errors.Is(g.closeErr, context.DeadlineExceeded) && !forced:
		h.v.add(Counters, 1, "gen %d (%s): a Close meant to drain gave up after %v", g.n, g.spec, deadline)
	case errors.Is(g.closeErr, context.DeadlineExceeded):
		h.forced.Add(1)
	default:
		h.v.add(Counters, 1, "gen %d (%s): Close returned %v", g.n, g.spec, g.closeErr)
	}
	if !g.gaveUp {
		h.checkStopped(g, "right after Close")
		return
	}
	h.checkGaveUp(g)
	if g.live.Load() > 0 || g.e.Stats().Running > 0 {
		h.closedEarly.Add(1)
	}
}

// checkStopped checks a generation whose Close has returned nil: nothing
// queued or running, every accepted task ended, no fn of it still running.
func (h *harness) checkStopped(g *generation, when string) {
	s := g.e.Stats()
	if s.Queued != 0 || s.Running != 0 || s.Submitted != s.Completed+s.Canceled {
		h.v.add(Counters, 1, "gen %d (%s): %s: %+v; want Queued == Running == 0 and Submitted == Completed+Canceled",
			g.n, g.spec, when, s)
	}
	if n := g.live.Load(); n != 0 {
		h.v.add(Counters, 1, "gen %d (%s): %s, which returned nil: %d fns of the generation still run", g.n, g.spec, when, n)
	}
}

// check waits for everything submitted to g to come back and compares the
// harness's counts with g's Stats.
func (h *harness) check(g *generation) {
	h.watchGaveUp(g)
	h.unplant(g)
	if g.gaveUp {
		// A Close that gave up returned at once; another returns nil once
		// nothing runs.
		ctx, cancel := context.WithTimeout(context.Background(), lostGrace)
		err := g.e.Close(ctx)
		cancel()
		if err != nil {
			h.v.add(Counters, 1, "gen %d (%s): Close after a Close that gave up: %v; want nil once nothing runs", g.n, g.spec, err)
		} else {
			h.checkStopped(g, "Close after a Close that gave up")
		}
	}
	if !poll(retireGrace, func() bool { return g.e.ActiveKeys() == 0 }) {
		h.v.add(Counters, 1, "gen %d (%s): ActiveKeys = %d %v after Close; want 0",
			g.n, g.spec, g.e.ActiveKeys(), retireGrace)
	}
	settled := func() bool {
		return g.calls.Load() == g.returns.Load() && g.accepted.Load() == g.ended.Load()
	}
	if !poll(lostGrace, settled) {
		lost := g.calls.Load() - g.returns.Load() + g.accepted.Load() - g.ended.Load()
		h.v.add(Lost, lost, "gen %d (%s): %d calls started, %d returned; %d Submits accepted, %d ended, %v after Close",
			g.n, g.spec, g.calls.Load(), g.returns.Load(), g.accepted.Load(), g.ended.Load(), lostGrace)
		return
	}
	s := g.e.Stats()
	h.genMu.Lock()
	h.gens = append(h.gens, s)
	h.genMu.Unlock()
	if runs := uint64(g.runs.Load()); s.Completed != runs {
		h.v.add(Counters, 1, "gen %d (%s): Completed = %d; the harness saw %d fns run", g.n, g.spec, s.Completed, runs)
	}
	if p := uint64(g.panics.Load()); s.Panicked != p {
		h.v.add(Counters, 1, "gen %d (%s): Panicked = %d; the harness saw %d panics", g.n, g.spec, s.Panicked, p)
	}
	if b := uint64(g.busy.Load()); s.Rejected != b {
		h.v.add(Counters, 1, "gen %d (%s): Rejected = %d; the harness saw %d ErrBusy results", g.n, g.spec, s.Rejected, b)
	}
	if a := uint64(g.accepted.Load()); s.Submitted < a {
		h.v.add(Counters, 1, "gen %d (%s): Submitted = %d; the harness had %d Submits accepted", g.n, g.spec, s.Submitted, a)
	}
	if !g.spec.noObserver {
		h.checkObserver(g, s)
	}
	h.checkGo(g)
	if w := h.cfg.Progress; w != nil {
		how := "drained"
		if g.closeErr != nil {
			how = "forced"
		}
		fmt.Fprintf(w, "gen %3d  %-60s  Close %-7s %9v  submitted %8d completed %8d canceled %6d rejected %7d panicked %5d\n",
			g.n, g.spec, how, g.closeDur.Round(time.Microsecond), s.Submitted, s.Completed, s.Canceled, s.Rejected, s.Panicked)
	}
}

// sample checks the live executor's counters every sampleEvery and takes
// the mid-run heap.
func (h *harness) sample(midHeap *uint64, done <-chan struct{}) {
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	mid := time.NewTimer(h.cfg.Duration / 2)
	defer mid.Stop()
	for i := 0; ; i++ {
		select {
		case <-done:
			return
		case <-mid.C:
			*midHeap = heapInUse()
			continue
		case <-tick.C:
		}
		g := h.cur.Load()
		if g == nil {
			continue
		}
		// Stats reads its counters one at a time, so one snapshot may mix
		// instants; comparing two keeps the check sound: the later
		// Submitted bounds the earlier Completed + Canceled.
		s1 := g.e.Stats()
		s2 := g.e.Stats()
		if s2.Submitted < s1.Completed+s1.Canceled || s1.Queued < 0 || s1.Running < 0 {
			h.v.add(Counters, 1, "gen %d (%s): live Stats %+v then %+v", g.n, g.spec, s1, s2)
		}
		if i%8 == 0 {
			hot := g.e.HotKeys(4)
			for j, kl := range hot {
				if kl.Pending <= 0 || kl.Key < 0 || kl.Key >= h.keySpace || (j > 0 && hot[j-1].Pending < kl.Pending) {
					h.v.add(Counters, 1, "gen %d (%s): HotKeys(4) = %v", g.n, g.spec, hot)
					break
				}
			}
		}
	}
}

// settleGoroutines polls until the goroutine count is back to base (plus
// slack) and returns the last count seen.
func (h *harness) settleGoroutines(base int, stuck bool) int {
	n := runtime.NumGoroutine()
	ok := poll(5*time.Second, func() bool {
		n = runtime.NumGoroutine()
		return n <= base+goroutineSlack
	})
	if !ok && !stuck { // stuck producers are already counted as lost
		h.v.add(LeakedGoroutines, int64(n-base), "%d goroutines after the run; %d before", n, base)
	}
	return n
}

// poll reports whether cond became true within d.
func poll(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for wait := 50 * time.Microsecond; ; wait = min(2*wait, 20*time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
	}
}

// heapInUse is the heap in use after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}
