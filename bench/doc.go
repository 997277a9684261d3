// Package bench measures perkey's executor beside the code it replaces. It
// holds only benchmarks, and beneath it the command ratios, which turns the
// throughput harness's output into Markdown tables; there is nothing to
// import.
//
// Every benchmark runs perkey and its peers as sub-benchmarks of one function,
// named impl=NAME, so that one run compares them on the same machine at the
// same moment. The peers are:
//
//   - impl=mutex: one global sync.Mutex around every task.
//   - impl=mutexmap: a map[string]*sync.Mutex guarded by a sync.Mutex, an
//     entry created on first use and never removed (the common hand-rolled
//     per-key lock, which leaks one entry per key ever seen).
//   - impl=locker: github.com/moby/locker, a map of reference-counted
//     mutexes that deletes a key's entry when its last holder unlocks.
//   - impl=keymutex: k8s.io/utils/keymutex.NewHashed(1024), 1,024 fixed
//     mutexes that keys hash onto (unrelated keys can contend).
//   - impl=actor: the actor most code bases have: a goroutine and a
//     buffered channel (64 slots) per key, started before the work and kept
//     for good, found in a map nothing writes while the work runs (no lock
//     per task). Do sends the task and waits on a reply channel; Submit only
//     sends. It keeps a goroutine and its channel per key ever seen. In the
//     Throughput harness it is leaner still (see below).
//   - impl=actor-retiring: a goroutine and a buffered channel (16 slots) per
//     key, created on first use and retired when the key drains, as perkey's
//     mailboxes are; the registry is one map under one sync.Mutex, taken on
//     every send and completion. The memory benchmarks use it: the plain
//     actor never gives anything back.
//   - impl=perkey-go: perkey fed by Go (fire and forget, no Task) where the
//     others are fed by Submit, with context.Background().
//   - impl=floor, in UncontendedDo, in the Throughput cells of Go and in
//     BatchSink: not
//     an alternative but a measuring stick, the smallest executor that
//     keeps what perkey pays for on that path (a sharded table whose
//     entries retire when their key drains, a FIFO queue or hold per key, a
//     bound on running tasks shared fairly by the keys, a fresh ctx per
//     task naming its key, recovered panics, exact counters) and nothing
//     else (floor_test.go, floor_go_test.go and floor_batch_test.go list
//     what each leaves out; the batch floor's message is a record of its
//     outcome, left out of its batch if its ctx ended).
//     The gap between it and perkey is what the rest of perkey costs on
//     that path; the gap between it and the actor is what the guarantees
//     cost.
//   - impl=actor-ctx, in the Throughput cells of Go: the plain actor giving
//     each fn the ctx the contract asks for (fresh, naming its key, ended
//     when fn returns) and not running a task whose ctx ended, and nothing
//     else. The gap between it and the actor is what that ctx alone costs,
//     whatever else an executor keeps.
//
// Lock-based peers run the task inline on the calling goroutine, so for them
// Submit is the same as Do. Every task is trivial (it bumps a per-key counter,
// which doubles as a check that no update was lost) unless a benchmark says
// otherwise. The executor is created and closed, and the plain actor's
// goroutines started, outside the timed region, except that the throughput
// harness times Close: it is how completion is measured there.
//
// What each benchmark measures:
//
//   - Throughput: the throughput harness, below.
//   - UncontendedDo: one goroutine, one idle key: the fixed cost of a call.
//   - HotKey: 8 goroutines (b.SetParallelism) calling Do on one key.
//   - Scaling64Producers: 64 producers calling Do synchronously over
//     100,000 keys, each cycling through every key.
//   - Stripes: 8 goroutines calling Do over 100,000 keys: perkey in striped
//     mode (WithStripes(1024)) against keymutex.NewHashed(1024), with dynamic
//     perkey for reference.
//   - ReferenceWorkload: 1,000 tasks of time.Sleep(1ms) over 50 keys from
//     1,000 goroutines (perkey with WithWorkers(64)); impl=ideal is 50
//     goroutines sleeping 20 times each. impl=perkey-submit and
//     impl=actor-submit submit the same tasks from one goroutine and wait
//     for all (the lock peers' Submit would run them one after another).
//     Reports ms/op.
//   - BytesPerWaitingKey: heap and stack growth per key with one task
//     waiting on each of 100,000 keys (perkey's only worker blocked; the
//     actor's goroutines parked in their task). Reports B/key.
//   - IdleMemory: after 1,000,000 distinct keys have come and gone, the heap
//     retained (after GC) and the goroutines left, against the start.
//
// # The throughput harness
//
// BenchmarkThroughput is what a user comparing perkey with an actor
// measures: trivial tasks from 8 producers, string keys, fire and forget,
// and the time until every task has run. Each cell is named
//
//	Throughput/api=A/feed=F/ctx=C/keys=N/impl=I
//
// and perkey (impl=perkey) runs beside the plain actor (impl=actor) in
// every cell of the same run. One op is one task: ns/op, B/op and
// allocs/op are per task, tasks/s is the tasks over the timed wall time,
// and allocs/task is allocs/op unrounded. The dimensions, and what each
// models:
//
//   - api=Go, api=Submit: how perkey is fed: Go, or Submit with its Task
//     dropped (a caller that only wants the work queued). The actor is fed
//     the same way in both: it has nothing like a Task to give.
//   - feed=owned: each producer feeds its own disjoint set of keys, as a
//     consumer per partition does; with keys=1 (fewer keys than producers)
//     only min(8, keys) producers run, one per key set, since a key fed by
//     two producers is not owned: keys=1 is one producer feeding one key.
//     feed=shared: every producer cycles through every key, as HTTP
//     handlers do, so every key is fed by all 8.
//   - ctx=background: every task gets context.Background(), a ctx that
//     never ends. ctx=cancel-shared: every task gets one ctx from
//     context.WithCancel, made before the run (a consumer loop's, a
//     server's). ctx=cancel-per-task: every task gets a ctx of its own from
//     context.WithCancel (a request's), all made before the timed region and
//     distinct: a pool of ctxs cycled over the tasks would let an
//     implementation that watches each distinct ctx once watch fewer than
//     one per task, which real requests do not allow.
//   - keys=1, 16, 1024, 100000: one hot key; a few, fewer than the actor's
//     goroutines could keep busy; many; far more keys than tasks in flight.
//
// Unbounded, perkey never slows a producer down: its backlog grows where
// the actor's producers block on full channels. BenchmarkThroughputBounded
// (make bench-bounded) runs the cells of 1, 16 and 1,024 keys for perkey
// bounded as its users bound it, waiting for room under
// backpressure.Block(): impl=perkey-keycap with WithMaxQueuePerKey(64) (the
// actor's own bound, per key, and the README's advice), impl=perkey-bounded
// with WithMaxPending(10_000) (one bound across all keys), beside the actor
// and unbounded perkey.
//
// Every task bumps its own key's counter, padded to a cache line, and
// nothing else: no word is written by every task (a shared WaitGroup.Done
// per task would slow the fastest implementation most). Completion is
// measured through Close on both sides: perkey's Close(ctx) returns once
// every task has run and its workers have exited; the actor closes every
// channel and waits for its goroutines. After each burst the harness checks
// that every key ran exactly the tasks fed to it (a lost, repeated or
// overlapping task shows); TestThroughputHarness runs every cell at a small
// size and checks the same with atomic counters and an overlap flag, and
// TestThroughputHarnessFails shows that the check catches a broken
// implementation.
//
// The actor is the strongest honest version users write: a goroutine per
// key started before the run, a 64-slot channel per key in a map built
// before the run that nothing writes during it (no lock per task). When
// every task has the same ctx (background, cancel-shared) the channel is a
// chan func(context.Context) error and the goroutine calls each func with
// that ctx; with a ctx per task the channel carries the func and its ctx (24
// bytes, no allocation) and the goroutine calls fn with the task's ctx.
// Like the actors users write, it does not look at the ctx; fn does if it
// cares. perkey runs with WithWorkers(GOMAXPROCS), as its docs advise for
// CPU-bound work.
//
// A run of b.N tasks is cut into bursts of at most -burst tasks (1,000,000
// by default); each burst gets a fresh executor or actor set (the actor's
// goroutines started and parked on their channels) and, for
// ctx=cancel-per-task, its own ctxs; all of that is made, and the heap
// collected, before the clock starts, and the ctxs are canceled after it
// stops. The bound keeps the per-task ctxs' memory, and the backlog that
// perkey's unbounded queues build up (the actor's producers block on full
// channels instead), the same whatever b.N the benchmark settles on. Run it
// with -benchtime Nx, N a multiple of -burst, so that every burst is full:
//
//	make bench-throughput
//
// runs every cell once per round at 1,000,000 tasks, 6 rounds (rounds
// rather than -count 6, which would run a cell's 6 counts back to back:
// this way perkey and the actor of a cell run seconds apart, and drift in
// the machine falls on both), prints benchstat's tables with the actor as
// the base column, and then the Markdown tables of perkey/actor ratios
// (bench/ratios) that BENCHMARKS.md quotes. It is
//
//	go test -c -o bench.test ./bench/
//	for i in 1 2 3 4 5 6; do
//		./bench.test -test.run '^$' -test.bench '^BenchmarkThroughput$' \
//			-test.benchtime=1000000x -test.benchmem -test.count=1
//	done | tee throughput.out
//	benchstat -filter .name:Throughput -col '/impl@(actor perkey)' throughput.out
//	go run ./bench/ratios throughput.out
//
// Choose cells with THROUGHPUT, e.g. make bench-throughput
// THROUGHPUT='api=Go/feed=owned/ctx=cancel-shared/' BENCH_COUNT=10. With -cpu
// 1 everything runs on one core, where the actor's figures move much less
// from run to run than on two (how fast it runs on two depends above all on
// how the machine moves goroutines between the cores).
//
// # Running
//
// Run everything and compare implementations with
//
//	make bench
//
// which runs every other benchmark 6 times (go test -run '^$' -bench .
// -skip '^BenchmarkThroughput$' -benchmem -count=6 ./bench/), then the
// harness in 6 rounds as above, all into bench.out, and prints one benchstat table per
// benchmark, its columns in the order the Makefile's BENCH_TABLES gives,
// the first being the base the others are compared with: the plain actor
// where the benchmark has it (benchstat -filter .name:NAME -col
// '/impl@(actor perkey ...)' bench.out). A full run takes most of an hour
// on 2 cores. benchstat is golang.org/x/perf/cmd/benchstat; the Makefile
// installs a pinned version. make profile writes the CPU profiles quoted in
// BENCHMARKS.md.
//
// Run one benchmark with, for example,
//
//	go test -run '^$' -bench 'HotKey' -benchmem ./bench/
//
// and compare two commits with scripts/ab.sh, which runs both in
// alternating rounds.
//
// The numbers in BENCHMARKS.md at the repository root came from this package.
package bench
