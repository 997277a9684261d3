package kafka

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/perkey/perkey/executor"
)

// Consumer is a consumer group member that hands each record to a Handler
// on a perkey executor: records of one key (per partition) one at a time
// in offset order, different keys in parallel up to Config.Workers. It
// commits, periodically and when a partition leaves, only offsets below
// which every record is done. Create it with NewConsumer and start it with
// Run.
type Consumer struct {
	cfg     Config
	opts    []kgo.Opt
	log     *zap.Logger
	sampled *zap.Logger // fetch errors: at most 10 a second, then 1 in 1000

	started atomic.Bool

	// client is the group member, set by Run once made, and by the group
	// callbacks (which may in theory run before Run sets it).
	client atomic.Pointer[kgo.Client]

	// Set by Run before the client exists; read-only afterwards.
	exec     *executor.Executor[recordKey]
	batcher  *executor.Batcher[recordKey, queued] // with a BatchHandler
	base     context.Context                      // parent of the handlers' ctx: Run's values, not its cancellation
	stopPoll context.CancelFunc

	mu        sync.Mutex // guards parts, gen, fatal, committed
	parts     map[TopicPartition]*partition
	gen       uint64
	fatal     error // the first failure that stopped the consumer
	committed map[TopicPartition]int64

	// halted is set by a failure that stops the consumer: from then on no
	// record starts, so the failed record's successors never run.
	halted atomic.Bool

	// commitMu serialises commits with the revoke and loss of partitions:
	// a commit never carries a partition dropped meanwhile, and a
	// partition is dropped only after its last commit.
	commitMu sync.Mutex

	maxHeld                                                                atomic.Int64
	fetched, handled, batches, retried, skipped, deadLettered, alreadyDone atomic.Uint64
	commits, commitErrors, pauses, assigned, revoked, lost                 atomic.Uint64
}

// NewConsumer checks cfg and returns a Consumer. opts are extra kgo options
// (TLS, SASL, balancers, timeouts, a kgo logger ...); they come after the
// Consumer's defaults (FetchMaxWait 200ms) and before the options it
// cannot work without, which always win: SeedBrokers, ConsumerGroup,
// ConsumeTopics, DisableAutoCommit, BlockRebalanceOnPoll and the
// OnPartitions / OnOffsetsFetched callbacks. NewConsumer connects to
// nothing: the client is made by Run.
func NewConsumer(cfg Config, opts ...kgo.Opt) (*Consumer, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	for _, o := range opts {
		if o == nil {
			return nil, cfgErr("nil kgo.Opt")
		}
	}
	log := cfg.Logger.Named("kafka")
	return &Consumer{
		cfg:  cfg,
		opts: opts,
		log:  log,
		sampled: log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
			return zapcore.NewSamplerWithOptions(c, time.Second, 10, 1000)
		})),
		parts:     make(map[TopicPartition]*partition),
		committed: make(map[TopicPartition]int64),
	}, nil
}

func (c *Consumer) clientOpts() []kgo.Opt {
	opts := []kgo.Opt{kgo.FetchMaxWait(DefaultFetchMaxWait)}
	opts = append(opts, c.opts...)
	return append(opts,
		kgo.SeedBrokers(c.cfg.Brokers...),
		kgo.ConsumerGroup(c.cfg.Group),
		kgo.ConsumeTopics(c.cfg.Topics...),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(c.onAssigned),
		kgo.OnPartitionsRevoked(c.onRevoked),
		kgo.OnPartitionsLost(c.onLost),
		kgo.OnOffsetsFetched(c.onOffsetsFetched),
	)
}

// Run joins the group and consumes until ctx ends or a record's failure
// stops the consumer (see Decision). Then it stops fetching, lets the
// records already dispatched finish (at most Config.DrainTimeout, after
// which the handlers' ctx is canceled and Run waits for them to return),
// makes a final commit, leaves the group, and returns.
//
// Run returns nil after a clean stop, a *HandlerError if a record stopped
// it, or an error if the final commit failed or the client died (its
// records are then delivered again to the next member). Run may be called
// once.
func (c *Consumer) Run(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return ErrRunning
	}
	// Throughput 4: a key with a backlog gives its worker back after 4
	// records in a row when other keys wait, so no busy key holds back
	// other keys or partitions (and their commits) for long. 1 is fairest
	// but lengthens long key chains; the executor's default, 32, lets a
	// backlogged key hold a worker for 32 records. A batch counts as one
	// task of its key: with a BatchHandler the key gives its worker back
	// after every batch (up to MaxBatch records), which already amortises
	// the hand-over.
	throughput := 4
	if c.cfg.BatchHandler != nil {
		throughput = 1
	}
	eopts := []executor.Option{executor.WithWorkers(c.cfg.Workers), executor.WithLogger(c.cfg.Logger),
		executor.WithThroughput(throughput)}
	if c.cfg.Observer != nil {
		eopts = append(eopts, executor.WithObserver(c.cfg.Observer))
	}
	exec, err := executor.New[recordKey](eopts...)
	if err != nil {
		return err
	}
	c.exec = exec
	if c.cfg.BatchHandler != nil {
		b, err := executor.NewBatcher(exec, c.runBatch, executor.WithMaxBatch(c.cfg.MaxBatch))
		if err != nil {
			_ = exec.Close(context.Background())
			return err
		}
		c.batcher = b
	}
	c.base = context.WithoutCancel(ctx)
	pollCtx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	c.mu.Lock()
	c.stopPoll = stopPoll
	c.mu.Unlock()

	cl, err := kgo.NewClient(c.clientOpts()...)
	if err != nil {
		_ = exec.Close(context.Background())
		return err
	}
	c.client.Store(cl)
	c.log.Info("consumer started", zap.String("group", c.cfg.Group),
		zap.Strings("topics", c.cfg.Topics), zap.Int("workers", c.cfg.Workers))

	commitCtx, stopCommits := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { c.commitLoop(commitCtx) })

	closed := c.poll(pollCtx)

	stopCommits()
	wg.Wait()
	return c.shutdown(closed)
}

// poll fetches and dispatches until ctx ends or the client is closed, and
// reports whether the client was closed under it.
func (c *Consumer) poll(ctx context.Context) (clientClosed bool) {
	for {
		fs := c.client.Load().PollRecords(ctx, c.cfg.MaxPollRecords)
		if fs.IsClientClosed() {
			c.client.Load().AllowRebalance()
			return true
		}
		if ctx.Err() != nil {
			// Records of this poll are not dispatched; they are above
			// every watermark, so the next owner gets them.
			c.client.Load().AllowRebalance()
			return false
		}
		fs.EachError(func(topic string, p int32, err error) {
			c.sampled.Warn("fetch error", zap.String("topic", topic), zap.Int32("partition", p), zap.Error(err))
		})
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) > 0 {
				c.dispatch(TopicPartition{p.Topic, p.Partition}, p.Records)
			}
		})
		// Everything polled is now tracked: let a blocked rebalance run.
		c.client.Load().AllowRebalance()
	}
}

// dispatch tracks a partition's polled records and submits one task per
// record, in offset order, to the executor (with a BatchHandler, one
// message per record to the Batcher, which runs a key's queued records as
// one task).
func (c *Consumer) dispatch(tp TopicPartition, recs []*kgo.Record) {
	c.mu.Lock()
	p := c.parts[tp]
	c.mu.Unlock()
	if p == nil {
		c.log.Debug("records for an unassigned partition dropped", zap.String("topic", tp.Topic),
			zap.Int32("partition", tp.Partition), zap.Int("records", len(recs)))
		return
	}
	run := make([]*kgo.Record, 0, len(recs))
	var redone uint64
	p.mu.Lock()
	if p.phase != active || p.dropped {
		p.mu.Unlock()
		return
	}
	for _, r := range recs {
		if r.Offset < p.track.next {
			continue // already tracked: a fetch never rewinds an assignment
		}
		if p.committed < 0 {
			p.committed = r.Offset // where the group stood when we got it
		}
		if p.skip.has(r.Offset) {
			p.track.add(r.Offset, r.LeaderEpoch, true)
			redone++
			continue
		}
		p.track.add(r.Offset, r.LeaderEpoch, false)
		p.outstanding++
		run = append(run, r)
	}
	if len(p.skip.ranges) > 0 && p.track.next > p.skip.last() {
		p.skip = doneSet{}
	}
	held := p.track.held
	if !p.paused && (held >= c.cfg.MaxHeld || p.track.len() >= 16*c.cfg.MaxHeld) {
		p.paused = true
		c.client.Load().PauseFetchPartitions(map[string][]int32{tp.Topic: {tp.Partition}})
		c.pauses.Add(1)
	}
	p.mu.Unlock()

	for m := c.maxHeld.Load(); int64(held) > m && !c.maxHeld.CompareAndSwap(m, int64(held)); m = c.maxHeld.Load() {
	}
	c.fetched.Add(uint64(len(run)))
	c.alreadyDone.Add(redone)
	for i, r := range run {
		key := recordKey{topic: tp.Topic, partition: tp.Partition, nilKey: r.Key == nil, key: string(r.Key)}
		var err error
		if c.batcher != nil {
			_, err = c.batcher.Submit(context.Background(), key, queued{p, r})
		} else {
			one := run[i : i+1 : i+1] // r as a batch of one, without an allocation
			_, err = c.exec.Submit(context.Background(), key, func(context.Context) error {
				c.runRecords(p, one)
				return nil
			})
		}
		if err != nil {
			// The executor refuses only once closed, after Run is done
			// with it: this is a bug, not a condition to ride out.
			p.mu.Lock()
			p.tasksDone(1)
			p.mu.Unlock()
			c.fail(fmt.Errorf("perkey/kafka: executor refused record %s/%d@%d: %w", tp.Topic, tp.Partition, r.Offset, err))
		}
	}
}

// queued is a record submitted to the Batcher, with its partition's
// assignment.
type queued struct {
	p *partition
	r *kgo.Record
}

// runBatch is the Batcher's BatchFunc: msgs are the queued records of one
// key, in offset order, taken as one task of the key. They belong to one
// assignment of their partition (an assignment ends only once each of its
// records' tasks has run, and a batch holds records that had not), but
// runBatch would run each assignment's records apart if not.
func (c *Consumer) runBatch(_ context.Context, _ recordKey, msgs []queued) error {
	recs := make([]*kgo.Record, len(msgs))
	for i, m := range msgs {
		recs[i] = m.r
	}
	i := 0
	defer func() {
		// Reached with i < len(msgs) only if the handler called
		// runtime.Goexit in an earlier assignment's records: leave the
		// rest to the next owner rather than lose their tasks.
		for ; i < len(msgs); i++ {
			p := msgs[i].p
			p.mu.Lock()
			p.tasksDone(1)
			p.mu.Unlock()
		}
	}()
	for i < len(msgs) {
		j := i + 1
		for j < len(msgs) && msgs[j].p == msgs[i].p {
			j++
		}
		p, rs := msgs[i].p, recs[i:j:j]
		i = j // past rs before it runs: a Goexit in it finishes rs itself (see call)
		c.runRecords(p, rs)
	}
	return nil
}

// runRecords is the task of rs, consecutive records of one key in offset
// order: one record for a Handler, a batch for a BatchHandler. It runs
// holding their key.
func (c *Consumer) runRecords(p *partition, rs []*kgo.Record) {
	p.mu.Lock()
	if p.phase == stopping || p.dropped || c.halted.Load() {
		// Left unfinished for the next owner (or the restart). Since
		// this task holds the key, the key's later records find the same
		// state and are left too: nothing runs out of order.
		p.tasksDone(len(rs))
		p.mu.Unlock()
		return
	}
	p.running++
	p.mu.Unlock()
	c.finish(p, rs, c.handleFrom(p, rs, 1, c.call(p, rs, 1)))
}

// finish ends the task of rs: its first done records are done (handled,
// skipped or dead-lettered), the rest are left for the partition's next
// owner.
func (c *Consumer) finish(p *partition, rs []*kgo.Record, done int) {
	p.mu.Lock()
	p.running--
	if !p.dropped {
		marked := false
		for _, r := range rs[:done] {
			marked = p.track.done(r.Offset) || marked
		}
		if marked && p.paused && p.track.held <= c.cfg.MaxHeld/2 && p.track.len() < 8*c.cfg.MaxHeld {
			p.paused = false
			c.client.Load().ResumeFetchPartitions(map[string][]int32{p.tp.Topic: {p.tp.Partition}})
		}
	}
	p.tasksDone(len(rs))
	p.mu.Unlock()
}

// handleFrom goes on with rs after its attempt ended with err: a success,
// or a failure that goes through retries and the failure decision, for rs
// as a whole. It returns how many of rs, from the first, are done
// (handled, skipped or dead-lettered): all or none, except when the
// dead-letter hook refuses one of them.
func (c *Consumer) handleFrom(p *partition, rs []*kgo.Record, attempt int, err error) (done int) {
	ctx := p.ctx
	for ; ; attempt, err = attempt+1, c.call(p, rs, attempt+1) {
		if err == nil {
			c.handled.Add(uint64(len(rs)))
			if c.batcher != nil {
				c.batches.Add(1)
			}
			return len(rs)
		}
		if ctx.Err() != nil {
			// The partition is going away; its next owner redoes rs.
			c.log.Debug("handler canceled", recsFields(rs, zap.Error(err))...)
			return 0
		}
		d := c.decide(rs[0], err, attempt)
		switch d {
		case Retry:
			c.retried.Add(1)
			c.log.Debug("handler failed, retrying", recsFields(rs, zap.Int("attempt", attempt), zap.Error(err))...)
			if !sleep(ctx, c.backoff(attempt)) {
				return 0
			}
		case Skip:
			c.skipped.Add(uint64(len(rs)))
			msg := "record skipped after handler failure"
			if c.batcher != nil {
				msg = "batch skipped after handler failure"
			}
			c.log.Warn(msg, recsFields(rs, zap.Int("attempts", attempt), zap.Error(err))...)
			return len(rs)
		case DeadLetter:
			for i, r := range rs {
				derr := c.deadLetter(ctx, r, err)
				if derr != nil {
					if ctx.Err() == nil {
						c.fail(newHandlerError(r, len(rs), attempt,
							fmt.Errorf("dead-letter hook: %w (handler error: %v)", derr, err)))
					}
					return i
				}
				c.deadLettered.Add(1)
				c.log.Info("record dead-lettered", recFields(r, zap.Int("attempts", attempt), zap.Error(err))...)
			}
			return len(rs)
		default: // Stop
			c.fail(newHandlerError(rs[0], len(rs), attempt, err))
			return 0
		}
	}
}

// call runs the handler on rs for attempt (a Handler on rs[0], or the
// BatchHandler on rs), turning a panic into an *executor.PanicError.
//
// A handler that calls runtime.Goexit (t.FailNow in a test) neither returns
// nor panics, and its goroutine is exiting: call never returns. Its deferred
// check then carries on with rs right there, as for any failure with
// executor.ErrGoexit (retries, the failure decision), and finishes the
// task of rs, all while the task still holds their key; only then does the
// goroutine go on exiting, and the executor hands the key on.
func (c *Consumer) call(p *partition, rs []*kgo.Record, attempt int) (err error) {
	returned := false
	defer func() {
		if returned {
			return
		}
		if v := recover(); v != nil {
			err = &executor.PanicError{Value: v, Stack: debug.Stack()}
			c.log.Error("handler panicked", recsFields(rs, zap.Any("panic", v))...)
			return
		}
		c.log.Error("handler called runtime.Goexit", recsFields(rs, zap.Int("attempt", attempt))...)
		c.finish(p, rs, c.handleFrom(p, rs, attempt, executor.ErrGoexit))
	}()
	if c.cfg.BatchHandler != nil {
		err = c.cfg.BatchHandler(p.ctx, rs)
	} else {
		err = c.cfg.Handler(p.ctx, rs[0])
	}
	returned = true
	return err
}

func (c *Consumer) decide(r *kgo.Record, err error, attempt int) (d Decision) {
	if c.cfg.Decide != nil {
		func() {
			defer func() {
				if v := recover(); v != nil {
					c.log.Error("Decide panicked; stopping", recFields(r, zap.Any("panic", v))...)
					d = Stop
				}
			}()
			d = c.cfg.Decide(r, err, attempt)
		}()
		if d >= Retry && d <= Stop {
			return d
		}
	}
	if attempt <= c.cfg.MaxRetries {
		return Retry
	}
	return c.cfg.OnFailure
}

func (c *Consumer) deadLetter(ctx context.Context, r *kgo.Record, herr error) (err error) {
	if c.cfg.DeadLetter == nil {
		return errors.New("no DeadLetter hook configured")
	}
	defer func() {
		if v := recover(); v != nil {
			err = &executor.PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return c.cfg.DeadLetter(ctx, r, herr)
}

// backoff is the wait after the attempt-th failure.
func (c *Consumer) backoff(attempt int) time.Duration {
	d := c.cfg.Backoff
	for i := 1; i < attempt && d < c.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, c.cfg.MaxBackoff)
}

// sleep waits d or until ctx ends, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// fail stops the consumer because of err. It is called on the failing
// record's task, before that task returns, so halted is set before the
// key's next record could start.
func (c *Consumer) fail(err error) {
	c.halted.Store(true)
	c.mu.Lock()
	first := c.fatal == nil
	if first {
		c.fatal = err
	}
	stop := c.stopPoll
	c.mu.Unlock()
	if first {
		c.log.Error("stopping the consumer", zap.Error(err))
	}
	if stop != nil {
		stop()
	}
}

// newHandlerError reports the failure of r, in a call of records records.
func newHandlerError(r *kgo.Record, records, attempts int, err error) *HandlerError {
	return &HandlerError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
		Key: r.Key, Attempts: attempts, Records: records, Err: err}
}

func recFields(r *kgo.Record, more ...zap.Field) []zap.Field {
	return append([]zap.Field{zap.String("topic", r.Topic), zap.Int32("partition", r.Partition),
		zap.Int64("offset", r.Offset), zap.ByteString("key", r.Key)}, more...)
}

// recsFields describes the records of one call: the first one's fields,
// and for a batch of more than one its size and offsets.
func recsFields(rs []*kgo.Record, more ...zap.Field) []zap.Field {
	if len(rs) > 1 {
		offs := make([]int64, len(rs))
		for i, r := range rs {
			offs[i] = r.Offset
		}
		more = append([]zap.Field{zap.Int("records", len(rs)), zap.Int64s("offsets", offs)}, more...)
	}
	return recFields(rs[0], more...)
}

// shutdown ends Run: it winds every partition down, commits, leaves the group
// and closes the executor.
func (c *Consumer) shutdown(clientClosed bool) error {
	parts := c.snapshot()
	if clientClosed {
		// Nothing can be committed any more: leave every record that
		// has not started to the next owner rather than redo more.
		c.stop(parts)
		c.await(parts, "client closed")
	} else {
		c.windDown(parts, c.cfg.DrainTimeout, "shutdown", true)
	}

	c.commitMu.Lock()
	var cerr error
	if !clientClosed {
		backoff := 100 * time.Millisecond
		for attempt := 1; ; attempt++ {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			cerr = c.commit(cctx, parts)
			cancel()
			if cerr == nil || errors.Is(cerr, kgo.ErrClientClosed) || attempt == 3 {
				break
			}
			c.log.Warn("final commit failed, retrying", zap.Error(cerr))
			time.Sleep(backoff)
			backoff *= 2
		}
	}
	for _, p := range parts {
		c.drop(p)
	}
	c.commitMu.Unlock()

	// Leaving the group revokes everything; onRevoked finds it dropped.
	c.client.Load().CloseAllowingRebalance()
	_ = c.exec.Close(context.Background()) // every task is done or left: returns at once

	c.mu.Lock()
	fatal := c.fatal
	c.mu.Unlock()
	c.log.Info("consumer stopped", zap.Uint64("handled", c.handled.Load()), zap.Error(fatal))
	switch {
	case fatal != nil:
		return fatal
	case clientClosed:
		return fmt.Errorf("perkey/kafka: no final commit: %w", kgo.ErrClientClosed)
	case cerr != nil:
		return fmt.Errorf("perkey/kafka: final commit: %w", cerr)
	}
	return nil
}

// snapshot lists the partitions assigned now.
func (c *Consumer) snapshot() []*partition {
	c.mu.Lock()
	defer c.mu.Unlock()
	parts := make([]*partition, 0, len(c.parts))
	for _, p := range c.parts {
		parts = append(parts, p)
	}
	return parts
}

// take lists the assigned partitions among tps.
func (c *Consumer) take(tps map[string][]int32) []*partition {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []*partition
	for t, ps := range tps {
		for _, n := range ps {
			if p := c.parts[TopicPartition{t, n}]; p != nil {
				parts = append(parts, p)
			}
		}
	}
	return parts
}

// windDown winds parts down. With drain, the records already dispatched may
// all run; without, only the handlers running now finish and the records
// not started are left to the next owner. Either way, once grace has passed
// the records not started are left, the running handlers' ctx is canceled,
// and windDown waits for them to return. Once it returns no task of parts
// runs a handler, so the partitions can go to another member without a key
// ever running on two.
func (c *Consumer) windDown(parts []*partition, grace time.Duration, why string, drain bool) {
	for _, p := range parts {
		p.mu.Lock()
		switch {
		case p.phase != active:
		case drain:
			p.phase = draining
		default:
			p.phase = stopping
		}
		p.mu.Unlock()
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	for i := 0; i < len(parts); i++ {
		p := parts[i]
		p.mu.Lock()
		idle := p.idleCh()
		p.mu.Unlock()
		if idle == nil {
			continue
		}
		select {
		case <-idle:
		case <-timer.C:
			c.log.Warn("grace period over, canceling the partitions' handlers", zap.String("why", why),
				zap.Duration("grace", grace))
			c.stop(parts[i:])
			c.await(parts[i:], why)
			return
		}
	}
}

// stop leaves parts' records that have not started and cancels the running
// handlers' ctx.
func (c *Consumer) stop(parts []*partition) {
	for _, p := range parts {
		p.mu.Lock()
		p.phase = stopping
		p.mu.Unlock()
		p.cancel()
	}
}

// await waits for parts' outstanding tasks, however long: a handler that
// ignores its ctx holds its partition (and the rebalance) until it returns.
func (c *Consumer) await(parts []*partition, why string) {
	for _, p := range parts {
		for {
			p.mu.Lock()
			idle, running := p.idleCh(), p.running
			p.mu.Unlock()
			if idle == nil {
				break
			}
			select {
			case <-idle:
			case <-time.After(5 * time.Second):
				c.log.Error("handlers still running after their ctx was canceled", zap.String("why", why),
					zap.String("topic", p.tp.Topic), zap.Int32("partition", p.tp.Partition),
					zap.Int("running", running))
			}
		}
	}
}

// drop releases a partition's state. Called with commitMu held, after the
// partition's last commit.
func (c *Consumer) drop(p *partition) {
	p.mu.Lock()
	already := p.dropped
	p.dropped = true
	paused := p.paused
	p.paused = false
	p.mu.Unlock()
	p.cancel()
	if already {
		return
	}
	if paused {
		// Paused partitions stay paused in the client across
		// assignments: unpause, or a later assignment would never fetch.
		c.client.Load().ResumeFetchPartitions(map[string][]int32{p.tp.Topic: {p.tp.Partition}})
	}
	c.mu.Lock()
	if c.parts[p.tp] == p {
		delete(c.parts, p.tp)
	}
	c.mu.Unlock()
}
