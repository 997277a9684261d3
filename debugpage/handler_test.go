package debugpage_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

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
		hot    []debugpage.HotKey
	}{
		{"/debug/perkey?format=json", []debugpage.HotKey{{Key: "hot", Pending: 5}, {Key: "cold", Pending: 1}}},
		{"/debug/perkey/json", []debugpage.HotKey{{Key: "hot", Pending: 5}, {Key: "cold", Pending: 1}}},
		{"/debug/perkey/json?n=1", []debugpage.HotKey{{Key: "hot", Pending: 5}}},
		{"/elsewhere/?format=json&n=100", []debugpage.HotKey{{Key: "hot", Pending: 5}, {Key: "cold", Pending: 1}}},
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
			if s.Time.Before(before) {
				t.Errorf("Time: got %v; want after %v", s.Time, before)
			}
		})
	}
}

// TestJSONIdle checks the JSON of an executor with nothing pending: the hot
// keys are an empty list, not null.
func TestJSONIdle(t *testing.T) {
	e, err := executor.New[int]()
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
	if got := string(raw["HotKeys"]); got != "[]" {
		t.Errorf("HotKeys: got %s; want []", got)
	}
	var stats executor.Stats
	if err := json.Unmarshal(raw["Stats"], &stats); err != nil {
		t.Fatal(err)
	}
	if stats.Submitted != 1 || stats.Completed != 1 {
		t.Errorf("Stats: got %+v; want Submitted 1, Completed 1", stats)
	}
}

// source is a Source with fixed data that records the n it was asked for.
type source[K comparable] struct {
	stats executor.Stats
	hot   []executor.KeyLoad[K]
	asked int
}

func (s *source[K]) Stats() executor.Stats { return s.stats }

func (s *source[K]) HotKeys(n int) []executor.KeyLoad[K] {
	s.asked = n
	return s.hot[:min(n, len(s.hot))]
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
			src := &source[int]{hot: []executor.KeyLoad[int]{{Key: 7, Pending: 9}, {Key: 3, Pending: 2}, {Key: 1, Pending: 1}}}
			resp := get(t, debugpage.Handler(src), http.MethodGet, "/debug/perkey?format=json"+c.query)
			if resp.StatusCode != c.status {
				t.Fatalf("status: got %d; want %d", resp.StatusCode, c.status)
			}
			if c.status != http.StatusOK {
				return
			}
			s := decode(t, resp)
			if src.asked != c.wantAsked {
				t.Errorf("HotKeys asked for: got %d; want %d", src.asked, c.wantAsked)
			}
			if len(s.HotKeys) != c.wantLength {
				t.Errorf("hot keys served: got %d; want %d", len(s.HotKeys), c.wantLength)
			}
			if s.HotKeys[0] != (debugpage.HotKey{Key: "7", Pending: 9}) {
				t.Errorf("first hot key: got %+v; want {7 9}", s.HotKeys[0])
			}
		})
	}
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
	h := debugpage.Handler(src)
	s := decode(t, get(t, h, http.MethodGet, "/debug/perkey?format=json"))
	for i, want := range []string{`<script>alert("k")</script>`, "{b 7}", "(1+2i)", strings.Repeat("é", 199) + "…"} {
		if s.HotKeys[i].Key != want {
			t.Errorf("key %d: got %q; want %q", i, s.HotKeys[i].Key, want)
		}
	}

	resp := get(t, h, http.MethodGet, "/debug/perkey")
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type: got %q; want text/html", ct)
	}
	var body strings.Builder
	if _, err := io.Copy(&body, resp.Body); err != nil {
		t.Fatal(err)
	}
	html := body.String()
	for _, want := range []string{
		`<td id="Submitted">1234567</td>`,
		`<td id="ActiveKeys">4</td>`,
		`&lt;script&gt;alert(&#34;k&#34;)&lt;/script&gt;`,
		`<td class="key">{b 7}</td><td>2</td>`,
		`fetch("?format=json&n=" + n`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %s", want)
		}
	}
	if strings.Contains(html, `<script>alert`) {
		t.Error("HTML has an unescaped key")
	}
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
