package debugpage

import (
	"sync"
	"time"

	"github.com/perkey/perkey/executor"
)

const (
	// RateWindow is the window rates are measured over: the handler's
	// samples of the last RateWindow, whoever asks.
	RateWindow = 10 * time.Second
	// sampleEvery is how often a handler samples its source's Stats while
	// it is looked at.
	sampleEvery = time.Second
	// idleAfter: a handler that has served no request for this long stops
	// sampling; the next request starts again, with a shorter window until
	// RateWindow of samples have gathered.
	idleAfter = 5 * time.Minute
)

// sampler keeps a handler's samples of its source's counters, taken once a
// second on a timer of its own while the page is looked at, so that the
// rates of every request cover the same window, kept by the server: not
// the time since whoever looked last. It runs no goroutine between
// samples (a timer, re-armed after each), and stops after idleAfter
// without a request.
type sampler struct {
	stats func() executor.Stats

	mu       sync.Mutex  // protects the fields below
	samples  []sample    // oldest first, sampleEvery apart, at most RateWindow/sampleEvery + 1
	timer    *time.Timer // nil when not sampling
	lastLook time.Time   // the latest request
}

type sample struct {
	at    time.Time
	stats executor.Stats
}

// rates returns the rates over the newest RateWindow of samples, and
// starts sampling if it had stopped (then its first sample is now). Until
// the samples span RateWindow, the window is since started, when every
// counter was 0, or, if started is zero, since the oldest sample; a zero
// started and a single sample give zero Rates.
func (s *sampler) rates(now, started time.Time) Rates {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastLook = now
	if s.timer == nil {
		s.samples = append(s.samples[:0], sample{at: now, stats: s.stats()})
		s.timer = time.AfterFunc(sampleEvery, s.tick)
	}
	end := s.samples[len(s.samples)-1]
	base := s.samples[0]
	if end.at.Sub(base.at) < RateWindow-sampleEvery/2 && !started.IsZero() {
		base = sample{at: started}
	}
	window := end.at.Sub(base.at)
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
	b, e := base.stats, end.stats
	return Rates{
		Window:    window,
		Submitted: per(b.Submitted, e.Submitted),
		Completed: per(b.Completed, e.Completed),
		Rejected:  per(b.Rejected, e.Rejected),
		Canceled:  per(b.Canceled, e.Canceled),
		Panicked:  per(b.Panicked, e.Panicked),
		Slow:      per(b.Slow, e.Slow),
	}
}

// tick takes a sample and re-arms the timer, or stops sampling if nobody
// has looked for idleAfter.
func (s *sampler) tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if now.Sub(s.lastLook) > idleAfter {
		s.timer, s.samples = nil, s.samples[:0]
		return
	}
	s.samples = append(s.samples, sample{at: now, stats: s.stats()})
	if keep := int(RateWindow/sampleEvery) + 1; len(s.samples) > keep {
		s.samples = append(s.samples[:0], s.samples[len(s.samples)-keep:]...)
	}
	s.timer.Reset(sampleEvery)
}
