package metrics

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/perkey/perkey/executor"
)

// buckets are the bounds, in seconds, of both histograms: 1, 2.5, 5 per
// decade from 10µs to 10s, which covers an in-memory critical section as
// well as a slow remote call.
var buckets = []float64{
	10e-6, 25e-6, 50e-6,
	100e-6, 250e-6, 500e-6,
	1e-3, 2.5e-3, 5e-3,
	10e-3, 25e-3, 50e-3,
	100e-3, 250e-3, 500e-3,
	1, 2.5, 5,
	10,
}

// reasons are the rejection reasons whose counters New resolves up front.
var reasons = [...]executor.Reason{
	executor.ReasonKey, executor.ReasonGlobal, executor.ReasonDelay, executor.ReasonClosed,
}

// Collector counts the task events of the executors it observes and reads
// their gauges when scraped. It implements executor.Observer,
// executor.SlowObserver, executor.Attacher, executor.Detacher and
// prometheus.Collector; pass it to executor.WithObserver and register it
// with a prometheus.Registerer. Its Quantiles make it a
// debugpage.LatencySource.
//
// A Collector that is registered but was never passed to WithObserver
// counts nothing: perkey_executors_attached then reads 0, and its help
// text says why.
//
// One Collector may observe several executors: counters and histograms
// then add up their events; the active, queued, running and slow-holds
// gauges, the workers and the global cap add up; perkey_key_pending_max,
// the per-key cap and the two ages are the largest among them, and the
// slow-task threshold the smallest that is set. Its Observer methods take no lock and do not allocate. It is
// safe for concurrent use.
type Collector struct {
	submitted prometheus.Counter
	completed prometheus.Counter
	canceled  prometheus.Counter
	panicked  prometheus.Counter
	slow      prometheus.Counter
	rejected  *prometheus.CounterVec
	// byReason holds rejected's children, indexed by executor.Reason, so
	// that TaskRejected needs no label lookup.
	byReason [executor.ReasonClosed + 1]prometheus.Counter
	wait     prometheus.Histogram
	run      prometheus.Histogram

	activeKeys *prometheus.Desc
	queued     *prometheus.Desc
	running    *prometheus.Desc
	pendingMax *prometheus.Desc
	attached   *prometheus.Desc

	oldestHold   *prometheus.Desc
	oldestQueued *prometheus.Desc
	slowHolds    *prometheus.Desc
	workers      *prometheus.Desc
	keyLimit     *prometheus.Desc
	pendingLimit *prometheus.Desc
	slowLimit    *prometheus.Desc

	mu      sync.Mutex // protects sources
	sources []source   // attached executors
}

var (
	_ executor.Observer     = (*Collector)(nil)
	_ executor.SlowObserver = (*Collector)(nil)
	_ executor.Attacher     = (*Collector)(nil)
	_ executor.Detacher     = (*Collector)(nil)
	_ prometheus.Collector  = (*Collector)(nil)
)

// New returns a Collector whose metric names start with namespace and an
// underscore (no prefix if namespace is empty). namespace must be a valid
// Prometheus name prefix, such as "perkey" or "billing_perkey"; an invalid
// one makes registering the Collector fail.
//
// The wait and run histograms have buckets at 1, 2.5 and 5 per decade from
// 10µs to 10s.
func New(namespace string) *Collector {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help})
	}
	gauge := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, nil, nil)
	}
	histogram := func(name, help string) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: name, Help: help, Buckets: buckets,
		})
	}
	c := &Collector{
		submitted: counter("tasks_submitted_total", "Tasks accepted."),
		completed: counter("tasks_completed_total", "Tasks whose function returned, with or without an error, or panicked."),
		canceled:  counter("tasks_canceled_total", "Accepted tasks that never ran: their context ended, or Close gave up."),
		panicked:  counter("tasks_panicked_total", "Tasks whose function panicked (also counted as completed)."),
		slow: counter("tasks_slow_total",
			"Holds of a key (a task, a shared group or a multi-key task) that lasted longer than the executor's WithSlowTaskWarning threshold, each counted once when found; 0 when the option is off."),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "tasks_rejected_total",
			Help:      "Submissions refused, by reason: key (per-key cap), global (executor cap), delay (queue delay), closed.",
		}, []string{"reason"}),
		wait: histogram("task_wait_seconds", "Time from a task's acceptance to its start."),
		run:  histogram("task_run_seconds", "Time a task's function ran."),

		activeKeys: gauge("active_keys", "Keys (or stripes) with a live mailbox now."),
		queued:     gauge("tasks_queued", "Tasks accepted and not started."),
		running:    gauge("tasks_running", "Tasks executing now."),
		pendingMax: gauge("key_pending_max", "Pending tasks (queued + running) of the busiest key now."),
		attached: gauge("executors_attached",
			"Executors this Collector observes now: built with executor.WithObserver(collector) and not yet closed. 0 when it was never passed to WithObserver (then every other metric of it reads 0, however busy the executor), or once every executor it observed has closed."),

		oldestHold: gauge("oldest_hold_seconds",
			"Age of the oldest hold of a key now: how long the longest-running task (or shared group, or multi-key task) has held its key; 0 when none runs. A stuck key keeps it rising."),
		oldestQueued: gauge("oldest_queued_seconds",
			"How long the oldest queued task has waited now; 0 when none is queued."),
		slowHolds: gauge("slow_holds",
			"Holds of a key older than the executor's WithSlowTaskWarning threshold now; 0 when the option is off."),
		workers: gauge("workers", "Workers the executor runs tasks on (WithWorkers)."),
		keyLimit: gauge("key_pending_limit",
			"Cap on one key's pending tasks (WithMaxQueuePerKey); 0 means no cap."),
		pendingLimit: gauge("pending_limit",
			"Cap on the executor's pending tasks, all keys together (WithMaxPending); 0 means no cap."),
		slowLimit: gauge("slow_task_threshold_seconds",
			"Hold age past which a hold is slow (WithSlowTaskWarning); 0 means off."),
	}
	for _, r := range reasons {
		c.byReason[r] = c.rejected.WithLabelValues(r.String())
	}
	return c
}

// Attach adds g to the executors whose gauges c reports; executor.New calls
// it with the executor it builds. Attaching g twice counts it once.
func (c *Collector) Attach(g executor.Gauges) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.ContainsFunc(c.sources, func(s source) bool { return s.g == g }) {
		c.sources = append(c.sources, newSource(g))
	}
}

// Detach stops c from reading g's gauges, so that a closed executor can be
// freed while c lives on. Counts already made stay in the counters.
func (c *Collector) Detach(g executor.Gauges) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sources = slices.DeleteFunc(c.sources, func(s source) bool { return s.g == g })
}

// Describe sends the descriptors of every metric c exposes
// (prometheus.Collector).
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	c.submitted.Describe(ch)
	c.completed.Describe(ch)
	c.canceled.Describe(ch)
	c.panicked.Describe(ch)
	c.slow.Describe(ch)
	c.rejected.Describe(ch)
	c.wait.Describe(ch)
	c.run.Describe(ch)
	ch <- c.activeKeys
	ch <- c.queued
	ch <- c.running
	ch <- c.pendingMax
	ch <- c.attached
	ch <- c.oldestHold
	ch <- c.oldestQueued
	ch <- c.slowHolds
	ch <- c.workers
	ch <- c.keyLimit
	ch <- c.pendingLimit
	ch <- c.slowLimit
}

// Collect sends the current value of every metric (prometheus.Collector).
// The gauges are read from the attached executors now: Stats and Settings
// are cheap; MaxKeyPending visits every live mailbox, as HotKeys(1) does,
// and so does Ages, which the age gauges come from.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.submitted.Collect(ch)
	c.completed.Collect(ch)
	c.canceled.Collect(ch)
	c.panicked.Collect(ch)
	c.slow.Collect(ch)
	c.rejected.Collect(ch)
	c.wait.Collect(ch)
	c.run.Collect(ch)

	c.mu.Lock()
	sources := slices.Clone(c.sources)
	c.mu.Unlock()
	var active, queued, running, pendingMax, slowHolds int
	var workers, keyLimit, pendingLimit int
	var held, wait, slowLimit time.Duration
	for _, src := range sources { // not under mu: MaxKeyPending takes shard locks
		s := src.g.Stats()
		active += s.ActiveKeys
		queued += s.Queued
		running += s.Running
		pendingMax = max(pendingMax, src.g.MaxKeyPending())
		var set executor.Settings
		if src.settings != nil {
			set = src.settings()
		}
		workers += set.Workers
		keyLimit = max(keyLimit, set.MaxQueuePerKey)
		pendingLimit += set.MaxPending
		if set.SlowTask > 0 && (slowLimit == 0 || set.SlowTask < slowLimit) {
			slowLimit = set.SlowTask
		}
		a := readAges(src)
		held, wait = max(held, a.OldestHeld), max(wait, a.OldestWait)
		slowHolds += a.SlowHolds
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	gauge(c.activeKeys, float64(active))
	gauge(c.queued, float64(queued))
	gauge(c.running, float64(running))
	gauge(c.pendingMax, float64(pendingMax))
	gauge(c.attached, float64(len(sources)))
	gauge(c.oldestHold, held.Seconds())
	gauge(c.oldestQueued, wait.Seconds())
	gauge(c.slowHolds, float64(slowHolds))
	gauge(c.workers, float64(workers))
	gauge(c.keyLimit, float64(keyLimit))
	gauge(c.pendingLimit, float64(pendingLimit))
	gauge(c.slowLimit, slowLimit.Seconds())
}

// TaskAccepted counts a submission (executor.Observer).
func (c *Collector) TaskAccepted() { c.submitted.Inc() }

// TaskRejected counts a refusal under its reason (executor.Observer).
func (c *Collector) TaskRejected(r executor.Reason) {
	if int(r) < len(c.byReason) && c.byReason[r] != nil {
		c.byReason[r].Inc()
		return
	}
	// A reason this package does not know yet: rare, so a lookup is fine.
	c.rejected.WithLabelValues(r.String()).Inc()
}

// TaskStarted records how long a task waited in its queue (executor.Observer).
func (c *Collector) TaskStarted(wait time.Duration) { c.wait.Observe(wait.Seconds()) }

// TaskFinished records how long fn ran and counts the task as completed,
// and as panicked if it did (executor.Observer).
func (c *Collector) TaskFinished(run time.Duration, outcome executor.Outcome) {
	c.run.Observe(run.Seconds())
	c.completed.Inc()
	if outcome == executor.Panicked {
		c.panicked.Inc()
	}
}

// TaskCanceled counts an accepted task that will never run (executor.Observer).
func (c *Collector) TaskCanceled() { c.canceled.Inc() }

// TaskSlow counts a hold that lasted longer than the executor's
// WithSlowTaskWarning threshold (executor.SlowObserver).
func (c *Collector) TaskSlow(time.Duration) { c.slow.Inc() }

// Quantiles estimates, for each q, the wait and the run time below which a
// fraction q of the tasks observed fell, from the histograms' buckets as
// PromQL's histogram_quantile does: by linear interpolation within the
// bucket where q falls, so an estimate is as coarse as the buckets (1, 2.5
// and 5 per decade). A quantile above the 10s bucket reads 10s; q is
// clamped to [0, 1]. The estimates cover every task since New, over every
// executor c observes. A histogram without observations gives nil. It makes
// c a debugpage.LatencySource; each call reads both histograms once and
// allocates.
func (c *Collector) Quantiles(q ...float64) (wait, run []time.Duration) {
	return quantiles(c.wait, q), quantiles(c.run, q)
}

// quantiles estimates the quantiles qs of h, in order; nil if h is empty.
func quantiles(h prometheus.Histogram, qs []float64) []time.Duration {
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		return nil
	}
	hist := m.GetHistogram()
	total := float64(hist.GetSampleCount())
	if total == 0 {
		return nil
	}
	out := make([]time.Duration, len(qs))
	for i, q := range qs {
		out[i] = seconds(bucketQuantile(min(max(q, 0), 1)*total, hist.GetBucket()))
	}
	return out
}

// bucketQuantile is the value of the observation of the given rank, with
// observations spread evenly within each bucket (the first from 0); ranks
// beyond the last finite bucket read its upper bound.
func bucketQuantile(rank float64, buckets []*dto.Bucket) float64 {
	lower, below := 0.0, 0.0
	for _, b := range buckets {
		upper, count := b.GetUpperBound(), float64(b.GetCumulativeCount())
		if count >= rank && count > below {
			return lower + (upper-lower)*(rank-below)/(count-below)
		}
		lower, below = upper, count
	}
	return lower
}

// seconds converts s seconds to a Duration, to the nearest nanosecond.
func seconds(s float64) time.Duration { return time.Duration(math.Round(s * float64(time.Second))) }
