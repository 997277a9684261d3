package soak

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/perkey/perkey/executor"
)

// op is a kind of producer step.
type op int

const (
	opDo op = iota
	opCall
	opSubmit
	opDoMany
	opDoShared
	opGo
	opGate
	opRing        // a deadlock ring (see ring.go)
	opBatchSubmit // Batcher.Submit of a few messages, then their Waits (see batch.go)
	opBatchDo     // one Batcher.Do
	numOps
)

var opNames = [numOps]string{
	opDo:          "Do",
	opCall:        "Call",
	opSubmit:      "Submit",
	opDoMany:      "DoMany",
	opDoShared:    "DoShared",
	opGo:          "Go",
	opGate:        "gate+cancel",
	opRing:        "ring",
	opBatchSubmit: "Batcher.Submit",
	opBatchDo:     "Batcher.Do",
}

func (o op) String() string { return opNames[o] }

// backoffMax bounds a producer's pause after ErrBusy.
const backoffMax = 500 * time.Microsecond

// opWeights is the mix of steps, in percent.
var opWeights = [numOps]int{
	opDo:          24,
	opCall:        5,
	opSubmit:      23,
	opDoMany:      15,
	opDoShared:    21,
	opGo:          5,
	opGate:        2,
	opRing:        1,
	opBatchSubmit: 3,
	opBatchDo:     1,
}

// producer is one goroutine of load. Its random source and its queue-wait
// histogram are its own; the histogram is written by the fns it submitted.
type producer struct {
	h       *harness
	id      int
	r       *rand.Rand
	zipf    *rand.Zipf
	wait    histogram
	refused atomic.Bool // the current step met ErrBusy

	inflightMu sync.Mutex         // guards inflight
	inflight   map[*task]struct{} // its calls in flight and accepted Submits not yet awaited (see track)
}

// track records t, whose call is about to be made, as in flight until
// untrack: checkGaveUp looks there for the tasks a giving-up Close must
// end. A call made once its generation's Close has begun is refused at
// once and is not tracked.
func (h *harness) track(t *task) {
	if t.g.closing.Load() {
		return
	}
	p := t.p
	p.inflightMu.Lock()
	defer p.inflightMu.Unlock()
	if p.inflight == nil {
		p.inflight = map[*task]struct{}{}
	}
	p.inflight[t] = struct{}{}
}

// untrack records that t's submitter has heard of its end (or refusal).
func (h *harness) untrack(t *task) {
	p := t.p
	p.inflightMu.Lock()
	defer p.inflightMu.Unlock()
	delete(p.inflight, t)
}

func newProducer(h *harness, id int) *producer {
	r := rand.New(rand.NewPCG(h.cfg.Seed, uint64(id)+1))
	return &producer{h: h, id: id, r: r, zipf: rand.NewZipf(r, 1.1, 1, uint64(h.cfg.Keys-1))}
}

// loop runs steps until the run stops. A step that met ErrBusy backs off
// for up to backoffMax, as a client should; one that met ErrClosed waits for
// the next generation instead of spinning on the closing one.
func (p *producer) loop() {
	for !p.h.stop.Load() {
		g := p.h.cur.Load()
		if g == nil {
			return
		}
		closed := p.step(g)
		if p.refused.Swap(false) {
			time.Sleep(time.Duration(p.r.Int64N(int64(backoffMax))))
		}
		if closed {
			select {
			case <-g.replaced:
			case <-p.h.over:
				return
			}
		}
	}
}

// step runs one random operation on g and reports whether it met ErrClosed.
func (p *producer) step(g *generation) (closed bool) {
	x := p.r.IntN(100)
	o := op(0)
	for ; x >= opWeights[o]; o++ {
		x -= opWeights[o]
	}
	p.h.calls[o].Add(1)
	switch o {
	case opSubmit:
		return p.batch(g)
	case opGate:
		return p.gate(g)
	case opGo:
		return p.goBatch(g)
	case opRing:
		return p.ring(g)
	case opBatchSubmit:
		return p.messages(g)
	case opDoMany:
		keys := p.distinctKeys(2 + p.r.IntN(2))
		return p.call(g, o, keys, nil, 0)
	}
	return p.call(g, o, []int{p.key()}, nil, 0)
}

func (p *producer) key() int { return int(p.zipf.Uint64()) }

// distinctKeys draws up to n distinct keys (fewer if the hot keys keep
// coming up).
func (p *producer) distinctKeys(n int) []int {
	keys := make([]int, 0, n)
	for try := 0; len(keys) < n && try < 4*n; try++ {
		if k := p.key(); !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// valueKey keys the value of a submission's ctx that never ends.
type valueKey struct{}

// context returns a ctx for one submission: mostly Background or another
// that never ends (with a value), else one that times out within 3 ms, is
// canceled within 2 ms, or has already ended.
func (p *producer) context() (context.Context, context.CancelFunc) {
	switch x := p.r.IntN(100); {
	case x < 55:
		return context.Background(), func() {}
	case x < 65: // never ends either, but is not context.Background() (see executor's plainArg)
		return context.WithValue(context.Background(), valueKey{}, x), func() {}
	case x < 80:
		return context.WithTimeout(context.Background(), time.Duration(p.r.Int64N(int64(3*time.Millisecond))))
	case x < 95:
		ctx, cancel := context.WithCancel(context.Background())
		t := time.AfterFunc(time.Duration(p.r.Int64N(int64(2*time.Millisecond))), cancel)
		return ctx, func() { t.Stop(); cancel() }
	default:
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx, cancel
	}
}

// newTask draws a task's behaviour: mostly quick, else slow (0–2 ms), an
// error, a panic or a runtime.Goexit; for a Batcher message, what it makes
// its batch do (see messageBehaviour), and no nested call.
func (p *producer) newTask(g *generation, o op, keys []int, ctx context.Context) *task {
	t := &task{
		id:     p.h.nextID.Add(1),
		g:      g,
		p:      p,
		op:     o.String(),
		kind:   o,
		keys:   keys,
		shared: o == opDoShared,
		ctx:    ctx,
	}
	if o == opBatchSubmit || o == opBatchDo {
		t.do, t.nap = p.messageBehaviour()
		return t
	}
	switch x := p.r.IntN(100); {
	case x < 77:
	case x < 78:
		t.do, t.nap = stubborn, time.Duration(p.r.Int64N(int64(2*time.Millisecond)))
	case x < 88:
		t.do, t.nap = slow, time.Duration(p.r.Int64N(int64(2*time.Millisecond)))
	case x < 94:
		t.do = failing
	case x < 98:
		t.do = panicky
	default:
		t.do = goexit
	}
	// Some fns first make a nested call (see harness.nest), on a key above
	// all of theirs; not in striped mode, where key order says nothing
	// about the order of stripes.
	if o != opGate && g.spec.stripes == 0 && p.r.IntN(100) < nestPercent {
		if top := slices.Max(keys); top < p.h.cfg.Keys-1 {
			above := func() int { return top + 1 + p.r.IntN(p.h.cfg.Keys-1-top) }
			no, nk := nestedOp(p.r.IntN(100)), []int{above()}
			if no == opDoMany {
				if k := above(); k != nk[0] {
					nk = append(nk, k)
				} else {
					no = opDo // one key above: a DoMany of one is a Do
				}
			}
			in := p.newTask(g, no, nk, nil)
			in.op, in.nested = "nested "+no.String(), true
			t.inner = in
		}
	}
	return t
}

// nestedOp is the kind of a nested call, from x in [0, 100): Do, Submit
// then Wait, DoShared or DoMany.
func nestedOp(x int) op {
	switch {
	case x < 40:
		return opDo
	case x < 70:
		return opSubmit
	case x < 85:
		return opDoShared
	}
	return opDoMany
}

// call makes one blocking call (Do, Call, DoShared, DoMany or Batcher.Do)
// and checks its result. streams and seq place it in a batch's FIFO streams
// (nil outside a batch).
//
// If fn may end through runtime.Goexit (see task.mayExit), the call is made
// from a goroutine of its own, which the producer waits for: a fn that runs
// inline, on the caller's goroutine, takes that goroutine with it, and the
// producer must survive it. The call then never returns; the harness checks
// that this happened only to a fn that did end through Goexit.
func (p *producer) call(g *generation, o op, keys []int, streams []*stream, seq int64) (closed bool) {
	ctx, cancel := p.context()
	defer cancel()
	t := p.newTask(g, o, keys, ctx)
	t.streams, t.seq = streams, seq
	arg := keys
	if o == opDoMany && p.r.IntN(10) == 0 {
		arg = append(slices.Clone(keys), keys[0]) // DoMany removes duplicates
	}
	if !t.mayExit() {
		return p.invoke(g, t, arg)
	}
	p.h.aside.Add(1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		closed = p.invoke(g, t, arg)
	}()
	<-done
	return closed
}

// invoke makes t's blocking call on keys and checks its result, or, if the
// call never returns (its goroutine exits), that fn ended through Goexit.
func (p *producer) invoke(g *generation, t *task, keys []int) (closed bool) {
	fn := func(ctx context.Context) error { return p.h.run(ctx, t) }
	ctx := t.ctx
	returned := false
	defer func() {
		if !returned {
			p.h.gone(t)
			g.returns.Add(1)
		}
		p.h.untrack(t)
	}()
	g.calls.Add(1)
	t.submitted = time.Now()
	p.h.track(t)
	var err error
	var v uint64
	switch t.kind {
	case opDo:
		err = g.e.Do(ctx, keys[0], fn)
	case opCall:
		v, err = executor.Call(ctx, g.e, keys[0], func(ctx context.Context) (uint64, error) {
			return t.id, p.h.run(ctx, t)
		})
	case opDoShared:
		err = g.e.DoShared(ctx, keys[0], fn)
	case opDoMany:
		err = g.e.DoMany(ctx, keys, fn)
	case opBatchDo:
		err = g.batcher.Do(ctx, keys[0], t)
	}
	returned = true
	p.h.settle(t, err, v, t.kind == opCall)
	g.returns.Add(1)
	return errors.Is(err, executor.ErrClosed)
}

// goBatch fires 1–4 Go calls over 1–2 keys, each key a FIFO stream, and
// does not wait for them: their failures reach the generation's error
// handler (see handle). One time in three a Do on one of the keys follows,
// which must start after them.
func (p *producer) goBatch(g *generation) (closed bool) {
	keys := p.distinctKeys(1 + p.r.IntN(2))
	streams := make([]*stream, len(keys))
	for i := range streams {
		streams[i] = new(stream)
	}
	var seq int64
	for range 1 + p.r.IntN(4) {
		i := p.r.IntN(len(keys))
		ctx, cancel := p.context()
		seq++
		t := p.newTask(g, opGo, keys[i:i+1], ctx)
		t.streams, t.seq = streams[i:i+1], seq
		t.cancel = cancel // once fn ends; a ctx that can end does so within 3 ms anyway
		t.submitted = time.Now()
		g.calls.Add(1)
		p.h.goCalls.Add(1)
		p.h.track(t)
		err := g.e.Go(ctx, keys[i], func(ctx context.Context) error { return p.h.run(ctx, t) })
		p.h.untrack(t) // accepted, it is one of g.goTasks (see checkGaveUp)
		if err != nil {
			p.h.settle(t, err, 0, false)
			g.returns.Add(1)
			cancel()
			closed = closed || errors.Is(err, executor.ErrClosed)
			continue
		}
		p.h.goAccepted.Add(1)
		g.goMu.Lock()
		g.goTasks = append(g.goTasks, t)
		g.goMu.Unlock()
		g.returns.Add(1)
	}
	if p.r.IntN(3) == 0 {
		seq++
		i := p.r.IntN(len(keys))
		closed = p.call(g, opDo, keys[i:i+1], streams[i:i+1], seq) || closed
	}
	return closed
}

// submitted is an accepted Submit awaiting its Wait.
type submitted struct {
	t      *task
	tk     *executor.Task
	cancel context.CancelFunc
}

// batch submits 2–8 tasks over 1–3 keys, sometimes follows them with a
// blocking call on the same keys, then waits for them in random order.
// Each key's submissions form a FIFO stream.
func (p *producer) batch(g *generation) (closed bool) {
	s := p.submitMany(g, opSubmit, 3, 8)
	if p.r.IntN(3) == 0 {
		// A blocking call after the Submits: it must start after them.
		switch i := p.r.IntN(len(s.keys)); p.r.IntN(3) {
		case 0:
			p.follow(g, s, opDo, i)
		case 1:
			p.follow(g, s, opDoShared, i)
		default:
			p.follow(g, s, opDoMany, -1)
		}
	}
	return p.awaitAll(g, s)
}

// submissions are a step's Submits (or Batcher.Submits) over a few keys,
// each key a FIFO stream of the producer's.
type submissions struct {
	keys    []int
	streams []*stream // one per key
	seq     int64     // the last submission's place in its stream
	subs    []submitted
	closed  bool // a call met ErrClosed
}

// submitMany submits 2 to maxN tasks of kind o (opSubmit, or opBatchSubmit
// for Batcher messages) over 1 to maxKeys distinct keys. One accepted task
// in twenty has its ctx canceled at once, most likely while it is queued.
func (p *producer) submitMany(g *generation, o op, maxKeys, maxN int) *submissions {
	keys := p.distinctKeys(1 + p.r.IntN(maxKeys))
	s := &submissions{keys: keys, streams: make([]*stream, len(keys))}
	for i := range s.streams {
		s.streams[i] = new(stream)
	}
	n := 2 + p.r.IntN(maxN-1)
	s.subs = make([]submitted, 0, n)
	for range n {
		i := p.r.IntN(len(keys))
		ctx, cancel := p.context()
		s.seq++
		t := p.newTask(g, o, keys[i:i+1], ctx)
		t.streams, t.seq = s.streams[i:i+1], s.seq
		t.submitted = time.Now()
		g.calls.Add(1)
		p.h.track(t)
		var tk *executor.Task
		var err error
		if o == opBatchSubmit {
			tk, err = g.batcher.Submit(ctx, keys[i], t)
		} else {
			tk, err = g.e.Submit(ctx, keys[i], func(ctx context.Context) error { return p.h.run(ctx, t) })
		}
		if err != nil {
			p.h.untrack(t)
			p.h.settle(t, err, 0, false)
			g.returns.Add(1)
			cancel()
			s.closed = s.closed || errors.Is(err, executor.ErrClosed)
			continue
		}
		t.tk.Store(tk)
		g.accepted.Add(1)
		g.returns.Add(1)
		if p.r.IntN(20) == 0 {
			cancel() // most likely while queued
		}
		s.subs = append(s.subs, submitted{t, tk, cancel})
	}
	return s
}

// follow makes a blocking call of kind o after s's submissions, on key i
// of s, or on all its keys if i < 0: it must start after them.
func (p *producer) follow(g *generation, s *submissions, o op, i int) {
	s.seq++
	keys, streams := s.keys, s.streams
	if i >= 0 {
		keys, streams = keys[i:i+1], streams[i:i+1]
	}
	s.closed = p.call(g, o, keys, streams, s.seq) || s.closed
}

// awaitAll waits for s's accepted submissions in random order, and
// reports whether a call met ErrClosed.
func (p *producer) awaitAll(g *generation, s *submissions) (closed bool) {
	p.r.Shuffle(len(s.subs), func(i, j int) { s.subs[i], s.subs[j] = s.subs[j], s.subs[i] })
	for _, sub := range s.subs {
		p.await(g, sub.t, sub.tk)
		sub.cancel()
	}
	return s.closed
}

func isDone(tk *executor.Task) bool {
	select {
	case <-tk.Done():
		return true
	default:
		return false
	}
}

// await waits for an accepted Submit and checks its result. Sometimes a
// short Wait gives up first; that must leave the task alone. A Wait that
// outlives waitWatchdog gives up without counting the task as ended: the
// generation check then counts it lost.
func (p *producer) await(g *generation, t *task, tk *executor.Task) {
	defer p.h.untrack(t)
	if p.r.IntN(10) == 0 {
		ctx, cancel := context.WithCancel(context.Background())
		stop := time.AfterFunc(time.Duration(p.r.Int64N(int64(500*time.Microsecond))), cancel)
		err := tk.Wait(ctx)
		stop.Stop()
		cancel()
		if !isDone(tk) && err != ctx.Err() {
			p.h.v.add(WrongOutcome, 1, "%s: Wait returned %v before the task ended", t, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitWatchdog)
	defer cancel()
	err := tk.Wait(ctx)
	if !isDone(tk) {
		if err != ctx.Err() {
			p.h.v.add(WrongOutcome, 1, "%s: Wait returned %v before the task ended", t, err)
		}
		return
	}
	if err == ctx.Err() && ctx.Err() != nil {
		// Wait's ctx and the task ended together; ask again for the task's end.
		err = tk.Wait(context.Background())
	}
	p.h.settle(t, err, 0, false)
	g.ended.Add(1)
}

// gate runs the cancel-while-queued scenario: a gate task holds a key, a
// victim queued behind it has its ctx canceled, and the victim must give
// its place back at once and never run (see the package doc).
func (p *producer) gate(g *generation) (closed bool) {
	key := p.key()
	s := new(stream)
	gt := newGate()
	gateTask := p.newTask(g, opGate, []int{key}, context.Background())
	gateTask.do, gateTask.gate, gateTask.streams, gateTask.seq = quick, gt, []*stream{s}, 1
	gateTask.submitted = time.Now()
	g.calls.Add(1)
	p.h.track(gateTask)
	tkG, err := g.e.Submit(context.Background(), key, func(ctx context.Context) error { return p.h.run(ctx, gateTask) })
	if err != nil {
		p.h.untrack(gateTask)
		p.h.settle(gateTask, err, 0, false)
		g.returns.Add(1)
		return errors.Is(err, executor.ErrClosed)
	}
	gateTask.tk.Store(tkG)
	g.accepted.Add(1)
	g.returns.Add(1)

	// Under Block the victim's Submit may wait for room that only the
	// gate's release would make: its ctx ends after victimPatience so the
	// producer cannot deadlock itself. An early end changes nothing below:
	// it too comes before the check that the gate still runs.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	patience := time.AfterFunc(victimPatience, cancel)
	defer patience.Stop()
	victim := p.newTask(g, opGate, []int{key}, ctx)
	victim.streams, victim.seq = []*stream{s}, 2
	victim.submitted = time.Now()
	g.calls.Add(1)
	p.h.track(victim)
	tkV, err := g.e.Submit(ctx, key, func(ctx context.Context) error { return p.h.run(ctx, victim) })
	if err != nil {
		p.h.untrack(victim)
		p.h.settle(victim, err, 0, false)
		g.returns.Add(1)
		close(gt.release)
		p.await(g, gateTask, tkG)
		return errors.Is(err, executor.ErrClosed)
	}
	victim.tk.Store(tkV)
	g.accepted.Add(1)
	g.returns.Add(1)

	timer := time.NewTimer(time.Second)
	select {
	case <-gt.running:
	case <-tkG.Done():
	case <-timer.C:
	}
	timer.Stop()
	held := false
	select {
	case <-gt.running:
		held = !gt.returned.Load()
	default:
	}
	cancel()
	victimDone := false
	if held && !gt.returned.Load() {
		// The gate ran from before the cancel to after it, and the victim
		// is behind it: its ctx ended before it could start.
		victim.mustNotRun.Store(true)
		p.h.gates.Add(1)
		wctx, wcancel := context.WithTimeout(context.Background(), withdrawLimit)
		err = tkV.Wait(wctx)
		wcancel()
		if isDone(tkV) {
			p.h.untrack(victim)
			p.h.settle(victim, err, 0, false)
			g.ended.Add(1)
			victimDone = true
		} else {
			p.h.v.add(SlowWithdrawal, 1, "%s: Wait still blocked %v after its ctx was canceled behind a running gate",
				victim, withdrawLimit)
		}
	} else {
		// The gate had not started, or a forced Close ended it: an
		// ordinary cancel, checked like any other.
		p.h.gateVoid.Add(1)
	}
	close(gt.release)
	p.await(g, gateTask, tkG)
	if !victimDone {
		p.await(g, victim, tkV)
	}
	return false
}
