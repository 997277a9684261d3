package debugpage

import "html/template"

// pageData is what the page template renders.
type pageData struct {
	Snapshot
	N int // hot keys asked for; the script asks for as many
}

// page is rendered with the current Snapshot, so it is complete without
// script; its script then fetches the JSON from the same URL every second
// and updates the numbers in place, setting data-refreshes on <body> to how
// many refreshes have succeeded.
var page = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>/debug/perkey</title>
<style>
body { font-family: sans-serif; margin: 1em 2em; }
table { border-collapse: collapse; margin-bottom: 1.5em; }
th, td { padding: 0.15em 0.8em; text-align: right; }
th { border-bottom: 1px solid #999; }
td.key, th.key { text-align: left; font-family: monospace; max-width: 40em; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
td.bar { width: 15em; text-align: left; }
td.bar span { display: inline-block; height: 0.8em; background: #c33; }
.note { color: #666; font-size: 90%; }
#status.stale { color: #c33; font-weight: bold; }
</style>
</head>
<body data-refreshes="0">
<h1>/debug/perkey</h1>
<p class="note"><span id="status">as of {{.Time.Format "15:04:05"}}</span> ·
refreshed every second · <a href="?format=json&amp;n={{.N}}">JSON</a></p>

<h2>Now</h2>
<table>
<tr><th class="key">gauge</th><th>value</th></tr>
<tr><td class="key">active keys</td><td id="ActiveKeys">{{.Stats.ActiveKeys}}</td></tr>
<tr><td class="key">queued</td><td id="Queued">{{.Stats.Queued}}</td></tr>
<tr><td class="key">running</td><td id="Running">{{.Stats.Running}}</td></tr>
</table>

<h2>Since start</h2>
<table>
<tr><th class="key">counter</th><th>total</th><th>per second</th></tr>
<tr><td class="key">submitted</td><td id="Submitted">{{.Stats.Submitted}}</td><td id="Submitted-rate"></td></tr>
<tr><td class="key">completed</td><td id="Completed">{{.Stats.Completed}}</td><td id="Completed-rate"></td></tr>
<tr><td class="key">rejected</td><td id="Rejected">{{.Stats.Rejected}}</td><td id="Rejected-rate"></td></tr>
<tr><td class="key">canceled</td><td id="Canceled">{{.Stats.Canceled}}</td><td id="Canceled-rate"></td></tr>
<tr><td class="key">panicked</td><td id="Panicked">{{.Stats.Panicked}}</td><td id="Panicked-rate"></td></tr>
</table>

<h2>Hot keys</h2>
<table>
<thead><tr><th class="key">key</th><th>pending</th><th></th></tr></thead>
<tbody id="hot">
{{- range .HotKeys}}
<tr><td class="key">{{.Key}}</td><td>{{.Pending}}</td><td class="bar"></td></tr>
{{- else}}
<tr><td class="key">(none)</td><td></td><td></td></tr>
{{- end}}
</tbody>
</table>
<p class="note">Pending is queued + running. The top {{.N}} keys by pending tasks; ask for more with ?n=.</p>

<script>
(function () {
	"use strict";
	const n = {{.N}};
	const stats = ["ActiveKeys", "Queued", "Running", "Submitted", "Completed", "Rejected", "Canceled", "Panicked"];
	const counters = ["Submitted", "Completed", "Rejected", "Canceled", "Panicked"];
	const status = document.getElementById("status");
	let prev = null;
	let refreshes = 0;

	function cell(text, cls) {
		const td = document.createElement("td");
		td.textContent = text;
		if (cls) td.className = cls;
		return td;
	}

	function render(s) {
		for (const f of stats) document.getElementById(f).textContent = s.Stats[f];
		if (prev) {
			const dt = (Date.parse(s.Time) - Date.parse(prev.Time)) / 1000;
			for (const f of counters) {
				document.getElementById(f + "-rate").textContent =
					dt > 0 ? ((s.Stats[f] - prev.Stats[f]) / dt).toFixed(1) : "";
			}
		}
		const hot = s.HotKeys || [];
		const most = hot.length ? hot[0].Pending : 1;
		const rows = hot.map(function (k) {
			const tr = document.createElement("tr");
			tr.append(cell(k.Key, "key"), cell(k.Pending));
			const bar = document.createElement("span");
			bar.style.width = (100 * k.Pending / most) + "%";
			const td = cell("", "bar");
			td.append(bar);
			tr.append(td);
			return tr;
		});
		if (!rows.length) {
			const tr = document.createElement("tr");
			tr.append(cell("(none)", "key"), cell(""), cell(""));
			rows.push(tr);
		}
		document.getElementById("hot").replaceChildren(...rows);
		status.textContent = "as of " + new Date(s.Time).toLocaleTimeString();
		status.className = "";
	}

	async function refresh() {
		try {
			const r = await fetch("?format=json&n=" + n, {cache: "no-store"});
			if (!r.ok) throw new Error(r.status + " " + r.statusText);
			const s = await r.json();
			render(s);
			prev = s;
			document.body.dataset.refreshes = ++refreshes;
		} catch (e) {
			status.textContent = "refresh failed: " + e.message;
			status.className = "stale";
		}
		setTimeout(refresh, 1000);
	}
	refresh();
})();
</script>
</body>
</html>
`))
