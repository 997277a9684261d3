package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/perkey/perkey/debugpage"
	"github.com/perkey/perkey/executor"
	"github.com/perkey/perkey/metrics"
)

// gaugeNames and counterNames are the metrics whose values the tests pin.
var (
	gaugeNames = []string{
		"perkey_active_keys", "perkey_tasks_queued", "perkey_tasks_running", "perkey_key_pending_max",
	}
	counterNames = []string{
		"perkey_tasks_submitted_total", "perkey_tasks_completed_total", "perkey_tasks_rejected_total",
		"perkey_tasks_canceled_total", "perkey_tasks_panicked_total",
	}
)

const gaugeHelp = `
# HELP perkey_active_keys Keys (or stripes) with a live mailbox now.
# TYPE perkey_active_keys gauge
perkey_active_keys %d
# HELP perkey_tasks_queued Tasks accepted and not started.
# TYPE perkey_tasks_queued gauge
perkey_tasks_queued %d
# HELP perkey_tasks_running Tasks executing now.
# TYPE perkey_tasks_running gauge
perkey_tasks_running %d
# HELP perkey_key_pending_max Pending tasks (queued + running) of the busiest key now.
# TYPE perkey_key_pending_max gauge
perkey_key_pending_max %d
`

// wantGauges is the exposition of the four gauges.
func wantGauges(active, queued, running, pendingMax int) string {
	return fmt.Sprintf(gaugeHelp, active, queued, running, pendingMax)
}

const counterHelp = `
# HELP perkey_tasks_submitted_total Tasks accepted.
# TYPE perkey_tasks_submitted_total counter
perkey_tasks_submitted_total %d
# HELP perkey_tasks_completed_total Tasks whose function returned, with or without an error, or panicked.
# TYPE perkey_tasks_completed_total counter
perkey_tasks_completed_total %d
# HELP perkey_tasks_canceled_total Accepted tasks that never ran: their context ended, or Close gave up.
# TYPE perkey_tasks_canceled_total counter
perkey_tasks_canceled_total %d
# HELP perkey_tasks_panicked_total Tasks whose function panicked (also counted as completed).
# TYPE perkey_tasks_panicked_total counter
perkey_tasks_panicked_total %d
# HELP perkey_tasks_rejected_total Submissions refused, by reason: key (per-key cap), global (executor cap), delay (queue delay), closed.
# TYPE perkey_tasks_rejected_total counter
perkey_tasks_rejected_total{reason="closed"} %d
perkey_tasks_rejected_total{reason="delay"} %d
perkey_tasks_rejected_total{reason="global"} %d
perkey_tasks_rejected_total{reason="key"} %d
`

type counts struct {
	submitted, completed, canceled, panicked int
	closed, delay, global, key               int // rejections by reason
}

func (c counts) String() string {
	return fmt.Sprintf(counterHelp, c.submitted, c.completed, c.canceled, c.panicked,
		c.closed, c.delay, c.global, c.key)
}

// observations returns the sample count of histogram name.
func observations(t *testing.T, c prometheus.Collector, name string) int {
	t.Helper()
	text, err := testutil.CollectAndFormat(c, expfmt.TypeTextPlain, name)
	if err != nil {
		t.Fatalf("CollectAndFormat(%s): %v", name, err)
	}
	m := regexp.MustCompile(`(?m)^` + name + `_count (\d+)$`).FindSubmatch(text)
	if m == nil {
		t.Fatalf("no %s_count in\n%s", name, text)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

func lint(t *testing.T, c prometheus.Collector) {
	t.Helper()
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatalf("CollectAndLint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func closeAll(t *testing.T, closers ...interface{ Close(context.Context) error }) {
	t.Helper()
	t.Cleanup(func() {
		for _, c := range closers {
			if err := c.Close(context.Background()); err != nil {
				t.Errorf("Close: %v", err)
			}
		}
	})
}

func TestLintFresh(t *testing.T) {
	for _, ns := range []string{"perkey", "billing_perkey", ""} {
		t.Run(fmt.Sprintf("%q", ns), func(t *testing.T) {
			m := metrics.New(ns)
			lint(t, m)
			reg := prometheus.NewPedanticRegistry()
			if err := reg.Register(m); err != nil {
				t.Fatalf("Register: %v", err)
			}
			want := "tasks_submitted_total"
			if ns != "" {
				want = ns + "_" + want
			}
			if n := testutil.CollectAndCount(m, want); n != 1 {
				t.Errorf("series named %s: got %d; want 1", want, n)
			}
			// 12 gauges, 5 counters, 4 rejection reasons, 2 histograms.
			if n := testutil.CollectAndCount(m); n != 23 {
				t.Errorf("series: got %d; want 23", n)
			}
		})
	}
}

// TestWorkload runs a known workload on two executors sharing one Collector
// and checks every counter, the gauges while work is blocked, and the
// histograms, against the executors' own Stats.
func TestWorkload(t *testing.T) {
	ctx := context.Background()
	m := metrics.New("perkey")
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	e, err := executor.New[string](executor.WithObserver(m), executor.WithMaxQueuePerKey(2), executor.WithWorkers(4))
	if err != nil {
		t.Fatal(err)
	}
	g, err := executor.New[int](executor.WithObserver(m), executor.WithMaxPending(1))
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, e, g)

	if err := testutil.CollectAndCompare(m, strings.NewReader(wantGauges(0, 0, 0, 0)), gaugeNames...); err != nil {
		t.Errorf("idle gauges: %v", err)
	}

	// Key "a": 3 successes, 1 failure, 2 panics.
	boom := errors.New("boom")
	for i, fn := range []func(context.Context) error{
		func(context.Context) error { return nil },
		func(context.Context) error { return nil },
		func(context.Context) error { return nil },
		func(context.Context) error { return boom },
		func(context.Context) error { panic("one") },
		func(context.Context) error { panic("two") },
	} {
		err := e.Do(ctx, "a", fn)
		var pe *executor.PanicError
		switch {
		case i < 3 && err != nil:
			t.Fatalf("task %d: got %v; want nil", i, err)
		case i == 3 && !errors.Is(err, boom):
			t.Fatalf("task %d: got %v; want %v", i, err, boom)
		case i > 3 && !errors.As(err, &pe):
			t.Fatalf("task %d: got %v; want a *PanicError", i, err)
		}
	}

	// Key "hot" at its cap of 2: one task running, one queued.
	release, started := make(chan struct{}), make(chan struct{})
	blocker, err := e.Submit(ctx, "hot", func(context.Context) error {
		close(started)
		<-release
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	queued, err := e.Submit(qctx, "hot", func(context.Context) error {
		t.Error("canceled task ran")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := e.Submit(ctx, "hot", func(context.Context) error { return nil }); !errors.Is(err, executor.ErrBusy) {
			t.Fatalf("Submit over the key cap: got %v; want ErrBusy", err)
		}
	}

	// g at its global cap of 1: one task running on key 1.
	gRelease, gStarted := make(chan struct{}), make(chan struct{})
	gTask, err := g.Submit(ctx, 1, func(context.Context) error {
		close(gStarted)
		<-gRelease
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	<-gStarted
	if _, err := g.Submit(ctx, 2, func(context.Context) error { return nil }); !errors.Is(err, executor.ErrBusy) {
		t.Fatalf("Submit over the global cap: got %v; want ErrBusy", err)
	}

	// Gauges add up over both executors; the deepest key is "hot" with 2.
	if err := testutil.CollectAndCompare(m, strings.NewReader(wantGauges(2, 1, 2, 2)), gaugeNames...); err != nil {
		t.Errorf("busy gauges: %v", err)
	}

	cancel()
	if err := queued.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled task: got %v; want context.Canceled", err)
	}
	close(release)
	close(gRelease)
	if err := blocker.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := gTask.Wait(ctx); err != nil {
		t.Fatal(err)
	}

	want := counts{submitted: 9, completed: 8, canceled: 1, panicked: 2, global: 1, key: 3}
	if err := testutil.CollectAndCompare(m, strings.NewReader(want.String()), counterNames...); err != nil {
		t.Errorf("counters: %v", err)
	}
	// The events agree with the executors' own counters.
	es, gs := e.Stats(), g.Stats()
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"Submitted", es.Submitted + gs.Submitted, uint64(want.submitted)},
		{"Completed", es.Completed + gs.Completed, uint64(want.completed)},
		{"Canceled", es.Canceled + gs.Canceled, uint64(want.canceled)},
		{"Panicked", es.Panicked + gs.Panicked, uint64(want.panicked)},
		{"Rejected", es.Rejected + gs.Rejected, uint64(want.global + want.key)},
	} {
		if c.got != c.want {
			t.Errorf("Stats().%s summed: got %d; want %d", c.name, c.got, c.want)
		}
	}
	for _, name := range []string{"perkey_task_wait_seconds", "perkey_task_run_seconds"} {
		if got := observations(t, m, name); got != want.completed {
			t.Errorf("%s observations: got %d; want %d (one per task that ran)", name, got, want.completed)
		}
	}
	lint(t, m)
	if _, err := reg.Gather(); err != nil {
		t.Errorf("pedantic Gather: %v", err)
	}
}

func TestRejectedReasons(t *testing.T) {
	m := metrics.New("perkey")
	for r, n := range map[executor.Reason]int{
		executor.ReasonKey: 1, executor.ReasonGlobal: 2, executor.ReasonDelay: 3, executor.ReasonClosed: 4,
	} {
		for range n {
			m.TaskRejected(r)
		}
	}
	want := counts{key: 1, global: 2, delay: 3, closed: 4}
	if err := testutil.CollectAndCompare(m, strings.NewReader(want.String()), counterNames...); err != nil {
		t.Error(err)
	}

	// A reason this package does not know still counts, under its String.
	m.TaskRejected(executor.Reason(200))
	if n := testutil.CollectAndCount(m, "perkey_tasks_rejected_total"); n != 5 {
		t.Errorf("rejected series after an unknown reason: got %d; want 5", n)
	}
	lint(t, m)
}

func TestHistogramBuckets(t *testing.T) {
	m := metrics.New("perkey")
	for _, d := range []time.Duration{0, 7 * time.Microsecond, 300 * time.Microsecond, 3 * time.Millisecond, 2 * time.Second, time.Minute} {
		m.TaskStarted(d)
	}
	const want = `
# HELP perkey_task_wait_seconds Time from a task's acceptance to its start.
# TYPE perkey_task_wait_seconds histogram
perkey_task_wait_seconds_bucket{le="1e-05"} 2
perkey_task_wait_seconds_bucket{le="2.5e-05"} 2
perkey_task_wait_seconds_bucket{le="5e-05"} 2
perkey_task_wait_seconds_bucket{le="0.0001"} 2
perkey_task_wait_seconds_bucket{le="0.00025"} 2
perkey_task_wait_seconds_bucket{le="0.0005"} 3
perkey_task_wait_seconds_bucket{le="0.001"} 3
perkey_task_wait_seconds_bucket{le="0.0025"} 3
perkey_task_wait_seconds_bucket{le="0.005"} 4
perkey_task_wait_seconds_bucket{le="0.01"} 4
perkey_task_wait_seconds_bucket{le="0.025"} 4
perkey_task_wait_seconds_bucket{le="0.05"} 4
perkey_task_wait_seconds_bucket{le="0.1"} 4
perkey_task_wait_seconds_bucket{le="0.25"} 4
perkey_task_wait_seconds_bucket{le="0.5"} 4
perkey_task_wait_seconds_bucket{le="1"} 4
perkey_task_wait_seconds_bucket{le="2.5"} 5
perkey_task_wait_seconds_bucket{le="5"} 5
perkey_task_wait_seconds_bucket{le="10"} 5
perkey_task_wait_seconds_bucket{le="+Inf"} 6
perkey_task_wait_seconds_sum 62.003307
perkey_task_wait_seconds_count 6
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), "perkey_task_wait_seconds"); err != nil {
		t.Error(err)
	}

	m.TaskFinished(time.Millisecond, executor.OK)
	m.TaskFinished(time.Millisecond, executor.Failed)
	m.TaskFinished(time.Millisecond, executor.Panicked)
	if got := observations(t, m, "perkey_task_run_seconds"); got != 3 {
		t.Errorf("run observations: got %d; want 3", got)
	}
	if err := testutil.CollectAndCompare(m, strings.NewReader(counts{completed: 3, panicked: 1}.String()), counterNames...); err != nil {
		t.Error(err)
	}
}

// fakeGauges is an executor.Gauges with fixed values.
type fakeGauges struct {
	s   executor.Stats
	max int
}

func (f *fakeGauges) Stats() executor.Stats { return f.s }
func (f *fakeGauges) MaxKeyPending() int    { return f.max }

func TestAttachDetach(t *testing.T) {
	m := metrics.New("perkey")
	a := &fakeGauges{s: executor.Stats{ActiveKeys: 3, Queued: 10, Running: 2}, max: 9}
	b := &fakeGauges{s: executor.Stats{ActiveKeys: 1, Queued: 4, Running: 1}, max: 5}
	m.Attach(a)
	m.Attach(b)
	m.Attach(a) // counted once
	for _, step := range []struct {
		name string
		do   func()
		want string
	}{
		{"both", func() {}, wantGauges(4, 14, 3, 9)},
		{"detach a", func() { m.Detach(a) }, wantGauges(1, 4, 1, 5)},
		{"detach a again", func() { m.Detach(a) }, wantGauges(1, 4, 1, 5)},
		{"detach b", func() { m.Detach(b) }, wantGauges(0, 0, 0, 0)},
	} {
		step.do()
		if err := testutil.CollectAndCompare(m, strings.NewReader(step.want), gaugeNames...); err != nil {
			t.Errorf("%s: %v", step.name, err)
		}
	}
}

// TestObserverAllocs checks that no Observer method allocates: the
// executor calls them on every task.
func TestObserverAllocs(t *testing.T) {
	m := metrics.New("perkey")
	for _, c := range []struct {
		name string
		fn   func()
	}{
		{"TaskAccepted", m.TaskAccepted},
		{"TaskRejected/key", func() { m.TaskRejected(executor.ReasonKey) }},
		{"TaskRejected/global", func() { m.TaskRejected(executor.ReasonGlobal) }},
		{"TaskRejected/delay", func() { m.TaskRejected(executor.ReasonDelay) }},
		{"TaskRejected/closed", func() { m.TaskRejected(executor.ReasonClosed) }},
		{"TaskStarted", func() { m.TaskStarted(3 * time.Millisecond) }},
		{"TaskFinished/ok", func() { m.TaskFinished(time.Millisecond, executor.OK) }},
		{"TaskFinished/failed", func() { m.TaskFinished(time.Millisecond, executor.Failed) }},
		{"TaskFinished/panicked", func() { m.TaskFinished(time.Millisecond, executor.Panicked) }},
		{"TaskCanceled", m.TaskCanceled},
		{"TaskSlow", func() { m.TaskSlow(time.Minute) }},
	} {
		if n := testing.AllocsPerRun(1000, c.fn); n != 0 {
			t.Errorf("%s: got %v allocs; want 0", c.name, n)
		}
	}
}

// TestConcurrentScrape scrapes while tasks run, for the race detector.
func TestConcurrentScrape(t *testing.T) {
	m := metrics.New("perkey")
	e, err := executor.New[int](executor.WithObserver(m), executor.WithWorkers(4))
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, e)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 2000 {
			_ = e.Do(context.Background(), i%7, func(context.Context) error { return nil })
		}
	}()
	for scrapes := 0; ; scrapes++ {
		select {
		case <-done:
			if err := testutil.CollectAndCompare(m, strings.NewReader(counts{submitted: 2000, completed: 2000}.String()), counterNames...); err != nil {
				t.Error(err)
			}
			return
		default:
			testutil.CollectAndCount(m)
		}
	}
}

const slowHelp = `
# HELP perkey_tasks_slow_total Holds of a key (a task, a shared group or a multi-key task) that lasted longer than the executor's WithSlowTaskWarning threshold, each counted once when found; 0 when the option is off.
# TYPE perkey_tasks_slow_total counter
perkey_tasks_slow_total %d
`

// TestSlowTasks runs an executor on virtual time with a slow-task
// threshold of 1s: a task stuck for a minute and one that takes 2s are
// counted once each; quick ones are not.
func TestSlowTasks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := metrics.New("perkey")
		e, err := executor.New[string](executor.WithObserver(m), executor.WithSlowTaskWarning(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		stuck := make(chan struct{})
		if err := e.Go(ctx, "stuck", func(context.Context) error { <-stuck; return nil }); err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			if err := e.Do(ctx, strconv.Itoa(i), func(context.Context) error { time.Sleep(time.Millisecond); return nil }); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.Do(ctx, "slow", func(context.Context) error { time.Sleep(2 * time.Second); return nil }); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if err := testutil.CollectAndCompare(m, strings.NewReader(fmt.Sprintf(slowHelp, 2)), "perkey_tasks_slow_total"); err != nil {
			t.Error(err)
		}
		if s := e.Stats(); s.Slow != 2 {
			t.Errorf("Stats().Slow: got %d; want 2", s.Slow)
		}
		lint(t, m)
		close(stuck)
		if err := e.Close(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

const attachedHelp = `
# HELP perkey_executors_attached Executors this Collector observes now: built with executor.WithObserver(collector) and not yet closed. 0 when it was never passed to WithObserver (then every other metric of it reads 0, however busy the executor), or once every executor it observed has closed.
# TYPE perkey_executors_attached gauge
perkey_executors_attached %d
`

// TestExecutorsAttached: a Collector registered but never passed to
// WithObserver says so, with perkey_executors_attached at 0; the gauge
// follows executors as they are built and closed.
func TestExecutorsAttached(t *testing.T) {
	m := metrics.New("perkey")
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	check := func(when string, want int) {
		t.Helper()
		if err := testutil.CollectAndCompare(m, strings.NewReader(fmt.Sprintf(attachedHelp, want)), "perkey_executors_attached"); err != nil {
			t.Errorf("%s: %v", when, err)
		}
	}

	// The mistake: an executor built without WithObserver(m).
	unobserved, err := executor.New[string]()
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, unobserved)
	_ = unobserved.Do(context.Background(), "a", func(context.Context) error { return nil })
	check("never attached", 0)
	if err := testutil.CollectAndCompare(m, strings.NewReader(counts{}.String()), counterNames...); err != nil {
		t.Errorf("never attached: %v", err)
	}

	a, err := executor.New[string](executor.WithObserver(m))
	if err != nil {
		t.Fatal(err)
	}
	b, err := executor.New[int](executor.WithObserver(m))
	if err != nil {
		t.Fatal(err)
	}
	check("two attached", 2)
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	check("one closed", 1)
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	check("both closed", 0)
	lint(t, m)
	if _, err := reg.Gather(); err != nil {
		t.Errorf("pedantic Gather: %v", err)
	}
}

// A Collector gives the debug page its percentiles.
var _ debugpage.LatencySource = (*metrics.Collector)(nil)

// TestQuantiles checks the estimates against histogram_quantile's
// interpolation on known observations.
func TestQuantiles(t *testing.T) {
	m := metrics.New("perkey")
	if wait, run := m.Quantiles(0.5); wait != nil || run != nil {
		t.Errorf("no observations: got %v, %v; want nil, nil", wait, run)
	}

	// 100 waits: 50 in (10µs, 25µs], 40 in (2.5ms, 5ms], 9 in (50ms,
	// 100ms], 1 above 10s.
	for range 50 {
		m.TaskStarted(20 * time.Microsecond)
	}
	for range 40 {
		m.TaskStarted(3 * time.Millisecond)
	}
	for range 9 {
		m.TaskStarted(70 * time.Millisecond)
	}
	m.TaskStarted(time.Minute)
	m.TaskFinished(3*time.Millisecond, executor.OK) // one run, in (2.5ms, 5ms]

	wait, run := m.Quantiles(0, 0.25, 0.5, 0.7, 0.9, 0.95, 0.999, 1, -1, 2)
	want := []time.Duration{
		10 * time.Microsecond,   // q=0: the bottom of the first bucket with observations
		17500 * time.Nanosecond, // rank 25 of the 50 in (10µs, 25µs]: halfway
		25 * time.Microsecond,   // rank 50: its top
		3750 * time.Microsecond, // rank 70: halfway through (2.5ms, 5ms]
		5 * time.Millisecond,    // rank 90: its top
		5 * time.Millisecond,    // rank 95 falls in (50ms, 100ms]: ...
		10 * time.Second,        // rank 99.9, above the last finite bucket
		10 * time.Second,        // q=1
		10 * time.Microsecond,   // q=-1 clamps to 0
		10 * time.Second,        // q=2 clamps to 1
	}
	want[5] = 50*time.Millisecond + 50*time.Millisecond*5/9 // ... 5 of its 9
	if len(wait) != len(want) {
		t.Fatalf("wait quantiles: got %v; want %v", wait, want)
	}
	for i := range want {
		if d := wait[i] - want[i]; d < -time.Nanosecond || d > time.Nanosecond {
			t.Errorf("wait quantile %d: got %v; want %v", i, wait[i], want[i])
		}
	}
	if run[2] != 3750*time.Microsecond {
		t.Errorf("run p50 of one observation in (2.5ms, 5ms]: got %v; want 3.75ms", run[2])
	}
}
