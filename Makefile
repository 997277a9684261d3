# Developer tasks for perkey. `make test` runs the README's test command;
# `make lint` checks formatting and runs go vet and staticcheck; `make bench`
# compares perkey with its baselines (see bench/doc.go); `make profile` writes
# the CPU profiles quoted in BENCHMARKS.md. bench/ is a module of its own;
# ./bench/ reaches it from here through go.work.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

BENCHSTAT_VERSION := v0.0.0-20260908200009-22c9c6c9d4da
GOBIN_DIR ?= $(shell go env GOPATH)/bin
BENCHSTAT := $(GOBIN_DIR)/benchstat

# A full run is about 2 minutes per count on 2 cores, past go test's default
# 10-minute timeout. BENCH selects benchmarks, e.g. make bench BENCH=HotKey.
BENCH ?= .
BENCH_COUNT ?= 8
BENCH_TIMEOUT ?= 60m

.PHONY: test lint bench benchstat profile

# The README's test command: every module of go.work (./... at the root stops
# at the nested modules).
test:
	go test -race $$(go list -f '{{.Dir}}/...' -m)

# gofmt, go vet and staticcheck (pinned) over every module, as CI runs them.
lint:
	bash scripts/lint.sh

bench: benchstat
	go test -run '^$$' -bench '$(BENCH)' -benchmem -count=$(BENCH_COUNT) -timeout $(BENCH_TIMEOUT) ./bench/ | tee bench.out
	$(BENCHSTAT) bench.out
	$(BENCHSTAT) -col /impl bench.out

# benchstat is pinned; installing it again is a no-op once it is cached.
benchstat:
	GOBIN=$(GOBIN_DIR) go install golang.org/x/perf/cmd/benchstat@$(BENCHSTAT_VERSION)

# CPU profiles of perkey's hot paths (cpu-<case>.prof) and allocation
# profiles of a waiting key and of Submit (mem-<case>.prof), read with go tool pprof.
profile:
	go test -c -o bench.test ./bench/
	./bench.test -test.run '^$$' -test.bench 'UncontendedDo/^impl=perkey$$' -test.benchtime=3s -test.cpuprofile cpu-uncontended.prof
	./bench.test -test.run '^$$' -test.bench 'SubmitThroughput/^keys=1$$/^impl=perkey$$' -test.benchtime=3s -test.cpuprofile cpu-keys1.prof
	./bench.test -test.run '^$$' -test.bench 'SubmitThroughput/^keys=100000$$/^impl=perkey$$' -test.benchtime=3s -test.cpuprofile cpu-keys100000.prof
	./bench.test -test.run '^$$' -test.bench 'Scaling64Producers/^impl=perkey$$' -test.benchtime=3s -test.cpuprofile cpu-scaling64.prof
	./bench.test -test.run '^$$' -test.bench 'BytesPerWaitingKey/^impl=perkey$$' -test.benchtime=1x -test.memprofile mem-waiting.prof -test.memprofilerate=1
	./bench.test -test.run '^$$' -test.bench 'SubmitThroughput/^keys=100000$$/^impl=perkey$$' -test.benchtime=3s -test.memprofile mem-keys100000.prof
	for p in cpu-uncontended cpu-keys1 cpu-keys100000 cpu-scaling64; do \
		echo "== $$p"; go tool pprof -top -nodecount=10 bench.test $$p.prof; \
	done
	for p in mem-waiting mem-keys100000; do \
		echo "== $$p"; go tool pprof -top -sample_index=alloc_space -nodecount=8 bench.test $$p.prof; \
	done
