package kafka

import (
	"context"
	"sync"
)

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// recordKey is the executor key of a record: its key scoped to its
// partition, so two partitions never share a key's queue (a key moves
// between members with its partition, never on its own). Records with a
// nil key share one key per partition: they run in offset order.
type recordKey struct {
	topic     string
	partition int32
	nilKey    bool
	key       string
}

// phase is where a partition is in its life on this member.
type phase uint8

const (
	// active: records are dispatched and run.
	active phase = iota
	// draining: revoked or shutting down; no new records, the submitted
	// ones still run until the grace period ends.
	draining
	// stopping: the grace period ended or the partition was lost; records
	// not started are left for the next owner, running handlers see their
	// ctx canceled.
	stopping
)

// partition is one assignment of a partition to this member. A new
// assignment of the same partition gets a new partition value: the pointer
// is the generation, so work of an older assignment (a stale completion)
// can never touch the newer one's offsets.
type partition struct {
	tp     TopicPartition
	gen    uint64             // assignment number, for logs
	ctx    context.Context    // handlers' ctx
	cancel context.CancelFunc // ends ctx: grace period over, lost, dropped

	mu          sync.Mutex
	track       tracker       // guarded by mu
	outstanding int           // guarded by mu; records submitted whose task has not returned
	running     int           // guarded by mu; handler calls running now (a batch is one)
	phase       phase         // guarded by mu
	dropped     bool          // guarded by mu; state released, completions ignored
	paused      bool          // guarded by mu; fetching paused for flow control
	committed   int64         // guarded by mu; last committed offset, -1 before the first record
	meta        string        // guarded by mu; metadata of the last commit
	skip        doneSet       // guarded by mu; offsets done before this assignment (offset map)
	idle        chan struct{} // guarded by mu; closed when outstanding reaches 0, made by a waiter
}

func newPartition(parent context.Context, tp TopicPartition, gen uint64) *partition {
	ctx, cancel := context.WithCancel(parent)
	return &partition{
		tp: tp, gen: gen, ctx: ctx, cancel: cancel,
		track:     newTracker(),
		committed: -1,
	}
}

// idleCh returns a channel closed once no task of the partition is
// outstanding, or nil if none is now. Called with mu held.
func (p *partition) idleCh() chan struct{} {
	if p.outstanding == 0 {
		return nil
	}
	if p.idle == nil {
		p.idle = make(chan struct{})
	}
	return p.idle
}

// tasksDone counts n records' tasks out and wakes the waiters on the last
// one. Called with mu held.
func (p *partition) tasksDone(n int) {
	p.outstanding -= n
	if p.outstanding == 0 && p.idle != nil {
		close(p.idle)
		p.idle = nil
	}
}
