package soak

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

// The checks must be able to fail: each test plants the violation it
// guards against.

func TestOccupancy(t *testing.T) {
	tests := []struct {
		name  string
		first bool // shared
		then  bool // shared
		ok    bool
	}{
		{"exclusive then exclusive", false, false, false},
		{"exclusive then shared", false, true, false},
		{"shared then exclusive", true, false, false},
		{"shared then shared", true, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := make(occupancy, 2)
			if !o.enter(1, tt.first) {
				t.Fatal("first enter on an idle key reported an overlap")
			}
			if got := o.enter(1, tt.then); got != tt.ok {
				t.Errorf("second enter: got ok=%v; want %v", got, tt.ok)
			}
			if !o.enter(0, false) {
				t.Error("another key: got an overlap; want none")
			}
			o.leave(1, tt.then)
			o.leave(1, tt.first)
			if o[1].Load() != 0 {
				t.Errorf("after both left: state %#x; want 0", o[1].Load())
			}
		})
	}
}

func TestStream(t *testing.T) {
	var s stream
	for _, seq := range []int64{1, 3, 4} { // 2 was canceled: a gap is fine
		if !s.start(seq) {
			t.Fatalf("start(%d) after a lower seq: got a FIFO break", seq)
		}
	}
	if s.start(2) {
		t.Error("start(2) after 4: got ok; want a FIFO break")
	}
}

func TestHistogram(t *testing.T) {
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}} {
		got := h.quantile(c.q)
		if d := float64(got-c.want) / float64(c.want); d < -0.07 || d > 0.07 {
			t.Errorf("quantile(%v) = %v; want %v within 7%%", c.q, got, c.want)
		}
	}
	if got := time.Duration(h.max.Load()); got != time.Millisecond {
		t.Errorf("max = %v; want 1ms", got)
	}
	for ns := uint64(0); ns < 1<<20; ns = ns*3/2 + 1 {
		b := bucketOf(ns)
		if lo, hi := lowerBound(b), lowerBound(b+1); ns < lo || ns >= hi {
			t.Fatalf("%dns in bucket %d = [%d, %d)", ns, b, lo, hi)
		}
	}
}

// TestSettle feeds settle results that disagree with what fn did.
func TestSettle(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name   string
		do     behaviour
		ran    bool
		ctx    context.Context
		result func(t *task) error
		want   Invariant // numInvariants: no violation
	}{
		{"ran, nil", quick, true, context.Background(), func(*task) error { return nil }, numInvariants},
		{"never ran, nil", quick, false, context.Background(), func(*task) error { return nil }, WrongOutcome},
		{"ran, ErrClosed", quick, true, context.Background(), func(*task) error { return executor.ErrClosed }, WrongOutcome},
		{"never ran, ErrClosed", quick, false, context.Background(), func(*task) error { return executor.ErrClosed }, numInvariants},
		{"never ran, ErrBusy", quick, false, context.Background(), func(*task) error { return &backpressure.BusyError{} }, numInvariants},
		{"never ran, ended ctx", quick, false, canceled, func(*task) error { return context.Canceled }, numInvariants},
		{"never ran, ctx error of a live ctx", quick, false, context.Background(), func(*task) error { return context.Canceled }, WrongOutcome},
		{"failed, own error", failing, true, context.Background(), func(t *task) error { return t.result }, numInvariants},
		{"failed, another task's error", failing, true, context.Background(), func(t *task) error { return &taskError{t: &task{}} }, WrongOutcome},
		{"panicked, own value", panicky, true, context.Background(), func(t *task) error { return &executor.PanicError{Value: panicValue{t}} }, numInvariants},
		{"panicked, nil", panicky, true, context.Background(), func(*task) error { return nil }, WrongOutcome},
		{"delay rejection, plausible age", quick, false, context.Background(), func(*task) error {
			return &backpressure.BusyError{Scope: backpressure.ScopeDelay, Wait: time.Nanosecond}
		}, numInvariants},
		{"delay rejection, head older than the executor", quick, false, context.Background(), func(*task) error {
			return &backpressure.BusyError{Scope: backpressure.ScopeDelay, Wait: time.Hour}
		}, FalseDelay},
		{"unexpected error", quick, false, context.Background(), func(*task) error { return errors.New("boom") }, WrongOutcome},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &harness{}
			tk := &task{g: &generation{born: time.Now()}, p: &producer{}, do: tt.do, ctx: tt.ctx}
			if tt.do == failing {
				tk.result = &taskError{t: tk}
			}
			if tt.ran {
				tk.state.Store(started | finished)
			}
			h.settle(tk, tt.result(tk), 0, false)
			for i := range numInvariants {
				want := int64(0)
				if i == tt.want {
					want = 1
				}
				if got := h.v.n[i].Load(); got != want {
					t.Errorf("%s: got %d; want %d (%s)", i, got, want, strings.Join(h.v.details, "; "))
				}
			}
		})
	}
}

// TestRanAfterCancel: a fn that starts after its submitter was told it
// never ran is caught, as is a second start.
func TestRanAfterCancel(t *testing.T) {
	h := &harness{occ: make(occupancy, 1), workers: 1}
	tk := &task{g: &generation{}, p: &producer{}, keys: []int{0}, ctx: context.Background()}
	h.settle(tk, executor.ErrClosed, 0, false)
	if err := h.run(context.Background(), tk); err != nil {
		t.Fatalf("run: %v", err)
	}
	if got := h.v.n[RanAfterCancel].Load(); got != 1 {
		t.Errorf("ran after cancel: got %d; want 1", got)
	}
	h.run(context.Background(), tk)
	if got := h.v.n[RanTwice].Load(); got != 1 {
		t.Errorf("run twice: got %d; want 1", got)
	}
}
