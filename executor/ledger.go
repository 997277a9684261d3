package executor

import (
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/internal/mailbox"
)

// The ledger: every count, what Stats read and what Close's drain waits for.
// Starts and ends are counted where fn runs (invoke, runLean, a Batcher's
// run). An accepted task holds exactly one of these until it ends:
//   - a reservation in pending: every job, Batcher message and, with a
//     global cap (WithMaxPending), every plain task; the global cap and its
//     waiting room count these (reserveTurn, room.go);
//   - without a global cap, a queued plain task's place in its router
//     shard's counts (submitted - settled), so that no word every task
//     writes moves between the cores (see admitPlain, shardCounts);
//   - an uncontended Do without a global cap: its slot (leanSlot), which
//     the runner counts (Runner.Active).
//
// Close's drain (drainIfDone) waits for all three to reach 0 once the
// executor is sealed. Each holder writes its count, then reads the others',
// so the last one to let go sees them all at 0. Stats derive Queued and
// Running from the monotonic counts, so they add up by construction.
type ledger struct {
	// Each on its own cache line: pending and submitted, which submitters
	// write, and counts, which workers do. Plain tasks count in shards.
	pending   paddedInt64 // reservations held: WithMaxPending, and what Close drains
	submitted paddedUint64
	counts    taskCounts

	shardsMu sync.Mutex     // guards shards
	shards   []*shardCounts // one per router shard or stripe that queued a plain task or ran a Do at once
	// ranAtOnce counts tasks submitted and started in one step, by a Do that
	// runs fn at once (runLean): Stats adds it to both.
	ranAtOnce paddedUint64

	rejected, canceled, panicked, slow atomic.Uint64

	sealed    atomic.Bool   // Close has seen every router shard's lock closed (see seal)
	drained   chan struct{} // closed once sealed and nothing is held (drainIfDone)
	drainOnce sync.Once
}

// Stats is a snapshot of an executor's counters. At any quiet moment
// Submitted == Completed + Canceled + Queued + Running.
type Stats struct {
	ActiveKeys int    // keys that have a live mailbox now
	Queued     int    // tasks accepted and not started
	Running    int    // tasks executing now
	Submitted  uint64 // tasks accepted since New
	Completed  uint64 // tasks whose fn returned (with or without error)
	Rejected   uint64 // submissions refused by backpressure
	Canceled   uint64 // accepted tasks that never ran (ctx ended, or Close gave up)
	Panicked   uint64 // tasks whose fn panicked (also counted in Completed)
	Slow       uint64 // holds reported slow (WithSlowTaskWarning)
}

// Stats returns a snapshot of the executor's counters. It sums each router
// shard's plain-task counts: a few loads per shard (16 shards per P).
func (e *Executor[K]) Stats() Stats {
	if e.unmade() {
		return Stats{}
	}
	// Load in the order the counters move (submitted, then started or
	// canceled, then completed), latest first, so no derived gauge is negative.
	e.shardsMu.Lock()
	completed := e.counts.completed.Load()
	for _, n := range e.shards {
		completed += n.completed.Load()
	}
	atOnce := e.ranAtOnce.Load()
	started := e.counts.started.Load() + atOnce
	for _, n := range e.shards {
		started += n.started.Load()
	}
	canceled := e.canceled.Load()
	submitted := e.submitted.Load() + atOnce
	for _, n := range e.shards {
		submitted += n.submitted.Load()
	}
	e.shardsMu.Unlock()
	return Stats{
		ActiveKeys: e.router.Live(),
		Queued:     int(submitted - started - canceled),
		Running:    int(started - completed),
		Submitted:  submitted,
		Completed:  completed,
		Rejected:   e.rejected.Load(),
		Canceled:   canceled,
		Panicked:   e.panicked.Load(),
		Slow:       e.slow.Load(),
	}
}

// unreserve gives back a reservation: to the first submission parked for
// global room if there is one, else to Close's drain count.
func (e *Executor[K]) unreserve() {
	if e.pending.Add(-1) == 0 {
		e.drainIfDone()
	}
	if e.room.busy() {
		e.room.hand(e.takeRoom)
	}
}

// settled gives back what settled tasks on m held (turns' reservations,
// plain tasks' places in m's shard's counts: admitPlain) to Close's drain.
// Called at a batch's end (RunnerOptions.Ran) and by endTaken, only without
// a global cap (batchRelease), when nobody waits for room.
func (e *Executor[K]) settled(m *mailbox.Mailbox, turns, plains int) {
	if turns > 0 {
		e.pending.Add(-int64(turns))
	}
	if plains > 0 {
		plainCoreIn[K](m).counts.settled.Add(uint64(plains))
	}
	e.drainIfDone()
}

// drainIfDone lets Close return once sealed (see seal) and no task holds
// anything (see "The ledger"): called as the last reservation, a batch's
// (settled) or a slot (RunnerOptions.Released) is given back, and by Close.
func (e *Executor[K]) drainIfDone() {
	if e.sealed.Load() && e.pending.Load() == 0 && e.plainHeld() == 0 && e.runner.Active() == 0 {
		e.drain()
	}
}

func (e *Executor[K]) drain() { e.drainOnce.Do(func() { close(e.drained) }) }

// plainHeld is how many queued plain tasks hold a place in their shard's
// counts (see admitPlain); none with a global cap. Read once sealed, when
// no shard's submitted moves and settled only grows towards it.
func (e *Executor[K]) plainHeld() uint64 {
	if !e.batchRelease {
		return 0
	}
	e.shardsMu.Lock()
	defer e.shardsMu.Unlock()
	var n uint64
	for _, c := range e.shards {
		settled := c.settled.Load() // first: it only grows towards submitted
		n += c.submitted.Load() - settled
	}
	return n
}

// seal, once closed is set, waits for every router shard's lock to be let
// go before Close's drain counts: a plain task accepted having read closed
// false is counted by then (see admitPlain), and any later one reads it true.
func (e *Executor[K]) seal() {
	e.router.Barrier()
	e.sealed.Store(true)
}

// reject counts and logs a refusal by backpressure, tells the Observer of
// it or of one by Close (ErrClosed, not in Stats.Rejected), and returns err.
func (e *Executor[K]) reject(err error) error {
	if pe, ok := err.(*policyError); ok {
		e.rejected.Add(1) // refused by backpressure, if not by a verdict
		if e.obs != nil {
			e.obs.TaskRejected(reasonOf(pe.scope))
		}
		return err
	}
	be, ok := err.(*backpressure.BusyError)
	if !ok {
		if err == ErrClosed && e.obs != nil {
			e.obs.TaskRejected(ReasonClosed)
		}
		return err
	}
	e.rejected.Add(1)
	if e.obs != nil {
		e.obs.TaskRejected(reasonOf(be.Scope))
	}
	if ce := e.sampled.Check(zap.InfoLevel, "task rejected"); ce != nil {
		ce.Write(zap.Any("key", be.Key), zap.Stringer("cap", be.Scope),
			zap.Int("pending", be.Pending), zap.Int("limit", be.Limit))
	}
	return err
}

// countAccepted counts an accepted task, its (last) mailbox locked, before
// it can start; a multi-key job was stamped before its first enqueue.
func (e *Executor[K]) countAccepted(j *job[K]) {
	e.submitted.Add(1)
	if j.multi == nil {
		e.stamp(j)
	}
}

// stamp records when j entered the queue, if anyone reads it; it must
// happen before j is linked into any mailbox, whose lock then publishes it.
func (e *Executor[K]) stamp(j *job[K]) {
	if e.ages {
		j.turn.SetStamp(monotime())
	}
}

// observeAccepted tells the Observer of an acceptance, unlocked, with nothing
// left to do for the task: a runtime.Goexit there ends only the submitter.
func (e *Executor[K]) observeAccepted() {
	if e.obs != nil {
		e.obs.TaskAccepted()
	}
}

// tellAccepted tells the Observer (there is one) of an acceptance; if
// TaskAccepted calls runtime.Goexit, exited gives back what the caller holds.
func (e *Executor[K]) tellAccepted(exited func()) {
	told := false
	defer func() {
		if !told {
			exited()
		}
	}()
	e.obs.TaskAccepted()
	told = true
}

// observeLent is observeAccepted for a nested call let in from the waiting
// room with its task's slot lent (park): a Goexit in TaskAccepted takes the
// slot back, so the drive loop never hands on a slot it does not hold.
func (e *Executor[K]) observeLent(outer *taskCtx[K], lent bool) {
	if e.obs != nil {
		e.tellAccepted(func() { outer.unlend(e.runner, lent) })
	}
}

// abandon ends an accepted task that will never run (already taken out of
// Queued by the caller); its result has a reader (see job.ran).
func (e *Executor[K]) abandon(j *job[K], err error) {
	j.err = err
	e.abandoned(j.ctx, j.multi, false, err)
}

// abandoned accounts for an accepted task (keys multi if several) that will
// never run because of err, before user code hears of it; if unread, err goes
// to the error handler, deferred so that a Goexit in TaskCanceled cannot stop it.
func (e *Executor[K]) abandoned(c *taskCtx[K], multi *[]K, unread bool, err error) {
	e.canceled.Add(1)
	c.end()
	if unread {
		defer e.unread(keyField(c, multi), keyAny(c, multi), err, false)
	} else if ce := e.sampled.Check(zap.InfoLevel, "task canceled"); ce != nil {
		defer ce.Write(keyField(c, multi), zap.Error(err))
	}
	if e.obs != nil {
		e.obs.TaskCanceled()
	}
}

type paddedInt64 struct {
	atomic.Int64
	_ [56]byte
}

type paddedUint64 struct {
	atomic.Uint64
	_ [56]byte
}

// taskCounts are what the drive loops count, on a cache line of their own:
// started, completed and, for a shard's plain tasks, settled (shardCounts).
type taskCounts struct {
	started, completed, settled atomic.Uint64
	_                           [40]byte
}

// shardCounts are a router shard's (or stripe's) plain-task counts (see
// shardLocal), on lines apart by writer: submitted, the count beside the
// shard's lock (Mailbox.Count), by submitters holding it (queuePlain); the
// rest by the drive loops, settled (ended, place given back) a batch at a
// time without a global cap (batchRelease), where submitted - settled is
// what the shard's tasks hold for Close's drain (see admitPlain).
type shardCounts struct {
	submitted *atomic.Uint64
	taskCounts
}
