package soak_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/cmd/perkey-soak/internal/soak"
	"github.com/perkey/perkey/executor"
)

// TestSoak runs a short soak, small enough for go test -race on two cores,
// and fails on any violation. cmd/perkey-soak runs the same harness longer.
func TestSoak(t *testing.T) {
	cfg := soak.Config{
		Duration:     2 * time.Second,
		Producers:    8,
		Keys:         500,
		Workers:      4,
		Seed:         1,
		RestartEvery: 300 * time.Millisecond,
	}
	if testing.Short() {
		cfg.Duration = 500 * time.Millisecond
	}
	rep, err := soak.Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var out strings.Builder
	rep.Print(&out)
	t.Log("\n" + out.String())
	if !rep.Passed() {
		t.Fatalf("soak failed (seed %d); see the table above", cfg.Seed)
	}

	// The run must have exercised what it claims to check.
	var handled int64
	for _, n := range rep.Handled {
		handled += n
	}
	for _, c := range []struct {
		what string
		got  int64
	}{
		{"tasks run", rep.Runs},
		{"panics", rep.Panics},
		{"task errors", rep.TaskErrors},
		{"calls ended by ctx", rep.CtxResults},
		{"generations beyond the first", int64(rep.Generations - 1)},
		{"cancels behind a held key", rep.Gates},
		{"Goexits", rep.Goexits},
		{"ErrGoexit results", rep.GoexitRes},
		{"callers' goroutines ended by an inline Goexit", rep.CallersGone},
		{"Go tasks accepted", rep.GoAccepted},
		{"Go failures handled", handled},
		{"observer panics", rep.ObsPanics},
		{"deadlock rings formed", rep.Rings.Formed},
		{"ErrDeadlock in rings", rep.Rings.Deadlocks},
		{"batches", rep.Batches.Batches},
		{"batches of more than one message", rep.Batches.Batches - rep.Batches.Sizes[1]},
		{"messages failed alone", rep.Batches.FailedSingle},
		{"batches failed whole", rep.Batches.FailedWhole},
		{"giving-up Closes checked", rep.GiveUps.Checked},
		{"of those, with a task that ignores its ctx still running", rep.GiveUps.Stubborn},
		{"tasks planted behind it", rep.GiveUps.Planted},
		{"tasks that ignored their ctx", rep.Stubborn},
	} {
		if c.got <= 0 {
			t.Errorf("%s: got %d; want > 0", c.what, c.got)
		}
	}
	if got, want := rep.Forced+rep.Drained, int64(rep.Generations); got != want {
		t.Errorf("forced + drained Closes = %d; want one per generation, %d", got, want)
	}
}

// patience bounds every wait of the tests below: a wait that outlives it
// fails the test instead of hanging it.
const patience = 10 * time.Second

// recv receives from ch within patience, or fails t.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(patience):
		t.Fatalf("%s: nothing within %v", what, patience)
		panic("unreachable")
	}
}

// Regression tests for the bugs this soak found (fixed in 13eafe2). Each
// reduces one soak failure to a deterministic reproduction.
//
// DoMany stamped its enqueue time (job.enq, read by MaxQueueDelay as the
// head's age) in accept, which it called under the lock of its last key
// only, after its entries were already queued, and visible, on its other
// keys. A submission on one of those keys read the stamp under that key's
// lock: nothing ordered the write before the read (a data race), and before
// the write the stamp was 0, so the head looked as old as the process and
// MaxQueueDelay rejected with ErrBusy (ScopeDelay) a key whose head had just
// arrived. Found by perkey-soak -seed 1 (MaxQueueDelay generations: the
// false delay rejections invariant, and the race detector).

// TestBugDoManyEnqueueStampRace failed under -race: key a is busy, a DoMany
// on {a, b} queues behind it (waiting on b, also busy), then a Submit on a
// reads the DoMany's stamp.
func TestBugDoManyEnqueueStampRace(t *testing.T) {
	e, err := executor.New[int](executor.WithPolicy(backpressure.MaxQueueDelay(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	release := make(chan struct{})
	hold := func(key int) *executor.Task {
		running := make(chan struct{})
		tk, err := e.Submit(ctx, key, func(context.Context) error { close(running); <-release; return nil })
		if err != nil {
			t.Fatalf("Submit(%d): %v", key, err)
		}
		recv(t, running, "the holding task's start")
		return tk
	}
	const a, b = 1, 2
	ga, gb := hold(a), hold(b)
	done := make(chan error, 1)
	go func() { done <- e.DoMany(ctx, []int{a, b}, func(context.Context) error { return nil }) }()
	for e.Stats().Queued < 1 { // the DoMany is queued on a, behind ga
		if ctx.Err() != nil {
			t.Fatalf("the DoMany not queued within %v", patience)
		}
		time.Sleep(100 * time.Microsecond)
	}
	if _, err := e.Submit(ctx, a, func(context.Context) error { return nil }); err != nil {
		t.Errorf("Submit(a) behind a fresh DoMany: got %v; want nil", err)
	}
	close(release)
	ga.Wait(ctx)
	gb.Wait(ctx)
	if err := recv(t, done, "DoMany"); err != nil {
		t.Errorf("DoMany: %v", err)
	}
	if err := e.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// agePolicy admits everything and records the largest head age it is told
// of. Once, at the Load whose Pending is pauseAt, it pauses until resume:
// this widens, deterministically, the window in which a DoMany is queued on
// its first key and not yet stamped.
type agePolicy struct {
	pauseAt int
	entered chan struct{} // closed when the pause starts
	resume  chan struct{}
	paused  atomic.Bool
	oldest  atomic.Int64 // the largest OldestWait seen, in ns
}

func (p *agePolicy) Decide(l backpressure.Load) backpressure.Verdict {
	if l.Pending == p.pauseAt && p.paused.CompareAndSwap(false, true) {
		close(p.entered)
		select {
		case <-p.resume:
		case <-time.After(5 * time.Second):
		}
		return backpressure.Admit
	}
	for {
		m := p.oldest.Load()
		if int64(l.OldestWait) <= m || p.oldest.CompareAndSwap(m, int64(l.OldestWait)) {
			return backpressure.Admit
		}
	}
}

func (p *agePolicy) NeedsQueueAge() bool { return true }

// TestBugDoManyHeadAgeUnstamped failed without -race: a policy was told
// that a DoMany queued a moment ago had waited longer than the executor had
// existed (since the process started). With MaxQueueDelay(d) every such
// read rejected the submission with ErrBusy (ScopeDelay).
func TestBugDoManyHeadAgeUnstamped(t *testing.T) {
	p := &agePolicy{pauseAt: 2, entered: make(chan struct{}), resume: make(chan struct{})}
	born := time.Now()
	e, err := executor.New[int](executor.WithPolicy(p))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	release := make(chan struct{})
	var held []*executor.Task
	submit := func(key int, wait bool) {
		running := make(chan struct{})
		tk, err := e.Submit(ctx, key, func(context.Context) error { close(running); <-release; return nil })
		if err != nil {
			t.Fatalf("Submit(%d): %v", key, err)
		}
		held = append(held, tk)
		if wait {
			recv(t, running, "the holding task's start")
		}
	}
	const a, b = 1, 2
	submit(a, true)  // a: 1 pending (running)
	submit(b, true)  // b: 1 pending (running)
	submit(b, false) // b: 2 pending, so the DoMany's Load on b pauses
	done := make(chan error, 1)
	go func() { done <- e.DoMany(ctx, []int{a, b}, func(context.Context) error { return nil }) }()
	recv(t, p.entered, "the policy's pause") // the DoMany is queued on a, not yet stamped
	if _, err := e.Submit(ctx, a, func(context.Context) error { return nil }); err != nil {
		t.Errorf("Submit(a): %v", err)
	}
	close(p.resume)
	close(release)
	for _, tk := range held {
		tk.Wait(ctx)
	}
	if err := recv(t, done, "DoMany"); err != nil {
		t.Errorf("DoMany: %v", err)
	}
	if err := e.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
	if seen, age := time.Duration(p.oldest.Load()), time.Since(born); seen > age {
		t.Errorf("OldestWait = %v; want at most the executor's age, %v", seen, age)
	}
}

// signalBlock is backpressure.Block that closes parked the first time it
// makes a submission wait. The executor consults it with the key's mailbox
// locked and parks the submission under the same lock, so once parked is
// closed, anything that needs that lock finds the submission parked.
type signalBlock struct {
	parked chan struct{}
	once   sync.Once
}

func (p *signalBlock) Decide(l backpressure.Load) backpressure.Verdict {
	if l.Full() != 0 {
		p.once.Do(func() { close(p.parked) })
		return backpressure.Wait
	}
	return backpressure.Admit
}

// TestBugPromotedEntryRace failed under -race. With Block, a parked
// submission is admitted by whoever frees room: promote called Admit (which
// wakes the submitter) and then link, which writes the entry's mailbox
// pointer (Entry.m). The woken submitter's task could then be canceled, and
// Entry.release read Entry.m before taking the mailbox lock: nothing ordered
// that read after link's write. (The value written was the one Park had
// already stored, so no behaviour went wrong; the race detector still failed
// every -race test that canceled promoted tasks.) Found by perkey-soak
// -seed 1 under -race (Block generations). Fixed first by calling Admit
// last; since Admit may refuse (f1df2b5) it is asked first again, and link
// no longer writes Entry.m (Park did).
//
// Nothing watches a queued task's ctx (contract item 6): c's cancel is
// noticed by a Wait on c, which withdraws it and so promotes b, and b's by
// b's Wait.
func TestBugPromotedEntryRace(t *testing.T) {
	p := &signalBlock{parked: make(chan struct{})}
	e, err := executor.New[int](executor.WithMaxQueuePerKey(2), executor.WithPolicy(p))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	quick := func(context.Context) error { return nil }
	running, release := make(chan struct{}), make(chan struct{})
	a, err := e.Submit(context.Background(), 1, func(context.Context) error { close(running); <-release; return nil })
	if err != nil {
		t.Fatal(err)
	}
	recv(t, running, "a's start")
	cctx, ccancel := context.WithCancel(context.Background())
	c, err := e.Submit(cctx, 1, quick) // queued: the key is at its cap
	if err != nil {
		t.Fatal(err)
	}
	bctx, bcancel := context.WithCancel(context.Background())
	defer bcancel() // if the test fails before b is admitted, its Submit leaves
	type result struct {
		tk  *executor.Task
		err error
	}
	submitted := make(chan result, 1)
	go func() {
		tk, err := e.Submit(bctx, 1, quick) // parks
		submitted <- result{tk, err}
	}()
	recv(t, p.parked, "b's park")
	ccancel()
	if err := c.Wait(ctx); !errors.Is(err, context.Canceled) { // c leaves the queue, which promotes b
		t.Errorf("c: got %v; want context.Canceled", err)
	}
	b := recv(t, submitted, "the parked Submit")
	if b.err != nil {
		t.Fatalf("parked Submit: %v", b.err)
	}
	bcancel() // b is queued behind a; its withdrawal reads Entry.m
	if err := b.tk.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("b: got %v; want context.Canceled", err)
	}
	close(release)
	if err := a.Wait(ctx); err != nil {
		t.Errorf("a: %v", err)
	}
	if err := e.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}
