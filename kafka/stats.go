package kafka

// Stats is a snapshot of a Consumer's counters. Counters count since Run
// began; the others are as of the call.
type Stats struct {
	Fetched      uint64 // records polled and dispatched to handlers
	Handled      uint64 // records whose handler returned nil (redeliveries count again)
	Batches      uint64 // BatchHandler calls that returned nil (Handled counts their records)
	Retried      uint64 // failed attempts followed by a retry (a batch's attempt counts once)
	Skipped      uint64 // records marked done by the Skip decision
	DeadLettered uint64 // records the DeadLetter hook accepted
	AlreadyDone  uint64 // records not handled because the offset map said they were done

	Commits      uint64                   // successful commit requests
	CommitErrors uint64                   // failed commit requests (retried at the next interval)
	Committed    map[TopicPartition]int64 // last offset this consumer committed, per partition

	InFlight int // records held now (fetched, not done), all partitions
	Running  int // handler calls running now (a batch is one)
	MaxHeld  int // most records one partition held at once, just after a poll

	Partitions int    // partitions assigned now
	Paused     int    // partitions paused now for flow control
	Pauses     uint64 // times a partition was paused
	Assigned   uint64 // partition assignments received
	Revoked    uint64 // partitions revoked (committed, then dropped)
	Lost       uint64 // partitions lost (dropped without commit)
}

// Stats returns a snapshot of the consumer's counters. It is safe to call
// at any time, also before and after Run.
func (c *Consumer) Stats() Stats {
	s := Stats{
		Fetched:      c.fetched.Load(),
		Handled:      c.handled.Load(),
		Batches:      c.batches.Load(),
		Retried:      c.retried.Load(),
		Skipped:      c.skipped.Load(),
		DeadLettered: c.deadLettered.Load(),
		AlreadyDone:  c.alreadyDone.Load(),
		Commits:      c.commits.Load(),
		CommitErrors: c.commitErrors.Load(),
		MaxHeld:      int(c.maxHeld.Load()),
		Pauses:       c.pauses.Load(),
		Assigned:     c.assigned.Load(),
		Revoked:      c.revoked.Load(),
		Lost:         c.lost.Load(),
	}
	c.mu.Lock()
	s.Committed = make(map[TopicPartition]int64, len(c.committed))
	for tp, o := range c.committed {
		s.Committed[tp] = o
	}
	c.mu.Unlock()
	for _, p := range c.snapshot() {
		p.mu.Lock()
		if !p.dropped {
			s.Partitions++
			s.InFlight += p.track.held
			s.Running += p.running
			if p.paused {
				s.Paused++
			}
		}
		p.mu.Unlock()
	}
	return s
}
