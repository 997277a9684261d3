package bench

import (
	"context"
	"flag"
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

// produce runs b.N tasks through Do from p producers (see feed) and
// returns when every call has returned. Every producer cycles through every
// key, so keys are contended across producers. It reports tasks/s and
// checks the tally.
func produce(b *testing.B, k keyed, ks []string, p int) {
	t := newTally(len(ks), false)
	if ps, ok := k.(prestarter); ok {
		ps.prestart(ks)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	feed(b, context.Background(), k.Do, t, ks, p, b.N, false)
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "tasks/s")
	t.check(b, b.N)
}

// feed submits n tasks of t through call from p producers and returns once
// they are all submitted: producer j takes the j-th contiguous chunk of
// task numbers, and task i runs on key i % len(ks). A task call refuses
// is marked done on t.wg if async: it never ran.
func feed(b *testing.B, ctx context.Context, call func(context.Context, string, func(context.Context) error) error,
	t *tally, ks []string, p, n int, async bool) {
	var prod sync.WaitGroup
	for j := range p {
		prod.Go(func() {
			for i := j * n / p; i < (j+1)*n/p; i++ {
				ki := i % len(ks)
				if err := call(ctx, ks[ki], t.fns[ki]); err != nil {
					b.Error(err)
					if async {
						t.wg.Done()
					}
				}
			}
		})
	}
	prod.Wait()
}

// burstTasks is what one op of produceBursts runs: by default 1,000,000
// trivial tasks, the measure a user comparing perkey with an actor takes.
// -burst changes it, to see how a figure depends on the backlog a burst
// builds up (BENCHMARKS.md, "One core, and what limits the throughput").
var burstTasks = flag.Int("burst", 1_000_000, "tasks per burst in the throughput benchmarks")

// produceBursts runs b.N bursts of burstTasks tasks, each on a fresh
// implementation made by mk, submitted asynchronously by p producers (see
// feed), and all waited for; making, prestarting and closing the
// implementation are left out of the time. It reports tasks/s over the
// bursts, and the time and heap per task (ns/task, B/task, allocs/task;
// ns/op, B/op and allocs/op are per burst). A fixed burst, rather than
// b.N tasks, keeps the backlog an implementation with unbounded queues
// builds up the same whatever b.N the benchmark settles on.
func produceBursts(b *testing.B, mk func() keyed, ks []string, p int) {
	b.StopTimer()
	if *burstTasks < 1 {
		b.Fatalf("-burst %d: a burst needs at least one task", *burstTasks)
	}
	var (
		elapsed        time.Duration
		mallocs, bytes uint64
	)
	for range b.N {
		k := mk()
		if ps, ok := k.(prestarter); ok {
			ps.prestart(ks)
		}
		t := newTally(len(ks), true)
		t.wg.Add(*burstTasks)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		start := time.Now()
		feed(b, context.Background(), k.Submit, t, ks, p, *burstTasks, true)
		t.wg.Wait()
		elapsed += time.Since(start)
		b.StopTimer()
		runtime.ReadMemStats(&after)
		mallocs += after.Mallocs - before.Mallocs
		bytes += after.TotalAlloc - before.TotalAlloc
		t.check(b, *burstTasks)
		k.Close()
	}
	n := float64(b.N) * float64(*burstTasks)
	b.ReportMetric(n/elapsed.Seconds(), "tasks/s")
	b.ReportMetric(float64(elapsed.Nanoseconds())/n, "ns/task")
	b.ReportMetric(float64(bytes)/n, "B/task")
	b.ReportMetric(float64(mallocs)/n, "allocs/task")
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
