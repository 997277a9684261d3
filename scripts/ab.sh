#!/usr/bin/env bash
# ab.sh compares two commits' benchmarks the way BENCHMARKS.md asks: it builds
# bench/'s test binary at each commit, runs them in alternating rounds (the
# order swapped every round, so drift in the machine falls on both), and
# prints benchstat's comparison.
#
#   scripts/ab.sh OLD NEW ROUNDS PATTERN [test flags...]
#   scripts/ab.sh HEAD~1 HEAD 10 'UncontendedDo/impl=(perkey|locker)$'
#   scripts/ab.sh main my-branch 8 'SubmitThroughput/keys=16/' -test.benchtime 1000000x
set -euo pipefail

if (( $# < 4 )); then
	sed -n '2,9p' "$0" >&2
	exit 2
fi
old=$1 new=$2 rounds=$3 pattern=$4
shift 4

root=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/tree" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

build() { # build REV OUT
	git -C "$root" worktree add --detach --force "$work/tree" "$1" >/dev/null
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
