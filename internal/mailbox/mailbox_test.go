package mailbox_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alitto/pond/v2"

	"github.com/perkey/perkey/internal/mailbox"
)

// work is a mailbox.Work that records its run in a shared log and can be
// held back by a gate.
type work struct {
	id      int
	log     *runLog
	gate    chan struct{} // nil: run at once
	started chan struct{} // closed when Run begins, if non-nil
	ran     atomic.Int32
	settled atomic.Int32
	done    chan struct{} // closed by Settle
}

func newWork(id int, log *runLog) *work {
	return &work{id: id, log: log, done: make(chan struct{})}
}

// newGatedWork is newWork that reports its start and runs until its gate
// is closed.
func newGatedWork(id int, log *runLog) *work {
	w := newWork(id, log)
	w.gate, w.started = make(chan struct{}), make(chan struct{})
	return w
}

func (w *work) Run() {
	w.ran.Add(1)
	if w.started != nil {
		close(w.started)
	}
	if w.gate != nil {
		<-w.gate
	}
	w.log.add(w.id)
}

func (w *work) Settle() {
	if w.settled.Add(1) == 1 {
		close(w.done)
	}
}

func (w *work) Promote() bool { return true }

type runLog struct {
	mu  sync.Mutex
	ids []int
}

func (l *runLog) add(id int) {
	l.mu.Lock()
	l.ids = append(l.ids, id)
	l.mu.Unlock()
}

func (l *runLog) get() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int(nil), l.ids...)
}

// owner is a mailbox.Owner that counts retirements, and lets plain holds
// be fast holds if fast is set (its one mailbox is the only one that could
// have one, as Linger requires).
type owner struct {
	retired atomic.Int32
	fast    bool
	// stale counts retirements of a mailbox whose fast hold was still set
	// (not settled): whoever finds it next sees it held forever.
	stale atomic.Int32
}

func (o *owner) Retire(m *mailbox.Mailbox) {
	o.retired.Add(1)
	if m.FastHeld() {
		o.stale.Add(1)
	}
}

func (o *owner) Linger(*mailbox.Mailbox) bool { return o.fast }

// box is one mailbox in a home of its own, as the router would keep it.
type box struct {
	h mailbox.Home
	m mailbox.Mailbox
	o owner
}

func newBox(r *mailbox.Runner) *box {
	b := new(box)
	b.h.Init(r, &b.o)
	b.m.Init(&b.h)
	return b
}

// submit enqueues w as a single-key exclusive task and dispatches the
// mailbox if it needs a drive loop.
func (b *box) submit(w mailbox.Work) *mailbox.Turn {
	t := new(mailbox.Turn)
	t.Init(w, false)
	b.m.Lock()
	dispatch := b.m.Enqueue(t.Entry())
	b.m.Release()
	if dispatch {
		b.m.Dispatch()
	}
	return t
}

func newRunner(t *testing.T, slots, throughput int) *mailbox.Runner {
	return newRunnerWith(t, slots, throughput, mailbox.RunnerOptions{})
}

// newRunnerWith is newRunner with options.
func newRunnerWith(t *testing.T, slots, throughput int, opt mailbox.RunnerOptions) *mailbox.Runner {
	if opt.Plain == nil {
		opt.Plain = testPlain{}
	}
	pool := pond.NewPool(0)
	r := mailbox.NewRunner(pool, slots, throughput, opt)
	t.Cleanup(func() {
		r.Wait()
		pool.StopAndWait()
	})
	return r
}

func wait(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("gave up waiting for %s", what)
	}
}

func TestRunnerSlots(t *testing.T) {
	r := newRunner(t, 2, 1)
	steps := []struct {
		name       string
		op         func() bool
		want       bool
		wantActive int
	}{
		{"first TryAcquire", r.TryAcquire, true, 1},
		{"second TryAcquire", r.TryAcquire, true, 2},
		{"TryAcquire over the limit", r.TryAcquire, false, 2},
		{"Release", func() bool { r.Release(); return true }, true, 1},
		{"TryAcquire after Release", r.TryAcquire, true, 2},
		{"Release", func() bool { r.Release(); return true }, true, 1},
		{"Release", func() bool { r.Release(); return true }, true, 0},
	}
	for _, s := range steps {
		if got := s.op(); got != s.want {
			t.Fatalf("%s: got %v; want %v", s.name, got, s.want)
		}
		if got := r.Active(); got != s.wantActive {
			t.Fatalf("after %s: Active() = %d; want %d", s.name, got, s.wantActive)
		}
	}
}

// TestRunnerAcquireWaits: Acquire with every slot taken waits until one is
// released, and then owns it.
func TestRunnerAcquireWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool := pond.NewPool(0)
		r := mailbox.NewRunner(pool, 1, 1, mailbox.RunnerOptions{})
		if !r.TryAcquire() {
			t.Fatal("TryAcquire on an idle runner: got false; want true")
		}
		var got atomic.Bool
		go func() {
			r.Acquire()
			got.Store(true)
		}()
		synctest.Wait()
		if got.Load() {
			t.Fatalf("Acquire with no free slot returned; want it to wait")
		}
		r.Release()
		synctest.Wait()
		if !got.Load() || r.Active() != 1 {
			t.Fatalf("after Release: Acquire returned %v, Active %d; want true, 1", got.Load(), r.Active())
		}
		r.Release()
		r.Wait()
	})
}

// TestMailboxFIFO: one mailbox runs its tasks in order, each once, settles
// each once, and retires when it drains.
func TestMailboxFIFO(t *testing.T) {
	for _, throughput := range []int{1, 3, 64} {
		r := newRunner(t, 1, throughput)
		b := newBox(r)
		var log runLog
		var ws []*work
		for i := range 50 {
			w := newWork(i, &log)
			ws = append(ws, w)
			b.submit(w)
		}
		for _, w := range ws {
			wait(t, "a task to settle", w.done)
		}
		r.Wait()
		got := log.get()
		for i, id := range got {
			if id != i {
				t.Fatalf("throughput %d: run order %v; want 0..49 in order", throughput, got)
			}
		}
		for _, w := range ws {
			if w.ran.Load() != 1 || w.settled.Load() != 1 {
				t.Fatalf("task %d: ran %d, settled %d times; want 1, 1", w.id, w.ran.Load(), w.settled.Load())
			}
		}
		b.m.Lock()
		idle := b.m.Idle()
		b.m.Release()
		if !idle || b.o.retired.Load() == 0 {
			t.Errorf("throughput %d: drained mailbox: idle %v, retired %d times; want idle and retired", throughput, idle, b.o.retired.Load())
		}
	}
}

// TestMailboxCancel: a queued task withdrawn with Cancel never runs, is not
// settled by the mailbox (its canceler owns that), and does not hold up the
// tasks behind it; Cancel on a task that already ran reports false.
func TestMailboxCancel(t *testing.T) {
	r := newRunner(t, 1, 8)
	b := newBox(r)
	var log runLog
	first := newGatedWork(0, &log)
	ft := b.submit(first)
	wait(t, "the first task to start", first.started)
	second, third := newWork(1, &log), newWork(2, &log)
	st := b.submit(second)
	b.submit(third)
	if !st.Cancel() {
		t.Fatalf("Cancel on a queued task: got false; want true")
	}
	if st.State() != mailbox.Canceled {
		t.Errorf("canceled task state: got %d; want Canceled (%d)", st.State(), mailbox.Canceled)
	}
	close(first.gate)
	wait(t, "the third task to settle", third.done)
	r.Wait()
	if got := log.get(); len(got) != 2 || got[0] != 0 || got[1] != 2 {
		t.Errorf("run order: got %v; want [0 2]", got)
	}
	if second.ran.Load() != 0 || second.settled.Load() != 0 {
		t.Errorf("canceled task: ran %d, settled %d; want 0, 0", second.ran.Load(), second.settled.Load())
	}
	if ft.Cancel() {
		t.Errorf("Cancel on a task that ran: got true; want false")
	}
	b.m.Lock()
	if p := b.m.Pending(); p != 0 {
		t.Errorf("Pending after the drain: got %d; want 0", p)
	}
	b.m.Release()
}

// TestRunnerFairness: with one slot and throughput n, two busy mailboxes
// take turns of at most n tasks.
func TestRunnerFairness(t *testing.T) {
	const throughput = 2
	r := newRunner(t, 1, throughput)
	a, c := newBox(r), newBox(r)
	var log runLog
	hold := newGatedWork(-1, &log)
	a.submit(hold)
	wait(t, "the holder to start", hold.started)
	var ws []*work
	for i := range 10 {
		wa, wc := newWork(100+i, &log), newWork(200+i, &log)
		ws = append(ws, wa, wc)
		a.submit(wa)
		c.submit(wc)
	}
	close(hold.gate)
	for _, w := range ws {
		wait(t, "a task to settle", w.done)
	}
	r.Wait()
	got := log.get()[1:] // after the holder
	run := 0
	for i := range got {
		if i > 0 && got[i]/100 == got[i-1]/100 {
			run++
		} else {
			run = 1
		}
		if run > throughput {
			t.Fatalf("a mailbox ran %d tasks in a row; want <= %d (order %v)", run, throughput, got)
		}
	}
}

// batchWork is a work that records, in Settle, whether its task ran in a
// drive loop's batch.
type batchWork struct {
	*work
	t       mailbox.Turn
	batched atomic.Bool
	count   *atomic.Int32 // counts the settles of batched tasks
}

func (w *batchWork) Settle() {
	w.batched.Store(w.t.Batched())
	if w.batched.Load() {
		w.count.Add(1)
	}
	w.work.Settle()
}

// TestRunnerRan: RunnerOptions.Ran hears, after each batch's tasks have settled,
// how many of them ran, not counting one canceled inside the batch; a task
// that ran in a batch reports Batched in Settle, and the canceled one does
// not.
func TestRunnerRan(t *testing.T) {
	var (
		mu      sync.Mutex
		calls   []int
		settled atomic.Int32 // settles of batched tasks so far
		early   []string
	)
	ran := func(_ *mailbox.Mailbox, n, _ int) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, n)
		total := 0
		for _, c := range calls {
			total += c
		}
		if got := int(settled.Load()); got < total {
			early = append(early, "Ran before its batch settled")
		}
	}
	r := newRunnerWith(t, 1, 8, mailbox.RunnerOptions{Ran: ran})
	b := newBox(r)
	var log runLog
	ws := make([]*batchWork, 4)
	for i := range ws {
		ws[i] = &batchWork{work: newWork(i, &log), count: &settled}
	}
	for _, i := range []int{0, 1} {
		ws[i].gate, ws[i].started = make(chan struct{}), make(chan struct{})
	}
	submit := func(w *batchWork) {
		w.t.Init(w, false)
		b.m.Lock()
		dispatch := b.m.Enqueue(w.t.Entry())
		b.m.Release()
		if dispatch {
			b.m.Dispatch()
		}
	}
	submit(ws[0])
	wait(t, "task 0 to start", ws[0].started)
	submit(ws[1])
	submit(ws[2])
	submit(ws[3])
	close(ws[0].gate)
	wait(t, "task 1 to start", ws[1].started) // its batch took 1, 2 and 3
	if !ws[2].t.Cancel() {
		t.Fatal("Cancel on a batched task that has not started: got false; want true")
	}
	ws[2].Settle() // the canceler settles
	close(ws[1].gate)
	wait(t, "task 3 to settle", ws[3].done)
	r.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 2 || calls[0] != 1 || calls[1] != 2 {
		t.Errorf("Ran calls: got %v; want [1 2] (task 0 alone, then 1 and 3 of the batch 1-3)", calls)
	}
	if len(early) > 0 {
		t.Error(early[0])
	}
	for i, w := range ws {
		if want := i != 2; w.batched.Load() != want {
			t.Errorf("task %d: Batched in Settle = %v; want %v", i, w.batched.Load(), want)
		}
	}
}

// admitWork is a work that reports its admission from the waiting room.
type admitWork struct {
	*work
	admitted chan struct{}
}

func (w *admitWork) Promote() bool { close(w.admitted); return true }

// parkBehindBatch sets up a mailbox b, on a runner with one slot and
// RunnerOptions.Room room, whose gated tasks a and c run as one batch,
// with a submission p parked behind them; it returns once a has started.
func parkBehindBatch(t *testing.T, room int) (r *mailbox.Runner, b *box, log *runLog, a, c *work, p *admitWork) {
	t.Helper()
	r = newRunnerWith(t, 1, 8, mailbox.RunnerOptions{Room: room})
	log = new(runLog)
	other := newBox(r)
	hold := newGatedWork(-1, log)
	other.submit(hold)
	wait(t, "the slot's holder to start", hold.started)

	b = newBox(r)
	a, c = newGatedWork(0, log), newGatedWork(1, log)
	b.submit(a) // no free slot: both wait, then run as one batch
	b.submit(c)
	p = &admitWork{work: newWork(2, log), admitted: make(chan struct{})}
	pt := new(mailbox.Turn)
	pt.Init(p, false)
	b.m.Lock()
	b.m.Park(pt.Entry())
	b.m.Release()

	close(hold.gate) // the slot passes to the batch a, c
	wait(t, "task a to start", a.started)
	return r, b, log, a, c, p
}

// TestParkedAdmittedMidBatch: a submission parked at the key's cap enters
// the queue as soon as a task of a running batch ends and makes room, not
// when the whole batch ends; it still runs after the batch.
func TestParkedAdmittedMidBatch(t *testing.T) {
	r, b, log, a, c, p := parkBehindBatch(t, 2) // room for 2 pending per mailbox
	select {
	case <-p.admitted:
		t.Fatal("parked submission admitted while the key was full")
	default:
	}
	close(a.gate)
	wait(t, "task c to start", c.started)
	select {
	case <-p.admitted:
	case <-time.After(5 * time.Second):
		close(c.gate) // let the batch end, so the cleanup does not hang
		t.Fatal("parked submission not admitted while c runs; want it admitted when a ended")
	}
	b.m.Lock()
	pending, parked := b.m.Pending(), b.m.Parked()
	b.m.Release()
	if pending != 2 || parked != 0 {
		t.Errorf("after the admission: Pending %d, Parked %d; want 2, 0", pending, parked)
	}
	close(c.gate)
	wait(t, "the admitted task to settle", p.done)
	r.Wait()
	if got := log.get(); len(got) != 4 || got[1] != 0 || got[2] != 1 || got[3] != 2 {
		t.Errorf("run order: got %v; want [-1 0 1 2]", got)
	}
}

// TestParkedWaitsForRoom: with RunnerOptions.Room 1, a parked submission
// stays parked while a task of the running batch ends and leaves the key
// full with the next one, and enters the queue only when that one ends
// too.
func TestParkedWaitsForRoom(t *testing.T) {
	r, _, log, a, c, p := parkBehindBatch(t, 1)
	close(a.gate)
	wait(t, "task c to start", c.started) // a's end was the chance to admit
	select {
	case <-p.admitted:
		close(c.gate)
		t.Fatal("parked submission admitted with c pending and room for 1")
	default:
	}
	close(c.gate)
	wait(t, "the parked submission to be admitted", p.admitted)
	wait(t, "the admitted task to settle", p.done)
	r.Wait()
	if got := log.get(); len(got) != 4 || got[1] != 0 || got[2] != 1 || got[3] != 2 {
		t.Errorf("run order: got %v; want [-1 0 1 2]", got)
	}
}

// TestEachManyAhead: EachManyAhead names the multi-key tasks holding a
// mailbox or queued ahead of a queued task, not the single-key ones, and
// nothing for a task that is not queued (here, running in a batch); a
// mailbox walk that found none still sees the next multi-key task queued.
func TestEachManyAhead(t *testing.T) {
	r := newRunner(t, 1, 8)
	a, b := newBox(r), newBox(r)
	var log runLog
	first := newGatedWork(0, &log)
	ft := a.submit(first)
	wait(t, "the first task to start", first.started)
	walk := func(bx *box) []*mailbox.Turn {
		var out []*mailbox.Turn
		bx.m.Lock()
		bx.m.EachManyAhead(nil, func(o *mailbox.Turn) { out = append(out, o) })
		bx.m.Release()
		return out
	}
	s1 := a.submit(newWork(1, &log))
	if got := walk(a); len(got) != 0 {
		t.Errorf("walk of a queue of single-key tasks: got %v; want none", got)
	}
	many := new(mailbox.Turn)
	entries := many.InitMany(newWork(2, &log), 2)
	for i, bx := range []*box{a, b} {
		bx.m.Lock()
		dispatch := bx.m.Enqueue(&entries[i])
		if i == len(entries)-1 {
			many.Commit() // accepted: room on every key
		}
		bx.m.Release()
		if dispatch {
			bx.m.Dispatch()
		}
	}
	s3 := a.submit(newWork(3, &log))
	ahead := func(of *mailbox.Turn) []*mailbox.Turn {
		var out []*mailbox.Turn
		of.EachManyAhead(func(o *mailbox.Turn) { out = append(out, o) })
		return out
	}
	if got := ahead(s3); len(got) != 1 || got[0] != many {
		t.Errorf("ahead of the task behind the multi-key one: got %v; want it", got)
	}
	if got := ahead(s1); len(got) != 0 {
		t.Errorf("ahead of the task before the multi-key one: got %v; want none", got)
	}
	if got := walk(a); len(got) != 1 || got[0] != many {
		t.Errorf("walk after a multi-key task was queued: got %v; want it", got)
	}
	if got := walk(b); len(got) != 1 || got[0] != many {
		t.Errorf("walk of the multi-key task's other mailbox (it holds it): got %v; want it", got)
	}
	if got := ahead(ft); len(got) != 0 {
		t.Errorf("ahead of the running task: got %v; want none", got)
	}
	close(first.gate)
	r.Wait()
	if got := ahead(s3); len(got) != 0 {
		t.Errorf("ahead of a task that ran: got %v; want none", got)
	}
	if got := walk(a); len(got) != 0 {
		t.Errorf("walk after everything ran: got %v; want none", got)
	}
	if got := log.get(); len(got) != 4 || got[0] != 0 || got[1] != 1 || got[2] != 2 || got[3] != 3 {
		t.Errorf("run order: got %v; want [0 1 2 3]", got)
	}
}

// TestStagedTask: a multi-key task being enqueued is not accepted yet.
// Cancel (what an owner's giving-up Close calls on every task it saw queued)
// leaves it alone; Withdraw takes it out of the mailboxes it reached (queued
// or holding), and nothing runs or settles it.
func TestStagedTask(t *testing.T) {
	r := newRunner(t, 1, 8)
	a := newBox(r)
	var log runLog
	w := newWork(1, &log)
	many := new(mailbox.Turn)
	entries := many.InitMany(w, 2)
	a.m.Lock()
	dispatch := a.m.Enqueue(&entries[0])
	a.m.Release()
	if dispatch {
		a.m.Dispatch() // it may hold a while it waits for its other key
	}
	if many.Cancel() {
		t.Error("Cancel of a Staged task: got true; want false (it is not accepted)")
	}
	if got := many.State(); got != mailbox.Staged {
		t.Errorf("state after Cancel: got %d; want Staged (%d)", got, mailbox.Staged)
	}
	many.Withdraw()
	if got := many.State(); got != mailbox.Canceled {
		t.Errorf("state after Withdraw: got %d; want Canceled (%d)", got, mailbox.Canceled)
	}
	a.m.Lock()
	pending := a.m.Pending()
	a.m.Release()
	if pending != 0 {
		t.Errorf("pending after Withdraw: got %d; want 0", pending)
	}
	r.Wait()
	if w.ran.Load() != 0 || w.settled.Load() != 0 {
		t.Errorf("withdrawn task: ran %d, settled %d; want neither", w.ran.Load(), w.settled.Load())
	}
}
