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
// of key i, which only the holder of key i may touch, so a wrong total means
// an implementation let two tasks of one key overlap (or lost one). For
// asynchronous submissions each task also marks itself done on wg.
type tally struct {
	counts []counter
	fns    []func(context.Context) error
	wg     sync.WaitGroup
}

func newTally(keys int, async bool) *tally {
	t := &tally{counts: make([]counter, keys), fns: make([]func(context.Context) error, keys)}
	for i := range t.fns {
		c := &t.counts[i]
		if async {
			t.fns[i] = func(context.Context) error { c.n++; t.wg.Done(); return nil }
		} else {
			t.fns[i] = func(context.Context) error { c.n++; return nil }
		}
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

// produce runs b.N tasks from p producers and returns when every task has
// finished. Producer j takes the j-th contiguous chunk of task numbers and
// task i runs on key i % len(ks), so every producer cycles through every key
// and keys are contended across producers. With async it submits through
// Submit, otherwise through Do. It reports tasks/s and checks the tally.
func produce(b *testing.B, k keyed, ks []string, p int, async bool) {
	t := newTally(len(ks), async)
	if async {
		t.wg.Add(b.N)
	}
	ctx := context.Background()
	call := k.Do
	if async {
		call = k.Submit
	}
	if ps, ok := k.(prestarter); ok {
		ps.prestart(ks)
	}
	var prod sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for j := range p {
		prod.Add(1)
		go func() {
			defer prod.Done()
			for i := j * b.N / p; i < (j+1)*b.N/p; i++ {
				ki := i % len(ks)
				if err := call(ctx, ks[ki], t.fns[ki]); err != nil {
					b.Error(err)
					if async {
						t.wg.Done() // it never ran
					}
				}
			}
		}()
	}
	prod.Wait()
	t.wg.Wait()
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
