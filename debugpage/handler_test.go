package debugpage_test

import (
	"context"
	"encoding/json"
	stdhtml "html"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"

	"github.com/perkey/perkey/debugpage"
	"github.com/perkey/perkey/executor"
)

// get serves one request with h and returns the response.
func get(t *testing.T, h http.Handler, method, target string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec.Result()
}

func decode(t *testing.T, resp *http.Response) debugpage.Snapshot {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status: got %d; want 200", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type: got %q; want application/json", ct)
	}
	var s debugpage.Snapshot
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatalf("decode: %v", err)
	}
	return s
}

// TestJSONLive blocks work on a real executor and checks that the JSON
// shows it, in every URL form that asks for JSON.
func TestJSONLive(t *testing.T) {
	ctx := context.Background()
	e, err := executor.New[string](executor.WithWorkers(4))
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var tasks []*executor.Task
	submit := func(key string, started chan struct{}) {
		task, err := e.Submit(ctx, key, func(context.Context) error {
			if started != nil {
				close(started)
			}
			<-release
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, task)
	}
	hotStarted, coldStarted := make(chan struct{}), make(chan struct{})
	submit("hot", hotStarted)
	for range 4 {
		submit("hot", nil)
	}
	submit("cold", coldStarted)
	<-hotStarted
	<-coldStarted
	defer func() {
		close(release)
		for _, task := range tasks {
			if err := task.Wait(ctx); err != nil {
				t.Error(err)
			}
		}
		if err := e.Close(ctx); err != nil {
			t.Error(err)
		}
	}()

	h := debugpage.Handler(e)
	before := time.Now()
	for _, c := range []struct {
		target string
		hot    []debugpage.KeyLoad
	}{
		{"/debug/perkey?format=json", []debugpage.KeyLoad{{Key: "hot", Pending: 5}, {Key: "cold", Pending: 1}}},
		{"/debug/perkey/json", []debugpage.KeyLoad{{Key: "hot", Pending: 5}, {Key: "cold", Pending: 1}}},
		{"/debug/perkey/json?n=1", []debugpage.KeyLoad{{Key: "hot", Pending: 5}}},
		{"/elsewhere/?format=json&n=100", []debugpage.KeyLoad{{Key: "hot", Pending: 5}, {Key: "cold", Pending: 1}}},
	} {
		t.Run(c.target, func(t *testing.T) {
			s := decode(t, get(t, h, http.MethodGet, c.target))
			want := executor.Stats{ActiveKeys: 2, Queued: 4, Running: 2, Submitted: 6}
			if s.Stats != want {
				t.Errorf("Stats: got %+v; want %+v", s.Stats, want)
			}
			if !reflect.DeepEqual(s.HotKeys, c.hot) {
				t.Errorf("HotKeys: got %+v; want %+v", s.HotKeys, c.hot)
			}
			if s.Settings.Workers != 4 || s.Settings.Ages || len(s.OldestKeys) != 0 || s.Latency != nil {
				t.Errorf("got Settings %+v, OldestKeys %+v, Latency %v; want 4 workers, no ages, no oldest keys, no latency",
					s.Settings, s.OldestKeys, s.Latency)
			}
			if s.Time.Before(before) {
				t.Errorf("Time: got %v; want after %v", s.Time, before)
			}
		})
	}
}

// TestJSONIdle checks the JSON of an executor with nothing pending: the key
// tables are empty lists, not null, and there is no latency without a
// LatencySource.
func TestJSONIdle(t *testing.T) {
	e, err := executor.New[int](executor.WithSlowTaskWarning(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	if err := e.Do(context.Background(), 1, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	resp := get(t, debugpage.Handler(e), http.MethodGet, "/debug/perkey?format=json")
	var raw map[string]json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ field, want string }{
		{"HotKeys", "[]"}, {"OldestKeys", "[]"}, {"Latency", "null"},
	} {
		if got := string(raw[c.field]); got != c.want {
			t.Errorf("%s: got %s; want %s", c.field, got, c.want)
		}
	}
	var stats executor.Stats
	if err := json.Unmarshal(raw["Stats"], &stats); err != nil {
		t.Fatal(err)
	}
	if stats.Submitted != 1 || stats.Completed != 1 {
		t.Errorf("Stats: got %+v; want Submitted 1, Completed 1", stats)
	}
	var settings executor.Settings
	if err := json.Unmarshal(raw["Settings"], &settings); err != nil {
		t.Fatal(err)
	}
	want := e.Settings()
	if !settings.Started.Equal(want.Started) {
		t.Errorf("Settings.Started: got %v; want %v", settings.Started, want.Started)
	}
	settings.Started, want.Started = time.Time{}, time.Time{}
	if settings != want || !settings.Ages || settings.SlowTask != time.Minute {
		t.Errorf("Settings: got %+v; want %+v, with ages and SlowTask 1m", settings, want)
	}
}

// TestStuckKeys runs a real executor on virtual time: a key stuck for 6 s
// and one held for 1 s are listed oldest first, with their ages, in the
// JSON and in the HTML's stuck table, and the one past the slow-task
// threshold is marked.
func TestStuckKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bg := context.Background()
		e, err := executor.New[string](executor.WithSlowTaskWarning(2*time.Second), executor.WithLogger(zap.NewNop()))
		if err != nil {
			t.Fatal(err)
		}
		stuck, young := make(chan struct{}), make(chan struct{})
		if err := e.Go(bg, "stuck", func(context.Context) error { <-stuck; return nil }); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := e.Go(bg, "stuck", func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		if err := e.Go(bg, "young", func(context.Context) error { <-young; return nil }); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()

		h := debugpage.Handler(e)
		s := decode(t, get(t, h, http.MethodGet, "/debug/perkey/json"))
		want := []debugpage.KeyLoad{
			{Key: "stuck", Pending: 2, Held: 6 * time.Second, OldestWait: 6 * time.Second, Age: 6 * time.Second},
			{Key: "young", Pending: 1, Held: time.Second, Age: time.Second},
		}
		if !reflect.DeepEqual(s.OldestKeys, want) {
			t.Errorf("OldestKeys: got %+v; want %+v", s.OldestKeys, want)
		}
		if s.Stats.Slow != 1 {
			t.Errorf("Stats.Slow: got %d; want 1 (stuck, past 2s)", s.Stats.Slow)
		}
		if s.Uptime != 6*time.Second {
			t.Errorf("Uptime: got %v; want 6s", s.Uptime)
		}

		html := body(t, get(t, h, http.MethodGet, "/debug/perkey"))
		rows := regexp.MustCompile(`(?s)<tbody id="oldest">(.*?)</tbody>`).FindStringSubmatch(html)
		if rows == nil {
			t.Fatalf("no stuck table in\n%s", html)
		}
		for i, want := range []string{
			`<tr class="slow"><td class="key" data-json="OldestKeys.0.Key">stuck</td><td class="age" data-json="OldestKeys.0.Age" data-ns="6000000000">6s</td>`,
			`<tr><td class="key" data-json="OldestKeys.1.Key">young</td><td class="age" data-json="OldestKeys.1.Age" data-ns="1000000000">1s</td>`,
		} {
			if !strings.Contains(rows[1], want) {
				t.Errorf("stuck table row %d: want %s in\n%s", i, want, rows[1])
			}
		}
		if strings.Index(rows[1], ">stuck<") > strings.Index(rows[1], ">young<") {
			t.Errorf("stuck table: young listed before stuck in\n%s", rows[1])
		}

		close(stuck)
		close(young)
		if err := e.Close(bg); err != nil {
			t.Fatal(err)
		}
	})
}

// source is a Source with fixed data that records the n it was asked for.
type source[K comparable] struct {
	settings    executor.Settings
	stats       executor.Stats
	hot, oldest []executor.KeyLoad[K]
	asked       int // by HotKeys
	askedOldest int // by OldestKeys
}

func (s *source[K]) Settings() executor.Settings { return s.settings }
func (s *source[K]) Stats() executor.Stats       { return s.stats }

func (s *source[K]) HotKeys(n int) []executor.KeyLoad[K] {
	s.asked = n
	return s.hot[:min(n, len(s.hot))]
}

func (s *source[K]) OldestKeys(n int) []executor.KeyLoad[K] {
	s.askedOldest = n
	return s.oldest[:min(n, len(s.oldest))]
}

// latency is a LatencySource with fixed quantiles.
type latency struct {
	wait, run []time.Duration
	asked     []float64
}

func (l *latency) Quantiles(q ...float64) (wait, run []time.Duration) {
	l.asked = q
	return l.wait, l.run
}

func TestHotKeyCount(t *testing.T) {
	for _, c := range []struct {
		query      string
		status     int
		wantAsked  int
		wantLength int
	}{
		{"", http.StatusOK, debugpage.DefaultHotKeys, 3},
		{"&n=2", http.StatusOK, 2, 2},
		{"&n=100000", http.StatusOK, debugpage.MaxHotKeys, 3},
		{"&n=0", http.StatusBadRequest, 0, 0},
		{"&n=-3", http.StatusBadRequest, 0, 0},
		{"&n=many", http.StatusBadRequest, 0, 0},
	} {
		t.Run(c.query, func(t *testing.T) {
			loads := []executor.KeyLoad[int]{{Key: 7, Pending: 9}, {Key: 3, Pending: 2}, {Key: 1, Pending: 1}}
			src := &source[int]{hot: loads, oldest: loads}
			resp := get(t, debugpage.Handler(src), http.MethodGet, "/debug/perkey?format=json"+c.query)
			if resp.StatusCode != c.status {
				t.Fatalf("status: got %d; want %d", resp.StatusCode, c.status)
			}
			if c.status != http.StatusOK {
				return
			}
			s := decode(t, resp)
			if src.asked != c.wantAsked || src.askedOldest != c.wantAsked {
				t.Errorf("HotKeys, OldestKeys asked for: got %d, %d; want %d", src.asked, src.askedOldest, c.wantAsked)
			}
			if len(s.HotKeys) != c.wantLength || len(s.OldestKeys) != c.wantLength {
				t.Errorf("hot and oldest keys served: got %d, %d; want %d", len(s.HotKeys), len(s.OldestKeys), c.wantLength)
			}
			if s.HotKeys[0] != (debugpage.KeyLoad{Key: "7", Pending: 9}) {
				t.Errorf("first hot key: got %+v; want {7 9}", s.HotKeys[0])
			}
		})
	}
}

// body reads resp's body as text.
func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status: got %d; want 200", resp.StatusCode)
	}
	var b strings.Builder
	if _, err := io.Copy(&b, resp.Body); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestKeysPrinted checks that any comparable key prints, long keys are cut,
// and keys are escaped in the HTML.
func TestKeysPrinted(t *testing.T) {
	type account struct {
		Bank string
		ID   int
	}
	long := strings.Repeat("é", 500)
	src := &source[any]{
		stats: executor.Stats{ActiveKeys: 4, Queued: 6, Running: 2, Submitted: 1234567},
		hot: []executor.KeyLoad[any]{
			{Key: `<script>alert("k")</script>`, Pending: 4},
			{Key: account{"b", 7}, Pending: 2},
			{Key: complex(1, 2), Pending: 1}, // not encodable as JSON by itself
			{Key: long, Pending: 1},
		},
	}
	src.oldest = src.hot
	h := debugpage.Handler(src)
	s := decode(t, get(t, h, http.MethodGet, "/debug/perkey?format=json"))
	for i, want := range []string{`<script>alert("k")</script>`, "{b 7}", "(1+2i)", strings.Repeat("é", 199) + "…"} {
		if s.HotKeys[i].Key != want || s.OldestKeys[i].Key != want {
			t.Errorf("key %d: got %q and %q; want %q", i, s.HotKeys[i].Key, s.OldestKeys[i].Key, want)
		}
	}

	resp := get(t, h, http.MethodGet, "/debug/perkey")
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type: got %q; want text/html", ct)
	}
	html := body(t, resp)
	for _, want := range []string{
		`<td data-json="Stats.Submitted">1234567</td>`,
		`<td data-json="Stats.ActiveKeys">4</td>`,
		`<td class="key" data-json="HotKeys.0.Key">&lt;script&gt;alert(&#34;k&#34;)&lt;/script&gt;</td>`,
		`<td class="key" data-json="OldestKeys.1.Key">{b 7}</td>`,
		`<td class="key" data-json="HotKeys.1.Key">{b 7}</td><td data-json="HotKeys.1.Pending">2</td>`,
		`fetch(location.href`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %s", want)
		}
	}
	if strings.Contains(html, `<script>alert`) {
		t.Error("HTML has an unescaped key")
	}
}

// TestRatesOnFirstPaint: on virtual time, the first request's rates are
// since the executor's start, in the HTML as in the JSON; later ones are
// since the newest earlier request at least a second old.
func TestRatesOnFirstPaint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &source[string]{settings: executor.Settings{Started: time.Now()}}
		h := debugpage.Handler(src)
		time.Sleep(10 * time.Second)
		src.stats = executor.Stats{Submitted: 1000, Completed: 900, Rejected: 50, Canceled: 20, Panicked: 10, Slow: 2}

		s := decode(t, get(t, h, http.MethodGet, "/debug/perkey/json"))
		want := debugpage.Rates{Window: 10 * time.Second, Submitted: 100, Completed: 90, Rejected: 5, Canceled: 2, Panicked: 1, Slow: 0.2}
		if s.Rates != want {
			t.Errorf("first rates: got %+v; want %+v", s.Rates, want)
		}
		html := body(t, get(t, h, http.MethodGet, "/debug/perkey"))
		for _, want := range []string{
			`<td data-json="Rates.Submitted">100.0</td>`,
			`<td data-json="Rates.Completed">90.0</td>`,
			`<td data-json="Rates.Slow">0.2</td>`,
			`<span data-json="Rates.Window" data-ns="10000000000">10s</span>`,
		} {
			if !strings.Contains(html, want) {
				t.Errorf("first paint lacks %s", want)
			}
		}

		for _, step := range []struct {
			sleep     time.Duration
			submitted uint64
			want      debugpage.Rates
		}{
			// The samples at 10 s are the base: they are 2 s old.
			{2 * time.Second, 1300, debugpage.Rates{Window: 2 * time.Second, Submitted: 150, Completed: -1}},
			// The sample at 12 s is too young: still since 10 s.
			{500 * time.Millisecond, 1400, debugpage.Rates{Window: 2500 * time.Millisecond, Submitted: 160, Completed: -1}},
			// Since 12 s (the one at 12.5 s is 0.7 s old).
			{700 * time.Millisecond, 1510, debugpage.Rates{Window: 1200 * time.Millisecond, Submitted: 175, Completed: -1}},
		} {
			time.Sleep(step.sleep)
			src.stats.Submitted = step.submitted
			got := decode(t, get(t, h, http.MethodGet, "/debug/perkey/json")).Rates
			if got.Window != step.want.Window || math.Abs(got.Submitted-step.want.Submitted) > 1e-9 || got.Completed != 0 {
				t.Errorf("after %v more: got %+v; want window %v, %v submitted/s, 0 completed/s",
					step.sleep, got, step.want.Window, step.want.Submitted)
			}
		}
	})
}

// TestNoStart: a source that does not know when it started has no rates
// on its first request, and says so.
func TestNoStart(t *testing.T) {
	h := debugpage.Handler(&source[string]{stats: executor.Stats{Submitted: 5}})
	if s := decode(t, get(t, h, http.MethodGet, "/debug/perkey/json")); s.Rates != (debugpage.Rates{}) || s.Uptime != 0 {
		t.Errorf("got Rates %+v, Uptime %v; want none", s.Rates, s.Uptime)
	}
	if html := body(t, get(t, h, http.MethodGet, "/debug/perkey")); !strings.Contains(html, "No rates: the executor's start is unknown.") {
		t.Error("HTML does not say why it has no rates")
	}
}

func TestLatency(t *testing.T) {
	l := &latency{
		wait: []time.Duration{20 * time.Microsecond, 3 * time.Millisecond, 75 * time.Millisecond},
		run:  []time.Duration{1500 * time.Microsecond, 2 * time.Millisecond, 2400 * time.Millisecond},
	}
	h := debugpage.Handler(&source[string]{}, debugpage.WithLatency(l))
	s := decode(t, get(t, h, http.MethodGet, "/debug/perkey/json"))
	want := &debugpage.Latency{Quantiles: []float64{0.5, 0.9, 0.99}, Wait: l.wait, Run: l.run}
	if !reflect.DeepEqual(s.Latency, want) {
		t.Errorf("Latency: got %+v; want %+v", s.Latency, want)
	}
	if !reflect.DeepEqual(l.asked, want.Quantiles) {
		t.Errorf("quantiles asked for: got %v; want %v", l.asked, want.Quantiles)
	}
	html := body(t, get(t, h, http.MethodGet, "/debug/perkey"))
	for _, want := range []string{
		`<td class="name" data-json="Latency.Quantiles.0">p50</td><td data-json="Latency.Wait.0" data-ns="20000">20µs</td><td data-json="Latency.Run.0" data-ns="1500000">1.5ms</td>`,
		`<td class="name" data-json="Latency.Quantiles.2">p99</td><td data-json="Latency.Wait.2" data-ns="75000000">75ms</td><td data-json="Latency.Run.2" data-ns="2400000000">2.4s</td>`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %s", want)
		}
	}

	// Before any task: empty lists, and dashes.
	l.wait, l.run = nil, nil
	s = decode(t, get(t, h, http.MethodGet, "/debug/perkey/json"))
	if s.Latency == nil || len(s.Latency.Wait) != 0 || s.Latency.Wait == nil || len(s.Latency.Run) != 0 {
		t.Errorf("Latency before any task: got %+v; want empty Wait and Run", s.Latency)
	}
	if html := body(t, get(t, h, http.MethodGet, "/debug/perkey")); !strings.Contains(html, `<td class="name" data-json="Latency.Quantiles.1">p90</td><td>–</td><td>–</td>`) {
		t.Error("HTML before any task lacks dashes for p90")
	}

	// Without a source the page says how to get one.
	for _, h := range []http.Handler{debugpage.Handler(&source[string]{}), debugpage.Handler(&source[string]{}, debugpage.WithLatency(nil))} {
		if s := decode(t, get(t, h, http.MethodGet, "/debug/perkey/json")); s.Latency != nil {
			t.Errorf("Latency without a source: got %+v; want nil", s.Latency)
		}
		if html := body(t, get(t, h, http.MethodGet, "/debug/perkey")); !strings.Contains(html, "Pass the metrics.Collector it observes to debugpage.WithLatency.") {
			t.Error("HTML without a latency source does not say how to get one")
		}
	}
}

// cell matches an element that shows a value: its attributes and text.
var cell = regexp.MustCompile(`<(td|span)\b([^>]*)>([^<]*)</(?:td|span)>`)

// TestHTMLInStepWithJSON renders a page with every table filled and checks
// every value it shows against the JSON served at the same moment: each
// cell names its field (data-json), the field is in the JSON, and the cell
// shows its value: numbers and keys as they are, durations (data-ns) rounded,
// times in one format.
func TestHTMLInStepWithJSON(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started := time.Date(2026, 12, 1, 7, 0, 0, 0, time.FixedZone("CET", 3600))
		time.Sleep(time.Until(started.Add(90 * time.Minute)))
		hot := []executor.KeyLoad[string]{
			{Key: "hot", Pending: 32, Held: 1800 * time.Microsecond, OldestWait: 48 * time.Millisecond},
			{Key: "warm", Pending: 3, Held: 700 * time.Microsecond, OldestWait: 2 * time.Millisecond},
		}
		src := &source[string]{
			settings: executor.Settings{Workers: 16, MaxQueuePerKey: 32, MaxPending: 1000, Throughput: 32, Stripes: 0,
				Policy: "FailFast", SlowTask: time.Second, Ages: true, Started: started},
			stats: executor.Stats{ActiveKeys: 40, Queued: 50, Running: 16, Submitted: 123456, Completed: 120000,
				Rejected: 3000, Canceled: 400, Panicked: 3, Slow: 1},
			hot: hot,
			oldest: []executor.KeyLoad[string]{
				{Key: "stuck", Pending: 1, Held: 3*time.Minute + 4*time.Second},
				hot[0],
			},
		}
		l := &latency{wait: []time.Duration{20 * time.Microsecond, 3 * time.Millisecond, 75 * time.Millisecond},
			run: []time.Duration{1500 * time.Microsecond, 2 * time.Millisecond, 2400 * time.Millisecond}}
		h := debugpage.Handler(src, debugpage.WithLatency(l))
		html := body(t, get(t, h, http.MethodGet, "/debug/perkey"))
		var snap any
		dec := json.NewDecoder(get(t, h, http.MethodGet, "/debug/perkey/json").Body)
		dec.UseNumber()
		if err := dec.Decode(&snap); err != nil {
			t.Fatal(err)
		}

		shown := map[string]bool{}
		for _, m := range cell.FindAllStringSubmatch(html, -1) {
			attrs, text := m[2], stdhtml.UnescapeString(m[3])
			path := attr(attrs, "data-json")
			if path == "" {
				continue
			}
			shown[path] = true
			v, ok := lookup(snap, path)
			if !ok {
				t.Errorf("%s is shown (%q) but not in the JSON", path, text)
				continue
			}
			if ns := attr(attrs, "data-ns"); ns != "" {
				checkDuration(t, path, text, ns, v)
				continue
			}
			switch v := v.(type) {
			case json.Number:
				if _, err := strconv.Atoi(text); err == nil && text != v.String() {
					t.Errorf("%s: shows %q; JSON has %s", path, text, v)
				}
				if f, err := strconv.ParseFloat(text, 64); err == nil && strings.Contains(text, ".") {
					if jf, _ := v.Float64(); math.Abs(f-jf) > 0.05 {
						t.Errorf("%s: shows %q; JSON has %s", path, text, v)
					}
				}
			case string:
				if tm, err := time.Parse(time.RFC3339Nano, v); err == nil {
					if want := tm.UTC().Format("2006-01-02T15:04:05Z"); text != want {
						t.Errorf("%s: shows %q; want %q (JSON has %s)", path, text, want, v)
					}
				} else if text != v {
					t.Errorf("%s: shows %q; JSON has %q", path, text, v)
				}
			}
		}
		for _, want := range []string{
			"Time", "Uptime", "Settings.Started", "Settings.Workers", "Settings.MaxQueuePerKey", "Settings.MaxPending",
			"Settings.Throughput", "Settings.Stripes", "Settings.Policy", "Settings.Reentrant", "Settings.SlowTask",
			"Settings.Ages", "Stats.Slow", "Rates.Window", "Rates.Submitted", "Latency.Wait.2", "Latency.Run.0",
			"OldestKeys.0.Key", "OldestKeys.0.Age", "OldestKeys.1.OldestWait", "HotKeys.1.Held", "HotKeys.0.OldestWait",
		} {
			if !shown[want] {
				t.Errorf("the page does not show %s", want)
			}
		}
		for _, want := range []string{
			`<span data-json="Time">2026-12-01T07:30:00Z</span>`,
			`<span data-json="Settings.Started">2026-12-01T06:00:00Z</span>`,
			`<span data-json="Uptime" data-ns="5400000000000">1h30m0s</span>`,
			`<tr class="slow"><td class="key" data-json="OldestKeys.0.Key">stuck</td><td class="age" data-json="OldestKeys.0.Age" data-ns="184000000000">3m4s</td>`,
			`<tr class="atcap"><td class="key" data-json="HotKeys.0.Key">hot</td>`,
			`<span style="width: 100%"></span>`,
			`<span style="width: 9%"></span>`, // 3 of the cap of 32
		} {
			if !strings.Contains(html, want) {
				t.Errorf("HTML lacks %s", want)
			}
		}
	})
}

// checkDuration checks that a cell showing a duration agrees with the JSON.
func checkDuration(t *testing.T, path, text, ns string, v any) {
	t.Helper()
	if n, ok := v.(json.Number); !ok || n.String() != ns {
		t.Errorf("%s: data-ns %s; JSON has %v", path, ns, v)
		return
	}
	want, _ := strconv.ParseInt(ns, 10, 64)
	d, err := time.ParseDuration(strings.TrimPrefix(text, "after "))
	switch {
	case err != nil && want == 0 && text == "–":
	case err != nil:
		t.Errorf("%s: shows %q, not a duration", path, text)
	case math.Abs(float64(d-time.Duration(want))) > max(float64(want)/100, float64(time.Microsecond)):
		t.Errorf("%s: shows %q; JSON has %v", path, text, time.Duration(want))
	}
}

// attr returns the value of attribute name in attrs, or "".
func attr(attrs, name string) string {
	m := regexp.MustCompile(`\b` + name + `="([^"]*)"`).FindStringSubmatch(attrs)
	if m == nil {
		return ""
	}
	return stdhtml.UnescapeString(m[1])
}

// lookup resolves a dotted path (field names and list indexes) in decoded
// JSON.
func lookup(v any, path string) (any, bool) {
	for _, p := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[p]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

func TestMethods(t *testing.T) {
	h := debugpage.Handler(&source[string]{})
	for _, c := range []struct {
		method string
		status int
	}{
		{http.MethodGet, http.StatusOK},
		{http.MethodHead, http.StatusOK},
		{http.MethodPost, http.StatusMethodNotAllowed},
		{http.MethodDelete, http.StatusMethodNotAllowed},
	} {
		resp := get(t, h, c.method, "/debug/perkey")
		if resp.StatusCode != c.status {
			t.Errorf("%s: got %d; want %d", c.method, resp.StatusCode, c.status)
		}
		if c.status == http.StatusMethodNotAllowed && resp.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s: Allow: got %q; want GET, HEAD", c.method, resp.Header.Get("Allow"))
		}
	}
}
