package metrics_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/perkey/perkey/executor"
	"github.com/perkey/perkey/metrics"
)

func ExampleNew() {
	m := metrics.New("perkey")
	e, err := executor.New[string](executor.WithObserver(m), executor.WithMaxQueuePerKey(100))
	if err != nil {
		panic(err)
	}
	defer e.Close(context.Background())
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)

	for range 3 {
		_ = e.Do(context.Background(), "acct-1", func(context.Context) error { return nil })
	}

	families, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range families {
		if strings.HasSuffix(f.GetName(), "_total") && f.GetName() != "perkey_tasks_rejected_total" {
			fmt.Println(f.GetName(), f.GetMetric()[0].GetCounter().GetValue())
		}
	}
	// Output:
	// perkey_tasks_canceled_total 0
	// perkey_tasks_completed_total 3
	// perkey_tasks_panicked_total 0
	// perkey_tasks_slow_total 0
	// perkey_tasks_submitted_total 3
}
