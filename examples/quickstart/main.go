// Command quickstart runs perkey's reference workload four ways and prints
// one table row for each.
//
// The workload: 1,000 operations, each time.Sleep(1 * time.Millisecond) (a
// stand-in for a short database or network call), spread round-robin over 50
// keys and submitted from 1,000 goroutines released at once. Operations on
// one key must never overlap; operations on different keys may.
//
//   - global mutex: one sync.Mutex around every operation. Safe, but all
//     1,000 operations run one after another: about 1 s.
//   - mutex map: a map[key]*sync.Mutex, itself guarded by a mutex. Keys run in
//     parallel (about 20 ms), but the map keeps one entry per key ever seen:
//     it only grows.
//   - perkey: executor.Do on the key. Keys run in parallel on at most 64
//     workers, and a key's mailbox is retired once it drains, so nothing is
//     left behind.
//   - perkey Submit: the same executor fed as it is meant to be, by one
//     goroutine that submits all 1,000 operations with executor.Submit and
//     then waits for them: no goroutine per operation to start and wake.
//
// The ideal is 20 operations per key run back to back: 20 × the measured
// mean of time.Sleep(1ms).
//
// Run it with
//
//	go run ./examples/quickstart
//
// It exits with status 1 if any runner let two operations of one key overlap
// or if perkey left mailboxes behind.
package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/perkey/perkey/executor"
)

const (
	ops      = 1000                   // operations in the workload
	numKeys  = 50                     // distinct keys; operation i uses key i % numKeys
	opTime   = 1 * time.Millisecond   // what each operation sleeps
	workers  = 64                     // perkey's WithWorkers
	perKey   = ops / numKeys          // operations per key: the ideal is perKey × opTime
	drainFor = 2 * time.Second        // how long to wait for perkey's mailboxes to retire
	ms10     = 100 * time.Microsecond // the table shows times to a tenth of a millisecond
)

// result is one row of the table.
type result struct {
	name    string
	elapsed time.Duration
	overlap int // most operations seen inside one key at once, minus one
	left    int // entries left in the runner's key table afterwards; -1 if it has none
}

func main() {
	ideal := perKey * meanSleep(opTime, 50)
	rows := []result{runGlobalMutex(), runMutexMap(), runPerkey(), runPerkeySubmit()}

	fmt.Printf("%d ops of time.Sleep(%v) over %d keys, from %d goroutines (perkey Submit: from one)\n\n",
		ops, opTime, numKeys, ops)
	fmt.Printf("%-14s %10s %8s %12s\n", "runner", "time", "overlap", "keys left")
	fmt.Printf("%-14s %10s %8s %12s\n", "ideal", ideal.Round(ms10), "-", "-")
	failed := false
	for _, r := range rows {
		left := "-" // the runner keeps no table
		if r.left >= 0 {
			left = fmt.Sprint(r.left)
		}
		fmt.Printf("%-14s %10s %8d %12s\n", r.name, r.elapsed.Round(ms10), r.overlap, left)
		failed = failed || r.overlap > 0 || (r.left > 0 && r.name != "mutex map")
	}
	if failed {
		fmt.Fprintln(os.Stderr, "FAIL: overlap within a key, or perkey left mailboxes behind")
		os.Exit(1)
	}
}

// runGlobalMutex serialises every operation behind one sync.Mutex.
func runGlobalMutex() result {
	var mu sync.Mutex
	g := newGuard()
	elapsed := workload(func(key int) {
		mu.Lock()
		defer mu.Unlock()
		g.op(key)
	})
	return result{name: "global mutex", elapsed: elapsed, overlap: g.overlap(), left: -1}
}

// runMutexMap locks a mutex per key, created on first use and never removed:
// deleting one safely would need a reference count (as moby/locker keeps).
func runMutexMap() result {
	var (
		mu    sync.Mutex // guards locks
		locks = make(map[int]*sync.Mutex)
	)
	lockFor := func(key int) *sync.Mutex {
		mu.Lock()
		defer mu.Unlock()
		l, ok := locks[key]
		if !ok {
			l = new(sync.Mutex)
			locks[key] = l
		}
		return l
	}
	g := newGuard()
	elapsed := workload(func(key int) {
		l := lockFor(key)
		l.Lock()
		defer l.Unlock()
		g.op(key)
	})
	mu.Lock()
	left := len(locks)
	mu.Unlock()
	return result{name: "mutex map", elapsed: elapsed, overlap: g.overlap(), left: left}
}

// runPerkey hands each operation to executor.Do on its key.
func runPerkey() result {
	exec := newExecutor()
	ctx := context.Background()
	defer exec.Close(ctx)

	g := newGuard()
	var failures atomic.Int64
	elapsed := workload(func(key int) {
		err := exec.Do(ctx, key, func(context.Context) error {
			g.op(key)
			return nil
		})
		if err != nil {
			failures.Add(1)
			fmt.Fprintln(os.Stderr, "Do:", err)
		}
	})
	if n := failures.Load(); n > 0 {
		fmt.Fprintf(os.Stderr, "%d Do calls failed\n", n)
		os.Exit(1)
	}
	return result{name: "perkey", elapsed: elapsed, overlap: g.overlap(), left: activeAfterDrain(exec)}
}

// runPerkeySubmit submits every operation from one goroutine and waits for
// all of them.
func runPerkeySubmit() result {
	exec := newExecutor()
	ctx := context.Background()
	defer exec.Close(ctx)

	g := newGuard()
	tasks := make([]*executor.Task, ops)
	t0 := time.Now()
	for i := range ops {
		key := i % numKeys
		var err error
		if tasks[i], err = exec.Submit(ctx, key, func(context.Context) error { g.op(key); return nil }); err != nil {
			fmt.Fprintln(os.Stderr, "Submit:", err)
			os.Exit(1)
		}
	}
	for _, t := range tasks {
		if err := t.Wait(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "Wait:", err)
			os.Exit(1)
		}
	}
	elapsed := time.Since(t0)
	return result{name: "perkey Submit", elapsed: elapsed, overlap: g.overlap(), left: activeAfterDrain(exec)}
}

// newExecutor returns the executor each perkey row runs on, or exits.
func newExecutor() *executor.Executor[int] {
	exec, err := executor.New[int](executor.WithWorkers(workers))
	if err != nil {
		fmt.Fprintln(os.Stderr, "executor.New:", err)
		os.Exit(1)
	}
	return exec
}

// activeAfterDrain polls ActiveKeys until it reaches 0 or drainFor passes:
// a mailbox retires just after its last task returns, so give it a moment.
func activeAfterDrain(exec *executor.Executor[int]) int {
	deadline := time.Now().Add(drainFor)
	for {
		n := exec.ActiveKeys()
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// workload starts one goroutine per operation, releases them together, calls
// run(key) in each and returns the time until the last one has returned.
func workload(run func(key int)) time.Duration {
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	ready.Add(ops)
	done.Add(ops)
	for i := range ops {
		go func(key int) {
			defer done.Done()
			ready.Done()
			<-start
			run(key)
		}(i % numKeys)
	}
	ready.Wait() // every goroutine exists: measure the locking, not the spawning
	t0 := time.Now()
	close(start)
	done.Wait()
	return time.Since(t0)
}

// guard is the operation itself plus a check that no two operations of one
// key are inside at once.
type guard struct {
	inside [numKeys]atomic.Int32
	most   atomic.Int32 // the most operations seen inside one key at once
}

func newGuard() *guard { return new(guard) }

// op runs one operation on key and records how many were inside it.
func (g *guard) op(key int) {
	n := g.inside[key].Add(1)
	for {
		m := g.most.Load()
		if n <= m || g.most.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(opTime)
	g.inside[key].Add(-1)
}

// overlap is the most operations ever inside one key at once beyond the one
// allowed: 0 for a correct runner.
func (g *guard) overlap() int { return max(int(g.most.Load())-1, 0) }

// meanSleep measures what time.Sleep(d) really takes on this machine (timer
// slack and scheduling make it longer than d), averaged over n sleeps.
func meanSleep(d time.Duration, n int) time.Duration {
	t0 := time.Now()
	for range n {
		time.Sleep(d)
	}
	return time.Since(t0) / time.Duration(n)
}
