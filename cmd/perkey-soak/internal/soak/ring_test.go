package soak

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

// newTestHarness returns a harness with one generation of spec and a
// producer, and no load but what the test makes. finish closes the
// generation (draining it) and runs the checks a run makes on it.
func newTestHarness(t *testing.T, spec genSpec) (h *harness, g *generation, p *producer, finish func()) {
	t.Helper()
	cfg := Config{Keys: 100, Workers: 8}
	cfg.setDefaults()
	h = &harness{cfg: cfg, workers: cfg.Workers, over: make(chan struct{})}
	h.rings.init(cfg.Workers)
	h.keySpace = cfg.Keys + h.rings.keys()
	spec.throughput = max(spec.throughput, 4)
	g, err := h.startGeneration(0, spec)
	if err != nil {
		t.Fatal(err)
	}
	return h, g, newProducer(h, 0), func() {
		h.close(g, false)
		h.check(g)
	}
}

// formedRing is a ring of n that formed, with its members' outcomes.
func formedRing(isolated bool, errs ...error) *ring {
	r := newRing(len(errs), isolated)
	r.state, r.formedAt = ringFormed, time.Now()
	for i, err := range errs {
		r.errs[i] = err
		switch {
		case err == nil:
			r.out[i] = outRan
		case errors.Is(err, executor.ErrDeadlock):
			r.out[i] = outDeadlock
		default:
			r.out[i] = outOther
		}
	}
	return r
}

// TestCheckRing plants every way a ring can end wrong.
func TestCheckRing(t *testing.T) {
	dl, busy := executor.ErrDeadlock, error(&backpressure.BusyError{})
	tests := []struct {
		name     string
		r        *ring
		want     int64 // RingNotBroken violations
		excused  int64
		multiple int64
	}{
		{"one ErrDeadlock", formedRing(true, nil, dl, nil), 0, 0, 0},
		{"every call ran", formedRing(true, nil, nil, nil), 1, 0, 0},
		{"every call ran, load keys", formedRing(false, nil, nil), 1, 0, 0},
		{"two ErrDeadlock, keys of its own", formedRing(true, dl, nil, dl), 1, 0, 0},
		{"two ErrDeadlock, load keys", formedRing(false, dl, nil, dl), 0, 0, 1},
		{"broken by ErrBusy", formedRing(true, nil, busy, nil), 0, 1, 0},
		{"ErrBusy and two ErrDeadlock, keys of its own", formedRing(true, dl, busy, dl), 1, 1, 0},
		{"broken by a giving-up Close", formedRing(true, context.Canceled, nil), 0, 1, 0},
		{"ErrReentrant, keys of its own", formedRing(true, executor.ErrReentrant, nil), 1, 1, 0},
		{"ErrReentrant, load keys", formedRing(false, executor.ErrReentrant, nil), 0, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &harness{}
			h.checkRing(&generation{}, tt.r, []int{1, 2, 3}, false)
			wantViolations(t, h, RingNotBroken, tt.want)
			if got := h.ringStat.excused.Load(); got != tt.excused {
				t.Errorf("rings broken otherwise: got %d; want %d", got, tt.excused)
			}
			if got := h.ringStat.multi.Load(); got != tt.multiple {
				t.Errorf("load-key rings with 2+ ErrDeadlock: got %d; want %d", got, tt.multiple)
			}
			if h.ringStat.formed.Load() != 1 {
				t.Errorf("rings formed: got %d; want 1", h.ringStat.formed.Load())
			}
		})
	}
	t.Run("not formed", func(t *testing.T) {
		h := &harness{}
		r := newRing(2, true)
		r.abort()
		h.checkRing(&generation{}, r, []int{1, 2}, false)
		wantViolations(t, h, numInvariants, 0)
		if h.ringStat.aborted.Load() != 1 || h.ringStat.formed.Load() != 0 {
			t.Errorf("aborted %d, formed %d; want 1, 0", h.ringStat.aborted.Load(), h.ringStat.formed.Load())
		}
	})
}

// TestRingMeet: a ring forms once every member has arrived, and not if one
// is missing past ringPatience.
func TestRingMeet(t *testing.T) {
	r := newRing(2, true)
	var wg sync.WaitGroup
	var got [2]bool
	for i := range 2 {
		wg.Go(func() { got[i] = r.meet(context.Background()) })
	}
	wg.Wait()
	if !got[0] || !got[1] || !r.formed() {
		t.Errorf("two of two members: meet = %v, formed %v; want true", got, r.formed())
	}
	r = newRing(2, true)
	start := time.Now()
	if r.meet(context.Background()) {
		t.Error("one of two members: meet = true; want false")
	}
	if d := time.Since(start); d < ringPatience {
		t.Errorf("one of two members gave up after %v; want ringPatience, %v", d, ringPatience)
	}
	if r.meet(context.Background()) || r.formed() {
		t.Error("a member after the ring was abandoned: the ring formed")
	}
}

// TestRingHang: members that do not end within the limit are a hang, and
// the rescue ends them so the run goes on; members that end are not.
func TestRingHang(t *testing.T) {
	for _, stuck := range []bool{true, false} {
		h, g, _, _ := newTestHarness(t, genSpec{throughput: 4, policy: "FailFast"})
		h.ringLimit = 20 * time.Millisecond
		rescue, cancel := context.WithCancel(context.Background())
		r := formedRing(true, nil, nil)
		var tks []*executor.Task
		for k := range 2 {
			tk, err := g.e.Submit(rescue, k, func(ctx context.Context) error {
				if stuck {
					<-ctx.Done() // a wait the executor cannot see
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			tks = append(tks, tk)
		}
		hung := h.ringHung(g, r, []int{0, 1}, tks, cancel)
		for _, tk := range tks {
			ctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
			if err := tk.Wait(ctx); err != nil {
				t.Errorf("stuck=%v: member after the rescue: %v; want nil", stuck, err)
			}
			stop()
		}
		cancel()
		if err := g.e.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
		if hung != stuck {
			t.Errorf("stuck=%v: ringHung = %v", stuck, hung)
		}
		want := int64(0)
		if stuck {
			want = 1
		}
		wantViolations(t, h, RingHang, want)
	}
}

// TestRings runs rings of every size and kind on a real executor with no
// other load: every ring that forms ends with exactly one ErrDeadlock (in
// striped mode, where keys may share a stripe, only none hangs and none
// ends unbroken), and the generation's checks pass.
func TestRings(t *testing.T) {
	rounds := 60
	if testing.Short() {
		rounds = 20
	}
	for _, spec := range []genSpec{
		{throughput: 4, policy: "FailFast"},
		{throughput: 4, policy: "FailFast", noObserver: true},
		{throughput: 4, policy: "Block", perKey: 4, pending: 32},
		{throughput: 4, policy: "MaxQueueDelay", delay: time.Hour},
		{throughput: 4, policy: "FailFast", stripes: 256},
	} {
		t.Run(spec.String(), func(t *testing.T) {
			h, g, p, finish := newTestHarness(t, spec)
			for range rounds {
				p.ring(g)
			}
			finish()
			wantViolations(t, h, numInvariants, 0)
			rs := &h.ringStat
			if spec.stripes > 0 {
				if rs.formed.Load() == 0 || rs.deadlocks.Load() < rs.formed.Load()-rs.excused.Load() {
					t.Errorf("formed %d, ErrDeadlock %d, broken otherwise %d", rs.formed.Load(), rs.deadlocks.Load(), rs.excused.Load())
				}
				return
			}
			// A ring forms if its members meet within ringPatience, which
			// a busy machine can miss; one that did not form made no nested
			// call. Every ring that formed must end with one ErrDeadlock.
			formed := rs.formed.Load()
			if formed+rs.aborted.Load() != int64(rounds) || formed < int64(rounds)/2 ||
				rs.deadlocks.Load() != formed || rs.excused.Load() != 0 {
				t.Errorf("formed %d, not formed %d, ErrDeadlock %d, broken otherwise %d; want %d rings, most formed, one ErrDeadlock each, 0",
					formed, rs.aborted.Load(), rs.deadlocks.Load(), rs.excused.Load(), rounds)
			}
			for _, o := range []op{opDo, opSubmit, opDoShared, opDoMany} {
				if o == opDoMany && spec.policy == "Block" {
					continue // a Do there: see ringOp
				}
				if rs.kinds[o].Load() == 0 {
					t.Errorf("no ring member's nested call was a %s", o)
				}
			}
		})
	}
}
