package executor_test

// Callbacks that call runtime.Goexit (as a t.FailNow in a test's Policy,
// Observer, error handler or logger does; fn's Goexit is TestGoexit's). Goexit cannot be stopped: the goroutine it
// runs on exits, whether it is a caller's, a pool worker's or a ctx
// watcher's. What the executor owes is that nothing is left behind: no key
// held, no slot or reservation taken, no task unaccounted for, and Close
// still returns.

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

// exitingPolicy admits everything, or, while exit is set, calls
// runtime.Goexit in Decide (as a t.FailNow in a test's policy would).
type exitingPolicy struct{ exit *atomic.Bool }

func (p exitingPolicy) Decide(backpressure.Load) backpressure.Verdict {
	if p.exit.Load() {
		runtime.Goexit()
	}
	return backpressure.Admit
}

// TestPolicyGoexit: a Policy that calls runtime.Goexit ends the calling
// goroutine, as Goexit requires, and leaves nothing behind: the submission
// is not accepted, no lock or reservation stays taken (the key's shard and
// every other key go on), no DoMany entry stays queued, and Close returns.
func TestPolicyGoexit(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []executor.Option
		fill bool // the policy is asked only once the cap is reached
	}{
		{"per-key cap", []executor.Option{executor.WithMaxQueuePerKey(1)}, false},
		{"global cap", []executor.Option{executor.WithMaxPending(1)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exit := new(atomic.Bool)
			opts := append([]executor.Option{executor.WithPolicy(exitingPolicy{exit}), executor.WithLogger(zap.NewNop())}, tc.opts...)
			e, err := executor.New[string](opts...)
			if err != nil {
				t.Fatal(err)
			}
			var g *gate
			if tc.fill {
				g, _ = block(t, e, "x")
			}
			before := e.Stats()
			exit.Store(true)
			for name, f := range keyMethods(e, "b", "a") {
				if !exits(t, name+" with an exiting Policy", func() { f() }) {
					t.Errorf("%s returned to a caller whose Policy called Goexit; want its goroutine to exit", name)
				}
			}
			exit.Store(false)
			if s := e.Stats(); s.Submitted != before.Submitted {
				t.Errorf("Stats.Submitted after the Goexits: %d; want %d (none accepted)", s.Submitted, before.Submitted)
			}
			if g != nil {
				g.open()
				waitIdle(t, e) // under the global cap again
			}
			for name, f := range keyMethods(e, "b", "a") {
				if _, err := attempt(t, name+" after the Goexits", f); err != nil {
					t.Errorf("%s after the Goexits: got %v; want nil", name, err)
				}
				waitIdle(t, e) // a Go or Submit still running would fill the cap
			}
			waitIdle(t, e)
			closeWithin(t, e)
		})
	}
}

// countingExitPolicy admits until its nth question, where it calls
// runtime.Goexit.
type countingExitPolicy struct {
	asked *atomic.Int32
	n     int32
}

func (p countingExitPolicy) Decide(backpressure.Load) backpressure.Verdict {
	if p.asked.Add(1) == p.n {
		runtime.Goexit()
	}
	return backpressure.Admit
}

// TestPolicyGoexitDoMany: a Policy that calls runtime.Goexit about a
// DoMany's second key, once the first key's entry is queued, leaves that
// entry behind in no queue: both keys take new work, and Close returns.
func TestPolicyGoexitDoMany(t *testing.T) {
	bg := context.Background()
	asked := new(atomic.Int32)
	e, err := executor.New[string](executor.WithPolicy(countingExitPolicy{asked, 2}),
		executor.WithMaxQueuePerKey(4), executor.WithLogger(zap.NewNop()))
	if err != nil {
		t.Fatal(err)
	}
	if !exits(t, "DoMany with a Policy that exits on its second key", func() { e.DoMany(bg, []string{"b", "a"}, nop) }) {
		t.Fatal("DoMany returned to a caller whose Policy called Goexit; want its goroutine to exit")
	}
	doEach(t, e, "b", "a")
	if s := waitIdle(t, e); s.Submitted != 2 {
		t.Errorf("Stats.Submitted: got %d; want 2 (the DoMany was never accepted)", s.Submitted)
	}
	closeWithin(t, e)
}

// exitingObserver calls runtime.Goexit in the first event named on after
// it is armed, and records that it did.
type exitingObserver struct {
	on    string
	armed atomic.Bool
	fired atomic.Bool
}

func (o *exitingObserver) hit(ev string) {
	if ev == o.on && o.armed.CompareAndSwap(true, false) {
		o.fired.Store(true)
		runtime.Goexit()
	}
}
func (o *exitingObserver) TaskAccepted()                                { o.hit("accepted") }
func (o *exitingObserver) TaskRejected(executor.Reason)                 { o.hit("rejected") }
func (o *exitingObserver) TaskStarted(time.Duration)                    { o.hit("started") }
func (o *exitingObserver) TaskFinished(time.Duration, executor.Outcome) { o.hit("finished") }
func (o *exitingObserver) TaskCanceled()                                { o.hit("canceled") }
func (o *exitingObserver) TaskSlow(time.Duration)                       { o.hit("slow") }

// occupy runs a task on key until the returned func is called; it returns
// once the task has started.
func occupy(t *testing.T, e *executor.Executor[string], key string) (release func()) {
	t.Helper()
	started, done := make(chan struct{}), make(chan struct{})
	if err := e.Go(context.Background(), key, func(context.Context) error {
		close(started)
		<-done
		return nil
	}); err != nil {
		t.Fatalf("Go on %s: %v", key, err)
	}
	recv(t, "the task occupying "+key, started)
	return func() { close(done) }
}

// stage is what a scenario's run gets: the executor, the release of the
// busy task (if any), and watchers that run f once a submission has queued
// or parked, which the test stops, and waits for, once run has ended.
type stage struct {
	e       *executor.Executor[string]
	release func()
	parks   *parkingPolicy
	stop    chan struct{}
	wg      sync.WaitGroup
}

// when runs f on a goroutine of its own once cond holds, unless the test
// stops the stage first (run exited before it got that far).
func (s *stage) when(cond func() bool, f func()) {
	s.wg.Go(func() {
		for d := 10 * time.Microsecond; !cond(); d = min(2*d, time.Millisecond) {
			select {
			case <-s.stop:
				return
			case <-time.After(d):
			}
		}
		f()
	})
}

// whenQueued runs f once a task waits in a queue behind the busy one
// (key a then has two pending).
func (s *stage) whenQueued(f func()) { s.when(func() bool { return s.e.MaxKeyPending() >= 2 }, f) }

// whenParked runs f once the next submission is sent to the waiting room:
// the Policy said Wait under the key's lock, which the busy task's end
// then waits for.
func (s *stage) whenParked(f func()) {
	n := s.parks.waits.Load()
	s.when(func() bool { return s.parks.waits.Load() > n }, f)
}

// parkingPolicy is backpressure.Block that counts its Wait verdicts: each
// sends a submission to its key's waiting room.
type parkingPolicy struct{ waits atomic.Int64 }

func (p *parkingPolicy) Decide(l backpressure.Load) backpressure.Verdict {
	v := backpressure.Block().Decide(l)
	if v == backpressure.Wait {
		p.waits.Add(1)
	}
	return v
}

// goexitScenario is one way to reach the Observer's events: run, on a
// goroutine of its own (which may exit), with the events it must produce.
// If busy, a task occupies key a first (before the Observer is armed)
// until run calls release, or run ends; if waiting, a key at its cap (1)
// has submissions wait for room.
type goexitScenario struct {
	name    string
	opts    []executor.Option
	events  []string
	busy    bool
	waiting bool
	closes  bool // run closes the executor
	run     func(s *stage)
}

func goexitScenarios() []goexitScenario {
	bg := context.Background()
	ran := []string{"accepted", "started", "finished"}
	fails := func(context.Context) error { return errors.New("fails") }
	return []goexitScenario{
		{name: "Do", events: ran, run: func(s *stage) { s.e.Do(bg, "a", nop) }},
		{name: "DoFails", events: ran, run: func(s *stage) { s.e.Do(bg, "a", fails) }},
		{name: "DoCancelable", events: ran, run: func(s *stage) {
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			s.e.Do(ctx, "a", nop)
		}},
		{name: "DoQueued", events: ran, busy: true, run: func(s *stage) {
			s.whenQueued(s.release)
			s.e.Do(bg, "a", nop)
		}},
		{name: "DoNested", events: ran, run: func(s *stage) {
			s.e.Do(bg, "b", func(ctx context.Context) error { return s.e.Do(ctx, "a", nop) })
		}},
		{name: "DoNestedOneWorker", opts: []executor.Option{executor.WithWorkers(1)}, events: ran, run: func(s *stage) {
			s.e.Do(bg, "b", func(ctx context.Context) error { return s.e.Do(ctx, "a", nop) })
		}},
		{name: "DoNestedQueued", events: ran, busy: true, run: func(s *stage) {
			s.e.Do(bg, "b", func(ctx context.Context) error {
				s.whenQueued(s.release)
				return s.e.Do(ctx, "a", nop)
			})
		}},
		{name: "DoShared", events: ran, run: func(s *stage) { s.e.DoShared(bg, "a", nop) }},
		{name: "DoMany", events: ran, run: func(s *stage) { s.e.DoMany(bg, []string{"a", "b"}, nop) }},
		{name: "Go", events: ran, run: func(s *stage) { s.e.Go(bg, "a", nop) }},
		{name: "GoFails", events: ran, run: func(s *stage) { s.e.Go(bg, "a", fails) }},
		{name: "GoCancelable", events: ran, run: func(s *stage) {
			ctx, cancel := context.WithCancel(bg)
			s.e.Go(ctx, "a", func(context.Context) error { cancel(); return nil })
		}},
		{name: "Submit", events: ran, run: func(s *stage) {
			if task, err := s.e.Submit(bg, "a", nop); err == nil {
				task.Wait(bg)
			}
		}},
		{name: "SubmitCancelable", events: ran, run: func(s *stage) {
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			if task, err := s.e.Submit(ctx, "a", nop); err == nil {
				task.Wait(bg)
			}
		}},
		{name: "Batcher", events: ran, busy: true, run: func(s *stage) {
			b, err := executor.NewBatcher(s.e, func(context.Context, string, []int) error { return nil })
			if err != nil {
				return
			}
			task, err := b.Submit(bg, "a", 1)
			b.Submit(bg, "a", 2)
			s.release()
			if err == nil {
				task.Wait(bg)
			}
			b.Do(bg, "a", 3)
		}},
		{name: "DoCanceled", events: []string{"accepted", "canceled"}, busy: true, run: func(s *stage) {
			ctx, cancel := context.WithCancel(bg)
			s.whenQueued(cancel)
			s.e.Do(ctx, "a", nop)
		}},
		{name: "DoNestedCanceled", events: []string{"accepted", "canceled"}, busy: true, run: func(s *stage) {
			s.e.Do(bg, "b", func(ctx context.Context) error {
				ctx, cancel := context.WithCancel(ctx)
				s.whenQueued(cancel)
				return s.e.Do(ctx, "a", nop)
			})
		}},
		{name: "SubmitCanceled", events: []string{"accepted", "canceled"}, busy: true, run: func(s *stage) {
			ctx, cancel := context.WithCancel(bg)
			task, err := s.e.Submit(ctx, "a", nop)
			cancel()
			if err == nil {
				task.Wait(bg)
			}
		}},
		{name: "GoCanceled", events: []string{"accepted", "canceled"}, busy: true, run: func(s *stage) {
			ctx, cancel := context.WithCancel(bg)
			s.e.Go(ctx, "a", nop)
			cancel()
		}},
		{name: "Rejected", opts: []executor.Option{executor.WithMaxQueuePerKey(1)}, events: []string{"rejected"}, busy: true,
			run: func(s *stage) { s.e.Do(bg, "a", nop) }},
		{name: "Parked", waiting: true, events: ran, busy: true, run: func(s *stage) {
			s.whenParked(s.release)
			s.e.Do(bg, "a", nop)
		}},
		{name: "ParkedGo", waiting: true, events: ran, busy: true, run: func(s *stage) {
			s.whenParked(s.release)
			s.e.Go(bg, "a", nop)
		}},
		{name: "ParkedNested", waiting: true, events: ran, busy: true, run: func(s *stage) {
			s.e.Do(bg, "b", func(ctx context.Context) error {
				s.whenParked(s.release)
				return s.e.Do(ctx, "a", nop)
			})
		}},
		{name: "ParkedNestedClosed", waiting: true, events: []string{"rejected"}, busy: true, closes: true, run: func(s *stage) {
			s.e.Do(bg, "b", func(ctx context.Context) error {
				s.whenParked(func() { s.e.Close(bg) })
				return s.e.Do(ctx, "a", nop)
			})
		}},
	}
}

// TestObserverGoexit: an Observer that calls runtime.Goexit in any event,
// on whichever goroutine reports it, leaves nothing behind: every accepted
// task is accounted for, both keys take new work and Close returns.
func TestObserverGoexit(t *testing.T) {
	for _, sc := range goexitScenarios() {
		for _, ev := range sc.events {
			t.Run(sc.name+"/"+ev, func(t *testing.T) {
				obs := &exitingObserver{on: ev}
				s := &stage{release: func() {}, parks: &parkingPolicy{}, stop: make(chan struct{})}
				opts := append([]executor.Option{executor.WithObserver(obs), executor.WithWorkers(2),
					executor.WithLogger(zap.NewNop()), executor.WithErrorHandler(func(any, error) {})}, sc.opts...)
				if sc.waiting {
					opts = append(opts, executor.WithMaxQueuePerKey(1), executor.WithPolicy(s.parks))
				}
				e, err := executor.New[string](opts...)
				if err != nil {
					t.Fatal(err)
				}
				s.e = e
				if sc.busy {
					s.release = sync.OnceFunc(occupy(t, e, "a"))
				}
				obs.armed.Store(true)
				exits(t, sc.name, func() { sc.run(s) })
				close(s.stop)
				s.release()
				watched := make(chan struct{})
				go func() { s.wg.Wait(); close(watched) }()
				recv(t, "the scenario's watchers", watched)
				eventually(t, "the Observer's "+ev+" event", obs.fired.Load)
				waitIdle(t, e)
				if !sc.closes {
					doEach(t, e, "a", "b")
					waitIdle(t, e)
				}
				closeWithin(t, e)
			})
		}
	}
}

// exitingCore is a zap core whose Write calls runtime.Goexit once armed.
type exitingCore struct {
	zapcore.LevelEnabler
	armed *atomic.Bool
}

func (c exitingCore) With([]zapcore.Field) zapcore.Core { return c }
func (c exitingCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(ent.Level) {
		return ce.AddCore(ent, c)
	}
	return ce
}
func (c exitingCore) Write(zapcore.Entry, []zapcore.Field) error {
	if c.armed.CompareAndSwap(true, false) {
		runtime.Goexit()
	}
	return nil
}
func (exitingCore) Sync() error { return nil }

// TestLoggerGoexit: a logger core that calls runtime.Goexit while the
// executor reports a task's panic, a failure nobody reads or a refusal
// leaves nothing behind.
func TestLoggerGoexit(t *testing.T) {
	bg := context.Background()
	boom := func(context.Context) error { panic("boom") }
	fails := func(context.Context) error { return errors.New("fails") }
	for name, run := range map[string]func(e *executor.Executor[string]){
		"Do panics":       func(e *executor.Executor[string]) { e.Do(bg, "a", boom) },
		"Go panics":       func(e *executor.Executor[string]) { e.Go(bg, "a", boom) },
		"Go fails":        func(e *executor.Executor[string]) { e.Go(bg, "a", fails) },
		"DoShared panics": func(e *executor.Executor[string]) { e.DoShared(bg, "a", boom) },
		"Submit panics":   func(e *executor.Executor[string]) { task, _ := e.Submit(bg, "a", boom); task.Wait(bg) },
		"DoMany panics":   func(e *executor.Executor[string]) { e.DoMany(bg, []string{"a", "b"}, boom) },
		"Do nested panics": func(e *executor.Executor[string]) {
			e.Do(bg, "b", func(ctx context.Context) error { return e.Do(ctx, "a", boom) })
		},
	} {
		t.Run(name, func(t *testing.T) {
			armed := new(atomic.Bool)
			e, err := executor.New[string](executor.WithLogger(zap.New(exitingCore{zapcore.ErrorLevel, armed})),
				executor.WithWorkers(2))
			if err != nil {
				t.Fatal(err)
			}
			armed.Store(true)
			exits(t, name, func() { run(e) })
			eventually(t, "the logger's Goexit", func() bool { return !armed.Load() })
			waitIdle(t, e)
			doEach(t, e, "a", "b")
			closeWithin(t, e)
		})
	}
}

// TestErrorHandlerGoexit: an error handler that calls runtime.Goexit on a
// pool worker or a ctx watcher leaves nothing behind; and an Observer that
// calls it in TaskFinished does not keep the failure from the handler.
func TestErrorHandlerGoexit(t *testing.T) {
	bg := context.Background()
	t.Run("handler", func(t *testing.T) {
		armed := new(atomic.Bool)
		e, err := executor.New[string](executor.WithErrorHandler(func(any, error) {
			if armed.CompareAndSwap(true, false) {
				runtime.Goexit()
			}
		}), executor.WithWorkers(1))
		if err != nil {
			t.Fatal(err)
		}
		armed.Store(true)
		if err := e.Go(bg, "a", func(context.Context) error { return errors.New("fails") }); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the handler's Goexit", func() bool { return !armed.Load() })
		release := occupy(t, e, "a")
		armed.Store(true)
		ctx, cancel := context.WithCancel(bg)
		if err := e.Go(ctx, "a", nop); err != nil {
			t.Fatal(err)
		}
		cancel() // noticed at the head of the queue: the handler hears of it there
		release()
		eventually(t, "the handler's Goexit on cancellation", func() bool { return !armed.Load() })
		waitIdle(t, e)
		doEach(t, e, "a", "b")
		closeWithin(t, e)
	})
	t.Run("observer first", func(t *testing.T) {
		obs := &exitingObserver{on: "finished"}
		got := make(chan error, 1)
		e, err := executor.New[string](executor.WithObserver(obs), executor.WithErrorHandler(func(_ any, err error) { got <- err }))
		if err != nil {
			t.Fatal(err)
		}
		obs.armed.Store(true)
		if err := e.Go(bg, "a", func(context.Context) error { return errors.New("fails") }); err != nil {
			t.Fatal(err)
		}
		if err := recv(t, "the error handler", got); err == nil || err.Error() != "fails" {
			t.Errorf("error handler: got %v; want the task's error", err)
		}
		waitIdle(t, e)
		closeWithin(t, e)
	})
}

// TestSlowObserverGoexit: a TaskSlow that calls runtime.Goexit ends the
// slow-task watcher's goroutine; a fresh one takes over, so later slow
// tasks are still reported, and Close still stops it.
func TestSlowObserverGoexit(t *testing.T) {
	obs := &exitingObserver{on: "slow"}
	e, err := executor.New[string](executor.WithObserver(obs), executor.WithSlowTaskWarning(time.Millisecond),
		executor.WithLogger(zap.NewNop()))
	if err != nil {
		t.Fatal(err)
	}
	obs.armed.Store(true)
	release := occupy(t, e, "a")
	eventually(t, "the Observer's Goexit in TaskSlow", obs.fired.Load)
	release()
	waitIdle(t, e)
	before := e.Stats().Slow
	release = occupy(t, e, "b")
	eventually(t, "a slow task reported after the Goexit", func() bool { return e.Stats().Slow > before })
	release()
	waitIdle(t, e)
	closeWithin(t, e)
}

// detachExits is an Observer whose Detach calls runtime.Goexit.
type detachExits struct{ exitingObserver }

func (*detachExits) Detach(executor.Gauges) { runtime.Goexit() }

// TestCloseGoexit: a Close whose caller exits in the Observer's Detach
// still closes: a later Close returns nil at once.
func TestCloseGoexit(t *testing.T) {
	obs := &detachExits{}
	e, err := executor.New[string](executor.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Do(context.Background(), "a", nop); err != nil {
		t.Fatal(err)
	}
	if !exits(t, "Close with a Detach that exits", func() { e.Close(context.Background()) }) {
		t.Fatal("Close returned to a caller whose Detach called Goexit; want its goroutine to exit")
	}
	closeWithin(t, e)
}

// randomExits is an Observer and error handler that calls runtime.Goexit
// at about one event in every n, while on is set.
type randomExits struct {
	n     uint64
	on    atomic.Bool
	exits atomic.Int64
}

func (o *randomExits) hit() {
	if o.on.Load() && rand.Uint64N(o.n) == 0 {
		o.exits.Add(1)
		runtime.Goexit()
	}
}
func (o *randomExits) TaskAccepted()                                { o.hit() }
func (o *randomExits) TaskRejected(executor.Reason)                 { o.hit() }
func (o *randomExits) TaskStarted(time.Duration)                    { o.hit() }
func (o *randomExits) TaskFinished(time.Duration, executor.Outcome) { o.hit() }
func (o *randomExits) TaskCanceled()                                { o.hit() }
func (o *randomExits) handle(any, error)                            { o.hit() }

// randomCore is a zap core through which a randomExits exits too, as it
// writes (the executor logs task panics, and samples refusals and
// cancellations at info level).
type randomCore struct{ o *randomExits }

func (c randomCore) Enabled(zapcore.Level) bool        { return true }
func (c randomCore) With([]zapcore.Field) zapcore.Core { return c }
func (c randomCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(ent, c)
}
func (c randomCore) Write(zapcore.Entry, []zapcore.Field) error { c.o.hit(); return nil }
func (randomCore) Sync() error                                  { return nil }

// TestCallbacksGoexitStress: under mixed concurrent load (Do, DoShared,
// DoMany, nested Do, Go, Submit, cancellations, a per-key cap, failing and
// panicking tasks) an Observer, an error handler and a logger that call
// runtime.Goexit at random, on whichever goroutine they run, never let two
// tasks of a key overlap, never leave an accepted task unaccounted for, and
// leave nothing behind: the executor goes idle, every key takes new work
// and Close returns (goleak in TestMain). On the commit before the
// callbacks' Goexits were contained, it wedges within a few hundred
// operations.
func TestCallbacksGoexitStress(t *testing.T) {
	cb := &randomExits{n: 40}
	e, err := executor.New[int](executor.WithObserver(cb), executor.WithErrorHandler(cb.handle),
		executor.WithWorkers(2), executor.WithMaxQueuePerKey(8), executor.WithLogger(zap.New(randomCore{cb})))
	if err != nil {
		t.Fatal(err)
	}
	const keys = 6
	var occ occupancies[int]
	body := func(shared bool, ks ...int) func(context.Context) error {
		return func(context.Context) error {
			for _, k := range ks {
				occ.of(k).enter(shared)
			}
			runtime.Gosched()
			for _, k := range ks {
				occ.of(k).exit(shared)
			}
			switch rand.IntN(16) {
			case 0, 1:
				return errors.New("fails") // for the error handler
			case 2:
				panic("boom") // for the logger
			}
			return nil
		}
	}
	bg := context.Background()
	ops := []func(k int){
		func(k int) { e.Do(bg, k, body(false, k)) },
		func(k int) { e.DoShared(bg, k, body(true, k)) },
		func(k int) { e.DoMany(bg, []int{k, (k + 1) % keys}, body(false, k, (k+1)%keys)) },
		func(k int) {
			e.Do(bg, k, func(ctx context.Context) error {
				return e.Do(ctx, (k+1)%keys, body(false, (k+1)%keys))
			})
		},
		func(k int) { e.Go(bg, k, body(false, k)) },
		func(k int) {
			if task, err := e.Submit(bg, k, body(false, k)); err == nil {
				task.Wait(bg)
			}
		},
		func(k int) {
			ctx, cancel := context.WithCancel(bg)
			time.AfterFunc(time.Duration(rand.IntN(200))*time.Microsecond, cancel)
			if rand.IntN(2) == 0 {
				e.Do(ctx, k, body(false, k))
			} else {
				e.Go(ctx, k, body(false, k))
			}
		},
	}
	cb.on.Store(true)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	give := time.After(patience) // a wedged executor fails the test, never hangs it
	for i := range 3000 {
		select {
		case sem <- struct{}{}:
		case <-give:
			t.Fatalf("gave up after %d operations: every caller in flight is stuck", i)
		}
		wg.Go(func() {
			defer func() { <-sem }() // runs even if the goroutine exits
			ops[i%len(ops)](rand.IntN(keys))
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	recv(t, "the callers to return or exit", done)
	cb.on.Store(false)
	if cb.exits.Load() == 0 {
		t.Fatal("no callback called Goexit; the test tested nothing")
	}
	s := waitIdle(t, e)
	t.Logf("%d Goexits in callbacks; %+v", cb.exits.Load(), s)
	if n := occ.overlaps(); n != 0 {
		t.Errorf("%d overlapping runs on one key", n)
	}
	for k := range keys {
		if _, err := attempt(t, "Do after the Goexits", func() error { return e.Do(bg, k, nop) }); err != nil {
			t.Errorf("Do(%d) after the Goexits: %v", k, err)
		}
	}
	closeWithin(t, e)
}

// alwaysExits is an Observer that calls runtime.Goexit in every
// TaskCanceled while on is set.
type alwaysExits struct {
	exitingObserver
	on    atomic.Bool
	exits atomic.Int64
}

func (o *alwaysExits) TaskCanceled() {
	if o.on.Load() {
		o.exits.Add(1)
		runtime.Goexit()
	}
}

// TestGiveUpGoexit: a giving-up Close takes queued plain tasks out of
// their queue and ends them with ErrClosed; an Observer that calls
// runtime.Goexit in every TaskCanceled ends Close's goroutine, but every
// one of those tasks still ends (none is lost), and a later Close returns.
func TestGiveUpGoexit(t *testing.T) {
	bg := context.Background()
	obs := &alwaysExits{}
	e, err := executor.New[string](executor.WithObserver(obs), executor.WithLogger(zap.NewNop()),
		executor.WithErrorHandler(func(any, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	if err := e.Go(bg, "a", func(context.Context) error { close(started); <-release; return nil }); err != nil {
		t.Fatal(err)
	}
	recv(t, "the blocker to start", started)
	var tasks []*executor.Task
	cancelable, cancel := context.WithCancel(bg) // never canceled: its tasks are queued as turns
	defer cancel()
	for range 4 {
		task, err := e.Submit(bg, "a", nop) // plain tasks, queued behind the blocker
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, task)
		if err := e.Go(bg, "a", nop); err != nil {
			t.Fatal(err)
		}
		if task, err = e.Submit(cancelable, "a", nop); err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, task)
	}
	obs.on.Store(true)
	short, cancel := context.WithTimeout(bg, 10*time.Millisecond)
	defer cancel()
	if !exits(t, "a giving-up Close whose Observer exits", func() { e.Close(short) }) {
		t.Fatal("Close returned to a caller whose Observer called Goexit; want its goroutine to exit")
	}
	for i, task := range tasks {
		if _, err := attempt(t, "Wait", func() error { return task.Wait(bg) }); !errors.Is(err, executor.ErrClosed) {
			t.Errorf("task %d: got %v; want ErrClosed", i, err)
		}
	}
	if n := obs.exits.Load(); n != 12 {
		t.Errorf("TaskCanceled exited %d times; want 12 (once per queued task)", n)
	}
	obs.on.Store(false)
	close(release)
	closeWithin(t, e)
	if s := e.Stats(); !balanced(s) || s.Canceled != 12 {
		t.Errorf("Stats after Close: %+v; want them balanced, with 12 canceled", s)
	}
}

// attachExits is an Observer whose Attach calls runtime.Goexit.
type attachExits struct{ exitingObserver }

func (*attachExits) Attach(executor.Gauges) { runtime.Goexit() }

// TestNewGoexit: a New whose Observer's Attach calls runtime.Goexit ends
// its caller's goroutine and leaves no goroutine of the half-made executor
// behind (goleak in TestMain), with or without a slow-task watcher.
func TestNewGoexit(t *testing.T) {
	for _, opts := range [][]executor.Option{
		{executor.WithObserver(&attachExits{})},
		{executor.WithObserver(&attachExits{}), executor.WithSlowTaskWarning(time.Millisecond), executor.WithLogger(zap.NewNop())},
	} {
		if !exits(t, "New with an Attach that exits", func() { executor.New[string](opts...) }) {
			t.Fatal("New returned to a caller whose Attach called Goexit; want its goroutine to exit")
		}
	}
}
