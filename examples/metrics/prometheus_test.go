package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perkey/perkey/debugpage"
)

// The end-to-end timeline of TestPrometheus, from the example's start.
const (
	e2eData     = 30 * time.Second // data gathered before the dashboard is queried
	e2eStuckFor = 40 * time.Second // key "stuck" is given back then
	e2eDeadline = 100 * time.Second
)

// TestPrometheus runs the example with -stuck under a real Prometheus that
// scrapes it every second and evaluates alerts.yml every second. After
// about 30 s it queries every expression of the Grafana dashboard through
// the HTTP API: each must parse and return data. PerkeyKeyStuck must be
// firing for the example's instance by then, with the stuck key's age;
// once the example gives key "stuck" back (at 40 s) the alert must resolve
// while the hot key stays at its cap: it fired for the stuck key, not the
// hot one. PerkeyHotKeyAtCap, its "for" shortened from 1m to 5s in the
// copy of the rules Prometheus loads, must be firing too.
//
// It runs only with PERKEY_E2E_PROMETHEUS=1 and the prometheus binary on
// PATH (scripts/check-prometheus.sh installs it and sets the variable).
func TestPrometheus(t *testing.T) {
	if os.Getenv("PERKEY_E2E_PROMETHEUS") != "1" {
		t.Skip("end-to-end check against a real Prometheus: run scripts/check-prometheus.sh")
	}
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("PERKEY_E2E_PROMETHEUS=1 but no prometheus on PATH")
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), e2eDeadline)
	defer cancel()

	// The example, with its status lines on a pipe.
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, config{addr: "127.0.0.1:0", keys: 100_000, stuck: true, stuckFor: e2eStuckFor, logs: io.Discard}, pw)
		pw.Close()
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the example: %v", err)
		}
	}()
	lines := bufio.NewScanner(pr)
	if !lines.Scan() {
		t.Fatal("the example printed nothing")
	}
	target := regexp.MustCompile(`http://([0-9.:]+)/metrics`).FindStringSubmatch(lines.Text())
	if target == nil {
		t.Fatalf("no URL in %q", lines.Text())
	}
	go io.Copy(io.Discard, pr) // the status lines
	example := "http://" + target[1]

	prom := startPrometheus(t, ctx, bin, target[1])
	t.Logf("%s: %s scrapes %s every second", since(start), prom, target[1])

	// Wait for the first scrape, then for e2eData of data.
	waitFor(t, ctx, "the first scrape", func() (bool, string) {
		v, err := query(ctx, prom, `up{job="perkey"}`)
		if err != nil {
			return false, err.Error()
		}
		return len(v) == 1 && v[0].value == 1, fmt.Sprint(v)
	})
	t.Logf("%s: first scrape done", since(start))
	select {
	case <-time.After(time.Until(start.Add(e2eData))):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}

	// Every expression of the dashboard parses and returns data.
	exprs := dashboardExprs(t)
	empty := 0
	for _, e := range exprs {
		q := strings.NewReplacer(`$job`, `perkey`, `$__rate_interval`, `10s`).Replace(e)
		v, err := query(ctx, prom, q)
		switch {
		case err != nil:
			t.Errorf("dashboard expression %s: %v", q, err)
			empty++
		case len(v) == 0:
			t.Errorf("dashboard expression %s: no data", q)
			empty++
		default:
			t.Logf("  %-120s %s", q, v)
		}
	}
	t.Logf("%s: %d dashboard expressions queried, %d without data", since(start), len(exprs), empty)

	// PerkeyKeyStuck fires for the example, with the stuck key's age: the
	// debug page names the key whose hold is that old.
	var stuckAlert alert
	waitFor(t, ctx, "PerkeyKeyStuck firing", func() (bool, string) {
		as, err := alerts(ctx, prom)
		if err != nil {
			return false, err.Error()
		}
		for _, a := range as {
			if a.Labels["alertname"] == "PerkeyKeyStuck" && a.State == "firing" && a.Labels["instance"] == target[1] {
				stuckAlert = a
				return true, ""
			}
		}
		return false, fmt.Sprint(as)
	})
	value, _ := strconv.ParseFloat(stuckAlert.Value, 64)
	var snap debugpage.Snapshot
	if err := json.Unmarshal([]byte(fetch(t, example+"/debug/perkey/json")), &snap); err != nil {
		t.Fatalf("the debug page's JSON: %v", err)
	}
	if len(snap.OldestKeys) == 0 || snap.OldestKeys[0].Key != "stuck" {
		t.Fatalf("the debug page's oldest key: got %+v; want stuck", snap.OldestKeys)
	}
	held := snap.OldestKeys[0].Held.Seconds()
	if value < 5 || value > held+0.5 || value < held-5 {
		t.Errorf("PerkeyKeyStuck's value %.3f s: want the stuck key's hold, %.3f s on the debug page (at most a few scrapes older)", value, held)
	}
	for _, k := range snap.HotKeys {
		if k.Key == "hot" && k.Held.Seconds() >= 5 {
			t.Errorf("the hot key is held %v: too long for this check", k.Held)
		}
	}
	t.Logf("%s: PerkeyKeyStuck firing for %s since %s, value %.1f s; the debug page: key stuck held %.1f s", since(start),
		stuckAlert.Labels["instance"], stuckAlert.ActiveAt.Sub(start).Round(100*time.Millisecond), value, held)

	waitFor(t, ctx, "PerkeyHotKeyAtCap firing (for: shortened to 5s)", func() (bool, string) {
		as, err := alerts(ctx, prom)
		if err != nil {
			return false, err.Error()
		}
		for _, a := range as {
			if a.Labels["alertname"] == "PerkeyHotKeyAtCap" && a.State == "firing" {
				return true, ""
			}
		}
		return false, fmt.Sprint(as)
	})
	t.Logf("%s: PerkeyHotKeyAtCap firing", since(start))

	// Key "stuck" is given back at e2eStuckFor: PerkeyKeyStuck resolves while
	// the hot key stays at its cap.
	waitFor(t, ctx, "PerkeyKeyStuck resolved after key stuck was given back", func() (bool, string) {
		if time.Since(start) < e2eStuckFor {
			return false, "key stuck not given back yet"
		}
		as, err := alerts(ctx, prom)
		if err != nil {
			return false, err.Error()
		}
		for _, a := range as {
			if a.Labels["alertname"] == "PerkeyKeyStuck" {
				return false, fmt.Sprint(a)
			}
		}
		return true, ""
	})
	v, err := query(ctx, prom, `max_over_time(perkey_key_pending_max[3s]) >= perkey_key_pending_limit`)
	if err != nil || len(v) != 1 {
		t.Errorf("the hot key at its cap once PerkeyKeyStuck resolved: got %v, %v", v, err)
	}
	hold, err := query(ctx, prom, `perkey_oldest_hold_seconds`)
	if err != nil || len(hold) != 1 || hold[0].value >= 5 {
		t.Errorf("perkey_oldest_hold_seconds once key stuck is given back: got %v, %v; want below 5", hold, err)
	}
	t.Logf("%s: PerkeyKeyStuck resolved; the hot key at its cap (%v); oldest hold now %v s", since(start), v, hold)
}

func since(start time.Time) string { return time.Since(start).Round(100 * time.Millisecond).String() }

// startPrometheus starts bin on a free loopback port, scraping target every
// second and evaluating alerts.yml (PerkeyHotKeyAtCap's "for" shortened)
// every second, and returns its URL once it is ready. It is stopped when
// the test ends.
func startPrometheus(t *testing.T, ctx context.Context, bin, target string) string {
	t.Helper()
	dir := t.TempDir()
	rules, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	short := strings.Replace(string(rules), "for: 1m", "for: 5s", 1)
	if short == string(rules) {
		t.Fatal(`alerts.yml has no "for: 1m" to shorten`)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts.yml"), []byte(short), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - alerts.yml
scrape_configs:
  - job_name: perkey
    static_configs:
      - targets: [%q]
`, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	for attempt := 1; ; attempt++ {
		port := freePort(t)
		addr := "127.0.0.1:" + strconv.Itoa(port)
		logPath := filepath.Join(dir, "prometheus.log")
		logFile, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin,
			"--config.file="+filepath.Join(dir, "prometheus.yml"),
			"--storage.tsdb.path="+filepath.Join(dir, "data"),
			"--web.listen-address="+addr,
			"--log.level=warn")
		cmd.Stdout, cmd.Stderr = logFile, logFile
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		t.Cleanup(func() {
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
			logFile.Close()
			if t.Failed() {
				if b, err := os.ReadFile(logPath); err == nil {
					t.Logf("prometheus's log:\n%s", b)
				}
			}
		})
		url := "http://" + addr
		ready := time.NewTimer(20 * time.Second)
		for {
			resp, err := http.Get(url + "/-/ready")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					ready.Stop()
					return url
				}
			}
			select {
			case <-exited:
				if attempt < 3 {
					t.Logf("prometheus exited at start (port %d taken?); trying another port", port)
				} else {
					t.Fatal("prometheus exited at start three times")
				}
			case <-ready.C:
				t.Fatal("prometheus not ready after 20 s")
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(100 * time.Millisecond):
				continue
			}
			break
		}
		ready.Stop()
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitFor polls cond every 250 ms until it holds, failing the test with
// cond's last word if ctx ends first.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() (bool, string)) {
	t.Helper()
	for {
		ok, last := cond()
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not seen before the deadline; last: %s", what, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// sample is one series of an instant vector: its labels and value.
type sample struct {
	labels map[string]string
	value  float64
}

func (s sample) String() string {
	return fmt.Sprintf("%v=%g", s.labels, s.value)
}

// query runs an instant query through Prometheus's HTTP API.
func query(ctx context.Context, prom, q string) ([]sample, error) {
	var res struct {
		Status    string `json:"status"`
		Error     string `json:"error"`
		ErrorType string `json:"errorType"`
		Data      struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := apiGet(ctx, prom+"/api/v1/query?query="+url.QueryEscape(q), &res); err != nil {
		return nil, err
	}
	if res.Status != "success" {
		return nil, fmt.Errorf("%s: %s", res.ErrorType, res.Error)
	}
	if res.Data.ResultType != "vector" {
		return nil, fmt.Errorf("result type %s; want vector", res.Data.ResultType)
	}
	out := make([]sample, len(res.Data.Result))
	for i, r := range res.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			v = math.NaN()
		}
		out[i] = sample{labels: r.Metric, value: v}
	}
	return out, nil
}

// alert is one alert of /api/v1/alerts.
type alert struct {
	Labels   map[string]string `json:"labels"`
	State    string            `json:"state"`
	Value    string            `json:"value"`
	ActiveAt time.Time         `json:"activeAt"`
}

func alerts(ctx context.Context, prom string) ([]alert, error) {
	var res struct {
		Status string `json:"status"`
		Data   struct {
			Alerts []alert `json:"alerts"`
		} `json:"data"`
	}
	if err := apiGet(ctx, prom+"/api/v1/alerts", &res); err != nil {
		return nil, err
	}
	if res.Status != "success" {
		return nil, fmt.Errorf("status %s", res.Status)
	}
	return res.Data.Alerts, nil
}

func apiGet(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	// The API answers errors (a bad query is 400) with the same JSON.
	return json.NewDecoder(resp.Body).Decode(v)
}

// dashboardExprs returns the expression of every target of every panel of
// grafana-dashboard.json, nested rows included.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var exprs []string
	var walk func(raw []json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, r := range raw {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatal(err)
			}
			for _, tg := range p.Targets {
				if tg.Expr != "" {
					exprs = append(exprs, tg.Expr)
				}
			}
			walk(p.Panels)
		}
	}
	var d struct {
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	walk(d.Panels)
	if len(exprs) == 0 {
		t.Fatal("no expressions in the dashboard")
	}
	return exprs
}
