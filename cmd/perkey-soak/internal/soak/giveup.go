package soak

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/perkey/perkey/executor"
)

// A Close that gives up fails every task that has not started with
// ErrClosed at once, those a drive loop has already taken into a batch
// behind a running task included, even while a task that ignores its ctx
// still runs. Before each forced Close, plant makes that case on a key of
// its own: a task that ignores its ctx for stubbornHold runs, and Submits,
// Gos, Batcher messages and a Do wait behind it. After the Close,
// checkGaveUp checks that within giveUpLimit of its return every task of
// the generation that had not started has ended: its Task's Done is
// closed, its call has returned, and for Go tasks, per key, the error
// handler has heard of every one that never ran; and Stats.Queued is 0.

const (
	giveUpLimit   = 100 * time.Millisecond // unstarted tasks must have ended this long after a giving-up Close returned
	giveUpWatch   = 5 * time.Second        // how long a violation is watched further, to say when it ended
	stubbornHold  = 300 * time.Millisecond // plant's task ignores its ctx this long: past giveUpLimit
	plantPatience = 20 * time.Millisecond  // plant's submissions give up on room after this
	plantFollow   = 6                      // tasks plant queues behind its stubborn task, at most
)

// giveUpStats are the run's counts of checked giving-up Closes.
type giveUpStats struct {
	checked     atomic.Int64 // giving-up Closes checked
	stubborn    atomic.Int64 // of those, with plant's task still running at the check's end
	planted     atomic.Int64 // plant's tasks queued behind its stubborn task (accepted)
	plantFailed atomic.Int64 // forced Closes plant could not prepare (its gate or task did not run in time)
	settled     histogram    // from Close's return to the last unstarted task's end
}

// stuck is what plant left on its key: a gate and the stubborn task,
// the Submits behind it to await, and the blocking calls it made.
type stuck struct {
	s     *task
	subs  []submitted
	calls sync.WaitGroup
}

// boundedCtx returns a ctx that ends after plantPatience unless keep is
// called first: a submission made with it cannot park forever under Block.
func boundedCtx() (ctx context.Context, keep func(), cancel context.CancelFunc) {
	ctx, cancel = context.WithCancel(context.Background())
	t := time.AfterFunc(plantPatience, cancel)
	return ctx, func() { t.Stop() }, cancel
}

// plant prepares g's forced Close: on h.plantKey a gate task holds the
// key while a stubborn task (it ignores its ctx for stubbornHold) and up
// to plantFollow followers (Submits, Gos, Batcher messages, one of them
// with its ctx ended at once, and a Do) queue behind it; then the gate
// lets go, and plant returns once the stubborn task runs, so that the
// followers wait behind it, in its drive loop's batch or in the queue,
// when Close gives up. The followers' keys' FIFO stream is checked as
// any other. Best effort: under caps some followers are refused, and if
// the gate or the stubborn task does not run within a second plant says
// so and returns what it has.
func (h *harness) plant(g *generation) *stuck {
	p, key := h.planter, h.plantKey
	st := &stuck{}
	s := new(stream)
	var seq int64
	// submit submits t on key with a bounded ctx, and reports whether it
	// was accepted, and its Task (none for a Go).
	submit := func(t *task, o op) (*executor.Task, bool) {
		ctx, keep, cancel := boundedCtx()
		seq++
		t.ctx, t.streams, t.seq = ctx, []*stream{s}, seq
		t.submitted = time.Now()
		g.calls.Add(1)
		h.track(t)
		var tk *executor.Task
		var err error
		switch o {
		case opBatchSubmit:
			tk, err = g.batcher.Submit(ctx, key, t)
		case opGo:
			h.goCalls.Add(1)
			t.cancel = cancel
			err = g.e.Go(ctx, key, func(ctx context.Context) error { return h.run(ctx, t) })
		default:
			tk, err = g.e.Submit(ctx, key, func(ctx context.Context) error { return h.run(ctx, t) })
		}
		keep()
		if err != nil || o == opGo {
			h.untrack(t)
		}
		g.returns.Add(1)
		if err != nil {
			h.settle(t, err, 0, false)
			cancel()
			return nil, false
		}
		if o == opGo {
			h.goAccepted.Add(1)
			g.goMu.Lock()
			g.goTasks = append(g.goTasks, t)
			g.goMu.Unlock()
			return nil, true
		}
		t.tk.Store(tk)
		g.accepted.Add(1)
		st.subs = append(st.subs, submitted{t, tk, cancel})
		return tk, true
	}
	gt := newGate()
	gate := p.newTask(g, opGate, []int{key}, nil)
	gate.do, gate.gate, gate.inner = quick, gt, nil
	released := false
	release := func() {
		if !released {
			released = true
			close(gt.release)
		}
	}
	defer release()
	tkG, ok := submit(gate, opSubmit)
	if !ok || !poll(time.Second, func() bool { return gate.state.Load()&started != 0 || isDone(tkG) }) {
		h.giveUps.plantFailed.Add(1)
		return st
	}
	st.s = p.newTask(g, opSubmit, []int{key}, nil)
	st.s.op, st.s.do, st.s.nap, st.s.inner = "stubborn Submit", stubborn, stubbornHold, nil
	if _, ok := submit(st.s, opSubmit); !ok {
		h.giveUps.plantFailed.Add(1)
		return st
	}
	n := plantFollow
	if c := g.spec.perKey; c > 0 {
		n = min(n, c-2) // the gate and the stubborn task count against the key's cap
	}
	kinds := []op{opSubmit, opGo, opBatchSubmit, opSubmit, opGo, opBatchSubmit}
	for i := range n {
		o := kinds[i]
		t := p.newTask(g, o, []int{key}, nil)
		t.inner = nil
		if o == opSubmit || o == opGo {
			t.do, t.nap = quick, 0
		}
		t.op = "planted " + o.String()
		if _, ok := submit(t, o); ok {
			h.giveUps.planted.Add(1)
			if i == 3 {
				st.subs[len(st.subs)-1].cancel() // its ctx ends while it is queued: nobody notices but a Wait
			}
		}
	}
	// A Do behind them, from a goroutine of its own: it must return
	// ErrClosed at once when Close gives up.
	do := p.newTask(g, opDo, []int{key}, context.Background())
	do.op, do.do, do.inner = "planted Do", quick, nil
	st.calls.Go(func() {
		g.calls.Add(1)
		do.submitted = time.Now()
		h.track(do)
		err := g.e.Do(do.ctx, key, func(ctx context.Context) error { return h.run(ctx, do) })
		h.untrack(do)
		h.settle(do, err, 0, false)
		g.returns.Add(1)
	})
	release()
	if !poll(time.Second, func() bool { return st.s.state.Load()&started != 0 }) {
		h.giveUps.plantFailed.Add(1)
	}
	return st
}

// unplant waits for what plant left on g: its Submits, and its Do.
func (h *harness) unplant(g *generation) {
	st := g.stuck
	if st == nil {
		return
	}
	// await draws from its producer's random source, which plant uses on
	// another goroutine: this one has its own.
	aw := &producer{h: h, id: h.planter.id, r: rand.New(rand.NewPCG(h.cfg.Seed, uint64(g.n)<<32))}
	for _, sub := range st.subs {
		aw.await(g, sub.t, sub.tk)
		sub.cancel()
	}
	done := make(chan struct{})
	go func() { st.calls.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(lostGrace):
		h.v.add(Lost, 1, "gen %d (%s): plant's Do not returned %v after Close", g.n, g.spec, lostGrace)
	}
}

// leftover is what a giving-up Close has not ended yet: a task, a key's
// Go tasks, or Stats.Queued.
type leftover struct {
	what  string        // as first seen
	ended time.Duration // after Close returned; 0 while it has not
}

// checkGaveUp checks, right after g's Close gave up, on the goroutine
// that called it (so that its first look comes at once), that every task
// of g that had not started has ended within giveUpLimit of Close's
// return, even while plant's stubborn task still runs. A task that started
// in the meantime is no concern of it (fn's start and the give-up may
// race). What is left at giveUpLimit stays in g.left for watchGaveUp.
func (h *harness) checkGaveUp(g *generation) {
	gs := &h.giveUps
	gs.checked.Add(1)
	deadline := g.closedAt.Add(giveUpLimit)
	for {
		left := h.unended(g)
		if len(left) == 0 {
			gs.settled.record(time.Since(g.closedAt))
			break
		}
		if time.Now().After(deadline) {
			g.left = left
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	if st := g.stuck; st != nil && st.s != nil {
		if s := st.s.state.Load(); s&started != 0 && s&finished == 0 {
			gs.stubborn.Add(1)
		}
	}
}

// watchGaveUp reports what checkGaveUp found left, after watching it up
// to giveUpWatch more to say when it ended (or that it hangs).
func (h *harness) watchGaveUp(g *generation) {
	left := g.left
	if len(left) == 0 {
		return
	}
	watch := cmp.Or(h.giveUpWatch, giveUpWatch)
	giveUp := g.closedAt.Add(watch)
	for open := len(left); open > 0 && time.Now().Before(giveUp); {
		time.Sleep(time.Millisecond)
		now := h.unended(g)
		open = 0
		for id, l := range left {
			if l.ended != 0 {
				continue
			}
			if _, still := now[id]; still {
				open++
				continue
			}
			l.ended = time.Since(g.closedAt)
		}
	}
	h.giveUps.settled.record(time.Since(g.closedAt))
	for _, l := range left {
		took := fmt.Sprintf("still not ended %v after", watch)
		if l.ended != 0 {
			took = fmt.Sprintf("ended %v after", l.ended.Round(time.Microsecond))
		}
		h.v.add(GiveUpLeft, 1, "%s: not ended %v after Close gave up (%s it returned; Close took %v)",
			l.what, giveUpLimit, took, g.closeDur.Round(time.Microsecond))
	}
}

// unended lists what of g has neither started nor ended: tracked calls
// and Submits, by task; Go tasks that never ran, per key, beyond the
// failures the error handler has heard for that key; and Stats.Queued.
// It is keyed by what it lists, so that two lists can be compared.
func (h *harness) unended(g *generation) map[string]*leftover {
	left := map[string]*leftover{}
	for _, p := range h.prods {
		p.inflightMu.Lock()
		for t := range p.inflight {
			if t.g != g || t.state.Load()&started != 0 {
				continue
			}
			what := fmt.Sprintf("%s: its call has not returned", t)
			if tk := t.tk.Load(); tk != nil {
				if isDone(tk) {
					continue
				}
				what = fmt.Sprintf("%s: accepted, its Task's Done not closed", t)
			}
			left[fmt.Sprint("task ", t.id)] = &leftover{what: what}
		}
		p.inflightMu.Unlock()
	}
	g.goMu.Lock()
	unstarted := map[int]int{}
	for _, t := range g.goTasks {
		if t.state.Load()&started == 0 {
			unstarted[t.keys[0]]++
		}
	}
	for k, n := range unstarted {
		if heard := g.notRun[k]; heard < n {
			left[fmt.Sprint("Go on key ", k)] = &leftover{what: fmt.Sprintf(
				"gen %d (%s): key %d: %d Go tasks never started and the error handler has heard of %d", g.n, g.spec, k, n, heard)}
		}
	}
	g.goMu.Unlock()
	if q := g.e.Stats().Queued; q != 0 {
		left["queued"] = &leftover{what: fmt.Sprintf("gen %d (%s): Stats.Queued = %d; want 0", g.n, g.spec, q)}
	}
	return left
}
