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

// DefaultMaxBatch is Config.MaxBatch's default, with a BatchHandler.
const DefaultMaxBatch = executor.DefaultMaxBatch

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

// BatchHandler handles a batch: consecutive records of one key (same
// topic, partition and key), in offset order, at most Config.MaxBatch. A
// batch is what is ready when the key's turn comes: the key's records
// fetched and waiting, all of them up to MaxBatch; it is never held back to
// fill up, so a key with no backlog gets batches of one. Calls for one key
// never overlap, and one starts only after every earlier record of the key
// is done, as for a Handler; different keys run in parallel. ctx is as for
// a Handler.
//
// The batch succeeds or fails as a whole. A nil error marks every record of
// recs done (for commits); any error, an executor.BatchErrors included,
// fails the batch, and it is retried and decided as one (see
// Config.MaxRetries, Config.OnFailure), with the same records on each
// attempt. There are no per-record outcomes: the consumer commits by
// offset, and in key order a record is done only once every earlier record
// of its key is, so a record that failed would hold back every later one of
// the batch anyway. A panic, or a call to runtime.Goexit, fails the batch.
//
// recs is the consumer's: do not modify it, nor keep it after the call
// returns. Batches are not stable: after a redelivery (see the package
// doc) the same records may come grouped differently, so make the handling
// idempotent per record, not per batch.
type BatchHandler func(ctx context.Context, recs []*kgo.Record) error

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

// Config configures a Consumer. Brokers, Group, Topics and exactly one of
// Handler and BatchHandler are required; every other field has a default
// used when it is left zero.
type Config struct {
	Brokers []string // seed brokers, host:port
	Group   string   // consumer group
	Topics  []string // topics to consume
	Handler Handler  // called once per record (more on redelivery)

	// BatchHandler, instead of Handler, is called once per batch of one
	// key's ready records, at most MaxBatch (see BatchHandler). Retries,
	// Decide, OnFailure and DeadLetter then apply to the batch: see their
	// fields.
	BatchHandler BatchHandler
	// MaxBatch bounds the records of one BatchHandler call: at least 1,
	// and 0 means DefaultMaxBatch (100), enough to amortise a bulk sink's
	// per-call cost while a failed batch stays small to retry. It must be
	// 0 without a BatchHandler. A batch holds only records fetched and
	// waiting, so MaxHeld bounds it too: a partition of many keys holds
	// about MaxHeld / keys records of each, and batches grow with MaxHeld.
	MaxBatch int

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

	// MaxRetries is how many times a failed record (with a BatchHandler,
	// a failed batch, whole) is retried before OnFailure decides it; 0
	// means DefaultMaxRetries (3), NoRetries means none.
	MaxRetries int
	// Backoff is the wait before the first retry; it doubles on each
	// retry up to MaxBackoff. Defaults DefaultBackoff (100ms) and
	// DefaultMaxBackoff (10s).
	Backoff, MaxBackoff time.Duration

	// OnFailure decides a record (or a batch) that failed MaxRetries+1
	// times: Skip, DeadLetter or Stop (Retry means retry forever).
	// Default: DeadLetter if DeadLetter is set, Stop otherwise. For a
	// batch: Skip skips every record of it (one warn line listing their
	// offsets); DeadLetter calls the DeadLetter hook once per record, in
	// offset order; Stop leaves the whole batch not done.
	OnFailure Decision

	// Decide, if set, is asked after every failed attempt (attempt counts
	// from 1) and overrides MaxRetries and OnFailure; returning 0 falls
	// back to them. Use it to send errors that retrying cannot cure
	// straight to DeadLetter. It runs on the record's worker. For a
	// batch it is called once per failed attempt, with the batch's first
	// record and the BatchHandler's error; its decision is the batch's.
	Decide func(rec *kgo.Record, err error, attempt int) Decision

	// DeadLetter receives records decided DeadLetter, with the last
	// error. It runs holding the record's key, so it is ordered with the
	// key's other records. A nil return marks the record done; an error
	// stops the consumer (Run returns it). For a batch decided DeadLetter
	// it is called for each of its records in offset order, each with
	// the batch's error: the records it accepted are done, and an error
	// stops the consumer with that record and the rest of the batch not
	// done.
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
//
// With a BatchHandler, Offset is the failed batch's first record (for a
// DeadLetter hook error, the record the hook refused) and Records the
// batch's size; the records of the batch from Offset on were not marked
// done.
type HandlerError struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Attempts  int
	Records   int // records of the failed call: 1 for a Handler
	Err       error
}

// Error describes the record and the failure.
func (e *HandlerError) Error() string {
	what := "record"
	if e.Records > 1 {
		what = fmt.Sprintf("batch of %d records at", e.Records)
	}
	return fmt.Sprintf("perkey/kafka: %s %s/%d@%d (key %q) failed after %d attempts: %v",
		what, e.Topic, e.Partition, e.Offset, e.Key, e.Attempts, e.Err)
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
	case c.Handler == nil && c.BatchHandler == nil:
		return c, cfgErr("no Handler nor BatchHandler")
	case c.Handler != nil && c.BatchHandler != nil:
		return c, cfgErr("both Handler and BatchHandler set; want exactly one")
	case c.MaxBatch < 0:
		return c, cfgErr("MaxBatch is negative (%d)", c.MaxBatch)
	case c.MaxBatch > 0 && c.BatchHandler == nil:
		return c, cfgErr("MaxBatch %d without a BatchHandler", c.MaxBatch)
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
	if c.BatchHandler != nil {
		set(&c.MaxBatch, DefaultMaxBatch)
	}
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
