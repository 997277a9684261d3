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
	// DefaultHotKeys is how many hot keys the page lists unless the request
	// asks for another number with ?n=.
	DefaultHotKeys = 10
	// MaxHotKeys is the most hot keys one request may ask for.
	MaxHotKeys = 100
	// maxKeyLen bounds a key's printed form, in runes.
	maxKeyLen = 200
)

// Source is what the page reads. Every *executor.Executor[K] is one.
type Source[K comparable] interface {
	Stats() executor.Stats
	HotKeys(n int) []executor.KeyLoad[K]
}

// Snapshot is the data the page shows, and the JSON the handler serves.
type Snapshot struct {
	Time    time.Time      // when it was taken
	Stats   executor.Stats // the executor's counters and gauges
	HotKeys []HotKey       // busiest first; empty when nothing is pending
}

// HotKey is a key and its pending tasks (queued + running). Key is the
// key printed with %v, cut to 200 characters, whatever the key's type.
type HotKey struct {
	Key     string
	Pending int
}

// Handler returns a handler that serves s's live view. A GET or HEAD
// request gets the HTML page, or the Snapshot as JSON if its query has
// format=json or its path ends in /json. The query parameter n sets how
// many hot keys to list (default DefaultHotKeys, at most MaxHotKeys).
//
// Each request calls s.Stats and s.HotKeys(n) once; on an executor,
// HotKeys visits every live mailbox, O(active keys × log n). An open page
// makes one request a second.
func Handler[K comparable](s Source[K]) http.Handler {
	return &handler[K]{src: s}
}

type handler[K comparable] struct {
	src Source[K]
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
			http.Error(w, fmt.Sprintf("n=%q: want a number of hot keys, at least 1", v), http.StatusBadRequest)
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

// take reads s now.
func (h *handler[K]) take(n int) Snapshot {
	stats := h.src.Stats()
	loads := h.src.HotKeys(n)
	hot := make([]HotKey, len(loads))
	for i, l := range loads {
		hot[i] = HotKey{Key: keyString(l.Key), Pending: l.Pending}
	}
	return Snapshot{Time: time.Now(), Stats: stats, HotKeys: hot}
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
