// Package bench measures perkey's executor beside the code it replaces. It
// holds only benchmarks; there is nothing to import.
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
//     sends. It keeps a goroutine and its channel per key ever seen.
//   - impl=actor-retiring: a goroutine and a buffered channel (16 slots) per
//     key, created on first use and retired when the key drains, as perkey's
//     mailboxes are; the registry is one map under one sync.Mutex, taken on
//     every send and completion. The memory benchmarks use it: the plain
//     actor never gives anything back.
//   - impl=perkey-go: perkey fed by Go (fire and forget, no Task) where the
//     others are fed by Submit. Both pass context.Background(), so every
//     perkey task is a plain task (see the executor's Costs).
//   - impl=floor, in UncontendedDo only: not an alternative but a measuring
//     stick, the smallest Do that keeps what an uncontended perkey Do pays
//     for (a sharded table whose entries retire when their key drains, a
//     FIFO hold per key, a bound on running tasks, a fresh ctx per task
//     naming its key, recovered panics, exact counters) and nothing else
//     (floor_test.go lists what it leaves out). The gap between it and
//     perkey is what the rest of perkey costs on that path.
//   - impl=floor-go, in SubmitThroughput only: the same kind of stick for
//     fire and forget, the smallest executor that keeps what a plain perkey
//     Go keeps on that path (mailboxes made on demand and retired on drain,
//     FIFO per key, a bounded set of workers, batches of 32, a fresh ctx per
//     task naming its key, exact counters) and nothing else
//     (floor_queue_test.go).
//
// Lock-based peers run the task inline on the calling goroutine, so for them
// Submit is the same as Do. Every task is trivial (it bumps a per-key counter,
// which doubles as a check that no update was lost) unless a benchmark says
// otherwise; the executor is created and closed outside the timed region.
//
// What each benchmark measures:
//
//   - UncontendedDo: one goroutine, one idle key: the fixed cost of a call.
//   - HotKey: 8 goroutines (b.SetParallelism) calling Do on one key.
//   - SubmitThroughput/keys=N: 8 producers submit 1,000,000 tasks
//     round-robin over N keys and wait for all of them, on a fresh
//     implementation; perkey uses Submit (perkey-go: Go) with
//     WithWorkers(GOMAXPROCS). One b.N iteration is one such burst, so ns/op,
//     B/op and allocs/op are per burst; ns/task, B/task and allocs/task are
//     per task, and tasks/s is the tasks over the bursts' wall time. The
//     burst is fixed, not b.N tasks, because perkey's queues are unbounded
//     (unless a per-key cap is set) and the producers outrun the workers:
//     with b.N tasks, the backlog perkey holds, and the collector scans,
//     would grow with whatever b.N the benchmark settles on, where the
//     actor's 64-slot channels make its producers wait instead. The flag
//     -burst sets another size (go test ./bench/ -bench SubmitThroughput
//     -burst 20000); -cpu 1 runs everything on one core, where the figures
//     move much less from run to run than on two.
//   - Scaling64Producers: as SubmitThroughput over 100,000 keys, but 64
//     producers calling Do synchronously.
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
// Run everything and compare implementations with
//
//	make bench
//
// which runs
//
//	go test -run '^$' -bench . -benchmem -count=8 -timeout 60m ./bench/ | tee bench.out
//	benchstat bench.out                  # one table per benchmark
//	benchstat -col /impl bench.out       # implementations side by side, vs perkey
//
// (a full run takes about 2 minutes per count on 2 cores, past go test's
// default 10-minute timeout). benchstat is golang.org/x/perf/cmd/benchstat;
// the Makefile installs a pinned version. make profile writes the CPU
// profiles quoted in BENCHMARKS.md.
//
// Run one benchmark with, for example,
//
//	go test -run '^$' -bench 'SubmitThroughput/keys=16/' -benchmem ./bench/
//
// The numbers in BENCHMARKS.md at the repository root came from this package.
package bench
