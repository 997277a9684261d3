package executor_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perkey/perkey/executor"
)

// The stress tests hammer a few keys from many goroutines with a mix of
// Do, Submit, DoShared and DoMany, random cancellations, errors and panics,
// and check invariants, never timings:
//
//   - no overlap within a key (shared tasks may overlap each other, never an
//     exclusive one);
//   - FIFO within a key for submissions ordered by happens-before (one
//     submitter goroutine per key numbers its tasks);
//   - every accepted task ends exactly once: it ran, or its Do/Wait says
//     why not;
//   - Stats add up and agree with what the callers saw;
//   - ActiveKeys() == 0 at the end.

// stressRecord is what one call saw.
type stressRecord struct {
	kind string
	ran  *atomic.Int32
	err  error
	// accepted is 1 if the task was accepted, 0 if it was refused, -1 if
	// the error does not tell: a blocking call refused at the door and one
	// withdrawn later both return ctx's error (or ErrClosed).
	accepted int
}

type stressRun struct {
	t       *testing.T
	e       *executor.Executor[int]
	keys    int
	occ     occupancies[int]
	mu      sync.Mutex // guards records and fifo
	records []stressRecord
	fifo    [][]int // per key: sequence numbers of the FIFO submitter's tasks, in start order
}

// body returns a task body that holds keys (shared or not), counts its run
// and then does one of: return nil, return errTask, panic, yield.
func (s *stressRun) body(r *rand.Rand, keys []int, shared bool, ran *atomic.Int32, after func()) func(context.Context) error {
	what := r.IntN(10)
	return func(context.Context) error {
		if ran.Add(1) != 1 {
			s.t.Errorf("a task ran twice")
		}
		for _, k := range keys {
			s.occ.of(k).enter(shared)
		}
		defer func() {
			for _, k := range keys {
				s.occ.of(k).exit(shared)
			}
		}()
		if after != nil {
			after()
		}
		switch {
		case what < 6:
			return nil
		case what < 8:
			return errTask
		case what < 9:
			panic(errTask)
		default:
			runtime.Gosched()
			return nil
		}
	}
}

// ctx returns a context that a quarter of the time ends at a random moment
// soon (possibly before the call is made).
func (s *stressRun) ctx(r *rand.Rand) (context.Context, context.CancelFunc) {
	switch r.IntN(8) {
	case 0:
		return context.WithTimeout(context.Background(), time.Duration(r.IntN(200))*time.Microsecond)
	case 1:
		ctx, cancel := context.WithCancel(context.Background())
		if r.IntN(2) == 0 {
			cancel()
		}
		return ctx, cancel
	}
	return context.Background(), func() {}
}

func (s *stressRun) record(rec stressRecord) {
	s.mu.Lock()
	s.records = append(s.records, rec)
	s.mu.Unlock()
}

// chaos makes ops random calls; it stops early once the executor is closed.
func (s *stressRun) chaos(seed uint64, ops int) {
	r := rand.New(rand.NewPCG(seed, 7))
	type pending struct {
		task *executor.Task
		ran  *atomic.Int32
	}
	var tasks []pending
loop:
	for range ops {
		ctx, cancel := s.ctx(r)
		k := r.IntN(s.keys)
		ran := new(atomic.Int32)
		var err error
		var kind string
		switch r.IntN(5) {
		case 0, 1:
			kind = "Do"
			err = s.e.Do(ctx, k, s.body(r, []int{k}, false, ran, nil))
		case 2:
			kind = "DoShared"
			err = s.e.DoShared(ctx, k, s.body(r, []int{k}, true, ran, nil))
		case 3:
			kind = "DoMany"
			ks := []int{k, r.IntN(s.keys), r.IntN(s.keys)}
			err = s.e.DoMany(ctx, ks, s.body(r, dedupInts(ks), false, ran, nil))
		default:
			task, err := s.e.Submit(ctx, k, s.body(r, []int{k}, false, ran, nil))
			if err != nil {
				cancel()
				s.record(stressRecord{kind: "Submit", ran: ran, err: err, accepted: 0})
				if errors.Is(err, executor.ErrClosed) {
					break loop
				}
				continue
			}
			if r.IntN(4) == 0 {
				cancel() // withdraw it, or not: it may have started
			}
			defer cancel()
			tasks = append(tasks, pending{task, ran})
			continue
		}
		cancel()
		s.recordCall(kind, ran, err)
		if errors.Is(err, executor.ErrClosed) {
			break
		}
	}
	for _, p := range tasks {
		err := p.task.Wait(context.Background())
		s.record(stressRecord{kind: "Submit+Wait", ran: p.ran, err: err, accepted: 1})
		select {
		case <-p.task.Done():
		default:
			s.t.Errorf("Done after Wait returned: open; want closed")
		}
	}
}

// recordCall records a blocking call (Do, DoShared, DoMany).
func (s *stressRun) recordCall(kind string, ran *atomic.Int32, err error) {
	accepted := 1
	switch {
	case errors.Is(err, executor.ErrBusy):
		accepted = 0
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, executor.ErrClosed):
		accepted = -1
	}
	s.record(stressRecord{kind: kind, ran: ran, err: err, accepted: accepted})
}

// submitter is key k's FIFO submitter: its Submit and Do calls are ordered
// by happens-before, so their tasks must start in sequence order.
func (s *stressRun) submitter(k int, seed uint64, ops int) {
	r := rand.New(rand.NewPCG(seed, uint64(k)))
	type pending struct {
		task *executor.Task
		ran  *atomic.Int32
	}
	var tasks []pending
	for seq := range ops {
		ctx, cancel := s.ctx(r)
		ran := new(atomic.Int32)
		fn := s.body(r, []int{k}, false, ran, func() {
			s.mu.Lock()
			s.fifo[k] = append(s.fifo[k], seq)
			s.mu.Unlock()
		})
		if r.IntN(8) == 0 {
			err := s.e.Do(ctx, k, fn)
			cancel()
			s.recordCall("FIFO Do", ran, err)
			if errors.Is(err, executor.ErrClosed) {
				break
			}
			continue
		}
		task, err := s.e.Submit(ctx, k, fn)
		if err != nil {
			cancel()
			s.record(stressRecord{kind: "FIFO Submit", ran: ran, err: err, accepted: 0})
			if errors.Is(err, executor.ErrClosed) {
				break
			}
			continue
		}
		if r.IntN(6) == 0 {
			cancel()
		}
		defer cancel()
		tasks = append(tasks, pending{task, ran})
	}
	for _, p := range tasks {
		s.record(stressRecord{kind: "FIFO Submit+Wait", ran: p.ran, err: p.task.Wait(context.Background()), accepted: 1})
	}
}

func dedupInts(ks []int) []int {
	var out []int
next:
	for _, k := range ks {
		for _, o := range out {
			if o == k {
				continue next
			}
		}
		out = append(out, k)
	}
	return out
}

// check verifies the invariants once every caller has returned.
func (s *stressRun) check() {
	t := s.t
	if n := s.occ.overlaps(); n != 0 {
		t.Errorf("got %d overlapping runs within a key; want 0", n)
	}
	for k, seqs := range s.fifo {
		for i := 1; i < len(seqs); i++ {
			if seqs[i] <= seqs[i-1] {
				t.Errorf("key %d: FIFO task #%d started after #%d; want submission order", k, seqs[i], seqs[i-1])
				break
			}
		}
	}
	var ran, panicked, rejected, sureCanceled, unsure uint64
	for _, rec := range s.records {
		n := rec.ran.Load()
		var pe *executor.PanicError
		switch {
		case rec.err == nil, errors.Is(rec.err, errTask) && !errors.As(rec.err, &pe):
			if n != 1 {
				t.Errorf("%s returned %v but its fn ran %d times; want 1", rec.kind, rec.err, n)
			}
		case errors.As(rec.err, &pe):
			panicked++
			if n != 1 {
				t.Errorf("%s returned a *PanicError but its fn ran %d times; want 1", rec.kind, n)
			}
		case errors.Is(rec.err, executor.ErrBusy):
			rejected++
			if n != 0 {
				t.Errorf("%s returned %v but its fn ran %d times; want 0", rec.kind, rec.err, n)
			}
		case errors.Is(rec.err, context.Canceled), errors.Is(rec.err, context.DeadlineExceeded),
			errors.Is(rec.err, executor.ErrClosed):
			if n != 0 {
				t.Errorf("%s returned %v but its fn ran %d times; want 0", rec.kind, rec.err, n)
			}
			switch rec.accepted {
			case 1:
				sureCanceled++
			case -1:
				unsure++
			}
		default:
			t.Errorf("%s returned %v; want nil, errTask, a *PanicError, ErrBusy, ErrClosed or a ctx error", rec.kind, rec.err)
		}
		ran += uint64(n)
	}
	st := waitIdle(t, s.e)
	if st.Completed != ran {
		t.Errorf("Stats.Completed: got %d; want %d (fns that ran)", st.Completed, ran)
	}
	if st.Panicked != panicked {
		t.Errorf("Stats.Panicked: got %d; want %d", st.Panicked, panicked)
	}
	if st.Rejected != rejected {
		t.Errorf("Stats.Rejected: got %d; want %d", st.Rejected, rejected)
	}
	// Submit's refusals are told apart from Wait's reports; a blocking
	// call's ctx error may be either, so Canceled is bounded, not exact.
	if st.Canceled < sureCanceled || st.Canceled > sureCanceled+unsure {
		t.Errorf("Stats.Canceled: got %d; want between %d and %d", st.Canceled, sureCanceled, sureCanceled+unsure)
	}
	if st.Submitted != st.Completed+st.Canceled {
		t.Errorf("Stats: got %+v; want Submitted == Completed + Canceled", st)
	}
	t.Logf("calls %d, ran %d, panicked %d, rejected %d, canceled %d (%d certain), stats %+v",
		len(s.records), ran, panicked, rejected, st.Canceled, sureCanceled, st)
}

func TestStress(t *testing.T) {
	const keys = 4
	ops := 1500
	if testing.Short() {
		ops = 300
	}
	tests := []struct {
		workers, stripes int
		closeEarly       bool
	}{
		{1, 0, false}, {2, 0, false}, {16, 0, false},
		{1, 0, true}, {2, 0, true}, {16, 0, true},
		{2, 3, false}, {16, 3, true},
	}
	for _, tt := range tests {
		name := fmt.Sprintf("workers=%d/stripes=%d/close=%v", tt.workers, tt.stripes, tt.closeEarly)
		t.Run(name, func(t *testing.T) {
			opts := []executor.Option{executor.WithWorkers(tt.workers), executor.WithThroughput(3),
				executor.WithMaxQueuePerKey(12)}
			if tt.stripes > 0 {
				opts = append(opts, executor.WithStripes(tt.stripes))
			}
			e, err := executor.New[int](opts...)
			if err != nil {
				t.Fatal(err)
			}
			s := &stressRun{t: t, e: e, keys: keys, fifo: make([][]int, keys)}
			seed := uint64(tt.workers*10 + tt.stripes)
			var wg sync.WaitGroup
			for k := range keys {
				wg.Go(func() { s.submitter(k, seed, ops) })
			}
			for c := range 6 {
				wg.Go(func() { s.chaos(100*seed+uint64(c), ops) })
			}
			if tt.closeEarly {
				// Close while the callers are busy, with a ctx that may
				// or may not expire before the drain. (Under a cap of 12
				// most calls are refused: about as many tasks as ops run
				// in a whole run with stripes, so wait for a third.)
				eventually(t, "some tasks to complete", func() bool { return e.Stats().Completed > uint64(ops/3) })
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(tt.workers)*100*time.Microsecond)
				err := e.Close(ctx)
				cancel()
				if err != nil && !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Close: got %v; want nil or %v", err, context.DeadlineExceeded)
				}
				if err != nil {
					// It gave up and returned at its deadline; running
					// tasks finish on their own, and then Close drains.
					if err := e.Close(context.Background()); err != nil {
						t.Errorf("Close after giving up: got %v; want nil", err)
					}
				}
				if st := e.Stats(); st.Queued != 0 || st.Running != 0 || !balanced(st) {
					t.Errorf("Stats when Close returned: got %+v; want nothing queued or running, balanced", st)
				}
			}
			stop := make(chan struct{})
			go func() {
				select {
				case <-stop:
				case <-time.After(2 * patience):
					t.Logf("still waiting for the callers after %v; the executor: %s", 2*patience, executor.DebugState(e))
				}
			}()
			waitAll(t, &wg)
			close(stop)
			s.check()
			if err := e.Close(context.Background()); err != nil {
				t.Errorf("Close: got %v; want nil", err)
			}
		})
	}
}
