#!/usr/bin/env bash
# Checks every module of go.work: gofmt on every tracked .go file, then go vet
# and staticcheck (pinned, installed if missing). Exits non-zero on any
# finding. Run by `make lint` and by .ci/run.
#
# Usage: scripts/lint.sh
set -euo pipefail
cd "$(dirname "$0")/.."

STATICCHECK_VERSION=v0.8.2

bin="$(go env GOBIN)"
[ -n "$bin" ] || bin="$(go env GOPATH)/bin"
staticcheck="$bin/staticcheck"
"$staticcheck" -version 2>/dev/null | grep -q "(${STATICCHECK_VERSION#v})" \
	|| go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"

echo "== gofmt"
unformatted="$(gofmt -l $(git ls-files '*.go'))"
if [ -n "$unformatted" ]; then
	echo "gofmt needed on:"; echo "$unformatted"; exit 1
fi

# Every module of go.work as DIR/...: ./... at the root stops at the nested
# modules. A go.mod that go.work does not list would be left out of every
# check and of the tests, so it fails here.
echo "== modules"
modules="$(go list -f '{{.Dir}}/...' -m)"
echo "$modules"
gomods="$(git ls-files --cached --others --exclude-standard '*go.mod')"
if [ "$(echo "$gomods" | wc -l)" -ne "$(echo "$modules" | wc -l)" ]; then
	echo "go.work does not list every go.mod:"; echo "$gomods"; exit 1
fi

echo "== go vet"
go vet $modules

echo "== staticcheck $("$staticcheck" -version)"
"$staticcheck" $modules
