package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestBatchSizeBound: three hot keys on one partition and a handler slower
// than the fetches, so the keys' backlogs exceed MaxBatch: every call holds
// at most MaxBatch records, all of one key, consecutive offsets of that key
// in order (the ledger checks each call), and full batches do occur.
func TestBatchSizeBound(t *testing.T) {
	const maxBatch = 5
	e := newEnv(t, 1)
	p := e.produce(size(1200, 600), 3, 0, 14)
	l := newLedger(t, p)
	cfg := e.config()
	mode{"batch", maxBatch}.use(&cfg, l, "a", func(context.Context, []*kgo.Record) error {
		time.Sleep(2 * time.Millisecond) // per call: the backlog grows while a batch runs
		return nil
	})
	r := runToEnd(t, e, l, cfg)
	calls, most := l.batches()
	if most != maxBatch {
		t.Errorf("the largest call held %d records; want MaxBatch (%d)", most, maxBatch)
	}
	if s := r.c.Stats(); s.Batches != uint64(calls) || s.Handled != uint64(p.total) {
		t.Errorf("Stats Batches %d, Handled %d; want %d, %d", s.Batches, s.Handled, calls, p.total)
	}
	t.Logf("%d records in %d calls", p.total, calls)
}

// TestBatchDoneOnReturn: a batch's records count as done, for commits, only
// once its call returns nil. One key: the first call is held while commits
// run; the commit stays at or below its first record, and the records
// fetched meanwhile (if the first call did not get them all) go to the
// next call.
func TestBatchDoneOnReturn(t *testing.T) {
	e := newEnv(t, 1)
	p := e.produce(20, 1, 0, 15)
	l := newLedger(t, p)
	release := make(chan struct{})
	held := make(chan int64, 1)
	var sizes []int // calls' sizes; only the key's calls append, one at a time
	cfg := e.config()
	mode{"batch", 100}.use(&cfg, l, "a", func(_ context.Context, recs []*kgo.Record) error {
		sizes = append(sizes, len(recs))
		if len(sizes) == 1 {
			held <- recs[0].Offset
			<-release
		}
		return nil
	})
	r := start(t, cfg, e.groupOpts()...)
	var first int64
	select {
	case first = <-held:
	case <-time.After(60 * time.Second):
		t.Fatalf("no batch started within 60s")
	}
	waitFor(t, 60*time.Second, "every record fetched", func() bool { return r.c.Stats().Fetched == uint64(p.total) })
	time.Sleep(5 * cfg.CommitInterval) // commits run meanwhile
	if c, ok := e.committed()[0]; ok && c > first {
		t.Errorf("committed %d while the batch from offset %d ran; want at most %d", c, first, first)
	}
	if l.doneCount() != 0 {
		t.Errorf("%d records done while the first call ran; want 0", l.doneCount())
	}
	close(release)
	waitFor(t, 60*time.Second, "every record handled", func() bool { return l.doneCount() == p.total })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v; want nil", err)
	}
	if dups := l.check(); len(dups) > 0 {
		t.Errorf("%d records handled twice; want none", len(dups))
	}
	if len(sizes) > 2 {
		t.Errorf("calls of %v records; want at most two: the first, then every record fetched while it ran", sizes)
	}
	checkCommittedToEnd(t, e, p)
}
