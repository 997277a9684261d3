package soak

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Invariant names one checked property (see the package doc).
type Invariant int

// The invariants, in the order the report lists them.
const (
	Overlap Invariant = iota
	FIFOBreak
	Lost
	RanTwice
	RanAfterCancel
	SlowWithdrawal
	GiveUpLeft
	WrongOutcome
	FalseDelay
	HandlerMiss
	Counters
	OverWorkers
	RingNotBroken
	RingHang
	BatchBound
	LeakedGoroutines
	numInvariants
)

var invariantNames = [numInvariants]string{
	Overlap:          "overlaps per key",
	FIFOBreak:        "FIFO breaks",
	Lost:             "lost tasks",
	RanTwice:         "tasks run twice",
	RanAfterCancel:   "ran after cancel",
	SlowWithdrawal:   "slow withdrawals",
	GiveUpLeft:       "unstarted tasks a forced Close left",
	WrongOutcome:     "wrong outcomes",
	FalseDelay:       "false delay rejections",
	HandlerMiss:      "Go failures not handled once",
	Counters:         "counters that do not add up",
	OverWorkers:      "over the worker bound",
	RingNotBroken:    "deadlock rings not broken once",
	RingHang:         "deadlock rings hung",
	BatchBound:       "batches out of bounds",
	LeakedGoroutines: "leaked goroutines",
}

func (i Invariant) String() string { return invariantNames[i] }

// maxDetails bounds the violation messages kept for the report.
const maxDetails = 32

// violations counts invariant breaks and keeps the first few descriptions.
type violations struct {
	n       [numInvariants]atomic.Int64
	mu      sync.Mutex // guards details
	details []string
}

func (v *violations) add(i Invariant, n int64, format string, args ...any) {
	if n <= 0 {
		return
	}
	v.n[i].Add(n)
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.details) < maxDetails {
		v.details = append(v.details, i.String()+": "+fmt.Sprintf(format, args...))
	}
}

// occupancy tracks, per key, how many exclusive (high 32 bits) and shared
// (low 32 bits) fns are running now.
type occupancy []atomic.Uint64

const (
	exclOne   = uint64(1) << 32
	sharedOne = uint64(1)
)

// enter records a fn starting on key and reports whether it overlaps a
// running fn it must not run beside.
func (o occupancy) enter(key int, shared bool) (ok bool) {
	if shared {
		prev := o[key].Add(sharedOne) - sharedOne
		return prev>>32 == 0
	}
	prev := o[key].Add(exclOne) - exclOne
	return prev == 0
}

// leave records that fn has returned.
func (o occupancy) leave(key int, shared bool) {
	if shared {
		o[key].Add(^(sharedOne - 1))
		return
	}
	o[key].Add(^(exclOne - 1))
}

// stream is the start order of one producer's submissions on one key, within
// one batch: seq numbers are given in submission order, and each start must
// carry a higher seq than every start before it.
type stream struct {
	last atomic.Int64 // highest seq started so far
}

// start records seq starting and reports whether the order held.
func (s *stream) start(seq int64) bool {
	for {
		old := s.last.Load()
		if seq < old {
			return false
		}
		if s.last.CompareAndSwap(old, seq) {
			return true
		}
	}
}
