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
		{"hot_keys", "[]"}, {"oldest_keys", "[]"}, {"latency", "null"},
	} {
		if got := string(raw[c.field]); got != c.want {
			t.Errorf("%s: got %s; want %s", c.field, got, c.want)
		}
	}
	var stats map[string]json.Number
	if err := json.Unmarshal(raw["stats"], &stats); err != nil {
		t.Fatal(err)
	}
	if stats["submitted"] != "1" || stats["completed"] != "1" {
		t.Errorf("stats: got %v; want submitted 1, completed 1", stats)
	}
	var settings map[string]any
	if err := json.Unmarshal(raw["settings"], &settings); err != nil {
		t.Fatal(err)
	}
	// Durations are seconds, named so.
	if settings["slow_task_seconds"] != 60.0 || settings["ages"] != true {
		t.Errorf("settings: got %v; want slow_task_seconds 60, ages true", settings)
	}
	var uptime float64
	if err := json.Unmarshal(raw["uptime_seconds"], &uptime); err != nil || uptime < 0 || uptime > 60 {
		t.Errorf("uptime_seconds: got %s (%v); want seconds", raw["uptime_seconds"], err)
	}

	// And a Snapshot reads its JSON back.
	snap := decode(t, get(t, debugpage.Handler(e), http.MethodGet, "/debug/perkey?format=json"))
	want := e.Settings()
	if !snap.Settings.Started.Equal(want.Started) {
		t.Errorf("Settings.Started: got %v; want %v", snap.Settings.Started, want.Started)
	}
	snap.Settings.Started, want.Started = time.Time{}, time.Time{}
	if snap.Settings != want || snap.Stats.Submitted != 1 {
		t.Errorf("Settings: got %+v; want %+v", snap.Settings, want)
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
			`<tr class="slow"><td class="key" data-json="oldest_keys.0.key">stuck</td><td class="age" data-json="oldest_keys.0.age_seconds" data-seconds="6">6s</td>`,
			`<tr><td class="key" data-json="oldest_keys.1.key">young</td><td class="age" data-json="oldest_keys.1.age_seconds" data-seconds="1">1s</td>`,
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
	statsAt     func(time.Time) executor.Stats // if set, Stats is statsAt(now)
	hot, oldest []executor.KeyLoad[K]
	asked       int // by HotKeys
	askedOldest int // by OldestKeys
}

func (s *source[K]) Settings() executor.Settings { return s.settings }
func (s *source[K]) Stats() executor.Stats {
	if s.statsAt != nil {
		return s.statsAt(time.Now())
	}
	return s.stats
}

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
		`<td data-json="stats.submitted">1234567</td>`,
		`<td data-json="stats.active_keys">4</td>`,
		`<td class="key" data-json="hot_keys.0.key">&lt;script&gt;alert(&#34;k&#34;)&lt;/script&gt;</td>`,
		`<td class="key" data-json="oldest_keys.1.key">{b 7}</td>`,
		`<td class="key" data-json="hot_keys.1.key">{b 7}</td><td data-json="hot_keys.1.pending">2</td>`,
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
// since the executor's start, in the HTML as in the JSON.
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
			`<td data-json="rates.submitted_per_second">100.0</td>`,
			`<td data-json="rates.completed_per_second">90.0</td>`,
			`<td data-json="rates.slow_per_second">0.2</td>`,
			`<span data-json="rates.window_seconds" data-seconds="10">10s</span>`,
		} {
			if !strings.Contains(html, want) {
				t.Errorf("first paint lacks %s", want)
			}
		}

	})
}

// TestRatesFixedWindow: on virtual time, rates cover the last RateWindow
// of the server's own samples, whoever asks and whenever: since the start
// until the samples span the window, then the same 10 s for every request
// between two samples; after 5 minutes without a request sampling stops,
// and starts again with the next.
func TestRatesFixedWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		// 10 tasks a second for 150 s, then 30 a second.
		src := &source[string]{settings: executor.Settings{Started: start}, statsAt: func(now time.Time) executor.Stats {
			s := now.Sub(start).Seconds()
			if s <= 150 {
				return executor.Stats{Submitted: uint64(10 * s)}
			}
			return executor.Stats{Submitted: uint64(1500 + 30*(s-150))}
		}}
		h := debugpage.Handler(src)
		rates := func() debugpage.Rates {
			return decode(t, get(t, h, http.MethodGet, "/debug/perkey/json")).Rates
		}
		check := func(when string, got debugpage.Rates, window time.Duration, submitted float64) {
			t.Helper()
			if got.Window != window || math.Abs(got.Submitted-submitted) > 1e-9 {
				t.Errorf("%s: got window %v, %v submitted/s; want %v, %v", when, got.Window, got.Submitted, window, submitted)
			}
		}
		time.Sleep(100 * time.Second)
		check("first request, at 100 s", rates(), 100*time.Second, 10)
		time.Sleep(5500 * time.Millisecond)
		check("at 105.5 s: 5 s of samples", rates(), 105*time.Second, 10)
		time.Sleep(5 * time.Second)
		check("at 110.5 s: 10 s of samples", rates(), 10*time.Second, 10)
		time.Sleep(55 * time.Second)
		first := rates()
		check("at 165.5 s", first, 10*time.Second, 30)
		time.Sleep(400 * time.Millisecond)
		if second := rates(); second != first {
			t.Errorf("two viewers between samples: got %+v and %+v; want the same rates", first, second)
		}
		time.Sleep(6 * time.Minute) // nobody looks: sampling stops
		check("after 6 minutes unseen", rates(), 525900*time.Millisecond, (1500+30*(525.9-150))/525.9)
	})
}

// TestNoStart: a source that does not know when it started has no rates
// on its first request, and says so.
func TestNoStart(t *testing.T) {
	h := debugpage.Handler(&source[string]{stats: executor.Stats{Submitted: 5}})
	if s := decode(t, get(t, h, http.MethodGet, "/debug/perkey/json")); s.Rates != (debugpage.Rates{}) || s.Uptime != 0 {
		t.Errorf("got Rates %+v, Uptime %v; want none", s.Rates, s.Uptime)
	}
	if html := body(t, get(t, h, http.MethodGet, "/debug/perkey")); !strings.Contains(html, "No rates yet: the executor's start is unknown") {
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
		`<td class="name" data-json="latency.quantiles.0">p50</td><td data-json="latency.wait_seconds.0" data-seconds="0.00002">20µs</td><td data-json="latency.run_seconds.0" data-seconds="0.0015">1.5ms</td>`,
		`<td class="name" data-json="latency.quantiles.2">p99</td><td data-json="latency.wait_seconds.2" data-seconds="0.075">75ms</td><td data-json="latency.run_seconds.2" data-seconds="2.4">2.4s</td>`,
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
	if html := body(t, get(t, h, http.MethodGet, "/debug/perkey")); !strings.Contains(html, `<td class="name" data-json="latency.quantiles.1">p90</td><td>–</td><td>–</td>`) {
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
			if secs := attr(attrs, "data-seconds"); secs != "" {
				checkDuration(t, path, text, secs, v)
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
			"time", "uptime_seconds", "settings.started", "settings.workers", "settings.max_queue_per_key", "settings.max_pending",
			"settings.throughput", "settings.stripes", "settings.policy", "settings.reentrant", "settings.slow_task_seconds",
			"settings.ages", "stats.slow", "rates.window_seconds", "rates.submitted_per_second", "latency.wait_seconds.2", "latency.run_seconds.0",
			"oldest_keys.0.key", "oldest_keys.0.age_seconds", "oldest_keys.1.oldest_wait_seconds", "hot_keys.1.held_seconds", "hot_keys.0.oldest_wait_seconds",
		} {
			if !shown[want] {
				t.Errorf("the page does not show %s", want)
			}
		}
		for _, want := range []string{
			`<span data-json="time">2026-12-01T07:30:00Z</span>`,
			`<span data-json="settings.started">2026-12-01T06:00:00Z</span>`,
			`<span data-json="uptime_seconds" data-seconds="5400">1h30m0s</span>`,
			`<tr class="slow"><td class="key" data-json="oldest_keys.0.key">stuck</td><td class="age" data-json="oldest_keys.0.age_seconds" data-seconds="184">3m4s</td>`,
			`<tr class="atcap"><td class="key" data-json="hot_keys.0.key">hot</td>`,
			`<span style="width: 100%"></span>`,
			`<span style="width: 9%"></span>`, // 3 of the cap of 32
		} {
			if !strings.Contains(html, want) {
				t.Errorf("HTML lacks %s", want)
			}
		}
	})
}

// checkDuration checks that a cell showing a duration agrees with the JSON,
// which has it in seconds.
func checkDuration(t *testing.T, path, text, secs string, v any) {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Errorf("%s: data-seconds %s; JSON has %v", path, secs, v)
		return
	}
	jf, _ := n.Float64()
	af, err := strconv.ParseFloat(secs, 64)
	if err != nil || math.Abs(af-jf) > 1e-9 {
		t.Errorf("%s: data-seconds %s; JSON has %v", path, secs, n)
		return
	}
	want := time.Duration(math.Round(jf * 1e9))
	d, err := time.ParseDuration(strings.TrimPrefix(text, "after "))
	switch {
	case err != nil && want == 0 && text == "–":
	case err != nil:
		t.Errorf("%s: shows %q, not a duration", path, text)
	case math.Abs(float64(d-want)) > max(float64(want)/100, float64(time.Microsecond)):
		t.Errorf("%s: shows %q; JSON has %v", path, text, want)
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

// TestLongKeys: a key longer than 48 characters is shown shortened in the
// middle (23 characters, an ellipsis, 24), with the whole key in its title (on hover);
// the JSON has it whole. Shorter keys are shown as they are, with no title.
func TestLongKeys(t *testing.T) {
	uuid := "3f2b8c1e-9d4a-4e7b-b1f0-2c6d8e9a0b17"
	composite := "tenant:acme-industries-intl:user:" + uuid + ":cart:item4" // 80 characters
	multibyte := strings.Repeat("注文:東京都渋谷区:", 6)                            // 60 runes
	src := &source[string]{
		settings: executor.Settings{Ages: true},
		hot:      []executor.KeyLoad[string]{{Key: composite, Pending: 3}, {Key: uuid, Pending: 2}, {Key: multibyte, Pending: 1}},
	}
	src.oldest = src.hot
	h := debugpage.Handler(src)
	s := decode(t, get(t, h, http.MethodGet, "/debug/perkey/json"))
	if s.HotKeys[0].Key != composite || s.HotKeys[2].Key != multibyte {
		t.Errorf("JSON keys: got %q, %q; want them whole", s.HotKeys[0].Key, s.HotKeys[2].Key)
	}
	html := body(t, get(t, h, http.MethodGet, "/debug/perkey"))
	for _, want := range []string{
		`<td class="key" data-json="hot_keys.0.key" title="` + composite + `">tenant:acme-industries-…-2c6d8e9a0b17:cart:item4</td>`,
		`<td class="key" data-json="hot_keys.1.key">` + uuid + `</td>`,
		`<td class="key" data-json="hot_keys.2.key" title="` + multibyte + `">注文:東京都渋谷区:注文:東京都渋谷区:注文:…渋谷区:注文:東京都渋谷区:注文:東京都渋谷区:</td>`,
		`<td class="key" data-json="oldest_keys.0.key" title="` + composite + `">`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %s", want)
		}
	}
}
