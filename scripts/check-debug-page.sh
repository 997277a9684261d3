#!/usr/bin/env bash
# Renders the /debug/perkey page in headless Chromium against examples/metrics
# under live load, and checks that the page's script refreshed it with live
# numbers: at least two refreshes, tasks submitted, and the hot key listed
# with tasks pending. Exits non-zero on any failure.
#
# Usage: scripts/check-debug-page.sh   (installs Debian's chromium if missing)
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "check-debug-page: FAIL: $*" >&2; exit 1; }

browser="$(command -v chromium || command -v chromium-browser || true)"
if [ -z "$browser" ]; then
	echo "check-debug-page: installing chromium"
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	$sudo apt-get update -qq >/dev/null
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null
	browser="$(command -v chromium)" || fail "chromium did not install"
fi

work="$(mktemp -d)"
pid=""
cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/example" ./examples/metrics

# Port 0: the example picks a free port and prints its URLs.
"$work/example" -addr 127.0.0.1:0 -duration 60s >"$work/example.log" 2>&1 &
pid=$!
base=""
for _ in $(seq 100); do
	base="$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$work/example.log" | head -n1 || true)"
	[ -n "$base" ] && break
	kill -0 "$pid" 2>/dev/null || { cat "$work/example.log" >&2; fail "the example exited"; }
	sleep 0.1
done
[ -n "$base" ] || fail "the example printed no URL"
url="$base/debug/perkey"
echo "check-debug-page: rendering $url with $("$browser" --version 2>/dev/null || echo chromium)"

# --virtual-time-budget lets the page's timers run (about five refreshes)
# before --dump-dom prints the DOM as the script left it.
timeout 90 "$browser" --headless --no-sandbox --disable-gpu --disable-quic \
	--no-first-run --disable-background-networking --disable-component-update \
	--disable-sync --disable-dev-shm-usage --user-data-dir="$work/profile" \
	--virtual-time-budget=5000 --dump-dom "$url" >"$work/dom.html" 2>"$work/chromium.log" \
	|| { tail -n 20 "$work/chromium.log" >&2; fail "chromium failed"; }

dom="$work/dom.html"
show() { echo "--- DOM ---" >&2; head -c 4000 "$dom" >&2; echo >&2; }

refreshes="$(grep -o 'data-refreshes="[0-9]*"' "$dom" | grep -o '[0-9]*' || true)"
[ -n "$refreshes" ] || { show; fail "no data-refreshes on <body>"; }
[ "$refreshes" -ge 2 ] || { show; fail "the page refreshed $refreshes times; want at least 2"; }

submitted="$(grep -o '<td id="Submitted">[0-9]*</td>' "$dom" | grep -o '[0-9]\+' || true)"
[ -n "$submitted" ] && [ "$submitted" -gt 0 ] || { show; fail "no submitted tasks shown (got '${submitted}')"; }

rate="$(grep -o '<td id="Completed-rate">[0-9.]*</td>' "$dom" | grep -o '[0-9.]\+' || true)"
[ -n "$rate" ] || { show; fail "no completion rate: the script did not compute one"; }

hot="$(grep -o '<td class="key">hot</td><td>[0-9]*</td>' "$dom" | grep -o '<td>[0-9]*' | grep -o '[0-9]\+' || true)"
[ -n "$hot" ] && [ "$hot" -gt 0 ] || { show; fail "the hot key is not listed with pending tasks"; }

if grep -q 'id="status" class="stale"' "$dom"; then show; fail "the page reports a failed refresh"; fi

echo "check-debug-page: OK: $refreshes refreshes, $submitted submitted, ${rate} completed/s, hot key pending $hot"
