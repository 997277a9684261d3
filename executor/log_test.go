package executor_test

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/perkey/perkey/executor"
)

// TestLogSampledUnderHotKey: 100,000 rejections on a hot key produce a
// bounded number of log lines, while every panic is logged.
func TestLogSampledUnderHotKey(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	e := newExec[string](t, executor.WithLogger(zap.New(core)), executor.WithMaxQueuePerKey(1))
	bg := context.Background()
	release := make(chan struct{})
	task, err := e.Submit(bg, "hot", func(context.Context) error { <-release; return nil })
	if err != nil {
		t.Fatal(err)
	}
	const n = 100_000
	for range n {
		if err := e.Do(bg, "hot", func(context.Context) error { return nil }); !errors.Is(err, executor.ErrBusy) {
			t.Fatalf("Do on a full key: got %v; want ErrBusy", err)
		}
	}
	close(release)
	task.Wait(bg)
	rejected := logs.FilterMessage("task rejected").Len()
	t.Logf("%d rejections logged %d lines", n, rejected)
	if rejected == 0 || rejected > 500 {
		t.Errorf("log lines for %d rejections: got %d; want between 1 and 500 (sampled)", n, rejected)
	}
	if s := e.Stats(); s.Rejected != n {
		t.Errorf("Stats.Rejected: got %d; want %d (sampling drops lines, never counts)", s.Rejected, n)
	}
	for _, entry := range logs.FilterMessage("task rejected").TakeAll()[:1] {
		if entry.ContextMap()["key"] != "hot" {
			t.Errorf("rejection log fields: got %v; want key=hot", entry.ContextMap())
		}
		if entry.LoggerName != "perkey" {
			t.Errorf("logger name: got %q; want %q", entry.LoggerName, "perkey")
		}
	}
	for range 3 {
		e.Do(bg, "p", func(context.Context) error { panic("boom") })
	}
	panics := logs.FilterMessage("task panicked").FilterLevelExact(zapcore.ErrorLevel).AllUntimed()
	if len(panics) != 3 {
		t.Fatalf("panic log lines: got %d; want 3 (never sampled)", len(panics))
	}
	if f := panics[0].ContextMap(); f["key"] != "p" || f["panic"] != "boom" || f["stack"] == "" {
		t.Errorf("panic log fields: got %v; want key, panic value and stack", f)
	}
}

// TestLogNeverRan: a Go that fails is logged as failed; one withdrawn
// before it started is logged as never run, with why, not as failed.
func TestLogNeverRan(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	e := newExec[string](t, executor.WithLogger(zap.New(core)), executor.WithWorkers(1))
	g, _ := block(t, e, "k")
	ctx, cancel := context.WithCancel(context.Background())
	if err := e.Go(ctx, "k", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := e.Go(context.Background(), "k", func(context.Context) error { return errors.New("bad") }); err != nil {
		t.Fatal(err)
	}
	cancel()
	g.open()
	waitIdle(t, e)
	never := logs.FilterMessage("task never ran").AllUntimed()
	if len(never) != 1 || never[0].ContextMap()["why"] != "its ctx ended before it started" || never[0].ContextMap()["key"] != "k" {
		t.Errorf("never-ran log lines: got %v; want one, key k, why its ctx ended", never)
	}
	if failed := logs.FilterMessage("task failed").Len(); failed != 1 {
		t.Errorf("failed log lines: got %d; want 1 (the Go whose fn failed)", failed)
	}
}
