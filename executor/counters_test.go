package executor_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perkey/perkey/executor"
)

// countingObserver counts task events.
type countingObserver struct {
	accepted, started, finished, canceled, panicked, failed atomic.Int64
	rejected                                                [8]atomic.Int64
}

func (o *countingObserver) TaskAccepted()                  { o.accepted.Add(1) }
func (o *countingObserver) TaskRejected(r executor.Reason) { o.rejected[r].Add(1) }
func (o *countingObserver) TaskStarted(time.Duration)      { o.started.Add(1) }
func (o *countingObserver) TaskCanceled()                  { o.canceled.Add(1) }
func (o *countingObserver) TaskFinished(_ time.Duration, out executor.Outcome) {
	o.finished.Add(1)
	switch out {
	case executor.Panicked:
		o.panicked.Add(1)
	case executor.Failed:
		o.failed.Add(1)
	}
}

// TestCountersWhenCallReturns: by the time a call (or Wait) returns, Stats
// and the observer already account for its task, whatever its fate.
func TestCountersWhenCallReturns(t *testing.T) {
	bg := context.Background()
	tests := []struct {
		name string
		// run makes one call on an otherwise idle executor (with "busy"
		// held by a blocker and capped at 2 pending) and returns its error.
		run  func(e *executor.Executor[string]) error
		want executor.Stats // the delta the call must leave
		err  error
	}{
		{"Do inline ok", func(e *executor.Executor[string]) error { return e.Do(bg, "k", nop) },
			executor.Stats{Submitted: 1, Completed: 1}, nil},
		{"Do inline error", func(e *executor.Executor[string]) error {
			return e.Do(bg, "k", func(context.Context) error { return errTask })
		}, executor.Stats{Submitted: 1, Completed: 1}, errTask},
		{"Do inline panic", func(e *executor.Executor[string]) error {
			return e.Do(bg, "k", func(context.Context) error { panic(errTask) })
		}, executor.Stats{Submitted: 1, Completed: 1, Panicked: 1}, errTask},
		{"Submit ok", func(e *executor.Executor[string]) error {
			task, err := e.Submit(bg, "k", nop)
			if err != nil {
				return err
			}
			return task.Wait(bg)
		}, executor.Stats{Submitted: 1, Completed: 1}, nil},
		{"Submit panic", func(e *executor.Executor[string]) error {
			task, err := e.Submit(bg, "k", func(context.Context) error { panic(errTask) })
			if err != nil {
				return err
			}
			<-task.Done() // Done, like Wait, comes after the accounting
			return task.Wait(bg)
		}, executor.Stats{Submitted: 1, Completed: 1, Panicked: 1}, errTask},
		{"DoShared ok", func(e *executor.Executor[string]) error { return e.DoShared(bg, "k", nop) },
			executor.Stats{Submitted: 1, Completed: 1}, nil},
		{"DoMany error", func(e *executor.Executor[string]) error {
			return e.DoMany(bg, []string{"k", "j"}, func(context.Context) error { return errTask })
		}, executor.Stats{Submitted: 1, Completed: 1}, errTask},
		{"queued Do canceled", func(e *executor.Executor[string]) error {
			ctx, cancel := context.WithCancel(bg)
			go func() {
				for e.Stats().Queued == 0 {
					runtime.Gosched()
				}
				cancel()
			}()
			return e.Do(ctx, "busy", nop)
		}, executor.Stats{Submitted: 1, Canceled: 1}, context.Canceled},
		{"queued DoMany canceled", func(e *executor.Executor[string]) error {
			ctx, cancel := context.WithCancel(bg)
			go func() {
				for e.Stats().Queued == 0 {
					runtime.Gosched()
				}
				cancel()
			}()
			return e.DoMany(ctx, []string{"k", "busy"}, nop)
		}, executor.Stats{Submitted: 1, Canceled: 1}, context.Canceled},
		{"queued Submit canceled", func(e *executor.Executor[string]) error {
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			task, err := e.Submit(ctx, "busy", nop)
			if err != nil {
				return err
			}
			cancel()
			return task.Wait(bg)
		}, executor.Stats{Submitted: 1, Canceled: 1}, context.Canceled},
		{"rejected", func(e *executor.Executor[string]) error {
			if _, err := e.Submit(bg, "busy", nop); err != nil { // fills the cap
				return err
			}
			return e.Do(bg, "busy", nop)
		}, executor.Stats{Submitted: 1, Queued: 1, Rejected: 1}, executor.ErrBusy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := new(countingObserver)
			e := newExec[string](t, executor.WithWorkers(4), executor.WithMaxQueuePerKey(2), executor.WithObserver(obs))
			g, _ := block(t, e, "busy")
			defer g.open()
			before := e.Stats()
			err := tt.run(e)
			after := e.Stats()
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Errorf("call: got %v; want %v", err, tt.err)
			}
			got := executor.Stats{
				Queued:    after.Queued - before.Queued,
				Running:   after.Running - before.Running,
				Submitted: after.Submitted - before.Submitted,
				Completed: after.Completed - before.Completed,
				Rejected:  after.Rejected - before.Rejected,
				Canceled:  after.Canceled - before.Canceled,
				Panicked:  after.Panicked - before.Panicked,
			}
			if got != tt.want {
				t.Errorf("Stats change when the call returned: got %+v; want %+v", got, tt.want)
			}
			if !balanced(after) {
				t.Errorf("Stats when the call returned: got %+v; want Submitted == Completed+Canceled+Queued+Running", after)
			}
			// The observer saw the same events (the blocker adds one
			// acceptance and one start).
			if a := obs.accepted.Load(); a != int64(after.Submitted) {
				t.Errorf("observer acceptances: got %d; want %d", a, after.Submitted)
			}
			if c := obs.canceled.Load(); c != int64(after.Canceled) {
				t.Errorf("observer cancellations: got %d; want %d", c, after.Canceled)
			}
			if f := obs.finished.Load(); f != int64(after.Completed) {
				t.Errorf("observer finishes: got %d; want %d", f, after.Completed)
			}
			if s := obs.started.Load(); s != int64(after.Completed)+int64(after.Running) {
				t.Errorf("observer starts: got %d; want %d", s, int64(after.Completed)+int64(after.Running))
			}
			if p := obs.panicked.Load(); p != int64(after.Panicked) {
				t.Errorf("observer panics: got %d; want %d", p, after.Panicked)
			}
			if r := obs.rejected[executor.ReasonKey].Load(); r != int64(after.Rejected) {
				t.Errorf("observer rejections (key): got %d; want %d", r, after.Rejected)
			}
			g.open()
			waitIdle(t, e)
		})
	}
}

// Stats, ActiveKeys, HotKeys, Call

func TestStatsActiveKeysHotKeys(t *testing.T) {
	e := newExec[string](t, executor.WithWorkers(4))
	if s := e.Stats(); s != (executor.Stats{}) {
		t.Errorf("Stats of a new executor: got %+v; want zero", s)
	}
	var gates []*gate
	var tasks []*executor.Task
	for i, k := range []string{"one", "two", "three"} {
		g, _ := block(t, e, k)
		gates = append(gates, g)
		for range i {
			task, err := e.Submit(context.Background(), k, nop)
			if err != nil {
				t.Fatal(err)
			}
			tasks = append(tasks, task)
		}
	}
	if got := e.ActiveKeys(); got != 3 {
		t.Errorf("ActiveKeys: got %d; want 3", got)
	}
	want := executor.Stats{ActiveKeys: 3, Queued: 3, Running: 3, Submitted: 6}
	if s := e.Stats(); s != want {
		t.Errorf("Stats: got %+v; want %+v", s, want)
	}
	tests := []struct {
		n    int
		want []executor.KeyLoad[string]
	}{
		{1, []executor.KeyLoad[string]{{Key: "three", Pending: 3}}},
		{2, []executor.KeyLoad[string]{{Key: "three", Pending: 3}, {Key: "two", Pending: 2}}},
		{3, []executor.KeyLoad[string]{{Key: "three", Pending: 3}, {Key: "two", Pending: 2}, {Key: "one", Pending: 1}}},
		{100, []executor.KeyLoad[string]{{Key: "three", Pending: 3}, {Key: "two", Pending: 2}, {Key: "one", Pending: 1}}},
	}
	for _, tt := range tests {
		if got := e.HotKeys(tt.n); fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("HotKeys(%d): got %v; want %v", tt.n, got, tt.want)
		}
	}
	for _, g := range gates {
		g.open()
	}
	for _, task := range tasks {
		_ = task.Wait(context.Background())
	}
	s := waitIdle(t, e)
	if want := (executor.Stats{Submitted: 6, Completed: 6}); s != want {
		t.Errorf("Stats when idle: got %+v; want %+v", s, want)
	}
	if got := e.HotKeys(3); len(got) != 0 {
		t.Errorf("HotKeys when idle: got %v; want none", got)
	}
}

func TestCall(t *testing.T) {
	e := newExec[int](t, executor.WithWorkers(2))
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		fn      func(context.Context) (string, error)
		want    string
		wantErr error
	}{
		{"value", context.Background(), func(context.Context) (string, error) { return "v", nil }, "v", nil},
		{"value and error", context.Background(), func(context.Context) (string, error) { return "partial", errTask }, "partial", errTask},
		{"panic", context.Background(), func(context.Context) (string, error) { panic(errTask) }, "", errTask},
		{"canceled", canceled, func(context.Context) (string, error) { return "v", nil }, "", context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := executor.Call(tt.ctx, e, 1, tt.fn)
			if got != tt.want || !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Errorf("Call: got %q, %v; want %q, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
	t.Run("ordered with Do", func(t *testing.T) {
		n := 0
		for i := range 50 {
			if i%2 == 0 {
				_ = e.Do(context.Background(), 2, func(context.Context) error { n++; return nil })
				continue
			}
			got, err := executor.Call(context.Background(), e, 2, func(context.Context) (int, error) { n++; return n, nil })
			if err != nil || got != i+1 {
				t.Fatalf("Call #%d: got %d, %v; want %d, nil", i, got, err, i+1)
			}
		}
	})
	waitIdle(t, e)
}

// TestStatsUnderLoad: while producers feed plain Gos, plain Submits,
// uncontended Dos and jobs (a ctx that can end) to many keys, whose tasks
// count in their router shards' counters or the executor's, a reader's
// Stats never show a negative Queued or Running, nor more completed than
// submitted; once idle they add up exactly, with every task counted.
func TestStatsUnderLoad(t *testing.T) {
	e := newExec[int](t, executor.WithWorkers(2))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bg := context.Background()
	const producers, per = 4, 3000
	nop := func(context.Context) error { return nil }
	stop := make(chan struct{})
	readerDone := make(chan struct{})
	var bad atomic.Value
	go func() {
		defer close(readerDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if s := e.Stats(); s.Queued < 0 || s.Running < 0 || s.Completed > s.Submitted {
				bad.Store(fmt.Sprintf("%+v", s))
			}
		}
	}()
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range per {
				key := (p*per + i) % 97
				var err error
				switch i % 4 {
				case 0:
					err = e.Go(bg, key, nop)
				case 1:
					_, err = e.Submit(bg, key, nop)
				case 2:
					err = e.Do(bg, key, nop)
				default:
					err = e.Go(ctx, key, nop) // a job: its ctx can end
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	waitAll(t, &wg)
	s := waitIdle(t, e)
	close(stop)
	recv(t, "the Stats reader to stop", readerDone)
	if v := bad.Load(); v != nil {
		t.Errorf("Stats under load showed %v", v)
	}
	if s.Submitted != producers*per || s.Completed != producers*per {
		t.Errorf("idle Stats %+v; want %d submitted and completed", s, producers*per)
	}
}
