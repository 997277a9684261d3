package mailbox_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/perkey/perkey/internal/mailbox"
)

// plainWork is a plain task's arg for testPlain: it logs its task's id
// (through fn), can be held back by a gate, and can end its goroutine with
// runtime.Goexit after logging.
type plainWork struct {
	gate    chan struct{} // nil: run at once
	started chan struct{} // closed when RunPlain begins, if non-nil
	exit    bool
	ran     atomic.Int32
	done    chan struct{} // closed when the task has run
	settled atomic.Int32
	settle  func()           // called by SettlePlain, if non-nil
	m       *mailbox.Mailbox // the mailbox it is queued on, once queued
	at      mailbox.Place    // where EnqueuePlain queued it
}

func (p *plainWork) SettlePlain() {
	p.settled.Add(1)
	if p.settle != nil {
		p.settle()
	}
}

// testPlain is the tests' mailbox.Plain: it runs each plain task through
// its plainWork, and checks that the mailbox passes the one it queued on.
type testPlain struct{}

func (testPlain) RunPlain(m *mailbox.Mailbox, fn func(context.Context) error, arg any, _ int64, _ int) {
	p := arg.(*plainWork)
	if p.m != nil && p.m != m {
		panic("plain task run for another mailbox")
	}
	p.RunPlain(fn)
}

func (testPlain) SettlePlain(arg any) { arg.(*plainWork).SettlePlain() }

func (testPlain) NewAux(*mailbox.Mailbox) *mailbox.Aux { return new(mailbox.Aux) }

func (p *plainWork) RunPlain(fn func(context.Context) error) {
	p.ran.Add(1)
	if p.started != nil {
		close(p.started)
	}
	if p.gate != nil {
		<-p.gate
	}
	_ = fn(context.Background())
	close(p.done)
	if p.exit {
		runtime.Goexit()
	}
}

// plain queues a plain task that logs id.
func (b *box) plain(id int, log *runLog, p *plainWork) *plainWork {
	if p == nil {
		p = new(plainWork)
	}
	p.done = make(chan struct{})
	p.m = &b.m
	b.m.Lock()
	at, dispatch := b.m.EnqueuePlain(func(context.Context) error { log.add(id); return nil }, p, int64(id))
	p.at = at
	b.m.Release()
	if dispatch {
		b.m.Dispatch()
	}
	return p
}

func (b *box) pending() int {
	b.m.Lock()
	defer b.m.Release()
	return b.m.Pending()
}

// TestPlainFIFO: plain tasks and Turns queued on one mailbox in any mix run
// one at a time in the order they were queued, each once, whatever the
// drive loop's budget; then the mailbox is idle and retired.
func TestPlainFIFO(t *testing.T) {
	for _, throughput := range []int{1, 2, 5, 64} {
		rng := rand.New(rand.NewPCG(uint64(throughput), 1))
		r := newRunner(t, 1, throughput)
		b := newBox(r)
		var log runLog
		head := newGatedWork(0, &log) // everything queues behind it
		b.submit(head)
		wait(t, "the head task to start", head.started)
		var dones []<-chan struct{}
		for id := 1; id < 300; id++ {
			if rng.IntN(3) == 0 {
				w := newWork(id, &log)
				b.submit(w)
				dones = append(dones, w.done)
			} else {
				dones = append(dones, b.plain(id, &log, nil).done)
			}
		}
		close(head.gate)
		for _, d := range dones {
			wait(t, "a task to end", d)
		}
		r.Wait()
		if got := log.get(); !slices.Equal(got, seq(300)) {
			t.Fatalf("throughput %d: run order %v; want 0..299 in order", throughput, got)
		}
		if p := b.pending(); p != 0 {
			t.Errorf("throughput %d: Pending after the drain = %d; want 0", throughput, p)
		}
		b.m.Lock()
		idle := b.m.Idle()
		b.m.Release()
		if !idle || b.o.retired.Load() == 0 {
			t.Errorf("throughput %d: idle %v, retired %d times; want idle and retired", throughput, idle, b.o.retired.Load())
		}
	}
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// TestPlainRingGrowsDuringBatch: while a plain batch runs, a thousand more
// plain tasks queue behind it, growing the ring the batch reads from; the
// batch and everything behind it still run once each, in order.
func TestPlainRingGrowsDuringBatch(t *testing.T) {
	r := newRunner(t, 1, 8)
	b := newBox(r)
	var log runLog
	first := b.plain(0, &log, &plainWork{gate: make(chan struct{}), started: make(chan struct{})})
	var last *plainWork
	for id := 1; id < 4; id++ {
		last = b.plain(id, &log, nil) // the rest of the first batch, if it takes them
	}
	wait(t, "the first plain task to start", first.started)
	for id := 4; id < 1004; id++ {
		last = b.plain(id, &log, nil)
	}
	close(first.gate)
	wait(t, "the last plain task", last.done)
	r.Wait()
	if got := log.get(); !slices.Equal(got, seq(1004)) {
		t.Fatalf("run order %v; want 0..1003 in order", got)
	}
	if p := b.pending(); p != 0 {
		t.Errorf("Pending after the drain = %d; want 0", p)
	}
}

// TestPlainBatchLongerThanMaxCut: with a budget above the most slots one
// batch takes (a batch's size is kept in 16 bits), a queue longer than
// that runs in several batches, every task once and in order, and tasks
// queued while the first of them runs go behind it, not into its slots.
func TestPlainBatchLongerThanMaxCut(t *testing.T) {
	const n, more = 70_000, 10
	r := newRunnerWith(t, 1, 1<<20, mailbox.RunnerOptions{})
	b := newBox(r)
	var log runLog
	first := b.plain(0, &log, &plainWork{gate: make(chan struct{}), started: make(chan struct{})})
	wait(t, "the first plain task to start", first.started)
	// Task 1 starts the long batch, and is held there while more queue.
	second := b.plain(1, &log, &plainWork{gate: make(chan struct{}), started: make(chan struct{})})
	for id := 2; id < n; id++ {
		b.plain(id, &log, nil)
	}
	close(first.gate)
	wait(t, "the long batch to start", second.started)
	var last *plainWork
	for id := n; id < n+more; id++ {
		last = b.plain(id, &log, nil)
	}
	close(second.gate)
	wait(t, "the last plain task", last.done)
	r.Wait()
	if got := log.get(); !slices.Equal(got, seq(n+more)) {
		i := 0
		for i < len(got) && got[i] == i {
			i++
		}
		t.Fatalf("%d tasks ran, in order up to %d; want 0..%d in order", len(got), i, n+more-1)
	}
	if p := b.pending(); p != 0 {
		t.Errorf("Pending after the drain = %d; want 0", p)
	}
}

// TestPlainGoexit: a plain task whose RunPlain ends its goroutine in the
// middle of a batch costs the key nothing: the tasks behind it run in
// order on a fresh drive loop, Ran counts every task, and the mailbox
// retires.
func TestPlainGoexit(t *testing.T) {
	var ran atomic.Int64
	r := newRunnerWith(t, 1, 16, mailbox.RunnerOptions{Ran: countRan(&ran)})
	b := newBox(r)
	var log runLog
	head := newGatedWork(-1, &log)
	b.submit(head)
	wait(t, "the head task to start", head.started)
	var ps []*plainWork
	for id := range 10 {
		ps = append(ps, b.plain(id, &log, &plainWork{exit: id == 3 || id == 7}))
	}
	close(head.gate)
	wait(t, "the last plain task", ps[len(ps)-1].done)
	r.Wait()
	for i, p := range ps {
		if n := p.settled.Load(); n != 1 {
			t.Errorf("plain task %d settled %d times; want once", i, n)
		}
	}
	if got, want := log.get(), append([]int{-1}, seq(10)...); !slices.Equal(got, want) {
		t.Fatalf("run order %v; want %v", got, want)
	}
	if got := ran.Load(); got != 11 {
		t.Errorf("Ran reported %d tasks; want 11", got)
	}
	if p := b.pending(); p != 0 || b.o.retired.Load() == 0 {
		t.Errorf("after the drain: Pending %d, retired %d times; want 0 and retired", p, b.o.retired.Load())
	}
}

// TestPlainSettle: a plain task is settled once its place is free, so
// whoever it wakes finds room in the key: the pending count it sees no
// longer counts it.
func TestPlainSettle(t *testing.T) {
	r := newRunner(t, 1, 8)
	b := newBox(r)
	var log runLog
	head := newGatedWork(-1, &log)
	b.submit(head)
	wait(t, "the head task to start", head.started)
	seen := make([]int, 3)
	var ps []*plainWork
	for id := range seen {
		ps = append(ps, b.plain(id, &log, &plainWork{settle: func() { seen[id] = b.pending() }}))
	}
	close(head.gate)
	for _, p := range ps {
		wait(t, "a plain task", p.done)
	}
	r.Wait()
	for id, p := range ps {
		if n := p.settled.Load(); n != 1 {
			t.Errorf("plain task %d settled %d times; want once", id, n)
		}
	}
	if want := []int{2, 1, 0}; !slices.Equal(seen, want) {
		t.Errorf("pending when each task settled: %v; want %v", seen, want)
	}
}

// TestTakePlain: TakePlain takes the queued plain tasks out, oldest first,
// leaving the Turns queued among them and the running task alone; the
// mailbox counts them pending until DonePlain, and the Turns behind them
// still run in order.
func TestTakePlain(t *testing.T) {
	r := newRunner(t, 1, 8)
	b := newBox(r)
	var log runLog
	head := newGatedWork(0, &log)
	b.submit(head)
	wait(t, "the head task to start", head.started)
	var ps []*plainWork
	var ws []*work
	for id := 1; id <= 6; id++ {
		if id%3 == 0 {
			w := newWork(id, &log)
			b.submit(w)
			ws = append(ws, w)
			continue
		}
		ps = append(ps, b.plain(id, &log, nil))
	}
	b.m.Lock()
	taken := b.m.TakePlain(all)
	again := b.m.TakePlain(all)
	b.m.Release()
	if len(taken) != len(ps) || again != nil {
		t.Fatalf("TakePlain: got %d, then %d; want %d, then none", len(taken), len(again), len(ps))
	}
	for i, p := range taken {
		if p.(*plainWork) != ps[i] {
			t.Errorf("TakePlain[%d] is not the %d-th plain task queued", i, i)
		}
	}
	if p := b.pending(); p != 1+len(ws)+len(ps) {
		t.Errorf("Pending before DonePlain = %d; want %d", p, 1+len(ws)+len(ps))
	}
	for range taken {
		b.m.DonePlain()
	}
	close(head.gate)
	for _, w := range ws {
		wait(t, "a task behind the taken ones", w.done)
	}
	r.Wait()
	if got := log.get(); !slices.Equal(got, []int{0, 3, 6}) {
		t.Errorf("run order %v; want [0 3 6]", got)
	}
	for i, p := range ps {
		if p.ran.Load() != 0 {
			t.Errorf("taken plain task %d ran", i)
		}
	}
	if p := b.pending(); p != 0 {
		t.Errorf("Pending after the drain = %d; want 0", p)
	}
}

// all is TakePlain's drop for every task.
func all(any) bool { return true }

// TestTakePlainSome: TakePlain takes out only the tasks drop names, those
// a running plain batch has taken behind the task it runs included (it
// claims them back from the loop), and leaves the rest to run in order:
// the slots it emptied are skipped, Ran hears only of the tasks that ran,
// and the mailbox drains and retires.
func TestTakePlainSome(t *testing.T) {
	var ran atomic.Int64
	r := newRunnerWith(t, 1, 8, mailbox.RunnerOptions{Ran: countRan(&ran)})
	b := newBox(r)
	var log runLog
	head := newGatedWork(0, &log) // the plain tasks queue behind it
	b.submit(head)
	wait(t, "the head task to start", head.started)
	gate := &plainWork{gate: make(chan struct{}), started: make(chan struct{})}
	ps := []*plainWork{b.plain(1, &log, gate)}
	for id := 2; id <= 12; id++ {
		ps = append(ps, b.plain(id, &log, nil))
	}
	close(head.gate)
	wait(t, "the first plain task to start", gate.started) // its batch runs
	odd := func(arg any) bool {
		for i, p := range ps {
			if any(p) == arg {
				return (i+1)%2 == 1
			}
		}
		t.Errorf("TakePlain asked about an arg never queued")
		return false
	}
	b.m.Lock()
	taken := b.m.TakePlain(odd)
	b.m.Release()
	var ids []int
	for _, a := range taken {
		ids = append(ids, slices.Index(ps, a.(*plainWork))+1)
	}
	if want := []int{3, 5, 7, 9, 11}; !slices.Equal(ids, want) { // 1 runs
		t.Errorf("TakePlain took %v; want %v", ids, want)
	}
	for range taken {
		b.m.DonePlain()
	}
	close(gate.gate)
	wait(t, "the last plain task", ps[len(ps)-1].done)
	r.Wait()
	if got, want := log.get(), []int{0, 1, 2, 4, 6, 8, 10, 12}; !slices.Equal(got, want) {
		t.Errorf("run order %v; want %v", got, want)
	}
	if n := ran.Load(); n != 8 {
		t.Errorf("Ran heard of %d tasks; want 8: the head and the 7 plain tasks that ran", n)
	}
	if p := b.pending(); p != 0 {
		t.Errorf("Pending after the drain = %d; want 0", p)
	}
	if b.o.retired.Load() == 0 {
		t.Errorf("the drained mailbox was never retired")
	}
}

// TestPlainPos: PlainPos finds each plain task still waiting at the
// position it was queued at (the count of tasks queued before it),
// with the ring's head moved on by tasks that ran and a Turn queued among
// them; a task in the running batch, one taken out and an arg never queued
// are not waiting.
func TestPlainPos(t *testing.T) {
	r := newRunner(t, 1, 8)
	b := newBox(r)
	var log runLog
	for id := range 3 { // move the ring's head on
		wait(t, "an early plain task", b.plain(id, &log, nil).done)
	}
	r.Wait()
	head := b.plain(3, &log, &plainWork{gate: make(chan struct{}), started: make(chan struct{})})
	wait(t, "the gated plain task to start", head.started) // a batch of one
	var ps []*plainWork
	for id := 4; id < 12; id++ {
		if id == 7 {
			b.submit(newWork(id, &log))
			continue
		}
		ps = append(ps, b.plain(id, &log, nil))
	}
	b.m.Lock()
	for _, at := range []mailbox.Place{{}, head.at} {
		if _, queued := b.m.PlainPos(head, at); queued {
			t.Errorf("PlainPos(running task, %v): queued", at)
		}
	}
	if _, queued := b.m.PlainPos(new(plainWork), mailbox.Place{}); queued {
		t.Errorf("PlainPos(never queued): queued")
	}
	for i, p := range ps {
		want := uint32(4 + i)
		if i >= 3 {
			want++ // the turn queued after the third holds a position too
		}
		// Where it was queued, and with no Place: a walk of the queue.
		for _, at := range []mailbox.Place{p.at, {}} {
			if pos, queued := b.m.PlainPos(p, at); !queued || pos != want {
				t.Errorf("PlainPos(plain task %d, %v) = %d, %v; want %d, true", i, at, pos, queued, want)
			}
		}
	}
	taken := b.m.TakePlain(all)
	for i, p := range ps {
		if _, queued := b.m.PlainPos(p, p.at); queued {
			t.Errorf("PlainPos(plain task %d) after TakePlain: queued", i)
		}
	}
	b.m.Release()
	for range taken {
		b.m.DonePlain()
	}
	close(head.gate)
	r.Wait()
	if got := log.get(); !slices.Equal(got, []int{0, 1, 2, 3, 7}) {
		t.Errorf("run order %v; want [0 1 2 3 7]", got)
	}
}

// TestPlainAheadOfShared: with a plain task queued and nothing holding the
// mailbox (its drive loop waits for the only slot, busy on another key), a
// shared task queued behind it does not join a shared group, and nothing
// can hold the mailbox inline; once the slot is free the two run in order.
func TestPlainAheadOfShared(t *testing.T) {
	r := newRunner(t, 1, 8)
	other, b := newBox(r), newBox(r)
	var log runLog
	busy := newGatedWork(-1, &log)
	other.submit(busy)
	wait(t, "the other key's task to start", busy.started)
	p := b.plain(1, &log, nil)
	st := new(mailbox.Turn)
	sw := newWork(2, &log)
	st.Init(sw, true)
	b.m.Lock()
	if b.m.CanHold(true) {
		t.Errorf("CanHold(shared) with a plain task queued: got true")
	}
	dispatch := b.m.Enqueue(st.Entry())
	b.m.Release()
	if dispatch {
		b.m.Dispatch()
	}
	if st.JoinsShared() {
		t.Errorf("JoinsShared behind a queued plain task: got true")
	}
	close(busy.gate)
	wait(t, "the plain task", p.done)
	wait(t, "the shared task", sw.done)
	r.Wait()
	if got := log.get(); !slices.Equal(got, []int{-1, 1, 2}) {
		t.Errorf("run order %v; want [-1 1 2]", got)
	}
}

// TestHoldPlain: a plain hold (a Do run on its caller's goroutine) is
// exclusive with no holder to show; what is queued meanwhile, a Turn and a
// plain task, waits behind it without a drive loop and runs in order once
// the hold is given back; a mailbox held and given back with nothing
// queued retires at once.
func TestHoldPlain(t *testing.T) {
	r := newRunner(t, 2, 8)
	b := newBox(r)
	var log runLog

	b.m.Lock()
	if !b.m.CanHold(false) {
		t.Fatal("an idle mailbox cannot be held")
	}
	b.m.HoldPlain()
	if b.m.CanHold(false) || b.m.CanHold(true) {
		t.Error("a held mailbox can be held again")
	}
	if h := b.m.Holder(); h != nil {
		t.Errorf("Holder under a plain hold: %v; want nil (no Turn)", h)
	}
	b.m.Release()
	if got := b.o.retired.Load(); got != 0 {
		t.Fatalf("retired %d times while held; want 0", got)
	}

	w := newWork(1, &log)
	b.submit(w)
	p := b.plain(2, &log, nil)
	if n := b.pending(); n != 3 {
		t.Errorf("pending with the hold and two queued: %d; want 3", n)
	}
	if w.ran.Load() != 0 || p.ran.Load() != 0 {
		t.Fatal("a task queued behind a plain hold ran before the hold was given back")
	}

	b.m.UnholdPlain()
	wait(t, "the queued Turn", w.done)
	wait(t, "the queued plain task", p.done)
	if got := log.get(); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("run order after the hold: %v; want [1 2]", got)
	}

	// Once the drive loop has let go, a hold with nothing queued.
	waitIdle(t, b)
	b.m.Lock()
	before := b.o.retired.Load()
	if !b.m.CanHold(false) {
		t.Fatal("an idle mailbox cannot be held")
	}
	b.m.HoldPlain()
	b.m.Release()
	b.m.UnholdPlain()
	if b.o.retired.Load() == before {
		t.Error("a mailbox held and given back with nothing queued did not retire")
	}
	if n := b.pending(); n != 0 {
		t.Errorf("pending after everything: %d; want 0", n)
	}
}

// lock locks b's mailbox as an owner that lets fast holds must: Lock, then
// Claim (see Owner.Linger).
func (b *box) lock() {
	b.m.Lock()
	b.m.Claim()
}

// TestFastHold: a fast hold that nobody came for is given back without the
// lock, leaving the mailbox idle but unretired (Released) until the next
// locker settles it; one that somebody came for meanwhile (Claim revokes
// it) is given back under the lock and hands the key on to what queued.
func TestFastHold(t *testing.T) {
	r := newRunner(t, 2, 8)
	b := newBox(r)
	b.o.fast = true
	var log runLog

	// Nobody comes: one atomic step, no retirement.
	b.lock()
	b.m.HoldPlain()
	if b.m.CanHold(false) || b.m.Pending() != 1 || b.m.Holder() != nil {
		t.Errorf("under a fast hold: CanHold %v, Pending %d, Holder %v; want false, 1, nil",
			b.m.CanHold(false), b.m.Pending(), b.m.Holder())
	}
	b.m.Release()
	retired := b.o.retired.Load()
	b.m.UnholdPlain()
	if got := b.o.retired.Load(); got != retired {
		t.Errorf("a fast hold given back retired the mailbox %d times; want 0 (nothing locked it)", got-retired)
	}
	b.m.Lock()
	if !b.m.Released() || !b.m.Idle() {
		t.Errorf("after the lock-free give-back: Released %v, Idle %v; want true, true", b.m.Released(), b.m.Idle())
	}
	b.m.Claim()
	if b.m.Released() || !b.m.CanHold(false) || b.m.Pending() != 0 {
		t.Errorf("after Claim: Released %v, CanHold %v, Pending %d; want false, true, 0",
			b.m.Released(), b.m.CanHold(false), b.m.Pending())
	}
	b.m.Release()
	if got := b.o.retired.Load(); got != retired+1 {
		t.Errorf("the settled mailbox retired %d times as it was unlocked; want 1", got-retired)
	}

	// Released, then unlocked without a Claim: the unlock settles it too.
	b.lock()
	b.m.HoldPlain()
	b.m.Release()
	b.m.UnholdPlain()
	retired = b.o.retired.Load()
	b.m.Lock()
	b.m.Release()
	if got := b.o.retired.Load(); got != retired+1 {
		t.Errorf("an unlock after a lock-free give-back retired %d times; want 1", got-retired)
	}
	b.m.Lock()
	if b.m.Released() || !b.m.CanHold(false) {
		t.Errorf("after that unlock: Released %v, CanHold %v; want false, true", b.m.Released(), b.m.CanHold(false))
	}
	b.m.Release()

	// Somebody comes while it is taken: revoked, given back under the lock.
	b.lock()
	b.m.HoldPlain()
	b.m.Release()
	p := new(plainWork)
	p.done = make(chan struct{})
	b.lock() // revokes
	if b.m.Released() {
		t.Fatal("a fast hold still taken shows as given back")
	}
	if _, dispatch := b.m.EnqueuePlain(func(context.Context) error { log.add(1); return nil }, p, 1); dispatch {
		t.Fatal("a plain task queued behind a fast hold asked for a drive loop")
	}
	b.m.Release()
	if p.ran.Load() != 0 {
		t.Fatal("a task queued behind a fast hold ran while it was held")
	}
	b.m.UnholdPlain()
	wait(t, "the task queued behind a revoked fast hold", p.done)
	if got := log.get(); !slices.Equal(got, []int{1}) {
		t.Errorf("ran %v; want [1]", got)
	}
	waitIdle(t, b) // idle: nothing pending
}

// waitIdle waits (bounded) for b's mailbox to go idle, nothing pending,
// parked or driven: once a drive loop has let go, nothing signals that, so
// it polls. It fails the test if the mailbox stays busy.
func waitIdle(t *testing.T, b *box) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b.lock()
		idle, n := b.m.Idle(), b.m.Pending()
		b.m.Release()
		if idle {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for the mailbox to go idle (pending %d)", n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestFastHoldRace races fast holds given back without the lock against
// plain tasks queued by other goroutines, which revoke them: no task is
// lost or run twice, nothing ever overlaps a hold, and the mailbox ends
// idle with nothing pending.
func TestFastHoldRace(t *testing.T) {
	const (
		holders = 2
		holds   = 10000
		queuers = 2
		tasks   = 8000
	)
	r := newRunner(t, 2, 4)
	b := newBox(r)
	b.o.fast = true
	var busy, overlap, ran atomic.Int32
	allRan := make(chan struct{})
	enter := func() {
		if !busy.CompareAndSwap(0, 1) {
			overlap.Add(1)
		}
	}
	leave := func() { busy.Store(0) }
	done := make(chan struct{})
	var finished atomic.Int32
	end := func() {
		if finished.Add(1) == holders+queuers {
			close(done)
		}
	}
	for range holders {
		go func() {
			defer end()
			for i := 0; i < holds; {
				b.lock()
				if !b.m.CanHold(false) {
					b.m.Release()
					runtime.Gosched()
					continue
				}
				b.m.HoldPlain()
				b.m.Release()
				enter()
				if i%4 == 0 {
					runtime.Gosched() // a longer hold, for the queuers to meet
				}
				i++
				leave()
				b.m.UnholdPlain()
			}
		}()
	}
	for range queuers {
		go func() {
			defer end()
			for i := range tasks {
				fn := func(context.Context) error {
					enter()
					if ran.Add(1) == queuers*tasks {
						close(allRan)
					}
					leave()
					return nil
				}
				b.lock()
				if i%4 == 0 {
					// Locked and claimed, the way an owner asks its policy
					// before it queues: a hold that was taken when Claim
					// looked may be given back meanwhile.
					runtime.Gosched()
				}
				_, dispatch := b.m.EnqueuePlain(fn, new(plainWork), 0)
				b.m.Release()
				if dispatch {
					b.m.Dispatch()
				}
			}
		}()
	}
	wait(t, "the holders and queuers", done)
	select {
	case <-allRan:
	case <-time.After(20 * time.Second):
		t.Fatalf("ran %d plain tasks; want %d (lost behind a fast hold?)", ran.Load(), queuers*tasks)
	}
	if n := overlap.Load(); n != 0 {
		t.Errorf("%d overlaps between holds and tasks of the one key", n)
	}
	waitIdle(t, b) // idle: nothing pending
	if got := ran.Load(); got != queuers*tasks {
		t.Errorf("ran %d plain tasks; want %d (one ran twice?)", got, queuers*tasks)
	}
}

// TestFastHoldUnlockRace races fast holds given back without the lock
// against a goroutine that locks the mailbox without claiming it and
// unlocks it with Release, as a drive loop scheduled before the hold began
// does when it finds the key held: the give-back's swap may land at any
// point of that unlock, which must then either leave the hold to be
// settled later or settle it before it retires the mailbox, never retire
// the mailbox with the hold still set (the next submitter would queue
// behind it, and nothing would drive the key).
func TestFastHoldUnlockRace(t *testing.T) {
	const holds = 200000
	r := newRunner(t, 2, 4)
	b := newBox(r)
	b.o.fast = true
	stop := make(chan struct{})
	unlocked := make(chan struct{})
	go func() {
		defer close(unlocked)
		for {
			select {
			case <-stop:
				return
			default:
			}
			b.m.Lock()
			b.m.Release()
		}
	}()
	for i := 0; i < holds; i++ {
		b.lock()
		if !b.m.CanHold(false) {
			b.m.Release()
			continue
		}
		b.m.HoldPlain()
		b.m.Release()
		b.m.UnholdPlain()
	}
	close(stop)
	wait(t, "the unlocking goroutine", unlocked)
	if n := b.o.stale.Load(); n != 0 {
		t.Errorf("the mailbox retired %d times with its fast hold still set; want 0", n)
	}
	b.lock()
	if !b.m.CanHold(false) || b.m.FastHeld() || b.m.Pending() != 0 {
		t.Errorf("at the end: CanHold %v, fast hold %v, Pending %d; want true, false, 0", b.m.CanHold(false), b.m.FastHeld(), b.m.Pending())
	}
	b.m.Release()
}

// TestFastHoldRevoked: a task queued after Claim found the fast hold taken
// is never left behind it, even though the holder tries to give the hold
// back between that Claim and the enqueue: the revocation makes the holder
// wait for the lock and hand the key on.
func TestFastHoldRevoked(t *testing.T) {
	r := newRunner(t, 2, 8)
	b := newBox(r)
	b.o.fast = true
	locking := make(chan struct{})
	mailbox.SetUnholdLocking(func() { close(locking) })
	t.Cleanup(func() { mailbox.SetUnholdLocking(nil) })

	b.lock()
	b.m.HoldPlain()
	b.m.Release()

	b.lock() // the hold is taken: Claim revokes it
	given := make(chan struct{})
	go func() {
		b.m.UnholdPlain()
		close(given)
	}()
	select {
	case <-locking: // the holder saw the revocation and waits for the lock
	case <-given:
		t.Error("the holder gave back a revoked hold without the lock")
	case <-time.After(20 * time.Second):
		t.Fatal("gave up waiting for the holder")
	}
	p := new(plainWork)
	p.done = make(chan struct{})
	if _, dispatch := b.m.EnqueuePlain(func(context.Context) error { return nil }, p, 0); dispatch {
		t.Error("a task queued behind a held mailbox asked for a drive loop")
	}
	b.m.Release()
	wait(t, "the hold to be given back", given)
	wait(t, "the task queued behind the revoked hold", p.done)
	waitIdle(t, b) // idle: nothing pending
}

// TestPlainRingKeepsNothing: once plain tasks have run, nothing the
// mailbox keeps holds their args alive: not the ring they were queued in
// (which grew while a batch read its first buffer, and shrank as it
// drained), though the mailbox itself lives on.
func TestPlainRingKeepsNothing(t *testing.T) {
	r := newRunner(t, 1, 8)
	b := newBox(r)
	var log runLog
	first := b.plain(0, &log, &plainWork{gate: make(chan struct{}), started: make(chan struct{})})
	wait(t, "the first plain task to start", first.started)
	var refs []weak.Pointer[plainWork]
	var last *plainWork
	for id := 1; id < 3000; id++ { // grows the ring the running batch reads
		last = b.plain(id, &log, nil)
		refs = append(refs, weak.Make(last))
	}
	close(first.gate)
	wait(t, "the last plain task", last.done)
	r.Wait()
	last = nil
	runtime.GC()
	alive := 0
	for _, w := range refs {
		if w.Value() != nil {
			alive++
		}
	}
	if alive > 0 {
		t.Errorf("%d of %d plain tasks' args still reachable after they ran", alive, len(refs))
	}
	if got := log.get(); !slices.Equal(got, seq(3000)) {
		t.Fatalf("run order wrong: %d tasks ran", len(got))
	}
	runtime.KeepAlive(b)
}

// countRan is a RunnerOptions.Ran that adds up every task it hears of.
func countRan(n *atomic.Int64) func(*mailbox.Mailbox, int, int) {
	return func(_ *mailbox.Mailbox, turns, plains int) { n.Add(int64(turns + plains)) }
}

// TestMixedBatch: a drive loop's batch takes the exclusive tasks at the
// head of the one queue in order, plain tasks and turns alike, and a turn
// withdrawn from the middle of the queue costs it no budget. While the
// batch runs, EachWaiting lists the turns behind the running task (in the
// batch, then queued) and TakePlain takes a plain one from the batch,
// which the loop then skips. Ran hears of both kinds once per batch, and
// the mailbox drains and retires.
func TestMixedBatch(t *testing.T) {
	var (
		mu  sync.Mutex
		ran [][2]int // the turns and plain tasks of each Ran call
	)
	r := newRunnerWith(t, 1, 6, mailbox.RunnerOptions{
		Ran: func(_ *mailbox.Mailbox, turns, plains int) {
			mu.Lock()
			ran = append(ran, [2]int{turns, plains})
			mu.Unlock()
		},
	})
	other, b := newBox(r), newBox(r)
	var log runLog
	busy := newGatedWork(-1, &log) // holds the only slot while b's queue forms
	other.submit(busy)
	wait(t, "the other key's task to start", busy.started)

	first := b.plain(1, &log, &plainWork{gate: make(chan struct{}), started: make(chan struct{})})
	t2 := b.submit(newWork(2, &log))
	b.plain(3, &log, nil)
	t4 := b.submit(newWork(4, &log))
	p5 := b.plain(5, &log, nil)
	t6 := b.submit(newWork(6, &log))
	b.plain(7, &log, nil)
	w8 := newWork(8, &log)
	t8 := b.submit(w8)
	if !t4.Cancel() {
		t.Fatal("Cancel of a queued turn failed")
	}
	close(busy.gate)
	// Budget 6: 1, 2, 3, 5, 6 and 7 (4 left a tombstone); 8 waits.
	wait(t, "the batch's first task to start", first.started)

	b.m.Lock()
	var waiting []*mailbox.Turn
	b.m.EachWaiting(func(t *mailbox.Turn) { waiting = append(waiting, t) })
	taken := b.m.TakePlain(func(arg any) bool { return arg == p5 })
	b.m.Release()
	if !slices.Equal(waiting, []*mailbox.Turn{t2, t6, t8}) {
		t.Errorf("EachWaiting while the batch runs: %d turns; want turns 2, 6 and 8", len(waiting))
	}
	if len(taken) != 1 || taken[0] != p5 {
		t.Fatalf("TakePlain(5) took %v; want plain task 5", taken)
	}
	b.m.DonePlain()
	close(first.gate)
	wait(t, "the last task to end", w8.done)
	r.Wait()

	if got := log.get(); !slices.Equal(got, []int{-1, 1, 2, 3, 6, 7, 8}) {
		t.Errorf("run order %v; want [-1 1 2 3 6 7 8]", got)
	}
	mu.Lock()
	got := slices.Clone(ran)
	mu.Unlock()
	if want := [][2]int{{1, 0}, {2, 3}, {1, 0}}; !slices.Equal(got, want) {
		t.Errorf("Ran calls (turns, plain tasks) %v; want %v: the other key's task; turns 2 and 6 with plain tasks 1, 3 and 7; turn 8", got, want)
	}
	if p5.ran.Load() != 0 {
		t.Error("the plain task taken out of the running batch ran")
	}
	if p := b.pending(); p != 0 {
		t.Errorf("Pending after the drain = %d; want 0", p)
	}
	if b.o.retired.Load() == 0 {
		t.Error("the drained mailbox was never retired")
	}
}

// TestTakePlainOf: TakePlainOf takes one plain task out from where it was
// queued: from the queue (after its place moved too), and from a running
// batch (claimed, so the loop skips it), once; not the task the batch runs.
// The others run in order, and the mailbox drains and retires.
func TestTakePlainOf(t *testing.T) {
	r := newRunner(t, 1, 4)
	other, b := newBox(r), newBox(r)
	var log runLog
	busy := newGatedWork(-1, &log) // holds the only slot while b's queue forms
	other.submit(busy)
	wait(t, "the other key's task to start", busy.started)

	ps := []*plainWork{b.plain(0, &log, &plainWork{gate: make(chan struct{}), started: make(chan struct{})})}
	for id := 1; id < 16; id++ {
		ps = append(ps, b.plain(id, &log, nil))
	}
	var taken int
	take := func(id int, want bool) {
		t.Helper()
		b.m.Lock()
		got := b.m.TakePlainOf(ps[id], ps[id].at)
		b.m.Release()
		if got != want {
			t.Errorf("TakePlainOf(plain task %d) = %v; want %v", id, got, want)
		}
		if got {
			taken++
		}
	}
	for id := 1; id <= 8; id++ {
		take(id, true)
		take(id, false)
	}
	for id := 16; id < 24; id++ { // fills the ring, which closes its gaps
		ps = append(ps, b.plain(id, &log, nil))
	}
	b.m.Lock()
	pos, _ := b.m.PlainPos(ps[13], mailbox.Place{})
	b.m.Release()
	if pos != 5 {
		t.Fatalf("plain task 13 at position %d; want 5, after 0 and 9 to 12: the full ring did not close its gaps", pos)
	}
	take(12, true) // moved toward the head by 8: its place is stale
	close(busy.gate)
	wait(t, "the batch's first task to start", ps[0].started) // batch: 0, 9, 10, 11
	take(0, false)                                            // running
	take(10, true)                                            // in the batch, not started
	take(10, false)
	for range taken {
		b.m.DonePlain()
	}
	close(ps[0].gate)
	wait(t, "the last task to end", ps[23].done)
	r.Wait()

	want := []int{-1, 0, 9, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}
	if got := log.get(); !slices.Equal(got, want) {
		t.Errorf("run order %v; want %v", got, want)
	}
	if p := b.pending(); p != 0 {
		t.Errorf("Pending after the drain = %d; want 0", p)
	}
	if b.o.retired.Load() == 0 {
		t.Error("the drained mailbox was never retired")
	}
}
