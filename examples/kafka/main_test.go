package main

import (
	"context"
	"io"
	"testing"
	"time"
)

// TestRun runs the three modes on a small topic: the two ordered ones keep
// every key in order and all three handle every record.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := config{records: 600, keys: 60, partitions: 3, workers: 16, work: 300 * time.Microsecond}
	results, err := run(ctx, cfg, io.Discard)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if len(results) != 3 {
		t.Fatalf("got %d results; want 3", len(results))
	}
	for _, r := range results[:2] {
		if r.violations != 0 {
			t.Errorf("%s: %d records out of key order; want 0", r.mode, r.violations)
		}
	}
}
