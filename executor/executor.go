package executor

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alitto/pond/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/internal/mailbox"
	"github.com/perkey/perkey/internal/router"
)

// Executor runs closures one at a time per key, in submission order, and in
// parallel across keys on a bounded pool. Make one with New: every method of
// a nil or zero Executor returns ErrNilExecutor or a zero value, and never
// panics. All methods are safe for concurrent use.
type Executor[K comparable] struct {
	cfg       config
	log       *zap.Logger
	sampled   *zap.Logger // rejections and cancellations
	limited   *zap.Logger // panics of callbacks other than fn, rate-limited
	obs       Observer    // nil if none; contains the user's Observer's panics
	checkKeys bool        // K may hold a NaN or an unhashable interface (see validate)
	created   time.Time   // when New ran (Settings)
	needsAge  bool        // the policy reads queue age
	ages      bool        // tasks are stamped and holds timed (see KeyLoad)

	// batchRelease (no global cap): a batch's reservations go back in one
	// step at its end (settled); a queued plain task's reservation is its
	// router shard's count (admitPlain).
	batchRelease bool
	// leanDo: an uncontended Do outside any task reserves only its slot (leanSlot).
	leanDo  bool
	runner  *mailbox.Runner
	router  *router.Router[K]
	pool    pond.Pool
	ownPool bool

	jobs sync.Pool // of *job[K]; see job
	// subOps, plainOps: how Submit's Tasks find their submissions (taskOps).
	subOps, plainOps taskOps
	// multiMu makes each multi-key enqueue atomic relative to the others
	// (see enqueueMany); single-key submissions never take it.
	multiMu sync.Mutex
	// watchAfter is how long a wait for room lasts before it watches what
	// holds the room (roomWatchAfter). timers pools stopped timers, so those
	// waits allocate none; per executor, as under testing/synctest a timer
	// is its bubble's.
	watchAfter time.Duration
	timers     sync.Pool
	// watchMu guards watches and global, the room watches of the keys and of
	// the executor (watch.go); only a submission waiting for room takes it.
	watchMu sync.Mutex
	watches map[K]*roomWatch[K]
	global  roomWatch[K]
	// globalWaiters is global.waiters, read without watchMu (watchLate).
	globalWaiters atomic.Int32
	// cancelable: under a global cap, an asynchronous task whose ctx is not
	// context.Background() may be queued; sweepAll walks only then.
	cancelable atomic.Bool
	// sweepEvery is how often a large scope is swept at its cap (tests: 0,
	// every refusal); sweptAt is the last large sweepAll's monotime (see
	// "Lazy cancellation" in admit.go).
	sweepEvery time.Duration
	sweptAt    atomic.Int64
	// reserved, set only by tests, is called by admit once a submission has
	// reserved room, before it locks the key's mailbox: it stages
	// interleavings no Policy can reach.
	reserved func(K)

	ledger // what tasks hold, the counts behind Stats, Close's drain

	closed atomic.Bool

	slowStop chan struct{} // closed to stop the slow-task watcher; nil if none
	slowDone chan struct{} // closed when it has stopped
	slowOnce sync.Once

	force       context.Context // canceled when Close gives up: running tasks see their ctx end
	forceCancel context.CancelFunc
	closing     chan struct{} // closed when Close starts

	// dispatching counts submitters between enqueueing a task on an idle
	// mailbox and starting its drive loop. The task may settle in that
	// window and let Close drain, so Close waits for these before stopping
	// the runner: no loop starts after Close returns.
	dispatching sync.WaitGroup

	room  room     // submissions waiting for executor-wide room
	waits waits[K] // nested waits in progress (see deadlock.go)

	// The first Close past the drain stops the executor; the others wait for
	// stopped. Not a sync.Once: a Close blocked on its mutex while the first
	// polls the pool is never durably blocked, which hangs concurrent Closes
	// under testing/synctest.
	stopping atomic.Bool
	stopped  chan struct{}
}

// KeyLoad is a key's live load: its pending tasks and, where ages are
// tracked (see WithSlowTaskWarning), how old its work is.
type KeyLoad[K comparable] struct {
	Key     K
	Pending int // queued + running for this key

	// Held is how long the key's current hold (its running task, shared
	// group or multi-key task) has lasted; OldestWait, how long its oldest
	// queued task has waited. Each is 0 if none, or if ages are not tracked.
	Held       time.Duration
	OldestWait time.Duration
}

// Settings is what an executor was configured with, for status pages: the
// values New settled on, defaults included.
type Settings struct {
	Workers        int
	MaxQueuePerKey int // 0 = no cap
	MaxPending     int // 0 = no cap
	Throughput     int
	Stripes        int    // 0 = dynamic mode
	Policy         string // the policy's String(), or its type
	Reentrant      bool
	SlowTask       time.Duration // WithSlowTaskWarning; 0 = off
	Ages           bool          // KeyLoad ages and OldestKeys are tracked
	Started        time.Time     // when New returned
}

// unmade reports whether e is nil or was not made by New.
func (e *Executor[K]) unmade() bool { return e == nil || e.router == nil }

// Settings returns what e was configured with.
func (e *Executor[K]) Settings() Settings {
	if e.unmade() {
		return Settings{}
	}
	c := e.cfg
	return Settings{Workers: c.workers, MaxQueuePerKey: c.maxPerKey, MaxPending: c.maxPending,
		Throughput: c.throughput, Stripes: c.stripes, Policy: policyName(c.policy), Reentrant: c.reentrant,
		SlowTask: c.slow, Ages: e.ages, Started: e.created}
}

// New returns an executor configured by opts. A bad option value is an
// error wrapping its description; New never panics.
func New[K comparable](opts ...Option) (*Executor[K], error) {
	cfg := defaults()
	for _, o := range opts {
		if o == nil {
			return nil, optErr("nil Option")
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.logger == nil {
		cfg.logger = defaultLogger(cfg.slow > 0)
	}
	e := &Executor[K]{cfg: cfg, ledger: ledger{drained: make(chan struct{})},
		closing: make(chan struct{}), stopped: make(chan struct{}), watchAfter: roomWatchAfter, sweepEvery: capSweepEvery}
	e.timers.New = newStoppedTimer
	e.created = time.Now()
	e.subOps, e.plainOps = subOps[K](), plainOps(e)
	e.checkKeys = mayBeInvalid(reflect.TypeFor[K]())
	e.log = cfg.logger.WithOptions(zap.WrapCore(containCore)).Named("perkey")
	e.sampled = e.log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, time.Second, 10, 1000)
	}))
	e.limited = e.log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, time.Second, 1, 0)
	}))
	if cfg.hasObserver {
		e.obs = &safeObserver{o: cfg.observer, onPanic: e.callbackPanicked}
	}
	if a, ok := cfg.policy.(backpressure.NeedsQueueAge); ok {
		e.needsAge = e.askNeedsAge(a)
	}
	e.pool = cfg.pool
	if e.pool == nil {
		// The runner's slots are the bound; a pond goroutine exists only for
		// a slot owner or a task blocked in a nested call.
		e.pool = pond.NewPool(0)
		e.ownPool = true
	}
	e.jobs.New = func() any { return &job[K]{core: core[K]{e: e}, done: make(chan struct{}, 1)} }
	e.force, e.forceCancel = context.WithCancel(context.Background())
	e.ages = e.obs != nil || e.needsAge || cfg.slow > 0
	e.batchRelease = cfg.maxPending == 0
	e.leanDo = e.batchRelease && e.obs == nil && !e.ages && !e.asksKey() && cfg.stripes == 0
	opt := mailbox.RunnerOptions{
		TrackOldest:    e.ages || cfg.stripes > 0,       // see askKey, nameOf and OldestKeys
		MeasureService: cfg.maxPerKey > 0 || e.needsAge, // Retry hints: see askKey
		Room:           cfg.maxPerKey,
		Plain:          (*plainRunner[K])(e),
	}
	if e.ages {
		opt.Clock = monotime // see KeyLoad.Held
	}
	if e.batchRelease {
		opt.Ran = e.settled // see job.release and admitPlain
	}
	opt.Released = e.drainIfDone // see leanSlot
	e.runner = mailbox.NewRunner(e.pool, cfg.workers, cfg.throughput, opt)
	e.router = router.New[K](e.runner, cfg.stripes)
	e.attach()
	if cfg.slow > 0 {
		e.slowStop, e.slowDone = make(chan struct{}), make(chan struct{})
		go e.watchSlow(cfg.slow)
	}
	e.log.Debug("executor started", zap.Int("workers", cfg.workers),
		zap.Int("throughput", cfg.throughput), zap.Int("stripes", cfg.stripes))
	return e, nil
}

// Call runs fn with Do and returns its value and error.
func Call[K comparable, T any](ctx context.Context, e *Executor[K], key K,
	fn func(context.Context) (T, error)) (T, error) {
	var out T
	if fn == nil {
		return out, ErrNilFunc
	}
	err := e.Do(ctx, key, func(ctx context.Context) error {
		v, err := fn(ctx)
		out = v
		return err
	})
	return out, err
}

// ActiveKeys is the number of keys (in striped mode, stripes) with a live
// mailbox: keys with tasks queued or running, plus any about to retire.
func (e *Executor[K]) ActiveKeys() int {
	if e.unmade() {
		return 0
	}
	return e.router.Live()
}

// MaxKeyPending is the pending count of the busiest key (or stripe) now.
// It costs what HotKeys(1) costs.
func (e *Executor[K]) MaxKeyPending() int {
	if e.unmade() {
		return 0
	}
	most := 0
	e.router.Each(func(_ K, m *mailbox.Mailbox) { most = max(most, m.Pending()) })
	return most
}
