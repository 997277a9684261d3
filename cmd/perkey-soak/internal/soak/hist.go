package soak

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// subBits is how many bits below the leading one a histogram bucket keeps:
// 4 bits give buckets at most 1/16 (6.25%) wide.
const subBits = 4

// histogram counts durations in log-linear buckets: fixed memory, lock-free
// recording, quantiles within 6.25%, and an exact maximum.
type histogram struct {
	counts [64 << subBits]atomic.Uint64
	max    atomic.Int64
}

func bucketOf(ns uint64) int {
	if ns < 1<<subBits {
		return int(ns)
	}
	exp := bits.Len64(ns) - 1 - subBits // shift that leaves subBits+1 bits
	return (exp+1)<<subBits | int(ns>>exp)&(1<<subBits-1)
}

// lowerBound is the smallest duration that falls in bucket b.
func lowerBound(b int) uint64 {
	if b < 1<<subBits {
		return uint64(b)
	}
	exp := b>>subBits - 1
	return (1<<subBits | uint64(b)&(1<<subBits-1)) << exp
}

func (h *histogram) record(d time.Duration) {
	ns := max(int64(d), 0)
	h.counts[bucketOf(uint64(ns))].Add(1)
	for {
		m := h.max.Load()
		if ns <= m || h.max.CompareAndSwap(m, ns) {
			return
		}
	}
}

// merge adds o's counts to h. It is not atomic with respect to recording.
func (h *histogram) merge(o *histogram) {
	for i := range o.counts {
		if c := o.counts[i].Load(); c > 0 {
			h.counts[i].Add(c)
		}
	}
	if m := o.max.Load(); m > h.max.Load() {
		h.max.Store(m)
	}
}

func (h *histogram) total() uint64 {
	var n uint64
	for i := range h.counts {
		n += h.counts[i].Load()
	}
	return n
}

// quantile returns the midpoint of the bucket holding quantile q (0..1),
// capped at the maximum seen; 0 if nothing was recorded.
func (h *histogram) quantile(q float64) time.Duration {
	n := h.total()
	if n == 0 {
		return 0
	}
	rank := uint64(q*float64(n-1)) + 1
	var seen uint64
	for b := range h.counts {
		seen += h.counts[b].Load()
		if seen >= rank {
			lo, hi := lowerBound(b), lowerBound(b+1)
			mid := lo + (hi-lo)/2
			return time.Duration(min(int64(mid), h.max.Load()))
		}
	}
	return time.Duration(h.max.Load())
}
