package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/perkey/perkey/executor"
)

// Defaults for the Config fields left at their zero value.
const (
	DefaultWorkers        = executor.DefaultWorkers // Config.Workers
	DefaultMaxHeld        = 1000                    // Config.MaxHeld
	DefaultMaxPollRecords = 500                     // Config.MaxPollRecords
	DefaultCommitInterval = time.Second             // Config.CommitInterval
	DefaultMaxRetries     = 3                       // Config.MaxRetries
	DefaultBackoff        = 100 * time.Millisecond  // Config.Backoff
	DefaultMaxBackoff     = 10 * time.Second        // Config.MaxBackoff
	DefaultRevokeTimeout  = 10 * time.Second        // Config.RevokeTimeout
	DefaultDrainTimeout   = 30 * time.Second        // Config.DrainTimeout
	DefaultFetchMaxWait   = 200 * time.Millisecond  // kgo.FetchMaxWait, unless a kgo.Opt overrides it
)

// NoRetries, as Config.MaxRetries, sends a failed record straight to the
// Config.OnFailure decision.
const NoRetries = -1

// Handler handles one record. It runs with no other record of the same key
// (same topic, partition and key) in flight, after every earlier record of
// that key is done. ctx ends when the record's partition is lost, or is
// revoked (or Run is ending) and the grace period (RevokeTimeout,
// DrainTimeout) has passed: a handler must return soon after, since the
// consumer waits for it before it lets the partition go (so a key never runs
// on two members at once).
//
// A nil error marks the record done. An error is retried (see
// Config.MaxRetries) and then decided (see Decision). A panic is recovered
// and treated as an error (an *executor.PanicError).
type Handler func(ctx context.Context, rec *kgo.Record) error

// Decision is what becomes of a record whose handler failed.
type Decision uint8

const (
	// Retry runs the handler again on the same record after a backoff,
	// holding the key, so later records of the key keep waiting.
	Retry Decision = iota + 1
	// Skip logs the record and its error at warn level, counts it in
	// Stats.Skipped, and marks it done.
	Skip
	// DeadLetter hands the record to Config.DeadLetter and marks it done
	// once the hook returns nil. A hook error stops the consumer.
	DeadLetter
	// Stop leaves the record unfinished (it is not committed and will be
	// delivered again) and stops the consumer: Run drains the other
	// records in flight, commits, and returns a *HandlerError.
	Stop
)

// String returns the decision's name.
func (d Decision) String() string {
	switch d {
	case Retry:
		return "retry"
	case Skip:
		return "skip"
	case DeadLetter:
		return "dead-letter"
	case Stop:
		return "stop"
	}
	return fmt.Sprintf("Decision(%d)", uint8(d))
}

// Config configures a Consumer. Brokers, Group, Topics and Handler are
// required; every other field has a default used when it is left zero.
type Config struct {
	Brokers []string // seed brokers, host:port
	Group   string   // consumer group
	Topics  []string // topics to consume
	Handler Handler  // called once per record (more on redelivery)

	// Workers bounds how many handlers run at once, across all keys and
	// partitions. Default DefaultWorkers (64).
	Workers int

	// MaxHeld caps the records one partition holds (fetched and not yet
	// done). A partition at the cap is paused (PauseFetchPartitions) and
	// resumed once it is back to half of it, so a hot key or a slow
	// handler holds at most MaxHeld + MaxPollRecords records per
	// partition. A partition is also paused while the span from its
	// oldest unfinished record to its newest exceeds 16 × MaxHeld
	// records. Default DefaultMaxHeld (1000).
	MaxHeld int

	// MaxPollRecords bounds the records taken from the client per poll.
	// Default DefaultMaxPollRecords (500).
	MaxPollRecords int

	// CommitInterval is how often the done offsets are committed.
	// Default DefaultCommitInterval (1s).
	CommitInterval time.Duration

	// MaxRetries is how many times a failed record is retried before
	// OnFailure decides it; 0 means DefaultMaxRetries (3), NoRetries
	// means none.
	MaxRetries int
	// Backoff is the wait before the first retry; it doubles on each
	// retry up to MaxBackoff. Defaults DefaultBackoff (100ms) and
	// DefaultMaxBackoff (10s).
	Backoff, MaxBackoff time.Duration

	// OnFailure decides a record that failed MaxRetries+1 times: Skip,
	// DeadLetter or Stop (Retry means retry forever). Default: DeadLetter
	// if DeadLetter is set, Stop otherwise.
	OnFailure Decision

	// Decide, if set, is asked after every failed attempt (attempt counts
	// from 1) and overrides MaxRetries and OnFailure; returning 0 falls
	// back to them. Use it to send errors that retrying cannot cure
	// straight to DeadLetter. It runs on the record's worker.
	Decide func(rec *kgo.Record, err error, attempt int) Decision

	// DeadLetter receives records decided DeadLetter, with the last
	// error. It runs holding the record's key, so it is ordered with the
	// key's other records. A nil return marks the record done; an error
	// stops the consumer (Run returns it).
	DeadLetter func(ctx context.Context, rec *kgo.Record, err error) error

	// RevokeTimeout bounds how long the running handlers of a revoked
	// partition may take before their ctx is canceled (see Handler); its
	// records not started yet are left to the next owner at once.
	// Default DefaultRevokeTimeout (10s). Keep it well below the group's
	// rebalance timeout (kgo default 60s).
	RevokeTimeout time.Duration

	// DrainTimeout bounds the shutdown at the end of Run: every record
	// already dispatched may finish within it, then the rest are left and
	// the running handlers' ctx is canceled. Default DefaultDrainTimeout
	// (30s).
	DrainTimeout time.Duration

	// Logger receives lifecycle, rebalance, commit, skip and failure
	// events through Logger.Named("kafka"). Default zap.NewNop().
	Logger *zap.Logger

	// Observer, if set, receives the executor's task events
	// (executor.WithObserver), for example a metrics.Collector.
	Observer executor.Observer
}

// ErrConfig is wrapped by every error NewConsumer returns for a bad Config.
var ErrConfig = errors.New("perkey/kafka: invalid config")

// ErrRunning is returned by a second call to Run.
var ErrRunning = errors.New("perkey/kafka: Run already called")

// HandlerError is returned by Run when a record's failure stopped the
// consumer (Decision Stop, or a DeadLetter hook error). The record was not
// marked done: it is delivered again after a restart.
type HandlerError struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Attempts  int
	Err       error
}

// Error describes the record and the failure.
func (e *HandlerError) Error() string {
	return fmt.Sprintf("perkey/kafka: record %s/%d@%d (key %q) failed after %d attempts: %v",
		e.Topic, e.Partition, e.Offset, e.Key, e.Attempts, e.Err)
}

// Unwrap returns the handler's (or the dead-letter hook's) error.
func (e *HandlerError) Unwrap() error { return e.Err }

func cfgErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
}

// normalize validates c and fills in its defaults.
func (c Config) normalize() (Config, error) {
	switch {
	case len(c.Brokers) == 0:
		return c, cfgErr("no Brokers")
	case c.Group == "":
		return c, cfgErr("no Group")
	case len(c.Topics) == 0:
		return c, cfgErr("no Topics")
	case c.Handler == nil:
		return c, cfgErr("nil Handler")
	}
	for name, v := range map[string]int64{
		"Workers": int64(c.Workers), "MaxHeld": int64(c.MaxHeld), "MaxPollRecords": int64(c.MaxPollRecords),
		"CommitInterval": int64(c.CommitInterval), "Backoff": int64(c.Backoff), "MaxBackoff": int64(c.MaxBackoff),
		"RevokeTimeout": int64(c.RevokeTimeout), "DrainTimeout": int64(c.DrainTimeout),
	} {
		if v < 0 {
			return c, cfgErr("%s is negative (%d)", name, v)
		}
	}
	if c.MaxRetries < NoRetries {
		return c, cfgErr("MaxRetries %d: want >= 0 or NoRetries", c.MaxRetries)
	}
	if c.OnFailure > Stop {
		return c, cfgErr("OnFailure %v unknown", c.OnFailure)
	}
	if c.OnFailure == DeadLetter && c.DeadLetter == nil {
		return c, cfgErr("OnFailure is DeadLetter but DeadLetter is nil")
	}
	set := func(p *int, d int) {
		if *p == 0 {
			*p = d
		}
	}
	setD := func(p *time.Duration, d time.Duration) {
		if *p == 0 {
			*p = d
		}
	}
	set(&c.Workers, DefaultWorkers)
	set(&c.MaxHeld, DefaultMaxHeld)
	set(&c.MaxPollRecords, DefaultMaxPollRecords)
	set(&c.MaxRetries, DefaultMaxRetries)
	if c.MaxRetries == NoRetries {
		c.MaxRetries = 0
	}
	setD(&c.CommitInterval, DefaultCommitInterval)
	setD(&c.Backoff, DefaultBackoff)
	setD(&c.MaxBackoff, DefaultMaxBackoff)
	setD(&c.RevokeTimeout, DefaultRevokeTimeout)
	setD(&c.DrainTimeout, DefaultDrainTimeout)
	if c.MaxBackoff < c.Backoff {
		c.MaxBackoff = c.Backoff
	}
	if c.OnFailure == 0 {
		c.OnFailure = Stop
		if c.DeadLetter != nil {
			c.OnFailure = DeadLetter
		}
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c, nil
}
