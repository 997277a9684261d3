package soak

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/perkey/perkey/executor"
)

// batchOf returns messages of key for runBatch, one behaviour each, in one
// producer's FIFO stream.
func batchOf(g *generation, key int, dos ...behaviour) []*task {
	s := new(stream)
	p := &producer{}
	msgs := make([]*task, len(dos))
	for i, do := range dos {
		msgs[i] = &task{id: uint64(i + 1), g: g, p: p, kind: opBatchSubmit, keys: []int{key}, do: do,
			ctx: context.Background(), streams: []*stream{s}, seq: int64(i + 1), submitted: time.Now()}
	}
	return msgs
}

// callBatch calls runBatch as the executor would and returns what it
// returned, or the *PanicError it would make of a panic.
func callBatch(h *harness, g *generation, key int, msgs []*task) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &executor.PanicError{Value: v}
		}
	}()
	return h.runBatch(context.Background(), g, key, msgs)
}

// TestRunBatch plants what the BatchFunc must catch.
func TestRunBatch(t *testing.T) {
	quick9 := make([]behaviour, maxBatch+1)
	tests := []struct {
		name  string
		msgs  func(g *generation) []*task
		setup func(g *generation)
		want  Invariant
	}{
		{"a batch within bounds", func(g *generation) []*task { return batchOf(g, 1, quick, quick) }, nil, numInvariants},
		{"more than WithMaxBatch", func(g *generation) []*task { return batchOf(g, 1, quick9...) }, nil, BatchBound},
		{"a message of another key", func(g *generation) []*task {
			msgs := batchOf(g, 1, quick, quick)
			msgs[1].keys = []int{2}
			return msgs
		}, nil, BatchBound},
		{"key already held", func(g *generation) []*task { return batchOf(g, 1, quick) },
			func(g *generation) { g.occ.enter(1, true) }, Overlap},
		{"out of its producer's order", func(g *generation) []*task {
			msgs := batchOf(g, 1, quick, quick)
			msgs[0].seq, msgs[1].seq = 2, 1
			return msgs
		}, nil, FIFOBreak},
		{"a message run twice", func(g *generation) []*task {
			msgs := batchOf(g, 1, quick, quick)
			msgs[1].state.Store(started | finished)
			return msgs
		}, nil, RanTwice},
		{"a message its submitter was told never ran", func(g *generation) []*task {
			msgs := batchOf(g, 1, quick)
			msgs[0].state.Store(notRun)
			return msgs
		}, nil, RanAfterCancel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &harness{workers: 1}
			g := &generation{occ: make(occupancy, 4)}
			if tt.setup != nil {
				tt.setup(g)
			}
			callBatch(h, g, 1, tt.msgs(g))
			wantViolations(t, h, tt.want, 1)
		})
	}
}

// TestBatchOutcomes: each message must see its own outcome (what its batch
// made of it), and settle catches one that sees another's.
func TestBatchOutcomes(t *testing.T) {
	other := &taskError{t: &task{}}
	tests := []struct {
		name  string
		dos   []behaviour
		wrong func(msgs []*task, err error) (*task, error) // a result that must be caught
	}{
		{"all succeed", []behaviour{quick, slow, quick}, func(msgs []*task, _ error) (*task, error) { return msgs[0], other }},
		{"one fails alone", []behaviour{quick, failing, quick}, func(msgs []*task, err error) (*task, error) {
			return msgs[0], err.(executor.BatchErrors)[1] // another message's error
		}},
		{"one fails alone, seen as nil", []behaviour{quick, failing}, func(msgs []*task, _ error) (*task, error) { return msgs[1], nil }},
		{"the whole batch fails", []behaviour{quick, failBatch, failing}, func(msgs []*task, _ error) (*task, error) { return msgs[0], nil }},
		{"the batch panics", []behaviour{quick, panicky}, func(msgs []*task, _ error) (*task, error) {
			return msgs[0], &executor.PanicError{Value: panicValue{msgs[0]}} // its own value, not the batch's
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &harness{workers: 1}
			g := &generation{occ: make(occupancy, 4), born: time.Now()}
			msgs := batchOf(g, 1, tt.dos...)
			err := callBatch(h, g, 1, msgs)
			for i, m := range msgs {
				// What the executor hands message i (see executor.BatchFunc).
				got := err
				if errs, ok := err.(executor.BatchErrors); ok {
					got = errs[i]
				}
				h.settle(m, got, 0, false)
			}
			wantViolations(t, h, numInvariants, 0)
			if g.runs.Load() != int64(len(msgs)) {
				t.Errorf("runs: got %d; want %d, one per message", g.runs.Load(), len(msgs))
			}
			m, bad := tt.wrong(msgs, err)
			h.settle(m, bad, 0, false)
			wantViolations(t, h, WrongOutcome, 1)
		})
	}
}

// TestBatcherInTheMix runs the Batcher steps from several producers on a
// real executor, with and without an Observer, and the generation's checks
// (Stats and the observer against what the BatchFunc saw).
func TestBatcherInTheMix(t *testing.T) {
	for _, spec := range []genSpec{
		{throughput: 4, policy: "FailFast"},
		{throughput: 4, policy: "FailFast", noObserver: true},
		{throughput: 4, policy: "Block", perKey: 4, pending: 32},
		{throughput: 4, policy: "FailFast", stripes: 256},
	} {
		t.Run(spec.String(), func(t *testing.T) {
			h, g, _, finish := newTestHarness(t, spec)
			var wg sync.WaitGroup
			for i := range 4 {
				p := newProducer(h, i)
				wg.Go(func() {
					for range 100 {
						p.messages(g)
						p.call(g, opBatchDo, []int{p.key()}, nil, 0)
					}
				})
			}
			wg.Wait()
			finish()
			wantViolations(t, h, numInvariants, 0)
			bs := &h.batchSt
			if bs.batches.Load() == 0 || bs.max.Load() < 2 || bs.max.Load() > maxBatch {
				t.Errorf("%d batches, the largest of %d; want some, of 2 to %d", bs.batches.Load(), bs.max.Load(), maxBatch)
			}
		})
	}
}
