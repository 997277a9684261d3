#!/usr/bin/env bash
# ab.sh compares two commits' benchmarks the way BENCHMARKS.md asks: it builds
# bench/'s test binary at each commit, runs them in alternating rounds (the
# order swapped every round, so drift in the machine falls on both), and
# prints benchstat's comparison.
#
#   scripts/ab.sh OLD NEW ROUNDS PATTERN [test flags...]
#   scripts/ab.sh HEAD~1 HEAD 10 'UncontendedDo/impl=(perkey|locker)$'
#   scripts/ab.sh main my-branch 6 'Throughput/api=Go/feed=owned/ctx=cancel-shared/keys=16/impl=perkey$' -test.benchtime 1000000x
#
# With BENCH_REV set, both binaries are built with bench/ as it is at that
# revision, so that only the library differs (e.g. to measure a commit from
# before a benchmark existed): BENCH_REV=HEAD scripts/ab.sh OLD NEW ...
set -euo pipefail

if (( $# < 4 )); then
	sed -n '2,13p' "$0" >&2
	exit 2
fi
old=$1 new=$2 rounds=$3 pattern=$4
shift 4

root=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/tree" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

build() { # build REV OUT
	git -C "$root" worktree add --detach --force "$work/tree" "$1" >/dev/null
	if [[ -n ${BENCH_REV:-} ]]; then
		rm -rf "$work/tree/bench"
		git -C "$root" archive "$BENCH_REV" bench | tar -x -C "$work/tree"
	fi
	(cd "$work/tree" && go test -c -o "$2" ./bench/)
	git -C "$root" worktree remove --force "$work/tree"
}
build "$old" "$work/old.test"
build "$new" "$work/new.test"

one() { # one BINARY OUT: one round of BINARY, appended to OUT
	"$1" -test.run '^$' -test.bench "$pattern" -test.benchmem -test.count 1 "${flags[@]}" | grep '^Benchmark' >>"$2"
}
flags=("$@")
for (( i = 1; i <= rounds; i++ )); do
	if (( i % 2 )); then
		one "$work/old.test" "$work/old.txt"
		one "$work/new.test" "$work/new.txt"
	else
		one "$work/new.test" "$work/new.txt"
		one "$work/old.test" "$work/old.txt"
	fi
done

make -C "$root" -s benchstat >/dev/null
"$(go env GOPATH)/bin/benchstat" "old=$work/old.txt" "new=$work/new.txt"
