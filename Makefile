# Developer tasks for perkey. `make test` runs the README's test command;
# `make lint` checks formatting and runs go vet and staticcheck; `make bench`
# compares perkey with its baselines (see bench/doc.go) and `make
# bench-throughput` runs the throughput harness alone (`make bench-bounded` its
# bounded cells); `make profile` writes
# the CPU profiles quoted in BENCHMARKS.md. bench/ is a module of its own;
# ./bench/ reaches it from here through go.work.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

BENCHSTAT_VERSION := v0.0.0-20260908200009-22c9c6c9d4da
GOBIN_DIR ?= $(shell go env GOPATH)/bin
BENCHSTAT := $(GOBIN_DIR)/benchstat

# BENCH selects benchmarks, e.g. make bench BENCH=HotKey; BENCH_COUNT is how
# many times each runs (the figures are medians of 6). The throughput harness
# (BenchmarkThroughput) runs on its own at a fixed THROUGHPUT_TASKS tasks per
# cell, a whole number of bursts (see bench/doc.go); THROUGHPUT selects its
# cells, e.g. make bench-throughput THROUGHPUT='api=Go/feed=owned/.*/keys=16/'.
# Its striped cells (BenchmarkThroughputStriped) are for scripts/ab.sh.
BENCH ?= .
BENCH_COUNT ?= 6
BENCH_TIMEOUT ?= 120m
THROUGHPUT ?= .
THROUGHPUT_TASKS ?= 1000000

# One benchstat block per benchmark, columns in the order given (the first is
# the base the others are compared with): NAME:impl,impl,...
BENCH_TABLES := \
	Throughput:actor,perkey \
	UncontendedDo:actor,perkey,locker,mutex,mutexmap,keymutex,actor-retiring,floor \
	HotKey:actor,perkey,locker,mutex,mutexmap,keymutex,actor-retiring \
	Scaling64Producers:actor,perkey,locker,mutex,mutexmap,keymutex,actor-retiring \
	Stripes:keymutex,perkey-stripes,perkey \
	ReferenceWorkload:ideal,actor,perkey,actor-submit,perkey-submit,perkey-go,locker,mutex,mutexmap,keymutex,actor-retiring \
	BytesPerWaitingKey:actor-retiring,perkey,perkey-go,perkey-stripes \
	IdleMemory:actor-retiring,perkey,mutexmap,locker \
	BatchSink:ideal,batcher,per-message

.PHONY: test lint bench bench-throughput bench-bounded bench-tables benchstat profile

# The README's test command: every module of go.work (./... at the root stops
# at the nested modules).
test:
	go test -race $$(go list -f '{{.Dir}}/...' -m)

# gofmt, go vet and staticcheck (pinned) over every module, as CI runs them.
lint:
	bash scripts/lint.sh

# Every benchmark into bench.out, then one table per benchmark. The harness
# runs with the rest only when BENCH is left at "." (it takes a while).
bench: benchstat
	go test -run '^$$' -bench '$(BENCH)' -skip '^BenchmarkThroughput' -benchmem -count=$(BENCH_COUNT) -timeout $(BENCH_TIMEOUT) ./bench/ | tee bench.out
	if [[ '$(BENCH)' == . ]]; then $(THROUGHPUT_ROUNDS) | grep '^Benchmark' | tee -a bench.out; fi
	$(MAKE) -s bench-tables BENCH_OUT=bench.out

# The harness runs in BENCH_COUNT rounds of every selected cell once (not
# -count, which runs a cell's counts back to back), so that perkey and the
# actor of a cell run seconds apart and drift in the machine falls on both.
THROUGHPUT_ROUNDS = go test -c -o bench.test ./bench/ && \
	for i in $$(seq $(BENCH_COUNT)); do \
		./bench.test -test.run '^$$' -test.bench '^BenchmarkThroughput$$/$(THROUGHPUT)' -test.benchtime=$(THROUGHPUT_TASKS)x \
			-test.benchmem -test.count=1 -test.timeout $(BENCH_TIMEOUT); \
	done

# The throughput harness alone into throughput.out: perkey beside the plain
# actor in every cell, benchstat's table, then the Markdown tables of
# perkey/actor ratios that BENCHMARKS.md quotes.
bench-throughput: benchstat
	$(THROUGHPUT_ROUNDS) | tee throughput.out
	$(MAKE) -s bench-tables BENCH_OUT=throughput.out
	go run ./bench/ratios throughput.out

# The bounded cells (BenchmarkThroughputBounded) into bounded.out, in rounds
# as above: perkey bounded two ways beside the actor and unbounded perkey.
bench-bounded: benchstat
	go test -c -o bench.test ./bench/
	for i in $$(seq $(BENCH_COUNT)); do \
		./bench.test -test.run '^$$' -test.bench '^BenchmarkThroughputBounded$$/$(THROUGHPUT)' -test.benchtime=$(THROUGHPUT_TASKS)x \
			-test.benchmem -test.count=1 -test.timeout $(BENCH_TIMEOUT); \
	done | tee bounded.out
	$(BENCHSTAT) -filter '.unit:tasks/s' -col '/impl@(actor perkey perkey-bounded perkey-keycap)' bounded.out

# bench-tables prints BENCH_OUT (default bench.out) as BENCH_TABLES says.
BENCH_OUT ?= bench.out
bench-tables:
	for t in $(BENCH_TABLES); do \
		name=$${t%%:*} order=$${t#*:}; \
		grep -q "^Benchmark$$name/" $(BENCH_OUT) || continue; \
		echo "== $$name (base: $${order%%,*})"; \
		$(BENCHSTAT) -filter ".name:$$name" -col "/impl@($${order//,/ })" $(BENCH_OUT); \
		echo; \
	done

# benchstat is pinned; installing it again is a no-op once it is cached.
benchstat:
	GOBIN=$(GOBIN_DIR) go install golang.org/x/perf/cmd/benchstat@$(BENCHSTAT_VERSION)

# CPU profiles of perkey's hot paths (cpu-<case>.prof) and allocation
# profiles of a waiting key and of Go with a ctx per task (mem-<case>.prof),
# read with go tool pprof. The throughput cases are cells of the harness,
# THROUGHPUT_TASKS tasks each.
PROFILE_CELLS := \
	go-owned-background-keys1:Go/owned/background/1 \
	go-owned-cancel-shared-keys16:Go/owned/cancel-shared/16 \
	go-owned-cancel-per-task-keys1024:Go/owned/cancel-per-task/1024 \
	submit-shared-cancel-shared-keys1024:Submit/shared/cancel-shared/1024 \
	go-owned-background-keys100000:Go/owned/background/100000

profile:
	go test -c -o bench.test ./bench/
	./bench.test -test.run '^$$' -test.bench 'UncontendedDo/^impl=perkey$$' -test.benchtime=3s -test.cpuprofile cpu-uncontended.prof
	./bench.test -test.run '^$$' -test.bench 'Scaling64Producers/^impl=perkey$$' -test.benchtime=3s -test.cpuprofile cpu-scaling64.prof
	for c in $(PROFILE_CELLS); do \
		IFS=/ read -r api feed ctx keys <<<"$${c#*:}"; \
		./bench.test -test.run '^$$' -test.bench "^BenchmarkThroughput$$/^api=$$api$$/^feed=$$feed$$/^ctx=$$ctx$$/^keys=$$keys$$/^impl=perkey$$" \
			-test.benchtime=$(THROUGHPUT_TASKS)x -test.cpuprofile "cpu-$${c%%:*}.prof" >/dev/null; \
	done
	./bench.test -test.run '^$$' -test.bench 'BytesPerWaitingKey/^impl=perkey$$' -test.benchtime=1x -test.memprofile mem-waiting.prof -test.memprofilerate=1
	./bench.test -test.run '^$$' -test.bench '^BenchmarkThroughput$$/^api=Go$$/^feed=owned$$/^ctx=cancel-per-task$$/^keys=1024$$/^impl=perkey$$' \
		-test.benchtime=$(THROUGHPUT_TASKS)x -test.memprofile mem-go-cancel-per-task.prof
	for p in cpu-uncontended cpu-scaling64 $(foreach c,$(PROFILE_CELLS),cpu-$(firstword $(subst :, ,$(c)))); do \
		echo "== $$p"; go tool pprof -top -nodecount=10 bench.test $$p.prof; \
	done
	for p in mem-waiting mem-go-cancel-per-task; do \
		echo "== $$p"; go tool pprof -top -sample_index=alloc_space -nodecount=8 bench.test $$p.prof; \
	done
