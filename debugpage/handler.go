package debugpage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/perkey/perkey/executor"
)

const (
	// DefaultHotKeys is how many keys each table lists unless the request
	// asks for another number with ?n=.
	DefaultHotKeys = 10
	// MaxHotKeys is the most keys one request may ask for.
	MaxHotKeys = 100
	// maxKeyLen bounds a key's printed form, in runes.
	maxKeyLen = 200
)

// quantiles are the quantiles of wait and run time the page shows when it
// has a LatencySource.
var quantiles = [...]float64{0.5, 0.9, 0.99}

// Source is what the page reads. Every *executor.Executor[K] is one.
type Source[K comparable] interface {
	Settings() executor.Settings
	Stats() executor.Stats
	HotKeys(n int) []executor.KeyLoad[K]
	OldestKeys(n int) []executor.KeyLoad[K]
}

// LatencySource gives quantiles of the time tasks waited in their queue and
// the time they ran, as a *metrics.Collector does from its histograms. For
// each q it returns one duration in wait and one in run, in order; a nil
// slice means no task has been measured yet. It must be safe for concurrent
// use.
type LatencySource interface {
	Quantiles(q ...float64) (wait, run []time.Duration)
}

// Option configures a Handler.
type Option func(*options)

type options struct {
	latency LatencySource // nil: the page says there is none
}

// WithLatency makes the page show the wait and run time quantiles of l (the
// p50, p90 and p99). The executor keeps no histograms of its
// own; a *metrics.Collector passed to executor.WithObserver keeps them, and
// is a LatencySource. By default, and with a nil l, the page has no
// percentiles and says so.
func WithLatency(l LatencySource) Option {
	return func(o *options) { o.latency = l }
}

// Snapshot is the data the page shows, and the JSON the handler serves:
// everything the page shows is in it. Its JSON form (MarshalJSON) has
// snake_case names and durations in seconds, with "_seconds" in their
// names, as Prometheus writes them: "uptime_seconds": 21.458520058.
type Snapshot struct {
	Time     time.Time         // when it was taken
	Uptime   time.Duration     // since the executor was made (Settings.Started); 0 if unknown
	Settings executor.Settings // what the executor was configured with
	Stats    executor.Stats    // its counters and gauges
	Rates    Rates             // the counters' recent rates
	Latency  *Latency          // wait and run quantiles; nil without WithLatency

	// HotKeys are the keys with the most pending tasks, busiest first.
	// OldestKeys are the keys whose work is oldest (Age), oldest first:
	// the stuck keys. Each is empty when nothing is pending; OldestKeys is
	// also empty when the executor does not track ages (Settings.Ages).
	HotKeys    []KeyLoad
	OldestKeys []KeyLoad
}

// KeyLoad is a key's live load, as executor.KeyLoad, with Key printed with
// %v and cut to 200 characters, whatever the key's type. The page shows a
// key longer than 48 characters shortened in the middle, whole on hover;
// the JSON has it whole.
type KeyLoad struct {
	Key        string
	Pending    int           // queued + running
	Held       time.Duration // how long its current hold (running task) has lasted
	OldestWait time.Duration // how long its oldest queued task has waited
	Age        time.Duration // the larger of Held and OldestWait
}

// Rates are the counters of Stats per second, over Window: RateWindow, the
// last 10 s of the samples the handler takes once a second on its own, so
// every viewer sees the same window. The handler samples from its first
// request until 5 minutes after its latest; until its samples span
// RateWindow, Window is since the executor was made (Settings.Started), or,
// if that is unknown, since the first sample. Window is 0 (and every rate
// is 0) when neither gives a window yet.
type Rates struct {
	Window    time.Duration
	Submitted float64
	Completed float64
	Rejected  float64
	Canceled  float64
	Panicked  float64
	Slow      float64
}

// Latency holds the quantiles of a LatencySource: Wait[i] and Run[i] are at
// Quantiles[i]. Wait is empty until a task has started, Run until one has
// finished.
type Latency struct {
	Quantiles []float64
	Wait      []time.Duration
	Run       []time.Duration
}

// Handler returns a handler that serves s's live view. A GET or HEAD
// request gets the HTML page, or the Snapshot as JSON if its query has
// format=json or its path ends in /json. The query parameter n sets how
// many keys each table lists (default DefaultHotKeys, at most MaxHotKeys).
//
// Each request calls s.Settings, s.Stats, s.HotKeys(n) and s.OldestKeys(n)
// once; on an executor, HotKeys and OldestKeys each visit every live
// mailbox, O(active keys × log n). An open page makes one request a second.
// From its first request until 5 minutes after its latest, the handler
// also calls s.Stats once a second, on a timer, for the rates (see Rates).
// Mount one Handler on every path that serves it: it keeps the samples the
// rates are computed from.
func Handler[K comparable](s Source[K], opts ...Option) http.Handler {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return &handler[K]{src: s, latency: o.latency, rates: sampler{stats: s.Stats}}
}

type handler[K comparable] struct {
	src     Source[K]
	latency LatencySource // nil if none
	rates   sampler
}

func (h *handler[K]) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	n := DefaultHotKeys
	if v := r.URL.Query().Get("n"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			http.Error(w, fmt.Sprintf("n=%q: want a number of keys, at least 1", v), http.StatusBadRequest)
			return
		}
		n = min(n, MaxHotKeys)
	}
	snap := h.take(n)

	var body bytes.Buffer
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if r.URL.Query().Get("format") == "json" || strings.HasSuffix(r.URL.Path, "/json") {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(&body)
		enc.SetIndent("", "  ")
		if err := enc.Encode(snap); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	} else {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if err := page.Execute(&body, pageData{Snapshot: snap, N: n}); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	_, _ = w.Write(body.Bytes())
}

// take reads the source now.
func (h *handler[K]) take(n int) Snapshot {
	settings := h.src.Settings()
	stats := h.src.Stats()
	now := time.Now()
	s := Snapshot{
		Time:       now,
		Settings:   settings,
		Stats:      stats,
		Rates:      h.rates.rates(now, settings.Started),
		HotKeys:    loads(h.src.HotKeys(n)),
		OldestKeys: loads(h.src.OldestKeys(n)),
	}
	if !settings.Started.IsZero() {
		s.Uptime = max(0, now.Sub(settings.Started))
	}
	if h.latency != nil {
		q := quantiles
		wait, run := h.latency.Quantiles(q[:]...)
		s.Latency = &Latency{Quantiles: q[:], Wait: nonNil(wait), Run: nonNil(run)}
	}
	return s
}

// loads converts the executor's KeyLoads; never nil, so the JSON has [].
func loads[K comparable](ls []executor.KeyLoad[K]) []KeyLoad {
	out := make([]KeyLoad, len(ls))
	for i, l := range ls {
		out[i] = KeyLoad{Key: keyString(l.Key), Pending: l.Pending, Held: l.Held, OldestWait: l.OldestWait,
			Age: max(l.Held, l.OldestWait)}
	}
	return out
}

func nonNil(ds []time.Duration) []time.Duration {
	if ds == nil {
		return []time.Duration{}
	}
	return ds
}

// keyString prints k with %v, cut to maxKeyLen runes.
func keyString(k any) string {
	s := fmt.Sprint(k)
	if utf8.RuneCountInString(s) <= maxKeyLen {
		return s
	}
	r := []rune(s)
	return string(r[:maxKeyLen-1]) + "…"
}
