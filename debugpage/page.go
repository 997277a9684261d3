package debugpage

import (
	"html/template"
	"strconv"
	"time"
)

// timeLayout is the one format of every time the page shows: RFC 3339 in
// UTC, to the second.
const timeLayout = "2006-01-02T15:04:05Z"

// pageData is what the page template renders: the Snapshot, and what the
// tables derive from it.
type pageData struct {
	Snapshot
	N int // keys asked for
}

// hotRow is a row of the hot keys table.
type hotRow struct {
	KeyLoad
	Bar   int  // the bar's width, in percent of the per-key cap or of the busiest key
	AtCap bool // Pending has reached the per-key cap
}

// HotRows are the hot keys with their bars.
func (p pageData) HotRows() []hotRow {
	most := p.Settings.MaxQueuePerKey
	if most == 0 && len(p.HotKeys) > 0 {
		most = p.HotKeys[0].Pending
	}
	rows := make([]hotRow, len(p.HotKeys))
	for i, k := range p.HotKeys {
		rows[i] = hotRow{KeyLoad: k, AtCap: p.Settings.MaxQueuePerKey > 0 && k.Pending >= p.Settings.MaxQueuePerKey}
		if most > 0 {
			rows[i].Bar = min(100, 100*k.Pending/most)
		}
	}
	return rows
}

// Slow reports whether a key's work is older than the slow-task threshold.
func (p pageData) Slow(k KeyLoad) bool {
	return p.Settings.SlowTask > 0 && k.Age >= p.Settings.SlowTask
}

// quantileRow is a row of the latency table.
type quantileRow struct {
	Q         string // "p50"
	I         int    // index into Latency.Wait and Latency.Run
	Wait, Run time.Duration
	HasWait   bool
	HasRun    bool
}

// QuantileRows are the latency table's rows; nil without a LatencySource.
func (p pageData) QuantileRows() []quantileRow {
	if p.Latency == nil {
		return nil
	}
	l := p.Latency
	rows := make([]quantileRow, len(l.Quantiles))
	for i, q := range l.Quantiles {
		rows[i] = quantileRow{Q: "p" + strconv.FormatFloat(100*q, 'f', -1, 64), I: i}
		if i < len(l.Wait) {
			rows[i].Wait, rows[i].HasWait = l.Wait[i], true
		}
		if i < len(l.Run) {
			rows[i].Run, rows[i].HasRun = l.Run[i], true
		}
	}
	return rows
}

// shortKeyLen is the most runes of a key the tables show.
const shortKeyLen = 48

// shortKey shortens k in the middle to shortKeyLen runes, with an
// ellipsis: the start and the end of a key are what tell keys apart
// (a prefix names the kind, a suffix the id).
func shortKey(k string) string {
	r := []rune(k)
	if len(r) <= shortKeyLen {
		return k
	}
	head := (shortKeyLen - 1) / 2
	tail := shortKeyLen - 1 - head
	return string(r[:head]) + "…" + string(r[len(r)-tail:])
}

// formatTime formats t in timeLayout.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "unknown"
	}
	return t.UTC().Format(timeLayout)
}

// formatDuration rounds d to about four significant digits: 850µs,
// 12.34ms, 4.012s, 3m5s.
func formatDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(10 * time.Microsecond).String()
	case d < time.Minute:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

var funcs = template.FuncMap{
	"clock": formatTime,
	"dur":   formatDuration,
	"rate":  func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) },
	"secs":  func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) },
	"short": shortKey,
}

// page is rendered on the server, complete without script: every value
// cell names the field of the JSON it shows in data-json (and durations
// their seconds, as in the JSON, in data-seconds). A key longer than
// shortKeyLen is shown shortened in the middle, whole in its title (on
// hover); a key cell wraps anywhere, so that no key widens its table past
// its section. Its script fetches the same URL every second and
// swaps in the new <main id="live">, so a refreshed page is formatted by
// the same template as the first; it sets data-refreshes on <body> to how
// many refreshes have succeeded.
var page = template.Must(template.New("page").Funcs(funcs).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>/debug/perkey</title>
<style>
body { font-family: sans-serif; margin: 1em 2em; }
h1 { margin-bottom: 0.2em; }
h2 { font-size: 1.1em; margin: 1em 0 0.3em; }
.grid { display: flex; flex-wrap: wrap; gap: 0 3em; align-items: flex-start; }
.grid section { max-width: 36em; min-width: 0; }
table { border-collapse: collapse; margin-bottom: 0.5em; max-width: 100%; }
th, td { padding: 0.15em 0.8em; text-align: right; white-space: nowrap; }
th { border-bottom: 1px solid #999; }
td.key, th.key { text-align: left; font-family: monospace; white-space: normal; overflow-wrap: anywhere; min-width: 8em; }
td.name, th.name { text-align: left; }
td.bar { width: 10em; text-align: left; }
td.bar span { display: inline-block; height: 0.8em; background: #36c; }
tr.atcap td.bar span { background: #c33; }
tr.slow td { color: #c33; font-weight: bold; }
.note { color: #666; font-size: 90%; margin-top: 0; }
#status.stale { color: #c33; font-weight: bold; }
</style>
</head>
<body data-refreshes="0">
<h1>/debug/perkey</h1>
<p class="note">refreshed every second<span id="status"></span> · <a href="?format=json&amp;n={{.N}}">JSON</a> · times in UTC</p>
<main id="live">
<p>as of <span data-json="time">{{clock .Time}}</span> · up <span data-json="uptime_seconds" data-seconds="{{secs .Uptime}}">{{dur .Uptime}}</span> · started <span data-json="settings.started">{{clock .Settings.Started}}</span></p>
<div class="grid">
<section>
<h2>Configuration</h2>
<table>
<tr><td class="name">workers</td><td data-json="settings.workers">{{.Settings.Workers}}</td></tr>
<tr><td class="name">max queue per key</td><td data-json="settings.max_queue_per_key">{{with .Settings.MaxQueuePerKey}}{{.}}{{else}}no cap{{end}}</td></tr>
<tr><td class="name">max pending</td><td data-json="settings.max_pending">{{with .Settings.MaxPending}}{{.}}{{else}}no cap{{end}}</td></tr>
<tr><td class="name">throughput (tasks in a row)</td><td data-json="settings.throughput">{{.Settings.Throughput}}</td></tr>
<tr><td class="name">stripes</td><td data-json="settings.stripes">{{with .Settings.Stripes}}{{.}}{{else}}none (a mailbox per key){{end}}</td></tr>
<tr><td class="name">policy</td><td data-json="settings.policy">{{.Settings.Policy}}</td></tr>
<tr><td class="name">reentrant</td><td data-json="settings.reentrant">{{if .Settings.Reentrant}}yes{{else}}no{{end}}</td></tr>
<tr><td class="name">slow-task warning</td><td data-json="settings.slow_task_seconds" data-seconds="{{secs .Settings.SlowTask}}">{{with .Settings.SlowTask}}after {{dur .}}{{else}}off{{end}}</td></tr>
<tr><td class="name">ages tracked</td><td data-json="settings.ages">{{if .Settings.Ages}}yes{{else}}no{{end}}</td></tr>
</table>
</section>

<section>
<h2>Now</h2>
<table>
<tr><td class="name">active keys</td><td data-json="stats.active_keys">{{.Stats.ActiveKeys}}</td></tr>
<tr><td class="name">queued</td><td data-json="stats.queued">{{.Stats.Queued}}</td></tr>
<tr><td class="name">running</td><td data-json="stats.running">{{.Stats.Running}}</td></tr>
</table>
<p class="note">Running counts tasks on the {{.Settings.Workers}} workers.</p>
</section>

<section>
<h2>Since start</h2>
<table>
<tr><th class="name">tasks</th><th>total</th><th>per second</th></tr>
<tr><td class="name">submitted</td><td data-json="stats.submitted">{{.Stats.Submitted}}</td><td data-json="rates.submitted_per_second">{{if .Rates.Window}}{{rate .Rates.Submitted}}{{end}}</td></tr>
<tr><td class="name">completed</td><td data-json="stats.completed">{{.Stats.Completed}}</td><td data-json="rates.completed_per_second">{{if .Rates.Window}}{{rate .Rates.Completed}}{{end}}</td></tr>
<tr><td class="name">rejected</td><td data-json="stats.rejected">{{.Stats.Rejected}}</td><td data-json="rates.rejected_per_second">{{if .Rates.Window}}{{rate .Rates.Rejected}}{{end}}</td></tr>
<tr><td class="name">canceled</td><td data-json="stats.canceled">{{.Stats.Canceled}}</td><td data-json="rates.canceled_per_second">{{if .Rates.Window}}{{rate .Rates.Canceled}}{{end}}</td></tr>
<tr><td class="name">panicked</td><td data-json="stats.panicked">{{.Stats.Panicked}}</td><td data-json="rates.panicked_per_second">{{if .Rates.Window}}{{rate .Rates.Panicked}}{{end}}</td></tr>
<tr><td class="name">slow</td><td data-json="stats.slow">{{.Stats.Slow}}</td><td data-json="rates.slow_per_second">{{if .Rates.Window}}{{rate .Rates.Slow}}{{end}}</td></tr>
</table>
<p class="note">{{if .Rates.Window}}Per second over the last <span data-json="rates.window_seconds" data-seconds="{{secs .Rates.Window}}">{{dur .Rates.Window}}</span>, from the server's samples: the same window for every viewer.{{else}}No rates yet: the executor's start is unknown, and the server has taken one sample.{{end}}
Slow: holds longer than the slow-task warning's threshold.</p>
</section>

<section>
<h2>Latency</h2>
{{- with .QuantileRows}}
<table>
<tr><th class="name"></th><th>wait</th><th>run</th></tr>
{{- range .}}
<tr><td class="name" data-json="latency.quantiles.{{.I}}">{{.Q}}</td><td{{if .HasWait}} data-json="latency.wait_seconds.{{.I}}" data-seconds="{{secs .Wait}}"{{end}}>{{if .HasWait}}{{dur .Wait}}{{else}}–{{end}}</td><td{{if .HasRun}} data-json="latency.run_seconds.{{.I}}" data-seconds="{{secs .Run}}"{{end}}>{{if .HasRun}}{{dur .Run}}{{else}}–{{end}}</td></tr>
{{- end}}
</table>
<p class="note">Wait: from acceptance to start. Run: how long fn ran.<br>
Since the latency source began, estimated from its histogram buckets.</p>
{{- else}}
<p class="note" id="no-latency">No latency source: the executor keeps no histograms.<br>
Pass the metrics.Collector it observes to debugpage.WithLatency.</p>
{{- end}}
</section>
</div>

<div class="grid">
<section>
<h2>Oldest work (stuck keys)</h2>
<table>
<thead><tr><th class="key">key</th><th>age</th><th>held</th><th>oldest wait</th><th>pending</th></tr></thead>
<tbody id="oldest">
{{- range $i, $k := .OldestKeys}}
<tr{{if $.Slow $k}} class="slow"{{end}}><td class="key" data-json="oldest_keys.{{$i}}.key"{{if ne (short $k.Key) $k.Key}} title="{{$k.Key}}"{{end}}>{{short $k.Key}}</td><td class="age" data-json="oldest_keys.{{$i}}.age_seconds" data-seconds="{{secs $k.Age}}">{{dur $k.Age}}</td><td data-json="oldest_keys.{{$i}}.held_seconds" data-seconds="{{secs $k.Held}}">{{if $k.Held}}{{dur $k.Held}}{{else}}–{{end}}</td><td data-json="oldest_keys.{{$i}}.oldest_wait_seconds" data-seconds="{{secs $k.OldestWait}}">{{if $k.OldestWait}}{{dur $k.OldestWait}}{{else}}–{{end}}</td><td data-json="oldest_keys.{{$i}}.pending">{{$k.Pending}}</td></tr>
{{- else}}
<tr><td class="key">{{if .Settings.Ages}}(none){{else}}(ages not tracked){{end}}</td><td></td><td></td><td></td><td></td></tr>
{{- end}}
</tbody>
</table>
<p class="note">{{if .Settings.Ages -}}
Age is the older of held (how long the running task, or the group holding the key, has run) and oldest wait (how long its oldest queued task has waited).
{{- with .Settings.SlowTask}} Keys older than {{dur .}} are in red.{{end}}
{{- else -}}
Ages are tracked with an Observer (such as a metrics.Collector), a policy that reads queue age, or executor.WithSlowTaskWarning.
{{- end}}</p>
</section>

<section>
<h2>Hot keys</h2>
<table>
<thead><tr><th class="key">key</th><th>pending</th><th>held</th><th>oldest wait</th><th></th></tr></thead>
<tbody id="hot">
{{- range $i, $k := .HotRows}}
<tr{{if $k.AtCap}} class="atcap"{{end}}><td class="key" data-json="hot_keys.{{$i}}.key"{{if ne (short $k.Key) $k.Key}} title="{{$k.Key}}"{{end}}>{{short $k.Key}}</td><td data-json="hot_keys.{{$i}}.pending">{{$k.Pending}}</td><td data-json="hot_keys.{{$i}}.held_seconds" data-seconds="{{secs $k.Held}}">{{if $k.Held}}{{dur $k.Held}}{{else}}–{{end}}</td><td data-json="hot_keys.{{$i}}.oldest_wait_seconds" data-seconds="{{secs $k.OldestWait}}">{{if $k.OldestWait}}{{dur $k.OldestWait}}{{else}}–{{end}}</td><td class="bar"><span style="width: {{$k.Bar}}%"></span></td></tr>
{{- else}}
<tr><td class="key">(none)</td><td></td><td></td><td></td><td></td></tr>
{{- end}}
</tbody>
</table>
<p class="note">Pending is queued + running. The top {{.N}} keys by pending tasks; ask for more with ?n=.
{{- with .Settings.MaxQueuePerKey}} Bars are of the per-key cap, {{.}}; keys at the cap are in red.{{end}}</p>
</section>
</div>
</main>

<script>
(function () {
	"use strict";
	const status = document.getElementById("status");
	let refreshes = 0;

	async function refresh() {
		try {
			const r = await fetch(location.href, {cache: "no-store"});
			if (!r.ok) throw new Error(r.status + " " + r.statusText);
			const doc = new DOMParser().parseFromString(await r.text(), "text/html");
			const live = doc.getElementById("live");
			if (!live) throw new Error("no live section in the answer");
			document.getElementById("live").replaceWith(document.adoptNode(live));
			status.textContent = "";
			status.className = "";
			document.body.dataset.refreshes = ++refreshes;
		} catch (e) {
			status.textContent = " · refresh failed: " + e.message;
			status.className = "stale";
		}
		setTimeout(refresh, 1000);
	}
	setTimeout(refresh, 1000);
})();
</script>
</body>
</html>
`))
