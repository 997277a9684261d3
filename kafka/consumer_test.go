package kafka_test

import (
	"context"
	"errors"
	"runtime"
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
// keys in order per partition), committed to the end offsets.
func TestCleanRun(t *testing.T) {
	e := newEnv(t, 4)
	p := e.produce(size(3000, 800), 60, 25, 1)
	l := newLedger(t, p)
	r := start(t, e.config(l.handler("a", 300*time.Microsecond)), e.groupOpts()...)
	waitFor(t, 60*time.Second, "every record handled", func() bool { return l.doneCount() == p.total })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v; want nil", err)
	}
	if dups := l.check(); len(dups) > 0 {
		t.Errorf("%d records handled twice, first %v; want none", len(dups), dups[0])
	}
	checkCommittedToEnd(t, e, p)
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
}

// TestCrashRestart: the client dies mid-run without a final commit; a new
// member handles everything left. Records are handled twice only at or
// above the committed offset, and never one the offset map marked done.
func TestCrashRestart(t *testing.T) {
	e := newEnv(t, 4)
	p := e.produce(size(3000, 900), 60, 0, 2)
	l := newLedger(t, p)
	crashCtx, crash := context.WithCancel(context.Background())
	defer crash()
	cfg := e.config(l.handler("a", 2*time.Millisecond))
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

	cfg = e.config(l.handler("b", 0))
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
func TestGracefulRestart(t *testing.T) {
	e := newEnv(t, 4)
	p := e.produce(size(3000, 900), 60, 30, 3)
	l := newLedger(t, p)
	cfg := e.config(l.handler("a", 2*time.Millisecond))
	cfg.Workers = 8
	r1 := start(t, cfg, e.groupOpts()...)
	waitFor(t, 60*time.Second, "a third handled", func() bool { return l.doneCount() >= p.total/3 })
	if err := r1.stop(t); err != nil {
		t.Fatalf("first Run: %v; want nil", err)
	}
	if l.doneCount() == p.total {
		t.Fatalf("everything was handled before the stop; the test needs more records")
	}
	r2 := start(t, e.config(l.handler("b", 0)), e.groupOpts()...)
	waitFor(t, 60*time.Second, "every record handled", func() bool { return l.doneCount() == p.total })
	if err := r2.stop(t); err != nil {
		t.Fatalf("second Run: %v; want nil", err)
	}
	if dups := l.check(); len(dups) > 0 {
		t.Errorf("%d records handled twice, first %v; want none", len(dups), dups[0])
	}
	checkCommittedToEnd(t, e, p)
}

// TestMemberJoinsAndLeaves: a second member joins mid-run and leaves
// again. Nothing is lost or handled twice, every key keeps its order
// across members, and no key is ever inside two handlers at once.
func TestMemberJoinsAndLeaves(t *testing.T) {
	e := newEnv(t, 6)
	p := e.produce(size(6000, 3000), 120, 50, 4)
	l := newLedger(t, p)
	cfg := e.config(l.handler("a", 4*time.Millisecond))
	cfg.Workers = 4
	a := start(t, cfg, e.groupOpts()...)
	waitFor(t, 60*time.Second, "15% handled", func() bool { return l.doneCount() >= p.total*15/100 })

	cfg.Handler = l.handler("b", 4*time.Millisecond)
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
func TestKeyNeverOnTwoMembers(t *testing.T) {
	e := newEnv(t, 4)
	p := e.produce(120, 40, 0, 13)
	l := newLedger(t, p)
	slow := func(member string) kafka.Handler {
		return func(ctx context.Context, r *kgo.Record) error {
			l.begin(member, r)
			time.Sleep(400 * time.Millisecond)
			l.end(member, r, true)
			return nil
		}
	}
	cfg := e.config(slow("a"))
	cfg.Workers = 64 // more than the keys: every partition has handlers running when b joins
	a := start(t, cfg, e.groupOpts()...)
	waitFor(t, 60*time.Second, "a handling", func() bool { return l.doneCount() >= 16 })
	cfg.Handler = slow("b")
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
// canceled records are handled by the next owner: nothing is lost.
func TestRevokeGraceExpires(t *testing.T) {
	e := newEnv(t, 4)
	p := e.produce(size(800, 400), 40, 0, 11)
	l := newLedger(t, p)
	slow := func(member string) kafka.Handler {
		return func(ctx context.Context, r *kgo.Record) error {
			l.begin(member, r)
			select {
			case <-time.After(15 * time.Millisecond):
				l.end(member, r, true)
				return nil
			case <-ctx.Done():
				l.end(member, r, false)
				return ctx.Err()
			}
		}
	}
	cfg := e.config(slow("a"))
	cfg.Workers = 8
	cfg.RevokeTimeout = 5 * time.Millisecond
	cfg.DrainTimeout = 5 * time.Millisecond
	core, logs := observer.New(zap.WarnLevel)
	cfg.Logger = zap.New(core)
	a := start(t, cfg, e.groupOpts()...)
	waitFor(t, 60*time.Second, "10% handled", func() bool { return l.doneCount() >= p.total/10 })
	cfg.Handler = slow("b")
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
func TestFaults(t *testing.T) {
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

	cfg := e.config(l.handler("a", time.Millisecond))
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

func TestHandlerErrors(t *testing.T) {
	// A failing handler is retried in the record's turn, in order; one that
	// calls runtime.Goexit (t.FailNow, require.*) fails like any other and
	// never wedges its key.
	for _, tc := range []struct {
		name    string
		every   int64 // records whose offset is a multiple fail
		fails   int   // attempts that fail, each retried
		goexit  bool
		seed    uint64
		retries int
	}{
		{"retried in order", 7, 2, false, 6, 2},
		{"Goexit retried in order", 9, 1, true, 8, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 2)
			p := e.produce(size(1000, 400), 20, 0, tc.seed)
			l := newLedger(t, p)
			var mu sync.Mutex
			attempts := make(map[pos]int)
			failing := 0
			for _, ps := range p.keyOffs {
				for _, q := range ps {
					if q.offset%tc.every == 0 {
						failing++
					}
				}
			}
			cfg := e.config(func(ctx context.Context, r *kgo.Record) error {
				l.begin("a", r)
				q := pos{r.Partition, r.Offset}
				mu.Lock()
				attempts[q]++
				fail := q.offset%tc.every == 0 && attempts[q] <= tc.fails
				mu.Unlock()
				l.end("a", r, !fail)
				switch {
				case fail && tc.goexit:
					runtime.Goexit()
				case fail:
					return errors.New("transient")
				}
				return nil
			})
			cfg.MaxRetries = tc.retries
			run := start(t, cfg, e.groupOpts()...)
			waitFor(t, 60*time.Second, "every record handled", func() bool { return l.doneCount() == p.total })
			if err := run.stop(t); err != nil {
				t.Fatalf("Run: %v; want nil", err)
			}
			if dups := l.check(); len(dups) > 0 {
				t.Errorf("%d records handled twice; want none", len(dups))
			}
			if s := run.c.Stats(); s.Retried != uint64(tc.fails*failing) {
				t.Errorf("Stats.Retried %d; want %d", s.Retried, tc.fails*failing)
			}
			checkCommittedToEnd(t, e, p)
		})
	}

	t.Run("poison to dead letter", func(t *testing.T) {
		e := newEnv(t, 2)
		p := e.produce(size(1000, 400), 20, 0, 7)
		l := newLedger(t, p)
		_, poison := poisonOf(t, p)
		var mu sync.Mutex
		var dead []pos
		cfg := e.config(func(ctx context.Context, r *kgo.Record) error {
			l.begin("a", r)
			bad := r.Partition == poison.partition && r.Offset == poison.offset
			l.end("a", r, !bad)
			if bad {
				return errPoison
			}
			return nil
		})
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
		run := start(t, cfg, e.groupOpts()...)
		waitFor(t, 60*time.Second, "every record done", func() bool { return l.doneCount() == p.total })
		if err := run.stop(t); err != nil {
			t.Fatalf("Run: %v; want nil", err)
		}
		l.check()
		mu.Lock()
		if len(dead) != 1 || dead[0] != poison {
			t.Errorf("dead-lettered %v; want [%v]", dead, poison)
		}
		mu.Unlock()
		if s := run.c.Stats(); s.DeadLettered != 1 || s.Retried != 2 {
			t.Errorf("Stats DeadLettered %d, Retried %d; want 1, 2", s.DeadLettered, s.Retried)
		}
		checkCommittedToEnd(t, e, p)
	})

	t.Run("poison stops", func(t *testing.T) {
		e := newEnv(t, 2)
		p := e.produce(size(1000, 400), 20, 0, 8)
		l := newLedger(t, p)
		key, poison := poisonOf(t, p)
		cfg := e.config(func(ctx context.Context, r *kgo.Record) error {
			l.begin("a", r)
			bad := r.Partition == poison.partition && r.Offset == poison.offset
			l.end("a", r, !bad)
			if bad {
				return errPoison
			}
			return nil
		})
		cfg.MaxRetries = 1
		cfg.OnFailure = kafka.Stop
		run := start(t, cfg, e.groupOpts()...)
		err := run.wait(t)
		var he *kafka.HandlerError
		if !errors.As(err, &he) || !errors.Is(err, errPoison) {
			t.Fatalf("Run: %v; want a *HandlerError wrapping errPoison", err)
		}
		if he.Partition != poison.partition || he.Offset != poison.offset || he.Attempts != 2 {
			t.Errorf("HandlerError at %d@%d after %d attempts; want %v after 2", he.Partition, he.Offset, he.Attempts, poison)
		}
		l.mu.Lock()
		for _, q := range p.keyOffs[key][2:] {
			if n := l.count[q]; n != 0 {
				t.Errorf("key %s: record %v after the poison handled %d times; want 0", key, q, n)
			}
		}
		for _, e := range l.errs {
			t.Error(e)
		}
		l.mu.Unlock()
		if c, ok := e.committed()[poison.partition]; ok && c > poison.offset {
			t.Errorf("partition %d committed %d; want at most the poison's offset %d", poison.partition, c, poison.offset)
		}
	})

	t.Run("poison skipped and logged", func(t *testing.T) {
		e := newEnv(t, 2)
		p := e.produce(size(600, 300), 20, 0, 9)
		l := newLedger(t, p)
		_, poison := poisonOf(t, p)
		cfg := e.config(func(ctx context.Context, r *kgo.Record) error {
			l.begin("a", r)
			l.end("a", r, true) // done either way: skipped is done
			if r.Partition == poison.partition && r.Offset == poison.offset {
				return errPoison
			}
			return nil
		})
		core, logs := observer.New(zap.WarnLevel)
		cfg.Logger = zap.New(core)
		cfg.MaxRetries = kafka.NoRetries
		cfg.OnFailure = kafka.Skip
		run := start(t, cfg, e.groupOpts()...)
		waitFor(t, 60*time.Second, "every record done", func() bool { return l.doneCount() == p.total })
		if err := run.stop(t); err != nil {
			t.Fatalf("Run: %v; want nil", err)
		}
		l.check()
		skipped := logs.FilterMessage("record skipped after handler failure").All()
		if len(skipped) != 1 || skipped[0].ContextMap()["offset"] != poison.offset {
			t.Errorf("skip log entries %v; want one for offset %d", skipped, poison.offset)
		}
		if s := run.c.Stats(); s.Skipped != 1 {
			t.Errorf("Stats.Skipped %d; want 1", s.Skipped)
		}
		checkCommittedToEnd(t, e, p)
	})
}

// TestHotKeyPauses: one key on one partition and a handler slower than the
// fetches: the partition is paused, records held stay within MaxHeld plus
// one poll, and nothing is lost.
func TestHotKeyPauses(t *testing.T) {
	e := newEnv(t, 1)
	p := e.produce(size(1500, 500), 1, 0, 10)
	l := newLedger(t, p)
	cfg := e.config(l.handler("a", 400*time.Microsecond))
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
func TestPausedPartitionComesBack(t *testing.T) {
	e := newEnv(t, 2)
	p := e.produce(size(1500, 1000), 8, 0, 12)
	if len(p.ends) != 2 {
		t.Fatalf("records on %d partitions; want 2", len(p.ends))
	}
	l := newLedger(t, p)
	cfg := e.config(l.handler("a", 2*time.Millisecond))
	cfg.Workers = 2
	cfg.MaxHeld = 20
	cfg.MaxPollRecords = 10
	a := start(t, cfg, e.groupOpts()...)
	waitFor(t, 60*time.Second, "a partition paused", func() bool { return a.c.Stats().Paused > 0 })
	cfg.Handler = l.handler("b", 2*time.Millisecond)
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
}
