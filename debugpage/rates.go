package debugpage

import (
	"sync"
	"time"

	"github.com/perkey/perkey/executor"
)

const (
	// minWindow is the shortest window rates are measured over once there
	// is an earlier sample: two tabs a few milliseconds apart would give
	// noise.
	minWindow = time.Second
	// sampleEvery: a request within this of the newest sample records none,
	// so a handler keeps about minWindow/sampleEvery + 1 samples at most.
	sampleEvery = 100 * time.Millisecond
)

// sampler keeps the counters of a handler's recent requests, so that rates
// come from server-side data alone: a page has them on its first paint, and
// the HTML and the JSON agree.
type sampler struct {
	mu      sync.Mutex // protects samples
	samples []sample   // oldest first
}

type sample struct {
	at    time.Time
	stats executor.Stats
}

// rates returns the rates of stats at now over the window that starts at
// the newest sample at least minWindow old or, if there is none, at started
// (when every counter was 0), and records stats as a sample. A zero started
// and no sample give zero Rates.
func (s *sampler) rates(now time.Time, stats executor.Stats, started time.Time) Rates {
	s.mu.Lock()
	defer s.mu.Unlock()
	base := sample{at: started}
	i := len(s.samples) - 1
	for i >= 0 && now.Sub(s.samples[i].at) < minWindow {
		i--
	}
	if i >= 0 {
		base = s.samples[i]
		s.samples = s.samples[i:] // older ones can never be the base again
	}
	if n := len(s.samples); n == 0 || now.Sub(s.samples[n-1].at) >= sampleEvery {
		s.samples = append(s.samples, sample{at: now, stats: stats})
	}
	if base.at.IsZero() {
		return Rates{}
	}
	window := now.Sub(base.at)
	if window <= 0 {
		return Rates{}
	}
	secs := window.Seconds()
	per := func(from, to uint64) float64 {
		if to < from {
			return 0
		}
		return float64(to-from) / secs
	}
	b := base.stats
	return Rates{
		Window:    window,
		Submitted: per(b.Submitted, stats.Submitted),
		Completed: per(b.Completed, stats.Completed),
		Rejected:  per(b.Rejected, stats.Rejected),
		Canceled:  per(b.Canceled, stats.Canceled),
		Panicked:  per(b.Panicked, stats.Panicked),
		Slow:      per(b.Slow, stats.Slow),
	}
}
