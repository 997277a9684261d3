#!/usr/bin/env bash
# Renders the /debug/perkey page in headless Chromium against examples/metrics
# under live load, with one key stuck (-stuck) and keys shaped like
# production ones (-real-keys: a UUID, an 80-character composite key, a
# 200-character key, a multibyte key), and checks the page as the browser
# left it after its script refreshed it: at least two refreshes; the stuck
# key listed first in the stuck table, with an age of at least the time it
# has been stuck, then the production-shaped keys, long ones shortened in
# the middle with the whole key in their title; the hot key listed with
# tasks pending; rates (on the first paint too), configuration and
# percentiles shown; every time in the one format (RFC 3339, UTC). At
# 1280 px and at 800 px wide, it measures the laid-out page (through
# scripts/layoutcheck, which adds a measuring script to the page): no two
# tables overlap, no table is wider than its section, no key cell sticks
# out of its table, and the page needs no horizontal scrolling. Exits
# non-zero on any failure.
#
# Usage: scripts/check-debug-page.sh   (installs Debian's chromium if missing)
#        CHECK_DEBUG_PAGE_SCREENSHOT=debug-page scripts/check-debug-page.sh
#        also saves screenshots of the page at both widths, as
#        debug-page-1280.png and debug-page-800.png.
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
proxy=""
cleanup() {
	for p in $pid $proxy; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/example" ./examples/metrics
go build -o "$work/layoutcheck" ./scripts/layoutcheck

# Port 0: the example picks a free port and prints its URLs, then the time
# from which it holds key "stuck" (read after the stuck task started).
"$work/example" -addr 127.0.0.1:0 -duration 60s -stuck -real-keys >"$work/example.log" 2>"$work/example.err" &
pid=$!
base=""
since=""
for _ in $(seq 100); do
	base="$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$work/example.log" | head -n1 || true)"
	since="$(sed -n 's/^key "stuck" held since //p' "$work/example.log" | head -n1)"
	[ -n "$base" ] && [ -n "$since" ] && break
	kill -0 "$pid" 2>/dev/null || { cat "$work/example.log" "$work/example.err" >&2; fail "the example exited"; }
	sleep 0.1
done
[ -n "$base" ] || fail "the example printed no URL"
for _ in $(seq 100); do
	grep -q '^holding 4 keys' "$work/example.log" && break
	sleep 0.1
done
grep -q '^holding 4 keys' "$work/example.log" || fail "the example printed no production-shaped keys"

"$work/layoutcheck" -target "$base" >"$work/layoutcheck.log" 2>&1 &
proxy=$!
measured=""
for _ in $(seq 100); do
	measured="$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$work/layoutcheck.log" | head -n1 || true)"
	[ -n "$measured" ] && break
	sleep 0.1
done
[ -n "$measured" ] || { cat "$work/layoutcheck.log" >&2; fail "layoutcheck printed no URL"; }
[ -n "$since" ] || fail "the example printed no time for the stuck key"
since_ns="$(date -d "$since" +%s%N)" || fail "cannot read the stuck key's time '$since'"
url="$base/debug/perkey"

# Let the stuck key age past the hot key's oldest queued task (50 ms at
# most), then take the time the page's ages must reach at least.
sleep 1
launched_ns="$(date +%s%N)"
stuck_for=$((launched_ns - since_ns))
echo "check-debug-page: rendering $url with $("$browser" --version 2>/dev/null || echo chromium); key \"stuck\" held since $since"

chromium_flags=(--headless --no-sandbox --disable-gpu --disable-quic
	--no-first-run --disable-background-networking --disable-component-update
	--disable-sync --disable-dev-shm-usage --user-data-dir="$work/profile")

# --virtual-time-budget lets the page's timers run (about five refreshes)
# before --dump-dom prints the DOM as the script left it.
timeout 90 "$browser" "${chromium_flags[@]}" \
	--virtual-time-budget=5000 --dump-dom "$url" >"$work/dom.html" 2>"$work/chromium.log" \
	|| { tail -n 20 "$work/chromium.log" >&2; fail "chromium failed"; }
done_ns="$(date +%s%N)"

# Without a budget the DOM is dumped before the first refresh: the first
# paint, which must have its rates already.
timeout 90 "$browser" "${chromium_flags[@]}" --dump-dom "$url" >"$work/first.html" 2>>"$work/chromium.log" \
	|| { tail -n 20 "$work/chromium.log" >&2; fail "chromium failed"; }
grep -q 'data-refreshes="0"' "$work/first.html" || fail "the first paint was refreshed already; cannot check it"
grep -q '<td data-json="rates.completed_per_second">[0-9]*\.[0-9]</td>' "$work/first.html" \
	|| { head -c 6000 "$work/first.html" >&2; fail "no completion rate on the first paint"; }

# The layout at both widths, measured in the browser (see scripts/layoutcheck).
for width in 1280 800; do
	timeout 90 "$browser" "${chromium_flags[@]}" --hide-scrollbars --window-size="$width,900" \
		--virtual-time-budget=5000 --dump-dom "$measured/debug/perkey" >"$work/layout-$width.html" 2>>"$work/chromium.log" \
		|| { tail -n 20 "$work/chromium.log" >&2; fail "chromium failed at $width px"; }
	layout="$(grep -o 'data-layout="[^"]*"' "$work/layout-$width.html" | head -n1 | sed 's/^data-layout="//; s/"$//')"
	[ -n "$layout" ] || { head -c 3000 "$work/layout-$width.html" >&2; fail "at $width px: the page was not measured (fewer than two refreshes?)"; }
	[ "$layout" = ok ] || fail "at $width px: $layout"
	echo "check-debug-page: $width px: no tables overlap, no table wider than its section, no key cell out of its table, no horizontal scrolling"
	if [ -n "${CHECK_DEBUG_PAGE_SCREENSHOT:-}" ]; then
		shot="${CHECK_DEBUG_PAGE_SCREENSHOT%.png}-$width.png"
		timeout 90 "$browser" "${chromium_flags[@]}" --hide-scrollbars \
			--virtual-time-budget=3000 --window-size="$width,1100" --screenshot="$shot" "$url" \
			>>"$work/chromium.log" 2>&1 \
			|| { tail -n 20 "$work/chromium.log" >&2; fail "chromium failed to take the screenshot"; }
		echo "check-debug-page: screenshot in $shot"
	fi
done

dom="$work/dom.html"
flat="$work/flat.html"
tr -d '\n' <"$dom" >"$flat"
show() { echo "--- DOM ---" >&2; head -c 6000 "$dom" >&2; echo >&2; }
# value FIELD: the text of the cell that shows Snapshot field FIELD.
value() { grep -o "data-json=\"$1\"[^>]*>[^<]*<" "$flat" | head -n1 | sed 's/.*>\([^<]*\)<$/\1/' || true; }

refreshes="$(grep -o 'data-refreshes="[0-9]*"' "$flat" | grep -o '[0-9]*' || true)"
[ -n "$refreshes" ] || { show; fail "no data-refreshes on <body>"; }
[ "$refreshes" -ge 2 ] || { show; fail "the page refreshed $refreshes times; want at least 2"; }
if grep -q 'id="status" class="stale"' "$flat"; then show; fail "the page reports a failed refresh"; fi

# The stuck table: its first row is the stuck key, aged at least stuck_for.
first="$(sed -n 's:.*<tbody id="oldest">\(.*\)</tbody>.*<tbody id="hot">.*:\1:p' "$flat" | grep -o '<tr[^>]*>.*' | sed 's:</tr>.*::')"
[ -n "$first" ] || { show; fail "no stuck table"; }
key="$(echo "$first" | sed -n 's:.*data-json="oldest_keys.0.key">\([^<]*\)<.*:\1:p')"
[ "$key" = "stuck" ] || { show; fail "the stuck table lists '$key' first; want stuck"; }
age_s="$(echo "$first" | sed -n 's:.*data-json="oldest_keys.0.age_seconds" data-seconds="\([0-9.e+-]*\)".*:\1:p')"
age="$(echo "$first" | sed -n 's:.*data-json="oldest_keys.0.age_seconds"[^>]*>\([^<]*\)<.*:\1:p')"
[ -n "$age_s" ] || { show; fail "the stuck key's row has no age"; }
age_ns="$(awk -v s="$age_s" 'BEGIN { printf "%.0f", s * 1e9 }')"
[ "$age_ns" -ge "$stuck_for" ] || { show; fail "the stuck key's age is ${age_ns} ns ($age); it has been stuck ${stuck_for} ns at least"; }
# And no older than the time from its start to the end of the rendering
# (plus 100 ms for the print after the task started).
[ "$age_ns" -le $((done_ns - since_ns + 100000000)) ] || { show; fail "the stuck key's age is ${age_ns} ns ($age); it was stuck $((done_ns - since_ns)) ns at most"; }
echo "$first" | grep -q '^<tr class="slow">' || { show; fail "the stuck key, held past the slow-task threshold, is not marked slow"; }

submitted="$(value stats.submitted)"
[ -n "$submitted" ] && [ "$submitted" -gt 0 ] || { show; fail "no submitted tasks shown (got '${submitted}')"; }
rate="$(value rates.completed_per_second)"
[[ "$rate" =~ ^[0-9]+\.[0-9]$ ]] || { show; fail "no completion rate (got '$rate')"; }
workers="$(value settings.workers)"
[ "$workers" = 16 ] || { show; fail "the configuration shows $workers workers; want 16"; }
p99="$(value latency.wait_seconds.2)"
[ -n "$p99" ] || { show; fail "no p99 wait: the latency source is not shown"; }

# The production-shaped keys follow "stuck" in the stuck table: a short
# one as it is, long ones shortened in the middle with the whole key in
# their title.
oldest="$(sed -n 's:.*<tbody id="oldest">\(.*\)</tbody>.*<tbody id="hot">.*:\1:p' "$flat")"
for k in "3f2b8c1e-9d4a-4e7b-b1f0-2c6d8e9a0b17" "注文:東京都渋谷区:ユーザー:山田太郎:カート"; do
	echo "$oldest" | grep -qF ">$k</td>" || { show; fail "the stuck table does not show key $k"; }
done
for k in "tenant:acme-industries-intl:user:3f2b8c1e-9d4a-4e7b-b1f0-2c6d8e9a0b17:cart:item4" \
	"$(printf 'session/0123456789abcdef/%.0s' 1 2 3 4 5 6 7 8)"; do
	echo "$oldest" | grep -qF "title=\"$k\">" || { show; fail "the stuck table has no title with the whole key $k"; }
	echo "$oldest" | grep -qF "title=\"$k\">$k<" && { show; fail "the stuck table shows the long key $k whole"; }
done

[ "$(value hot_keys.0.key)" = hot ] || { show; fail "the hot key is not listed first among the hot keys"; }
hot="$(value hot_keys.0.pending)"
[ -n "$hot" ] && [ "$hot" -gt 0 ] || { show; fail "the hot key is not listed with pending tasks"; }

# One format for every time, as the server rendered it after the refreshes.
for field in time settings.started; do
	[[ "$(value "$field")" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$ ]] \
		|| { show; fail "$field is shown as '$(value "$field")'; want RFC 3339 in UTC"; }
done

echo "check-debug-page: OK: $refreshes refreshes; production-shaped keys shown, long ones shortened with the whole key on hover; stuck first, aged $age (stuck $((stuck_for / 1000000))–$(((done_ns - since_ns) / 1000000)) ms);" \
	"$submitted submitted, ${rate} completed/s (rates on the first paint too), p99 wait $p99; hot key pending $hot"
