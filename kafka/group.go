package kafka

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// The group callbacks run on the client's group goroutine, one at a time,
// and (BlockRebalanceOnPoll) never while a poll's records are being
// dispatched.

// onAssigned starts a fresh assignment for each new partition.
func (c *Consumer) onAssigned(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
	c.client.Store(cl)
	if stale := c.take(assigned); len(stale) > 0 {
		// Not revoked nor lost first: never expected, but a key must
		// not run under two assignments, so treat it as lost.
		c.log.Warn("partition assigned again before it was revoked; dropping the old state")
		c.loseParts(stale)
	}
	n := 0
	c.mu.Lock()
	for t, ps := range assigned {
		for _, p := range ps {
			c.gen++
			tp := TopicPartition{t, p}
			c.parts[tp] = newPartition(c.base, tp, c.gen)
			n++
		}
	}
	c.mu.Unlock()
	if n == 0 {
		return
	}
	c.assigned.Add(uint64(n))
	// A partition paused under an earlier assignment must fetch again.
	cl.ResumeFetchPartitions(assigned)
	c.log.Info("partitions assigned", zap.Any("partitions", assigned))
}

// onRevoked stops starting the revoked partitions' records, lets the
// running handlers finish (within RevokeTimeout, then cancels them and
// waits), commits, and drops the partitions' state, all before they can go
// to another member. The records left are the next owner's; those done
// above the committed offset are in the commit's offset map, so the next
// owner skips them.
func (c *Consumer) onRevoked(_ context.Context, cl *kgo.Client, revoked map[string][]int32) {
	c.client.Store(cl)
	parts := c.take(revoked)
	if len(parts) == 0 {
		return
	}
	start := time.Now()
	c.windDown(parts, c.cfg.RevokeTimeout, "revoke", false)
	c.commitMu.Lock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := c.commit(ctx, parts)
	cancel()
	for _, p := range parts {
		c.drop(p)
	}
	c.commitMu.Unlock()
	c.revoked.Add(uint64(len(parts)))
	if err != nil {
		c.log.Warn("commit of revoked partitions failed; their uncommitted records will be redelivered",
			zap.Any("partitions", revoked), zap.Error(err))
	}
	c.log.Info("partitions revoked", zap.Any("partitions", revoked), zap.Duration("took", time.Since(start)))
}

// onLost drops the lost partitions without committing: another member may
// own them already.
func (c *Consumer) onLost(_ context.Context, cl *kgo.Client, lost map[string][]int32) {
	c.client.Store(cl)
	parts := c.take(lost)
	if len(parts) == 0 {
		return
	}
	c.loseParts(parts)
	c.lost.Add(uint64(len(parts)))
	c.log.Warn("partitions lost", zap.Any("partitions", lost))
}

func (c *Consumer) loseParts(parts []*partition) {
	c.stop(parts)
	c.await(parts, "lost")
	c.commitMu.Lock()
	for _, p := range parts {
		c.drop(p)
	}
	c.commitMu.Unlock()
}

// onOffsetsFetched reads the offset maps of newly assigned partitions
// (completed offsets above the committed one, written by commit) so that
// their records are not handled twice. It runs after onAssigned and before
// the partitions' first fetch.
func (c *Consumer) onOffsetsFetched(_ context.Context, _ *kgo.Client, resp *kmsg.OffsetFetchResponse) error {
	apply := func(topic string, partition int32, offset int64, meta *string) {
		if meta == nil || topic == "" {
			return
		}
		d, ok := parseMeta(*meta)
		if !ok || d.base != offset {
			return
		}
		c.mu.Lock()
		p := c.parts[TopicPartition{topic, partition}]
		c.mu.Unlock()
		if p == nil {
			return
		}
		p.mu.Lock()
		if p.track.next < 0 {
			p.skip = d
		}
		p.mu.Unlock()
	}
	for _, g := range resp.Groups {
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				apply(t.Topic, p.Partition, p.Offset, p.Metadata)
			}
		}
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			apply(t.Topic, p.Partition, p.Offset, p.Metadata)
		}
	}
	return nil
}

// commitLoop commits every CommitInterval until ctx ends.
func (c *Consumer) commitLoop(ctx context.Context) {
	t := time.NewTicker(c.cfg.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.commitMu.Lock()
		cctx, cancel := context.WithTimeout(ctx, max(5*c.cfg.CommitInterval, 10*time.Second))
		err := c.commit(cctx, c.snapshot())
		cancel()
		c.commitMu.Unlock()
		if err != nil && ctx.Err() == nil {
			c.log.Warn("commit failed; retrying next interval", zap.Error(err))
		}
	}
}

// commit commits, for each of parts, the lowest offset not done (with the
// offset map of the done records above it as metadata), if it moved since
// the last commit. The client commits with the group's current generation
// and member id. Called with commitMu held.
func (c *Consumer) commit(ctx context.Context, parts []*partition) error {
	type pending struct {
		p    *partition
		off  int64
		meta string
	}
	byTP := make(map[TopicPartition]pending)
	offsets := make(map[string]map[int32]kgo.EpochOffset)
	for _, p := range parts {
		p.mu.Lock()
		if !p.dropped && p.committed >= 0 {
			wm, meta := p.track.watermark(), p.track.meta(p.skip.ranges)
			if wm > p.committed || wm == p.committed && meta != p.meta {
				if offsets[p.tp.Topic] == nil {
					offsets[p.tp.Topic] = make(map[int32]kgo.EpochOffset)
				}
				offsets[p.tp.Topic][p.tp.Partition] = kgo.EpochOffset{Epoch: p.track.epoch, Offset: wm}
				byTP[p.tp] = pending{p, wm, meta}
			}
		}
		p.mu.Unlock()
	}
	if len(byTP) == 0 {
		return nil
	}
	ctx = kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
		for i := range req.Topics {
			t := &req.Topics[i]
			for j := range t.Partitions {
				pp := &t.Partitions[j]
				if pd, ok := byTP[TopicPartition{t.Topic, pp.Partition}]; ok && pd.meta != "" {
					pp.Metadata = kmsg.StringPtr(pd.meta)
				}
			}
		}
		return nil
	})
	var (
		rerr error
		ok   []TopicPartition
	)
	c.client.Load().CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			rerr = err
			return
		}
		// v10+ responses name topics by id only.
		names := make(map[[16]byte]string, len(req.Topics))
		for _, t := range req.Topics {
			names[t.TopicID] = t.Topic
		}
		for _, t := range resp.Topics {
			topic := t.Topic
			if topic == "" {
				topic = names[t.TopicID]
			}
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					rerr = errors.Join(rerr, err)
					continue
				}
				ok = append(ok, TopicPartition{topic, p.Partition})
			}
		}
	})
	for _, tp := range ok {
		pd, found := byTP[tp]
		if !found {
			continue
		}
		pd.p.mu.Lock()
		pd.p.committed, pd.p.meta = pd.off, pd.meta
		pd.p.mu.Unlock()
		c.mu.Lock()
		c.committed[tp] = pd.off
		c.mu.Unlock()
	}
	if rerr != nil {
		c.commitErrors.Add(1)
		return rerr
	}
	c.commits.Add(1)
	return nil
}
