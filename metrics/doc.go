// Package metrics exports an executor's activity to Prometheus.
//
// A Collector is both an executor.Observer, which counts task events as they
// happen, and a prometheus.Collector, which reports those counts and reads
// the executor's live gauges at scrape time:
//
//	m := metrics.New("perkey")
//	e, err := executor.New[string](executor.WithObserver(m))
//	...
//	reg.MustRegister(m)
//
// With namespace "perkey" it exposes
//
//	perkey_active_keys                  gauge     keys with a live mailbox now
//	perkey_tasks_queued                 gauge     tasks accepted and not started
//	perkey_tasks_running                gauge     tasks executing now
//	perkey_key_pending_max              gauge     pending tasks of the busiest key now
//	perkey_executors_attached           gauge     executors observed now (0: never passed to WithObserver)
//	perkey_oldest_hold_seconds          gauge     age of the oldest hold of a key now (a stuck key)
//	perkey_oldest_queued_seconds        gauge     wait of the oldest queued task now
//	perkey_slow_holds                   gauge     holds older than WithSlowTaskWarning's threshold now
//	perkey_workers                      gauge     WithWorkers
//	perkey_key_pending_limit            gauge     WithMaxQueuePerKey (0: no cap)
//	perkey_pending_limit                gauge     WithMaxPending (0: no cap)
//	perkey_slow_task_threshold_seconds  gauge     WithSlowTaskWarning (0: off)
//	perkey_tasks_submitted_total        counter   tasks accepted
//	perkey_tasks_completed_total        counter   tasks whose fn returned or panicked
//	perkey_tasks_rejected_total{reason} counter   submissions refused: key, global, delay, closed
//	perkey_tasks_canceled_total         counter   accepted tasks that never ran
//	perkey_tasks_panicked_total         counter   tasks whose fn panicked
//	perkey_tasks_slow_total             counter   holds longer than WithSlowTaskWarning's threshold
//	perkey_task_wait_seconds            histogram time from acceptance to start
//	perkey_task_run_seconds             histogram time fn ran
//
// A Collector counts only the events of executors built with
// executor.WithObserver(collector). One that is registered but never passed
// to WithObserver would read 0 everywhere, like an idle executor; it says
// so with perkey_executors_attached at 0 (the count of executors it
// observes, each from its New to its Close), whose help text explains. A
// gauge rather than a log line: it is seen where the zeros are seen, and
// alerting on perkey_executors_attached == 0 catches the mistake.
//
// perkey_tasks_slow_total counts the holds an executor built with
// executor.WithSlowTaskWarning(d) reports (each hold of a key longer than d,
// once); the key is in the executor's warning log line and on the debug
// page, never in a label. Alert on a stuck key with the gauges, not the
// counter: perkey_oldest_hold_seconds rises for as long as a key is held
// and falls back when it is given back, so an alert on it fires while the
// key is stuck and resolves when it is not, whenever scraping began. A
// counter that steps once per stuck hold does neither. The limits are
// gauges too, so that a rule can compare perkey_key_pending_max with
// perkey_key_pending_limit instead of hard-coding the cap.
// examples/metrics/alerts.yml has rules for all of this, tested with
// promtool.
//
// The age gauges come from the executor's Ages at scrape time: one pass
// over its live mailboxes, as MaxKeyPending makes.
//
// Quantiles estimates wait and run percentiles from the two histograms, as
// histogram_quantile does; it makes a Collector the debugpage.LatencySource
// for the debug page's percentiles:
//
//	debugpage.Handler(e, debugpage.WithLatency(m))
//
// No metric has a key as a label: the number of series is fixed whatever
// the key space. A hot key shows as perkey_key_pending_max close to the
// per-key cap together with perkey_tasks_rejected_total{reason="key"}
// rising; package debugpage names it.
//
// The package owns no goroutine. It must never hold a lock, allocate or
// block in an Observer method: the executor calls them on every task.
package metrics
