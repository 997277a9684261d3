package bench

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

// producers is how many goroutines submit in the throughput benchmarks.
const producers = 8

// makeKeys returns n distinct keys.
func makeKeys(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprintf("key-%07d", i)
	}
	return ks
}

// sharedKeys is the key set of every benchmark that needs at most 100,000
// keys, made once so that no benchmark pays for it.
var sharedKeys = sync.OnceValue(func() []string { return makeKeys(100_000) })

// keys returns the first n shared keys.
func keys(n int) []string { return sharedKeys()[:n] }

// counter is one key's task count, alone on its cache line so that keys
// running on different cores do not slow each other down.
type counter struct {
	n int
	_ [56]byte
}

// tally is the trivial task of most benchmarks. Task fns[i] bumps the counter
// of key i, which only the holder of key i may touch, so a wrong count means
// an implementation let two tasks of one key overlap (or lost one, or ran one
// twice). Nothing in a task writes a word that another key's task writes.
type tally struct {
	counts []counter
	fns    []func(context.Context) error
}

func newTally(keys int) *tally {
	t := &tally{counts: make([]counter, keys), fns: make([]func(context.Context) error, keys)}
	for i := range t.fns {
		c := &t.counts[i]
		t.fns[i] = func(context.Context) error { c.n++; return nil }
	}
	return t
}

// check fails tb unless exactly want tasks ran.
func (t *tally) check(tb testing.TB, want int) {
	tb.Helper()
	got := 0
	for i := range t.counts {
		got += t.counts[i].n
	}
	if got != want {
		tb.Fatalf("tasks counted = %d; want %d (lost updates or lost tasks)", got, want)
	}
}

// produce runs b.N tasks through Do from p producers on k, prepared for ks
// (see prepared), and returns when every
// call has returned: producer j takes the j-th contiguous chunk of task
// numbers, and task i runs on key i % len(ks), so every producer cycles
// through every key. It reports tasks/s and checks the tally.
func produce(b *testing.B, k keyed, ks []string, p int) {
	t := newTally(len(ks))
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var prod sync.WaitGroup
	for j := range p {
		prod.Go(func() {
			for i := j * b.N / p; i < (j+1)*b.N/p; i++ {
				ki := i % len(ks)
				if err := k.Do(ctx, ks[ki], t.fns[ki]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	prod.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "tasks/s")
	t.check(b, b.N)
}

// parallelism is the b.SetParallelism that gives about 8 goroutines.
func parallelism() int {
	procs := runtime.GOMAXPROCS(0)
	return max(1, (8+procs-1)/procs)
}

// liveMemory collects garbage and returns the bytes of heap and of goroutine
// stacks in use. It collects twice: the first collection only moves what
// sync.Pools hold to their victim caches, the second frees it.
func liveMemory() (heap, stack uint64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.StackInuse
}

// await polls cond until it holds or d passes; it reports whether it held.
func await(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Microsecond)
	}
	return true
}
