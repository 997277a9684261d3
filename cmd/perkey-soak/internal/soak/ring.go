package soak

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/perkey/perkey/executor"
)

// Deadlock rings: n tasks (ringSizes) on distinct keys each hold their key,
// meet at a barrier, and then each makes a nested call on the next key of
// the ring (a Do, a DoShared, a DoMany on that key and a free one, or a
// Submit then a Wait on its Task) with its own task's ctx, which never ends
// unless a Close gives up on the task. Every member waits for the next one:
// a cycle. The executor must refuse the wait that closes it with
// ErrDeadlock, and only that one; the refused member returns, and the
// others' nested calls then run, one after the other. checkRing says what
// is right.

var ringSizes = []int{2, 3, 5}

const (
	// ringPatience is how long a member waits at the barrier for the
	// others; a ring whose members are not all running by then is
	// abandoned (not formed), without nested calls. It bounds how long the
	// members hold their workers, and a member queued behind one that
	// waits at the barrier (a DoMany of the load on both keys, a shared
	// stripe) cannot hold the ring up.
	ringPatience = 20 * time.Millisecond
	// ringLimit is how long a formed ring may take to end: longer is a
	// hang (RingHang), and the harness then ends the members' ctx so that
	// the run goes on.
	ringLimit = 10 * time.Second
	// ringSlotKeys is how many keys, beyond the load's, a ring slot owns:
	// one per member of the largest ring, and as many for its DoManys'
	// second keys.
	ringSlotKeys = 10
)

// ringPool bounds the rings in flight so that their members, which hold a
// worker each at the barrier, leave workers to the rest of the load:
// budget members at once (WithWorkers - 2), in at most budget/2 rings,
// each with a slot of keys of its own.
type ringPool struct {
	mu      sync.Mutex
	free    []int // slots not in use
	members int   // members of the rings in flight
	budget  int
}

func (rp *ringPool) init(workers int) {
	rp.budget = workers - 2
	for s := range rp.budget / 2 {
		rp.free = append(rp.free, s)
	}
}

// keys is how many keys the slots own, beyond the load's.
func (rp *ringPool) keys() int { return ringSlotKeys * (rp.budget / 2) }

// take reserves a slot for a ring of n members, or fewer if the budget is
// short (at least 2), and reports the slot and the ring's size.
func (rp *ringPool) take(n int) (slot, size int, ok bool) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	n = min(n, rp.budget-rp.members)
	if n < 2 || len(rp.free) == 0 {
		return 0, 0, false
	}
	slot = rp.free[len(rp.free)-1]
	rp.free = rp.free[:len(rp.free)-1]
	rp.members += n
	return slot, n, true
}

func (rp *ringPool) put(slot, n int) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.free = append(rp.free, slot)
	rp.members -= n
}

// ringStats are the run's counts of rings.
type ringStats struct {
	formed, isolated   atomic.Int64 // rings formed; of those, on keys of their own outside striped mode
	aborted, skipped   atomic.Int64 // rings not formed (a member refused, or missing at the barrier); ring steps with no slot free
	abortedOwn         atomic.Int64 // of the rings not formed, those on keys of their own
	refusedMember      atomic.Int64 // of the rings not formed, those a member's Submit was refused for
	deadlocks          atomic.Int64 // ErrDeadlock results in rings
	excused            atomic.Int64 // formed rings in which a nested call was refused otherwise
	busy, ended, reent atomic.Int64 // those refusals: ErrBusy; ErrClosed or the ctx's error (a Close gave up); ErrReentrant
	multi              atomic.Int64 // rings on load keys with more than one ErrDeadlock (see checkRing)
	time               histogram    // from the barrier to the last member's end
	sizes              [6]atomic.Int64
	kinds              [numOps]atomic.Int64 // the members' nested calls in formed rings, by kind
	refusedKinds       [numOps]atomic.Int64 // of those, the ones refused with ErrDeadlock
	leftovers, leftRan atomic.Int64         // Tasks of refused nested Submits the producer awaited; of those, that ran
}

type ringState int

const (
	ringForming ringState = iota
	ringFormed
	ringAborted
)

// ringOutcome is what a member's nested call came to.
type ringOutcome int

const (
	outNone     ringOutcome = iota // no nested call: the ring did not form
	outRan                         // its fn ran (whatever it returned)
	outDeadlock                    // refused with ErrDeadlock
	outOther                       // fn never ran, for another reason
)

// ring is one ring in flight.
type ring struct {
	n        int
	own      bool // on keys of a ring slot, which no other task uses
	isolated bool // own, outside striped mode (where stripes are shared)
	kinds    []op // each member's nested call; written before the members are submitted
	gate     chan struct{}

	mu       sync.Mutex // guards the fields below
	arrived  int
	state    ringState
	formedAt time.Time
	out      []ringOutcome
	errs     []error     // each member's nested call's result (for a Submit, its Wait's)
	left     []submitted // nested Submits whose Wait was refused: their Tasks, for the producer
}

func newRing(n int, isolated bool) *ring {
	return &ring{n: n, isolated: isolated, gate: make(chan struct{}),
		kinds: make([]op, n), out: make([]ringOutcome, n), errs: make([]error, n)}
}

// meet is a member's barrier: it reports whether every member arrived
// within ringPatience of this one (the ring formed). Otherwise, or if ctx
// ends first, the ring is abandoned.
func (r *ring) meet(ctx context.Context) bool {
	r.mu.Lock()
	r.arrived++
	if r.arrived == r.n && r.state == ringForming {
		r.state, r.formedAt = ringFormed, time.Now()
		close(r.gate)
	}
	r.mu.Unlock()
	timer := time.NewTimer(ringPatience)
	defer timer.Stop()
	select {
	case <-r.gate:
	case <-timer.C:
	case <-ctx.Done():
	}
	r.abort()
	return r.formed()
}

// abort abandons the ring if it has not formed, and reports whether it did.
func (r *ring) abort() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state != ringForming {
		return false
	}
	r.state = ringAborted
	close(r.gate)
	return true
}

func (r *ring) formed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state == ringFormed
}

// ringOp is the kind of a member's nested call, from x in [0, 100). Under
// Block with a per-key cap a DoMany polls for room rather than waiting in
// line, and the executor cannot see a cycle through a polling DoMany (see
// "Deadlocks" in the executor's package doc): there it is a Do.
func ringOp(x int, spec genSpec) op {
	switch {
	case x < 30:
		return opDo
	case x < 55:
		return opSubmit
	case x < 80:
		return opDoShared
	case spec.policy == "Block" && spec.perKey > 0:
		return opDo
	}
	return opDoMany
}

// ring runs one deadlock ring: it submits the members, waits for the ring
// to form (or not), for its members to end, at most ringLimit once it has
// formed, and for the Tasks of refused nested Submits, and checks the
// outcome.
func (p *producer) ring(g *generation) (closed bool) {
	h := p.h
	slot, n, ok := h.rings.take(ringSizes[p.r.IntN(len(ringSizes))])
	if !ok {
		h.ringStat.skipped.Add(1)
		return false
	}
	defer h.rings.put(slot, n)
	base := h.cfg.Keys + slot*ringSlotKeys
	isolated := p.r.IntN(2) == 0
	var keys []int
	if isolated {
		for i := range n {
			keys = append(keys, base+i)
		}
	} else if keys = p.distinctKeys(n); len(keys) < 2 {
		h.ringStat.skipped.Add(1)
		return false
	}
	n = len(keys)
	r := newRing(n, isolated && g.spec.stripes == 0)
	r.own = isolated
	// The members' ctx: it never ends, unless the ring hangs; then the
	// harness ends it, after counting the hang, so the run goes on.
	rescue, cancel := context.WithCancel(context.Background())
	defer cancel()

	var members []*task
	var tks []*executor.Task
	for i, k := range keys {
		m := &task{id: h.nextID.Add(1), g: g, p: p, op: "ring member", kind: opSubmit,
			keys: []int{k}, ctx: rescue, ring: r, idx: i}
		no := ringOp(p.r.IntN(100), g.spec)
		in := &task{id: h.nextID.Add(1), g: g, p: p, op: "ring nested " + no.String(), kind: no,
			keys: []int{keys[(i+1)%n]}, shared: no == opDoShared, nested: true, inRing: true}
		if no == opDoMany {
			in.keys = append(in.keys, base+ringSlotKeys/2+i) // a key of the slot's no other call uses
		}
		switch x := p.r.IntN(100); { // the others must complete, whatever fn does
		case x < 10:
			in.do = failing
		case x < 15:
			in.do = panicky
		}
		r.kinds[i] = no
		m.inner = in
		m.submitted = time.Now()
		g.calls.Add(1)
		h.track(m)
		tk, err := g.e.Submit(rescue, k, func(ctx context.Context) error { return h.run(ctx, m) })
		if err != nil {
			h.untrack(m)
			h.settle(m, err, 0, false)
			g.returns.Add(1)
			if r.abort() {
				h.ringStat.refusedMember.Add(1)
			}
			closed = errors.Is(err, executor.ErrClosed)
			break
		}
		m.tk.Store(tk)
		g.accepted.Add(1)
		g.returns.Add(1)
		members, tks = append(members, m), append(tks, tk)
	}
	if len(tks) > 0 {
		// The first member ends only once the ring has formed or been
		// abandoned, or without running (then it never forms).
		watchdog := time.NewTimer(waitWatchdog)
		select {
		case <-r.gate:
		case <-tks[0].Done():
		case <-watchdog.C:
		}
		watchdog.Stop()
	}
	r.abort()
	hung := r.formed() && h.ringHung(g, r, keys, tks, cancel)
	for i, tk := range tks {
		p.await(g, members[i], tk)
	}
	r.mu.Lock()
	left := r.left
	r.mu.Unlock()
	for _, s := range left {
		p.await(g, s.t, s.tk)
		h.ringStat.leftovers.Add(1)
		if s.t.state.Load()&started != 0 {
			h.ringStat.leftRan.Add(1)
		}
	}
	h.checkRing(g, r, keys, hung)
	return closed
}

// ringHung waits for the members' Tasks of a formed ring, at most
// h.ringLimit (ringLimit unless a test says otherwise). If they have not all
// ended by then it counts a hang and calls rescue, which ends the members'
// ctx, so that their nested calls give up and the run goes on.
func (h *harness) ringHung(g *generation, r *ring, keys []int, tks []*executor.Task, rescue context.CancelFunc) bool {
	d := cmp.Or(h.ringLimit, ringLimit)
	limit := time.NewTimer(d)
	defer limit.Stop()
	for _, tk := range tks {
		select {
		case <-tk.Done():
			continue
		case <-limit.C:
		}
		h.v.add(RingHang, 1, "gen %d (%s): ring of %d on keys %v not ended %v after it formed; its members' nested calls: %s",
			g.n, g.spec, r.n, keys, d, r.describe())
		rescue()
		return true
	}
	return false
}

// ringMember is a member's fn, once run has recorded its start: the
// barrier, then the nested call on the next key, with fn's ctx and no
// timeout. While the call waits the member lends its execution slot, so
// it stops counting as running.
func (h *harness) ringMember(ctx context.Context, t *task) {
	r := t.ring
	if !r.meet(ctx) {
		return
	}
	in, g := t.inner, t.g
	in.ctx = ctx
	g.calls.Add(1)
	g.running.Add(-1)
	in.submitted = time.Now()
	h.track(in) // until its call returns, or, for a Task left behind, the producer's await
	fn := func(ctx context.Context) error { return h.run(ctx, in) }
	var err error
	var left *executor.Task // a nested Submit's Task, still to be awaited
	switch e := g.e; in.kind {
	case opDoShared:
		err = e.DoShared(ctx, in.keys[0], fn)
	case opDoMany:
		err = e.DoMany(ctx, in.keys, fn)
	case opSubmit:
		var tk *executor.Task
		if tk, err = e.Submit(ctx, in.keys[0], fn); err != nil {
			break
		}
		in.tk.Store(tk)
		err = tk.Wait(ctx)
		switch {
		case errors.Is(err, executor.ErrDeadlock), errors.Is(err, executor.ErrReentrant), !isDone(tk):
			// The Wait was refused, or ctx ended (a Close gave up): the
			// task may still be queued behind the next member, and
			// waiting for it here would close the cycle again. The
			// producer awaits it once the members have ended.
			left = tk
		case err == ctx.Err() && err != nil:
			err = tk.Wait(context.Background()) // ctx and the task ended together
		}
	default:
		err = e.Do(ctx, in.keys[0], fn)
	}
	g.running.Add(1)
	out := outOther
	switch {
	case errors.Is(err, executor.ErrDeadlock):
		out = outDeadlock
	case left == nil && in.state.Load()&started != 0:
		out = outRan
	}
	r.mu.Lock()
	r.out[t.idx], r.errs[t.idx] = out, err
	if left != nil {
		g.accepted.Add(1) // the producer's await ends it
		r.left = append(r.left, submitted{t: in, tk: left})
	}
	r.mu.Unlock()
	if left == nil {
		h.untrack(in)
		h.settle(in, err, 0, false)
	}
	g.returns.Add(1)
}

// describe lists the members' outcomes, for a violation's report.
func (r *ring) describe() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := ""
	for i, o := range r.out {
		if i > 0 {
			s += ", "
		}
		switch o {
		case outNone:
			s += "none yet"
		case outRan:
			s += "ran"
		default:
			s += r.errs[i].Error()
		}
	}
	return s
}

// checkRing checks a ring whose members have ended. Once it formed, its n
// nested calls wait in a cycle: at least one must be refused, with
// ErrDeadlock unless something else refused one first (ErrBusy from a
// cap or MaxQueueDelay; ErrReentrant behind a DoMany of the load on two of
// its keys; ErrClosed or the ctx's error from a Close that gave up). On
// keys of its own (isolated, outside striped mode) the ring is the only
// cycle there is, so exactly one call may get ErrDeadlock; on the load's
// keys, or sharing stripes with them, a DoMany of the load can split it
// into two cycles (a DoMany queued on two keys that are not neighbours in
// the ring), each closed by its own refusal, so only "at least one" holds.
// A hung ring was counted by ring.
func (h *harness) checkRing(g *generation, r *ring, keys []int, hung bool) {
	rs := &h.ringStat
	if !r.formed() {
		rs.aborted.Add(1)
		if r.own {
			rs.abortedOwn.Add(1)
		}
		return
	}
	rs.formed.Add(1)
	rs.sizes[r.n].Add(1)
	if r.isolated {
		rs.isolated.Add(1)
	}
	rs.time.record(time.Since(r.formedAt))
	r.mu.Lock()
	var deadlocks, others, reentrant int
	for i, o := range r.out {
		rs.kinds[r.kinds[i]].Add(1)
		switch o {
		case outDeadlock:
			deadlocks++
			rs.refusedKinds[r.kinds[i]].Add(1)
		case outOther:
			others++
			switch err := r.errs[i]; {
			case errors.Is(err, executor.ErrBusy):
				rs.busy.Add(1)
			case errors.Is(err, executor.ErrReentrant):
				rs.reent.Add(1)
				reentrant++
			default:
				rs.ended.Add(1)
			}
		}
	}
	r.mu.Unlock()
	rs.deadlocks.Add(int64(deadlocks))
	if others > 0 {
		rs.excused.Add(1)
	}
	switch {
	case hung:
	case deadlocks == 0 && others == 0:
		h.v.add(RingNotBroken, 1, "gen %d (%s): ring of %d on keys %v: every nested call ran, none was refused: %s",
			g.n, g.spec, r.n, keys, r.describe())
	case deadlocks > 1 && r.isolated:
		h.v.add(RingNotBroken, 1, "gen %d (%s): ring of %d on keys of its own %v: %d nested calls refused with ErrDeadlock; want 1: %s",
			g.n, g.spec, r.n, keys, deadlocks, r.describe())
	case deadlocks > 1:
		rs.multi.Add(1)
	}
	if r.isolated && reentrant > 0 {
		h.v.add(RingNotBroken, 1, "gen %d (%s): ring of %d on keys of its own %v: ErrReentrant, but no DoMany of another task is queued on them: %s",
			g.n, g.spec, r.n, keys, r.describe())
	}
}
