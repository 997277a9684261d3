package soak

import (
	"cmp"
	"context"
	"sync/atomic"
	"time"

	"github.com/perkey/perkey/executor"
)

// The Batcher in the mix: every generation has one (executor.NewBatcher,
// WithMaxBatch(maxBatch)) whose messages are harness tasks (kind
// opBatchSubmit or opBatchDo); runBatch is its BatchFunc. A message's
// behaviour says what its batch does: a failing message fails alone
// (executor.BatchErrors), a failBatch one fails the whole batch, a panicky
// one makes the batch panic, a slow one makes it sleep. settle then checks
// that each message's Wait or Do saw its own outcome.

// maxBatch is every generation's WithMaxBatch.
const maxBatch = 8

// batchRun is one call of the BatchFunc.
type batchRun struct {
	panicker *task // the message that made the batch panic, if one did
}

// batchStats are the run's counts of batches.
type batchStats struct {
	batches, messages atomic.Int64 // BatchFunc calls, and the messages they were handed
	max               atomic.Int64 // the largest batch
	sizes             [maxBatch + 1]atomic.Int64
	failedWhole       atomic.Int64 // batches that failed as a whole
	failedSingle      atomic.Int64 // messages failed alone, through BatchErrors
	panicked          atomic.Int64 // batches that panicked
}

// messageBehaviour draws what a Batcher message makes its batch do: mostly
// nothing, else sleep up to 1 ms, fail the message alone, fail the whole
// batch or panic.
func (p *producer) messageBehaviour() (behaviour, time.Duration) {
	switch x := p.r.IntN(100); {
	case x < 86:
		return quick, 0
	case x < 92:
		return slow, time.Duration(p.r.Int64N(int64(time.Millisecond)))
	case x < 97:
		return failing, 0
	case x < 99:
		return failBatch, 0
	}
	return panicky, 0
}

// runBatch is every generation's BatchFunc: a batch is one task of key,
// so it checks, as run does for a task, that nothing else of the key runs
// beside it and the worker bound, and for each message that it starts
// once, after its submitter's earlier submissions on the key, and belongs
// to key; then it does what its messages say.
func (h *harness) runBatch(ctx context.Context, g *generation, key int, msgs []*task) error {
	start := time.Now()
	n := len(msgs)
	bs := &h.batchSt
	bs.batches.Add(1)
	bs.messages.Add(int64(n))
	for {
		m := bs.max.Load()
		if int64(n) <= m || bs.max.CompareAndSwap(m, int64(n)) {
			break
		}
	}
	if n < 1 || n > maxBatch {
		h.v.add(BatchBound, 1, "gen %d (%s): key %d: a batch of %d messages; want 1 to %d", g.n, g.spec, key, n, maxBatch)
	} else {
		bs.sizes[n].Add(1)
	}
	g.live.Add(1)
	if r := g.running.Add(1); r > int64(h.workers) {
		h.v.add(OverWorkers, 1, "gen %d (%s): a batch of key %d: %d fns running; want at most %d", g.n, g.spec, key, r, h.workers)
	}
	if !g.occ.enter(key, false) {
		h.v.add(Overlap, 1, "gen %d (%s): a batch of key %d: key already held at start", g.n, g.spec, key)
	}
	b := &batchRun{}
	var nap time.Duration
	var failer, panicker *task
	single := 0
	for _, t := range msgs {
		if t.keys[0] != key {
			h.v.add(BatchBound, 1, "%s: in a batch of key %d", t, key)
		}
		h.begin(t, start)
		if t.streams != nil && !t.streams[0].start(t.seq) {
			h.v.add(FIFOBreak, 1, "%s: in a batch that started after a later submission of its producer on key %d", t, key)
		}
		t.batch = b
		switch t.do {
		case slow:
			nap = max(nap, t.nap)
		case failing:
			single++
		case failBatch:
			failer = cmp.Or(failer, t)
		case panicky:
			panicker = cmp.Or(panicker, t)
		}
	}
	defer func() {
		g.occ.leave(key, false)
		g.running.Add(-1)
		g.live.Add(-1)
		g.runs.Add(int64(n))
		for _, t := range msgs {
			t.state.Or(finished)
		}
	}()
	if nap > 0 {
		// ctx ends only when a Close gives up on the batch.
		timer := time.NewTimer(nap)
		select {
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
	}
	switch {
	case panicker != nil:
		b.panicker = panicker
		for _, t := range msgs {
			t.state.Or(panicked)
		}
		g.panics.Add(int64(n)) // Stats.Panicked counts every message
		bs.panicked.Add(1)
		panic(panicValue{panicker})
	case failer != nil:
		err := &taskError{t: failer}
		for _, t := range msgs {
			t.result = err
		}
		g.failedRuns.Add(int64(n))
		bs.failedWhole.Add(1)
		return err
	case single > 0:
		errs := make(executor.BatchErrors, n)
		for i, t := range msgs {
			if t.do == failing {
				t.result = &taskError{t: t}
				errs[i] = t.result
			}
		}
		g.failedRuns.Add(int64(single))
		bs.failedSingle.Add(int64(single))
		return errs
	}
	return nil
}

// messages submits 2–10 messages (more than one batch holds) through the
// generation's Batcher over 1–2 keys, each key a FIFO stream; one time in
// three a Batcher.Do or a Do on one of the keys follows, which must start
// after them (a Do between messages splits them into two batches). Then it
// waits for the messages in random order; each must end with its own
// outcome.
func (p *producer) messages(g *generation) (closed bool) {
	s := p.submitMany(g, opBatchSubmit, 2, 10)
	if p.r.IntN(3) == 0 {
		o := opBatchDo
		if p.r.IntN(2) == 0 {
			o = opDo
		}
		p.follow(g, s, o, p.r.IntN(len(s.keys)))
	}
	return p.awaitAll(g, s)
}
