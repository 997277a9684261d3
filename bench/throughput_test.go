package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perkey/perkey/executor"
)

// strictTally is tally for the harness's own tests: each key's counter
// is atomic and guarded by a busy flag that a task sets on entry and clears
// on exit, so a task that enters while another task of its key is inside
// is counted as an overlap instead of racing. meet, if set, is called inside
// every task, between entry and exit.
type strictTally struct {
	keys []strictKey
	fns  []func(context.Context) error
	meet func(k int)
}

type strictKey struct {
	busy     atomic.Bool
	n        atomic.Int64
	overlaps atomic.Int64
	_        [40]byte
}

func newStrictTally(keys int) *strictTally {
	st := &strictTally{keys: make([]strictKey, keys), fns: make([]func(context.Context) error, keys)}
	for k := range st.fns {
		s := &st.keys[k]
		st.fns[k] = func(context.Context) error {
			entered := s.busy.CompareAndSwap(false, true)
			if !entered {
				s.overlaps.Add(1)
			}
			if st.meet != nil {
				st.meet(k)
			}
			s.n.Add(1)
			if entered {
				s.busy.Store(false)
			}
			return nil
		}
	}
	return st
}

func (st *strictTally) ran(k int) int { return int(st.keys[k].n.Load()) }

// verify returns an error unless every key of r ran exactly the tasks r's
// plan sent it, with no two of a key's tasks overlapping.
func (st *strictTally) verify(r *run) error {
	errs := []error{r.check(st.ran)}
	for k := range st.keys {
		if n := st.keys[k].overlaps.Load(); n > 0 {
			errs = append(errs, fmt.Errorf("key %s: %d tasks entered while another of its tasks ran", r.ks[k], n))
		}
	}
	return errors.Join(errs...)
}

// runBounded runs r's burst and returns its error, or fails t if it has not
// ended within a minute.
func runBounded(t *testing.T, r *run) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- r.run() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%v: the burst has not ended after a minute", r.c)
		return nil
	}
}

// harnessTestKeys are the harness's key counts and an odd count smaller
// than the producers, where owned producers own unequal shares.
var harnessTestKeys = append([]int{3}, throughputKeys...)

// TestThroughputHarness runs every cell of the harness at a small number of
// tasks, on the real implementations, and checks that each key ran exactly
// the tasks fed to it, none overlapping. With -short it leaves out the
// cells of 100,000 keys (most of its time under -race: the actor starts a
// goroutine per key).
func TestThroughputHarness(t *testing.T) {
	const n = 4000
	for _, api := range throughputAPIs {
		for _, feed := range throughputFeeds {
			for _, ck := range throughputCtxs {
				for _, nk := range harnessTestKeys {
					for _, im := range throughputImpls {
						if goOnly(im) && api != "Go" {
							continue // as in BenchmarkThroughput
						}
						c := cell{api: api, feed: feed, ctx: ck, keys: nk, impl: im}
						t.Run(c.String(), func(t *testing.T) {
							if testing.Short() && nk >= 100_000 {
								t.Skip("-short: 100,000 keys")
							}
							checkCell(t, c, n)
						})
					}
				}
			}
		}
	}
}

// checkCell runs n tasks of cell c on its real implementation and checks
// that each key ran exactly the tasks fed to it, none overlapping.
func checkCell(t *testing.T, c cell, n int) {
	st := newStrictTally(c.keys)
	r := newRun(c, keys(c.keys), st.fns, n, newTarget)
	err := runBounded(t, r)
	r.release()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.verify(r); err != nil {
		t.Error(err)
	}
}

// TestThroughputBoundedHarness runs the bounded cells (see
// BenchmarkThroughputBounded) at a small number of tasks, checked as
// TestThroughputHarness checks its cells. Both bounds bind: the per-key
// one (64) at 3 keys, and the executor-wide one lowered to 64 here.
func TestThroughputBoundedHarness(t *testing.T) {
	const n = 4000
	defer func(was int) { boundedMaxPending = was }(boundedMaxPending)
	boundedMaxPending = 64
	for _, api := range throughputAPIs {
		for _, feed := range throughputFeeds {
			for _, ck := range throughputCtxs {
				for _, im := range []string{"perkey-bounded", "perkey-keycap"} {
					c := cell{api: api, feed: feed, ctx: ck, keys: 3, impl: im}
					t.Run(c.String(), func(t *testing.T) { checkCell(t, c, n) })
				}
			}
		}
	}
}

// TestThroughputPlan checks the feeding patterns: every task goes to some
// key; owned, each key is fed by one producer only, and min(8, keys)
// producers run; shared, 8 producers run and each feeds every key once it
// has at least as many tasks as there are keys. It also checks that
// ctx=cancel-per-task gives every task a ctx of its own.
func TestThroughputPlan(t *testing.T) {
	const n = 10_000
	for _, feed := range throughputFeeds {
		for _, nk := range harnessTestKeys {
			for _, ck := range throughputCtxs {
				c := cell{api: "Go", feed: feed, ctx: ck, keys: nk, impl: "actor"}
				t.Run(c.String(), func(t *testing.T) {
					r := newRun(c, keys(nk), nil, n, func(context.Context, cell, []string) target { return nil })
					defer r.release()
					total := 0
					for _, w := range r.want() {
						total += w
					}
					if total != n {
						t.Errorf("the plan sends %d tasks; want %d", total, n)
					}
					wantP := producers
					if feed == feedOwned {
						wantP = min(producers, nk)
					}
					if r.p != wantP {
						t.Errorf("%d producers; want %d", r.p, wantP)
					}
					owner := make([]int, nk)
					for k := range owner {
						owner[k] = -1
					}
					for j := range r.p {
						lo, hi := r.tasks(j)
						cur := r.cursor(j)
						fed := make(map[int]bool)
						for range hi - lo {
							k := cur.next()
							if k < 0 || k >= nk {
								t.Fatalf("producer %d feeds key index %d of %d", j, k, nk)
							}
							fed[k] = true
							if feed == feedOwned {
								if owner[k] >= 0 && owner[k] != j {
									t.Fatalf("key %d fed by producers %d and %d", k, owner[k], j)
								}
								owner[k] = j
							}
						}
						if feed == feedShared && hi-lo >= nk && len(fed) != nk {
							t.Errorf("producer %d feeds %d of %d keys", j, len(fed), nk)
						}
					}
					switch ck {
					case ctxBackground:
						if r.ctx != context.Background() || r.ctxs != nil {
							t.Error("ctx=background: tasks do not all get context.Background()")
						}
					case ctxCancelShared:
						if r.ctx == nil || r.ctx.Done() == nil || r.ctxs != nil {
							t.Error("ctx=cancel-shared: tasks do not all get one cancelable ctx")
						}
					case ctxCancelPerTask:
						seen := make(map[context.Context]bool, n)
						for _, ctx := range r.ctxs {
							if ctx.Done() == nil || seen[ctx] {
								t.Fatal("ctx=cancel-per-task: a task's ctx is shared or never ends")
							}
							seen[ctx] = true
						}
						if len(seen) != n {
							t.Errorf("ctx=cancel-per-task: %d ctxs for %d tasks", len(seen), n)
						}
					}
				})
			}
		}
	}
}

// dropTarget is perkey that silently drops every 97th task.
type dropTarget struct {
	perkeyGoTarget
	sent atomic.Int64
}

func (d *dropTarget) send(ctx context.Context, key string, fn func(context.Context) error) error {
	if d.sent.Add(1)%97 == 0 {
		return nil
	}
	return d.perkeyGoTarget.send(ctx, key, fn)
}

// twiceTarget is perkey that runs every 97th task twice.
type twiceTarget struct {
	perkeyGoTarget
	sent atomic.Int64
}

func (d *twiceTarget) send(ctx context.Context, key string, fn func(context.Context) error) error {
	if d.sent.Add(1)%97 == 0 {
		if err := d.perkeyGoTarget.send(ctx, key, fn); err != nil {
			return err
		}
	}
	return d.perkeyGoTarget.send(ctx, key, fn)
}

// inlineTarget runs every task on the producer's goroutine, holding nothing.
type inlineTarget struct{}

func (inlineTarget) send(ctx context.Context, _ string, fn func(context.Context) error) error {
	return fn(ctx)
}
func (inlineTarget) close() error { return nil }

// TestThroughputHarnessFails checks that the harness's check catches an
// implementation that loses tasks, runs some twice, or lets two tasks of
// one key overlap.
func TestThroughputHarnessFails(t *testing.T) {
	newPerkey := func() perkeyGoTarget {
		e, err := executor.New[string]()
		if err != nil {
			t.Fatal(err)
		}
		return perkeyGoTarget{e}
	}
	broken := map[string]func() target{
		"drops":  func() target { return &dropTarget{perkeyGoTarget: newPerkey()} },
		"twice":  func() target { return &twiceTarget{perkeyGoTarget: newPerkey()} },
		"inline": func() target { return inlineTarget{} },
	}
	for name, mk := range broken {
		for _, feed := range throughputFeeds {
			// One key: shared, 8 producers feed it; owned, one does, so
			// that even inline nothing overlaps.
			c := cell{api: "Go", feed: feed, ctx: ctxCancelShared, keys: 1, impl: name}
			t.Run(c.String(), func(t *testing.T) {
				st := newStrictTally(c.keys)
				if name == "inline" && feed == feedShared {
					// The first two tasks of key 0 wait inside for each
					// other, so tasks that are not serialised overlap.
					var inside sync.WaitGroup
					var arrived atomic.Int64
					inside.Add(2)
					st.meet = func(k int) {
						if k != 0 || arrived.Add(1) > 2 {
							return
						}
						inside.Done()
						waited := make(chan struct{})
						go func() { inside.Wait(); close(waited) }()
						select {
						case <-waited:
						case <-time.After(10 * time.Second):
						}
					}
				}
				r := newRun(c, keys(c.keys), st.fns, 5000, func(context.Context, cell, []string) target { return mk() })
				err := runBounded(t, r)
				r.release()
				if err != nil {
					t.Fatal(err)
				}
				err = st.verify(r)
				serial := name == "inline" && feed == feedOwned // one producer, one key
				switch {
				case serial && err != nil:
					t.Errorf("one producer running one key's tasks inline: %v", err)
				case !serial && err == nil:
					t.Error("the check passed a broken implementation")
				case err != nil:
					t.Logf("caught: %v", err)
				}
			})
		}
	}
}
