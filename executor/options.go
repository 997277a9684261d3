package executor

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/alitto/pond/v2"
	"go.uber.org/zap"

	"github.com/perkey/perkey/backpressure"
)

// DefaultThroughput is how many tasks a mailbox runs in a row before it gives
// its worker back to other keys, unless WithThroughput says otherwise.
const DefaultThroughput = 32

// DefaultWorkers is the least number of execution slots unless WithWorkers
// says otherwise: tasks guarded per key usually wait on I/O, so that many
// overlap. For CPU-bound tasks use WithWorkers(runtime.GOMAXPROCS(0)).
const DefaultWorkers = 64

// Option configures an Executor. A bad value makes New return an error.
type Option func(*config) error

type config struct {
	workers     int
	maxPerKey   int
	maxPending  int
	throughput  int
	stripes     int
	reentrant   bool
	logger      *zap.Logger
	pool        pond.Pool
	policy      backpressure.Policy
	observer    Observer
	hasObserver bool
	onError     func(key any, err error)
	slow        time.Duration // WithSlowTaskWarning; 0 = off
}

// defaults sets every default in one place.
func defaults() config {
	return config{
		workers:    max(runtime.GOMAXPROCS(0), DefaultWorkers),
		throughput: DefaultThroughput,
		// logger stays nil: New picks defaultLogger, which depends on other options.
		policy: backpressure.FailFast(),
	}
}

var errOption = errors.New("perkey: invalid option")

func optErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errOption}, args...)...)
}

// option is an Option that fails with optErr(format, args...) if bad, and
// else sets what set sets.
func option(bad bool, set func(c *config), format string, args ...any) Option {
	return func(c *config) error {
		if bad {
			return optErr(format, args...)
		}
		set(c)
		return nil
	}
}

// WithWorkers bounds how many tasks execute at once, all keys together, on
// pool workers or inline on a caller's goroutine. n must be at least 1. The
// default is max(GOMAXPROCS, DefaultWorkers).
func WithWorkers(n int) Option {
	return option(n < 1, func(c *config) { c.workers = n }, "WithWorkers(%d): need at least 1 worker", n)
}

// WithMaxQueuePerKey caps the tasks pending (queued + running) on one key;
// a submission beyond the cap meets the Policy (by default it fails at once
// with ErrBusy). 0, the default, means no cap.
func WithMaxQueuePerKey(n int) Option {
	return option(n < 0, func(c *config) { c.maxPerKey = n }, "WithMaxQueuePerKey(%d): must be >= 0", n)
}

// WithMaxPending caps the tasks pending in the whole executor; a submission
// beyond it meets the Policy (by default ErrBusy). 0, the default, means no
// cap; a DoMany counts once. Under a policy that waits (backpressure.Block)
// submissions at this cap wait in one line, those of one key let in one after
// another, so a cap that always binds costs throughput: to slow a fast
// producer, cap each key (WithMaxQueuePerKey) and give this one room to spare.
func WithMaxPending(n int) Option {
	return option(n < 0, func(c *config) { c.maxPending = n }, "WithMaxPending(%d): must be >= 0", n)
}

// WithThroughput sets how many tasks a mailbox runs in a row before it gives
// its worker to other keys, if any wait (else it runs on). Lower is fairer,
// higher batches more. n must be at least 1; default DefaultThroughput (32).
func WithThroughput(n int) Option {
	return option(n < 1, func(c *config) { c.throughput = n }, "WithThroughput(%d): must be >= 1", n)
}

// WithLogger sets where panics, unread failures, sampled rejections and
// lifecycle events are logged, through l.Named("perkey"), containing a panic
// in l's core. The default logs JSON lines on stderr at error level: recovered
// panics (of fn, an Observer, a Policy, the error handler), failures no caller
// reads (see WithErrorHandler), and slow-task warnings if WithSlowTaskWarning
// is set. zap.NewNop() silences everything. nil is an error.
func WithLogger(l *zap.Logger) Option {
	return option(l == nil, func(c *config) { c.logger = l }, "WithLogger(nil): use zap.NewNop() to disable logging")
}

// WithStripes switches the executor to striped mode: keys are hashed onto n
// fixed mailboxes allocated by New, so memory never grows with the key space.
// Keys that share a stripe are one key for ordering, caps, re-entry and
// DoMany's duplicate removal (false contention): pick n well above the number
// of keys busy at once. n must be at least 1. Off by default.
func WithStripes(n int) Option {
	return option(n < 1, func(c *config) { c.stripes = n }, "WithStripes(%d): need at least 1 stripe", n)
}

// WithReentrant makes a nested Do/DoShared/DoMany on keys the calling task
// already holds run its fn inline instead of failing with ErrReentrant.
func WithReentrant() Option {
	return func(c *config) error {
		c.reentrant = true
		return nil
	}
}

// WithPool runs mailboxes on a caller-owned pond pool, which Close does not
// stop; WithWorkers still bounds execution. Give the pool room for at least
// the workers plus the depth of nested calls (an unbounded pool,
// pond.NewPool(0), is simplest): a task blocked in a nested call keeps its
// goroutine while it lends its slot. nil is an error.
func WithPool(p pond.Pool) Option {
	return option(p == nil, func(c *config) { c.pool = p }, "WithPool(nil)")
}

// WithPolicy sets what happens at a cap: backpressure.FailFast() (the
// default), or any backpressure.Policy. nil is an error.
func WithPolicy(p backpressure.Policy) Option {
	return option(p == nil, func(c *config) { c.policy = p }, "WithPolicy(nil)")
}

// WithObserver sets an Observer that receives task events. nil is an error.
func WithObserver(o Observer) Option {
	return option(o == nil, func(c *config) {
		c.observer = o
		c.hasObserver = true
	}, "WithObserver(nil)")
}

// WithErrorHandler sets f to receive the key and error of every task whose
// result no caller will read: a Go task that returned an error, panicked (a
// *PanicError), called runtime.Goexit (ErrGoexit) or never ran (its ctx's
// error, or ErrClosed when Close gave up). f is called once per such task, on
// the goroutine that ended it, before the key's next task starts: it must not
// block; a panic in it is recovered and logged. By default these failures are
// logged at error level with the key. nil is an error.
func WithErrorHandler(f func(key any, err error)) Option {
	return option(f == nil, func(c *config) { c.onError = f }, "WithErrorHandler(nil)")
}

// WithSlowTaskWarning makes the executor report, once, every hold of a key
// that lasts longer than d (a task that runs long, or is stuck): a warning
// logged with the key and its age (the default logger prints it), Stats.Slow,
// and TaskSlow for an Observer that implements SlowObserver. A goroutine of
// the executor looks every d/4 (clamped to 1 ms–1 s), so a task is reported
// between d and about 1.25 d after it started; Close stops it. It also turns
// on age tracking (KeyLoad.Held and OldestWait, OldestKeys), as an Observer
// or a policy that reads queue age does: a clock read as each task is queued
// and as it starts. Off by default, since what is slow depends on the work;
// d must be positive.
func WithSlowTaskWarning(d time.Duration) Option {
	return option(d <= 0, func(c *config) { c.slow = d }, "WithSlowTaskWarning(%v): must be > 0", d)
}
