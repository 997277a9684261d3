package metrics_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/perkey/perkey/executor"
	"github.com/perkey/perkey/metrics"
)

const agesHelp = `
# HELP perkey_oldest_hold_seconds Age of the oldest hold of a key now: how long the longest-running task (or shared group, or multi-key task) has held its key; 0 when none runs. A stuck key keeps it rising.
# TYPE perkey_oldest_hold_seconds gauge
perkey_oldest_hold_seconds %v
# HELP perkey_oldest_queued_seconds How long the oldest queued task has waited now; 0 when none is queued.
# TYPE perkey_oldest_queued_seconds gauge
perkey_oldest_queued_seconds %v
# HELP perkey_slow_holds Holds of a key older than the executor's WithSlowTaskWarning threshold now; 0 when the option is off.
# TYPE perkey_slow_holds gauge
perkey_slow_holds %d
`

var ageNames = []string{"perkey_oldest_hold_seconds", "perkey_oldest_queued_seconds", "perkey_slow_holds"}

const settingsHelp = `
# HELP perkey_key_pending_limit Cap on one key's pending tasks (WithMaxQueuePerKey); 0 means no cap.
# TYPE perkey_key_pending_limit gauge
perkey_key_pending_limit %d
# HELP perkey_pending_limit Cap on the executor's pending tasks, all keys together (WithMaxPending); 0 means no cap.
# TYPE perkey_pending_limit gauge
perkey_pending_limit %d
# HELP perkey_slow_task_threshold_seconds Hold age past which a hold is slow (WithSlowTaskWarning); 0 means off.
# TYPE perkey_slow_task_threshold_seconds gauge
perkey_slow_task_threshold_seconds %v
# HELP perkey_workers Workers the executor runs tasks on (WithWorkers).
# TYPE perkey_workers gauge
perkey_workers %d
`

var settingNames = []string{"perkey_workers", "perkey_key_pending_limit", "perkey_pending_limit", "perkey_slow_task_threshold_seconds"}

// TestAgeGauges: a stuck key shows as the oldest hold's age, rising while
// it is stuck and back to 0 once it is not; a task queued behind it as the
// oldest wait; both holds past the threshold as slow holds.
func TestAgeGauges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := metrics.New("perkey")
		e, err := executor.New[string](executor.WithObserver(m), executor.WithWorkers(4),
			executor.WithMaxQueuePerKey(8), executor.WithMaxPending(100), executor.WithSlowTaskWarning(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		check := func(when string, held, wait float64, slow int) {
			t.Helper()
			if err := testutil.CollectAndCompare(m, strings.NewReader(fmt.Sprintf(agesHelp, held, wait, slow)), ageNames...); err != nil {
				t.Errorf("%s: %v", when, err)
			}
		}
		if err := testutil.CollectAndCompare(m, strings.NewReader(fmt.Sprintf(settingsHelp, 8, 100, 1, 4)), settingNames...); err != nil {
			t.Error(err)
		}
		check("idle", 0, 0, 0)

		stuck, other := make(chan struct{}), make(chan struct{})
		block := func(ch chan struct{}) func(context.Context) error {
			return func(context.Context) error { <-ch; return nil }
		}
		if err := e.Go(ctx, "stuck", block(stuck)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		if err := e.Go(ctx, "other", block(other)); err != nil {
			t.Fatal(err)
		}
		if err := e.Go(ctx, "other", func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		check("stuck 2s", 2, 0, 1)
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		check("stuck 3.5s, other held 1.5s", 3.5, 1.5, 2)

		close(stuck)
		synctest.Wait()
		check("stuck given back", 1.5, 1.5, 1)
		close(other)
		synctest.Wait()
		check("all given back", 0, 0, 0)
		lint(t, m)
		if err := e.Close(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestAgeGaugesManyKeys: with more stuck keys than a scrape looks at first,
// every one is counted.
func TestAgeGaugesManyKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := metrics.New("perkey")
		const keys = 150
		e, err := executor.New[int](executor.WithObserver(m), executor.WithWorkers(keys+10),
			executor.WithSlowTaskWarning(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		release := make(chan struct{})
		for k := range keys {
			if err := e.Go(ctx, k, func(context.Context) error { <-release; return nil }); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(2 * time.Second)
		// One more key, held only briefly, and a task queued behind it.
		late := make(chan struct{})
		if err := e.Go(ctx, keys, func(context.Context) error { <-late; return nil }); err != nil {
			t.Fatal(err)
		}
		if err := e.Go(ctx, keys, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		want := fmt.Sprintf(agesHelp, 2.5, 0.5, keys)
		if err := testutil.CollectAndCompare(m, strings.NewReader(want), ageNames...); err != nil {
			t.Error(err)
		}
		close(late)
		close(release)
		if err := e.Close(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSettingsSeveral: the settings of two executors combine as the
// Collector's doc says: workers and global caps add up, the per-key cap is
// the largest, the threshold the smallest that is set.
func TestSettingsSeveral(t *testing.T) {
	m := metrics.New("perkey")
	a, err := executor.New[string](executor.WithObserver(m), executor.WithWorkers(3), executor.WithMaxQueuePerKey(5),
		executor.WithMaxPending(10), executor.WithSlowTaskWarning(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	b, err := executor.New[int](executor.WithObserver(m), executor.WithWorkers(2), executor.WithMaxQueuePerKey(7),
		executor.WithSlowTaskWarning(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, a, b)
	if err := testutil.CollectAndCompare(m, strings.NewReader(fmt.Sprintf(settingsHelp, 7, 10, 0.5, 5)), settingNames...); err != nil {
		t.Error(err)
	}
}
