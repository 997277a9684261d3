package kafka_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/perkey/perkey/kafka"
)

// checkCommittedToEnd fails unless the group committed every partition's
// end offset.
func checkCommittedToEnd(t *testing.T, e *env, p produced) {
	t.Helper()
	got := e.committed()
	for part, end := range p.ends {
		if got[part] != end {
			t.Errorf("partition %d: committed %d; want the end offset %d", part, got[part], end)
		}
	}
}

// TestCleanRun: every record handled exactly once, in order per key (nil
// keys in order per partition), committed to the end offsets; in batch
// mode, batches of one key in offset order, of at most MaxBatch records.
func TestCleanRun(t *testing.T) { forModes(t, testCleanRun) }

func testCleanRun(t *testing.T, m mode) {
	e := newEnv(t, 4)
	p := e.produce(size(3000, 800), 60, 25, 1)
	l := newLedger(t, p)
	cfg := e.config()
	m.use(&cfg, l, "a", sleeper(300*time.Microsecond))
	r := runToEnd(t, e, l, cfg)
	s := r.c.Stats()
	if s.Handled != uint64(p.total) || s.Fetched != uint64(p.total) {
		t.Errorf("Stats Handled %d, Fetched %d; want %d each", s.Handled, s.Fetched, p.total)
	}
	if s.InFlight != 0 || s.Running != 0 || s.Partitions != 0 {
		t.Errorf("Stats after Run: InFlight %d, Running %d, Partitions %d; want 0", s.InFlight, s.Running, s.Partitions)
	}
	if s.Commits == 0 || len(s.Committed) != len(p.ends) {
		t.Errorf("Stats Commits %d, Committed %v; want commits for %d partitions", s.Commits, s.Committed, len(p.ends))
	}
	calls, most := l.batches()
	switch {
	case m.batch == 0 && s.Batches != 0:
		t.Errorf("Stats.Batches %d with a Handler; want 0", s.Batches)
	case m.batch > 0 && s.Batches != uint64(calls):
		t.Errorf("Stats.Batches %d; want the %d calls made", s.Batches, calls)
	case m.batch > 0 && most < 2:
		t.Errorf("no batch held more than one record; want some (the test lost its point)")
	}
	t.Logf("%d records in %d calls, the largest of %d", p.total, calls, most)
}

// TestCrashRestart: the client dies mid-run without a final commit; a new
// member handles everything left. Records are handled twice only at or
// above the committed offset, and never one the offset map marked done.
//
// In batch mode, the batches running at the crash are delivered again
// whole, and they too repeat only at or above the committed offset.
func TestCrashRestart(t *testing.T) { forModes(t, testCrashRestart) }

func testCrashRestart(t *testing.T, m mode) {
	e := newEnv(t, 4)
	p := e.produce(size(3000, 900), 60, 0, 2)
	l := newLedger(t, p)
	crashCtx, crash := context.WithCancel(context.Background())
	defer crash()
	cfg := e.config()
	m.use(&cfg, l, "a", sleeper(2*time.Millisecond))
	cfg.Workers = 8
	r1 := start(t, cfg, append(e.groupOpts(), kgo.WithContext(crashCtx))...)
	waitFor(t, 60*time.Second, "a third handled", func() bool { return l.doneCount() >= p.total/3 })
	crash()
	if err := r1.wait(t); err == nil {
		t.Errorf("Run after the client died: nil; want an error")
	}
	commits := e.commits()
	before := l.doneCount()
	if before == p.total {
		t.Fatalf("everything was handled before the crash; the test needs more records")
	}

	cfg = e.config()
	m.use(&cfg, l, "b", sleeper(0))
	r2 := start(t, cfg, e.groupOpts()...)
	waitFor(t, 60*time.Second, "every record handled", func() bool { return l.doneCount() == p.total })
	if err := r2.stop(t); err != nil {
		t.Fatalf("second Run: %v; want nil", err)
	}
	dups := l.check()
	for _, d := range dups {
		c, ok := commits[d.partition]
		switch {
		case ok && d.offset < c.At:
			t.Errorf("record %d@%d handled twice though below the committed offset %d", d.partition, d.offset, c.At)
		case ok && kafka.MetaCovers(c.Metadata, c.At, d.offset):
			t.Errorf("record %d@%d handled twice though the offset map marked it done", d.partition, d.offset)
		}
	}
	t.Logf("handled %d before the crash; %d handled twice after the restart (skipped by the offset map: %d)",
		before, len(dups), r2.c.Stats().AlreadyDone)
	checkCommittedToEnd(t, e, p)
}

// TestGracefulRestart: a stop mid-run drains and commits; the next member
// handles nothing twice.
func TestGracefulRestart(t *testing.T) { forModes(t, testGracefulRestart) }

func testGracefulRestart(t *testing.T, m mode) {
	e := newEnv(t, 4)
	p := e.produce(size(3000, 900), 60, 30, 3)
	l := newLedger(t, p)
	cfg := e.config()
	m.use(&cfg, l, "a", sleeper(2*time.Millisecond))
	cfg.Workers = 8
	r1 := start(t, cfg, e.groupOpts()...)
	waitFor(t, 60*time.Second, "a third handled", func() bool { return l.doneCount() >= p.total/3 })
	if err := r1.stop(t); err != nil {
		t.Fatalf("first Run: %v; want nil", err)
	}
	if l.doneCount() == p.total {
		t.Fatalf("everything was handled before the stop; the test needs more records")
	}
	cfg = e.config()
	m.use(&cfg, l, "b", sleeper(0))
	r2 := start(t, cfg, e.groupOpts()...)
	waitFor(t, 60*time.Second, "every record handled", func() bool { return l.doneCount() == p.total })
	if err := r2.stop(t); err != nil {
		t.Fatalf("second Run: %v; want nil", err)
	}
	if dups := l.check(); len(dups) > 0 {
		// A member cut off (its session expired: a starved machine) or a
		// failed revoke commit repeats records by design; say which.
		s1, s2 := r1.c.Stats(), r2.c.Stats()
		t.Errorf("%d records handled twice, first %v; want none (first member: lost %d, revoked %d, commit errors %d; second: lost %d)",
			len(dups), dups[0], s1.Lost, s1.Revoked, s1.CommitErrors, s2.Lost)
	}
	checkCommittedToEnd(t, e, p)
}

// TestMemberJoinsAndLeaves: a second member joins mid-run and leaves
// again. Nothing is lost or handled twice, every key keeps its order
// across members, and no key is ever inside two handlers (in batch mode,
// two batches) at once.
func TestMemberJoinsAndLeaves(t *testing.T) { forModes(t, testMemberJoinsAndLeaves) }

func testMemberJoinsAndLeaves(t *testing.T, m mode) {
	e := newEnv(t, 6)
	p := e.produce(size(6000, 3000), 120, 50, 4)
	l := newLedger(t, p)
	cfg := e.config()
	m.use(&cfg, l, "a", sleeper(4*time.Millisecond))
	cfg.Workers = 4
	a := start(t, cfg, e.groupOpts()...)
	waitFor(t, 60*time.Second, "15% handled", func() bool { return l.doneCount() >= p.total*15/100 })

	m.use(&cfg, l, "b", sleeper(4*time.Millisecond))
	b := start(t, cfg, e.groupOpts()...)
	waitFor(t, 60*time.Second, "b handling", func() bool { return b.c.Stats().Handled >= 100 })
	if err := b.stop(t); err != nil {
		t.Fatalf("b's Run: %v; want nil", err)
	}
	if l.doneCount() == p.total {
		t.Fatalf("everything was handled before b left; the test needs more records")
	}
	waitFor(t, 60*time.Second, "every record handled", func() bool { return l.doneCount() == p.total })
	if err := a.stop(t); err != nil {
		t.Fatalf("a's Run: %v; want nil", err)
	}
	if dups := l.check(); len(dups) > 0 {
		t.Errorf("%d records handled twice, first %v; want none (revokes commit before handing over)", len(dups), dups[0])
	}
	checkCommittedToEnd(t, e, p)
	sa, sb := a.c.Stats(), b.c.Stats()
	if sa.Revoked == 0 || sb.Assigned == 0 {
		t.Errorf("a revoked %d partitions, b was assigned %d; want both > 0", sa.Revoked, sb.Assigned)
	}
	t.Logf("a handled %d (revoked %d, assigned %d), b handled %d; skipped by the offset map: a %d, b %d",
		sa.Handled, sa.Revoked, sa.Assigned, sb.Handled, sa.AlreadyDone, sb.AlreadyDone)
}

// TestKeyNeverOnTwoMembers: handlers that take 400 ms (longer than a
// hand-over takes) and ignore their
// ctx, so that a partition handed over without waiting for them would have
// the next owner start a key while the previous owner still runs it.
// Revocation waits, so the ledger never sees a key inside two handlers.
// In batch mode each call (a batch) takes the 400 ms, and the keys have
// MaxBatch times as many records, so that a revoke finds batches running
// and records queued behind them.
func TestKeyNeverOnTwoMembers(t *testing.T) { forModes(t, testKeyNeverOnTwoMembers) }

func testKeyNeverOnTwoMembers(t *testing.T, m mode) {
	e := newEnv(t, 4)
	p := e.produce(120*max(m.batch, 1), 40, 0, 13)
	l := newLedger(t, p)
	slow := func(context.Context, []*kgo.Record) error {
		time.Sleep(400 * time.Millisecond)
		return nil
	}
	cfg := e.config()
	m.use(&cfg, l, "a", slow)
	cfg.Workers = 64 // more than the keys: every partition has handlers running when b joins
	a := start(t, cfg, e.groupOpts()...)
	waitFor(t, 60*time.Second, "a handling", func() bool { return l.doneCount() >= 16 })
	m.use(&cfg, l, "b", slow)
	b := start(t, cfg, e.groupOpts()...)
	waitFor(t, 60*time.Second, "b handling", func() bool { return b.c.Stats().Handled >= 1 })
	if err := b.stop(t); err != nil {
		t.Fatalf("b's Run: %v; want nil", err)
	}
	waitFor(t, 60*time.Second, "every record handled", func() bool { return l.doneCount() == p.total })
	if err := a.stop(t); err != nil {
		t.Fatalf("a's Run: %v; want nil", err)
	}
	if dups := l.check(); len(dups) > 0 {
		t.Errorf("%d records handled twice; want none", len(dups))
	}
	checkCommittedToEnd(t, e, p)
}

// TestRevokeGraceExpires: handlers slower than RevokeTimeout. On each
// revoke and stop the running handlers are canceled and waited for before
// the partition goes, so a key is still never inside two handlers, and the
// canceled records are handled by the next owner: nothing is lost. In
// batch mode (15 ms per record of a call) a canceled batch goes to the
// next owner whole.
func TestRevokeGraceExpires(t *testing.T) { forModes(t, testRevokeGraceExpires) }

func testRevokeGraceExpires(t *testing.T, m mode) {
	e := newEnv(t, 4)
	p := e.produce(size(800, 400), 40, 0, 11)
	l := newLedger(t, p)
	slow := func(ctx context.Context, recs []*kgo.Record) error {
		select {
		case <-time.After(15 * time.Millisecond * time.Duration(len(recs))):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	cfg := e.config()
	m.use(&cfg, l, "a", slow)
	cfg.Workers = 8
	cfg.RevokeTimeout = 5 * time.Millisecond
	cfg.DrainTimeout = 5 * time.Millisecond
	core, logs := observer.New(zap.WarnLevel)
	cfg.Logger = zap.New(core)
	a := start(t, cfg, e.groupOpts()...)
	waitFor(t, 60*time.Second, "10% handled", func() bool { return l.doneCount() >= p.total/10 })
	m.use(&cfg, l, "b", slow)
	b := start(t, cfg, e.groupOpts()...)
	waitFor(t, 60*time.Second, "b handling", func() bool { return b.c.Stats().Handled >= 20 })
	if err := b.stop(t); err != nil {
		t.Fatalf("b's Run: %v; want nil", err)
	}
	waitFor(t, 60*time.Second, "every record handled", func() bool { return l.doneCount() == p.total })
	if err := a.stop(t); err != nil {
		t.Fatalf("a's Run: %v; want nil", err)
	}
	dups := l.check()
	checkCommittedToEnd(t, e, p)
	if n := logs.FilterMessage("grace period over, canceling the partitions' handlers").Len(); n == 0 {
		t.Errorf("no grace period expired; want at least one (the test lost its point)")
	}
	t.Logf("a revoked %d partitions; %d records handled twice", a.c.Stats().Revoked, len(dups))
}

// TestFaults: commit errors, fetch connections dropped, and the member
// kicked out (UNKNOWN_MEMBER_ID, its partitions lost): nothing is lost,
// order is kept, and everything ends up committed.
func TestFaults(t *testing.T) { forModes(t, testFaults) }

func testFaults(t *testing.T, m mode) {
	e := newEnv(t, 4)
	if e.fake == nil {
		t.Skip("fault injection needs the in-process kfake cluster")
	}
	p := e.produce(size(3000, 1000), 60, 0, 5)
	l := newLedger(t, p)

	var commitFaults, fetchCalls atomic.Int32
	e.fake.ControlKey(int16(kmsg.OffsetCommit), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		e.fake.KeepControl()
		if commitFaults.Add(1) > 5 {
			return nil, nil, false
		}
		req := kr.(*kmsg.OffsetCommitRequest)
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.UnknownServerError.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	e.fake.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		e.fake.KeepControl()
		if n := fetchCalls.Add(1); n%5 == 0 && n <= 100 {
			return nil, errors.New("injected: fetch connection dropped"), true
		}
		return nil, nil, false
	})
	var kick atomic.Bool
	e.fake.ControlKey(int16(kmsg.Heartbeat), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		e.fake.KeepControl()
		if !kick.CompareAndSwap(true, false) {
			return nil, nil, false
		}
		resp := kr.(*kmsg.HeartbeatRequest).ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp, nil, true
	})

	cfg := e.config()
	m.use(&cfg, l, "a", sleeper(time.Millisecond))
	cfg.Workers = 8
	r := start(t, cfg, e.groupOpts()...)
	waitFor(t, 60*time.Second, "a third handled", func() bool { return l.doneCount() >= p.total/3 })
	kick.Store(true)
	waitFor(t, 60*time.Second, "partitions lost", func() bool { return r.c.Stats().Lost > 0 })
	waitFor(t, 60*time.Second, "every record handled", func() bool { return l.doneCount() == p.total })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v; want nil", err)
	}
	dups := l.check()
	checkCommittedToEnd(t, e, p)
	s := r.c.Stats()
	if s.CommitErrors == 0 {
		t.Errorf("Stats.CommitErrors 0; want > 0 (5 commits were failed)")
	}
	t.Logf("lost %d partitions, %d commit errors, %d fetch requests, %d records handled twice",
		s.Lost, s.CommitErrors, fetchCalls.Load(), len(dups))
}

var errPoison = errors.New("poison")

// poisonOf picks the third record of a key with at least five records.
func poisonOf(t *testing.T, p produced) (key string, poison pos) {
	t.Helper()
	for k, ps := range p.keyOffs {
		if len(ps) >= 5 && k[0] == 'k' {
			return k, ps[2]
		}
	}
	t.Fatalf("no key with 5 records")
	return "", pos{}
}

// poisoned is the work of the poison tests: every call holding the poison
// fails with errPoison. The call holding the poison's key's first record
// waits 200 ms, so that the key's next records queue behind it: in batch
// mode the failing batch then holds other records with the poison.
type poisoned struct {
	key    string
	first  pos // the key's first record
	poison pos

	mu     sync.Mutex
	failed []*kgo.Record // the records of the last failed call
	fails  int           // failed calls
}

// newPoisoned makes a two-partition env with n records of 20 keys, its
// ledger, and a poison among them.
func newPoisoned(t *testing.T, n int, seed uint64) (*poisoned, *env, *ledger) {
	e := newEnv(t, 2)
	p := e.produce(n, 20, 0, seed)
	key, poison := poisonOf(t, p)
	return &poisoned{key: key, first: p.keyOffs[key][0], poison: poison}, e, newLedger(t, p)
}

func (z *poisoned) work(_ context.Context, recs []*kgo.Record) error {
	bad := false
	for _, r := range recs {
		switch (pos{r.Partition, r.Offset}) {
		case z.first:
			time.Sleep(200 * time.Millisecond)
		case z.poison:
			bad = true
		}
	}
	if !bad {
		return nil
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	z.failed = slices.Clone(recs)
	z.fails++
	return errPoison
}

// lastFailed returns the records of the last failed call, and checks that
// it held the poison, and in batch mode other records too.
func (z *poisoned) lastFailed(t *testing.T, m mode) []*kgo.Record {
	t.Helper()
	z.mu.Lock()
	defer z.mu.Unlock()
	if !slices.ContainsFunc(z.failed, func(r *kgo.Record) bool { return pos{r.Partition, r.Offset} == z.poison }) {
		t.Fatalf("the last failed call held %d records, not the poison %v", len(z.failed), z.poison)
	}
	if m.batch > 0 && len(z.failed) < 2 {
		t.Errorf("the failed batch held only the poison; want more (the test lost its point)")
	}
	return z.failed
}

func TestHandlerErrors(t *testing.T) {
	t.Run("retried in order", func(t *testing.T) {
		// Records whose offset is a multiple of 7 fail twice.
		forModes(t, func(t *testing.T, m mode) {
			testFlaky(t, m, 6, 2, func(q pos, n int) bool { return q.offset%7 == 0 && n <= 2 },
				func() error { return errors.New("transient") })
		})
	})
	t.Run("Goexit retried in order", func(t *testing.T) {
		// A handler that calls runtime.Goexit (t.FailNow, require.*) is a
		// failure like any other: retried, in order, and never wedges its
		// key; in batch mode, the whole batch is retried.
		forModes(t, func(t *testing.T, m mode) {
			testFlaky(t, m, 8, 1, func(q pos, n int) bool { return q.offset%9 == 0 && n == 1 },
				func() error { runtime.Goexit(); return nil })
		})
	})
	t.Run("poison to dead letter", func(t *testing.T) { forModes(t, testPoisonDeadLetter) })
	t.Run("poison stops", func(t *testing.T) { forModes(t, testPoisonStops) })
	t.Run("poison skipped and logged", func(t *testing.T) { forModes(t, testPoisonSkipped) })
}

// testFlaky: the calls holding a record for which bad(its position, its
// attempt) holds fail with fail() (in batch mode, the whole batch fails);
// each is retried in its key's turn (maxRetries suffices), and nothing is
// done twice.
func testFlaky(t *testing.T, m mode, seed uint64, maxRetries int, bad func(q pos, attempt int) bool, fail func() error) {
	e := newEnv(t, 2)
	p := e.produce(size(1000, 400), 20, 0, seed)
	l := newLedger(t, p)
	var mu sync.Mutex
	attempts := make(map[pos]int)
	fails := 0
	cfg := e.config()
	m.use(&cfg, l, "a", func(_ context.Context, recs []*kgo.Record) error {
		mu.Lock()
		failing := false
		for _, r := range recs {
			q := pos{r.Partition, r.Offset}
			attempts[q]++
			failing = bad(q, attempts[q]) || failing
		}
		if failing {
			fails++
		}
		mu.Unlock()
		if failing {
			return fail()
		}
		return nil
	})
	cfg.MaxRetries = maxRetries
	run := runToEnd(t, e, l, cfg)
	mu.Lock()
	defer mu.Unlock()
	if fails == 0 {
		t.Fatalf("no call failed; the test lost its point")
	}
	if s := run.c.Stats(); s.Retried != uint64(fails) {
		t.Errorf("Stats.Retried %d; want %d (one per failed call)", s.Retried, fails)
	}
}

// testPoisonDeadLetter: the poison's call fails three times, then the
// DeadLetter hook gets its records (in batch mode, every record of the
// batch, in offset order), and everything else goes on.
func testPoisonDeadLetter(t *testing.T, m mode) {
	z, e, l := newPoisoned(t, size(1000, 400), 7)
	var mu sync.Mutex
	var dead []pos
	cfg := e.config()
	m.use(&cfg, l, "a", z.work)
	cfg.MaxRetries = 2
	cfg.DeadLetter = func(ctx context.Context, r *kgo.Record, err error) error {
		if !errors.Is(err, errPoison) {
			t.Errorf("dead-letter error %v; want errPoison", err)
		}
		mu.Lock()
		dead = append(dead, pos{r.Partition, r.Offset})
		mu.Unlock()
		l.markDone(r)
		return nil
	}
	run := runToEnd(t, e, l, cfg)
	failed := z.lastFailed(t, m)
	var want []pos
	for _, r := range failed {
		want = append(want, pos{r.Partition, r.Offset})
	}
	mu.Lock()
	if !slices.Equal(dead, want) {
		t.Errorf("dead-lettered %v; want %v", dead, want)
	}
	mu.Unlock()
	if s := run.c.Stats(); s.DeadLettered != uint64(len(want)) || s.Retried != 2 || z.fails != 3 {
		t.Errorf("Stats DeadLettered %d, Retried %d, %d failed calls; want %d, 2, 3", s.DeadLettered, s.Retried, z.fails, len(want))
	}
}

// testPoisonStops: the poison's call fails twice and the consumer stops
// with a *HandlerError naming it (in batch mode, its batch's first
// record); nothing of the key from there on is done, nor committed.
func testPoisonStops(t *testing.T, m mode) {
	z, e, l := newPoisoned(t, size(1000, 400), 8)
	cfg := e.config()
	m.use(&cfg, l, "a", z.work)
	cfg.MaxRetries = 1
	cfg.OnFailure = kafka.Stop
	run := start(t, cfg, e.groupOpts()...)
	err := run.wait(t)
	var he *kafka.HandlerError
	if !errors.As(err, &he) || !errors.Is(err, errPoison) {
		t.Fatalf("Run: %v; want a *HandlerError wrapping errPoison", err)
	}
	failed := z.lastFailed(t, m)
	if he.Partition != z.poison.partition || he.Offset != failed[0].Offset || he.Attempts != 2 || he.Records != len(failed) {
		t.Errorf("HandlerError at %d@%d after %d attempts, %d records; want %d@%d after 2, %d records",
			he.Partition, he.Offset, he.Attempts, he.Records, z.poison.partition, failed[0].Offset, len(failed))
	}
	l.mu.Lock()
	for _, q := range l.p.keyOffs[z.key] {
		if n := l.count[q]; q.offset >= he.Offset && n != 0 {
			t.Errorf("key %s: record %v, at or after the failed call, handled %d times; want 0", z.key, q, n)
		}
	}
	for _, e := range l.errs {
		t.Error(e)
	}
	l.mu.Unlock()
	if c, ok := e.committed()[z.poison.partition]; ok && c > he.Offset {
		t.Errorf("partition %d committed %d; want at most the failed call's offset %d", z.poison.partition, c, he.Offset)
	}
}

// testPoisonSkipped: with no retries and Skip, the poison's call is
// skipped (in batch mode, every record of its batch), logged once, and
// counted.
func testPoisonSkipped(t *testing.T, m mode) {
	z, e, l := newPoisoned(t, size(600, 300), 9)
	cfg := e.config()
	m.use(&cfg, l, "a", func(ctx context.Context, recs []*kgo.Record) error {
		err := z.work(ctx, recs)
		if err != nil {
			for _, r := range recs {
				l.markDone(r) // skipped is done
			}
		}
		return err
	})
	core, logs := observer.New(zap.WarnLevel)
	cfg.Logger = zap.New(core)
	cfg.MaxRetries = kafka.NoRetries
	cfg.OnFailure = kafka.Skip
	run := runToEnd(t, e, l, cfg)
	failed := z.lastFailed(t, m)
	msg := "record skipped after handler failure"
	if m.batch > 0 {
		msg = "batch skipped after handler failure"
	}
	skipped := logs.FilterMessage(msg).All()
	if len(skipped) != 1 || skipped[0].ContextMap()["offset"] != failed[0].Offset {
		t.Errorf("%q log entries %v; want one for offset %d", msg, skipped, failed[0].Offset)
	}
	if s := run.c.Stats(); s.Skipped != uint64(len(failed)) || z.fails != 1 {
		t.Errorf("Stats.Skipped %d, %d failed calls; want %d, 1", s.Skipped, z.fails, len(failed))
	}
}

// TestHotKeyPauses: one key on one partition and a handler slower than the
// fetches: the partition is paused, records held stay within MaxHeld plus
// one poll, and nothing is lost.
func TestHotKeyPauses(t *testing.T) { forModes(t, testHotKeyPauses) }

func testHotKeyPauses(t *testing.T, m mode) {
	e := newEnv(t, 1)
	p := e.produce(size(1500, 500), 1, 0, 10)
	l := newLedger(t, p)
	cfg := e.config()
	m.use(&cfg, l, "a", sleeper(400*time.Microsecond))
	cfg.MaxHeld = 50
	cfg.MaxPollRecords = 20
	const bound = 50 + 20
	r := start(t, cfg, e.groupOpts()...)
	var most int
	sawPaused := false
	waitFor(t, 60*time.Second, "every record handled", func() bool {
		s := r.c.Stats()
		most = max(most, s.InFlight)
		sawPaused = sawPaused || s.Paused > 0
		return l.doneCount() == p.total
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v; want nil", err)
	}
	if dups := l.check(); len(dups) > 0 {
		t.Errorf("%d records handled twice; want none", len(dups))
	}
	s := r.c.Stats()
	if s.Pauses == 0 || !sawPaused {
		t.Errorf("Stats.Pauses %d, paused seen %v; want the partition paused", s.Pauses, sawPaused)
	}
	if s.MaxHeld > bound || most > bound {
		t.Errorf("records held: at most %d (sampled %d); want <= %d", s.MaxHeld, most, bound)
	}
	checkCommittedToEnd(t, e, p)
}

// TestPausedPartitionComesBack: partitions paused by flow control move to
// a second member and back. A paused partition stays paused in the client
// across assignments unless resumed, which would stall it for good
// (parallel-consumer #857); here every record is still handled.
func TestPausedPartitionComesBack(t *testing.T) { forModes(t, testPausedPartitionComesBack) }

func testPausedPartitionComesBack(t *testing.T, m mode) {
	e := newEnv(t, 2)
	p := e.produce(size(1500, 1000), 8, 0, 12)
	if len(p.ends) != 2 {
		t.Fatalf("records on %d partitions; want 2", len(p.ends))
	}
	l := newLedger(t, p)
	cfg := e.config()
	m.use(&cfg, l, "a", sleeper(2*time.Millisecond))
	cfg.Workers = 2
	cfg.MaxHeld = 20
	cfg.MaxPollRecords = 10
	a := start(t, cfg, e.groupOpts()...)
	waitFor(t, 60*time.Second, "a partition paused", func() bool { return a.c.Stats().Paused > 0 })
	m.use(&cfg, l, "b", sleeper(2*time.Millisecond))
	b := start(t, cfg, e.groupOpts()...)
	waitFor(t, 60*time.Second, "b handling", func() bool { return b.c.Stats().Handled >= 20 })
	if err := b.stop(t); err != nil {
		t.Fatalf("b's Run: %v; want nil", err)
	}
	if l.doneCount() == p.total {
		t.Fatalf("everything was handled before b left; the test needs more records")
	}
	waitFor(t, 60*time.Second, "every record handled (a stalled partition never finishes)",
		func() bool { return l.doneCount() == p.total })
	if err := a.stop(t); err != nil {
		t.Fatalf("a's Run: %v; want nil", err)
	}
	if dups := l.check(); len(dups) > 0 {
		t.Errorf("%d records handled twice; want none", len(dups))
	}
	checkCommittedToEnd(t, e, p)
	if s := a.c.Stats(); s.Revoked == 0 {
		t.Errorf("a revoked no partition; want b to have taken one")
	}
}

func TestNewConsumerConfig(t *testing.T) {
	h := func(context.Context, *kgo.Record) error { return nil }
	bh := func(context.Context, []*kgo.Record) error { return nil }
	ok := kafka.Config{Brokers: []string{"x:9092"}, Group: "g", Topics: []string{"t"}, Handler: h}
	tests := []struct {
		name string
		edit func(*kafka.Config)
	}{
		{"no brokers", func(c *kafka.Config) { c.Brokers = nil }},
		{"no group", func(c *kafka.Config) { c.Group = "" }},
		{"no topics", func(c *kafka.Config) { c.Topics = nil }},
		{"no handler", func(c *kafka.Config) { c.Handler = nil }},
		{"negative workers", func(c *kafka.Config) { c.Workers = -1 }},
		{"negative max held", func(c *kafka.Config) { c.MaxHeld = -1 }},
		{"bad retries", func(c *kafka.Config) { c.MaxRetries = -2 }},
		{"dead letter without hook", func(c *kafka.Config) { c.OnFailure = kafka.DeadLetter }},
		{"unknown decision", func(c *kafka.Config) { c.OnFailure = 99 }},
		{"both handlers", func(c *kafka.Config) { c.BatchHandler = bh }},
		{"max batch without batch handler", func(c *kafka.Config) { c.MaxBatch = 10 }},
		{"negative max batch", func(c *kafka.Config) { c.Handler, c.BatchHandler, c.MaxBatch = nil, bh, -1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			tt.edit(&cfg)
			if _, err := kafka.NewConsumer(cfg); !errors.Is(err, kafka.ErrConfig) {
				t.Errorf("NewConsumer: %v; want ErrConfig", err)
			}
		})
	}
	c, err := kafka.NewConsumer(ok)
	if err != nil {
		t.Fatalf("NewConsumer(valid): %v", err)
	}
	if s := c.Stats(); s.Handled != 0 || s.Partitions != 0 {
		t.Errorf("Stats before Run: %+v; want zeros", s)
	}
	batch := ok
	batch.Handler, batch.BatchHandler = nil, bh
	for _, n := range []int{0, 1, 1000} {
		batch.MaxBatch = n
		if _, err := kafka.NewConsumer(batch); err != nil {
			t.Errorf("NewConsumer(BatchHandler, MaxBatch %d): %v", n, err)
		}
	}
}
