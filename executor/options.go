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

// DefaultWorkers is the least number of execution slots an executor has
// unless WithWorkers says otherwise. Tasks guarded per key usually wait on
// I/O (a database, a remote call), so the default lets that many overlap; for
// CPU-bound tasks use WithWorkers(runtime.GOMAXPROCS(0)).
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
		// logger stays nil unless WithLogger sets it: New then picks
		// the default (defaultLogger), which depends on other options.
		policy: backpressure.FailFast(),
	}
}

var errOption = errors.New("perkey: invalid option")

func optErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errOption}, args...)...)
}

// WithWorkers bounds how many tasks execute at once, all keys together,
// counting tasks run on pool workers and tasks run inline on a caller's
// goroutine. n must be at least 1. The default is max(GOMAXPROCS,
// DefaultWorkers).
func WithWorkers(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return optErr("WithWorkers(%d): need at least 1 worker", n)
		}
		c.workers = n
		return nil
	}
}

// WithMaxQueuePerKey caps the tasks pending (queued + running) on one key;
// a submission beyond the cap meets the Policy (by default it fails at once
// with ErrBusy). 0, the default, means no cap.
func WithMaxQueuePerKey(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return optErr("WithMaxQueuePerKey(%d): must be >= 0", n)
		}
		c.maxPerKey = n
		return nil
	}
}

// WithMaxPending caps the tasks pending in the whole executor; a submission
// beyond it meets the Policy (by default ErrBusy). 0, the default, means no cap.
// A DoMany task counts once. Under a policy that waits (backpressure.Block),
// submissions at this cap wait in one line, and those of one key are let in
// one after another, so a cap that binds all the time costs throughput: to
// slow a producer that outruns the workers, cap each key (WithMaxQueuePerKey)
// and leave this one room to spare.
func WithMaxPending(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return optErr("WithMaxPending(%d): must be >= 0", n)
		}
		c.maxPending = n
		return nil
	}
}

// WithThroughput sets how many tasks a mailbox runs in a row before it gives
// its worker back to other keys, if any wait for one (otherwise it runs on).
// Lower is fairer, higher batches more. n must be at least 1; the default
// is DefaultThroughput (32).
func WithThroughput(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return optErr("WithThroughput(%d): must be >= 1", n)
		}
		c.throughput = n
		return nil
	}
}

// WithLogger sets where panics, unread failures, sampled rejections and
// lifecycle events are logged. The executor logs through l.Named("perkey"),
// and contains a panic in l's core. The default logs at error level only, as
// JSON lines on stderr: recovered panics (of fn, an Observer, a Policy, the
// error handler) and the failures of tasks whose result no caller reads
// (see WithErrorHandler), and slow-task warnings if WithSlowTaskWarning is
// set. A recovered panic is never silent unless you say so: zap.NewNop()
// silences everything. nil is an error.
func WithLogger(l *zap.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return optErr("WithLogger(nil): use zap.NewNop() to disable logging")
		}
		c.logger = l
		return nil
	}
}

// WithStripes switches the executor to striped mode: keys are hashed onto n
// fixed mailboxes allocated by New, so memory never grows with the key space.
// Keys that share a stripe are one key for ordering, caps, re-entry and
// DoMany's duplicate removal (false contention): pick n well above the number
// of keys busy at once. n must be at least 1. Off by default.
func WithStripes(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return optErr("WithStripes(%d): need at least 1 stripe", n)
		}
		c.stripes = n
		return nil
	}
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
// stop. The executor still bounds execution with WithWorkers. Give the pool
// room for at least the workers plus the depth of nested calls (an unbounded
// pool, pond.NewPool(0), is simplest): a worker blocked in a nested call
// keeps its pool goroutine while it lends its execution slot. nil is an error.
func WithPool(p pond.Pool) Option {
	return func(c *config) error {
		if p == nil {
			return optErr("WithPool(nil)")
		}
		c.pool = p
		return nil
	}
}

// WithPolicy sets what happens at a cap: backpressure.FailFast() (the
// default), or any backpressure.Policy. nil is an error.
func WithPolicy(p backpressure.Policy) Option {
	return func(c *config) error {
		if p == nil {
			return optErr("WithPolicy(nil)")
		}
		c.policy = p
		return nil
	}
}

// WithObserver sets an Observer that receives task events. nil is an error.
func WithObserver(o Observer) Option {
	return func(c *config) error {
		if o == nil {
			return optErr("WithObserver(nil)")
		}
		c.observer = o
		c.hasObserver = true
		return nil
	}
}

// WithErrorHandler sets f to receive the key and the error of every task
// whose result no caller will read: a task started with Go that returned an
// error, panicked (a *PanicError), called runtime.Goexit (ErrGoexit) or never
// ran (its ctx's error, or ErrClosed when Close gave up). f is called once
// per such task, on the goroutine that ended it, before the key's next task
// starts: it must not block. A panic in f is recovered and logged. By
// default these failures are logged at error level with the key. nil is an
// error.
func WithErrorHandler(f func(key any, err error)) Option {
	return func(c *config) error {
		if f == nil {
			return optErr("WithErrorHandler(nil)")
		}
		c.onError = f
		return nil
	}
}

// WithSlowTaskWarning makes the executor report every hold of a key that
// lasts longer than d (a task that runs long, or is stuck), once: a warning
// logged with the key and its age, Stats.Slow, and TaskSlow for an Observer
// that implements SlowObserver. A goroutine of the executor looks every d/4
// (at most every second, at least every millisecond), so a task is reported
// between d and about 1.25 d after it started; Close stops it.
//
// Without WithLogger the default logger prints these warnings as well as
// errors (see WithLogger).
//
// It also turns on age tracking (KeyLoad.Held and OldestWait, OldestKeys),
// which an Observer or a policy that reads queue age turn on as well: one
// clock read as each task starts and as it is queued. Off by default, since
// what is slow depends on the work; d must be positive.
func WithSlowTaskWarning(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return optErr("WithSlowTaskWarning(%v): must be > 0", d)
		}
		c.slow = d
		return nil
	}
}
