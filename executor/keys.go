package executor

import (
	"sort"
	"time"

	"github.com/perkey/perkey/internal/mailbox"
)

// HotKeys returns up to n keys with the most pending tasks (queued +
// running), busiest first, with their ages where tracked; in striped mode one
// of its keys names each busy stripe. It visits every live mailbox, one shard
// lock at a time: O(active keys × log n). n <= 0 returns nil.
func (e *Executor[K]) HotKeys(n int) []KeyLoad[K] {
	return e.topKeys(n, func(l KeyLoad[K]) int64 { return int64(l.Pending) })
}

// OldestKeys returns up to n keys whose work is oldest, oldest first, by the
// age of their current hold (a task that runs long, or is stuck) or of their
// oldest queued task, whichever is older: which key is stuck, since when.
// Ages are tracked only with an Observer, a policy that reads queue age or
// WithSlowTaskWarning; without, it returns nil. It costs what HotKeys costs.
func (e *Executor[K]) OldestKeys(n int) []KeyLoad[K] {
	if e.unmade() || !e.ages {
		return nil
	}
	return e.topKeys(n, func(l KeyLoad[K]) int64 { return int64(max(l.Held, l.OldestWait)) })
}

// Ages is how old the executor's live work is now, for alerting on a stuck
// key without naming it (see Executor.Ages).
type Ages struct {
	OldestHeld time.Duration // the longest hold now: a task that runs long, or is stuck; 0 if none
	OldestWait time.Duration // the longest any queued task has waited; 0 if none
	SlowHolds  int           // holds older than WithSlowTaskWarning's threshold now; 0 without one
}

// Ages returns how old the executor's live work is: one pass over the live
// mailboxes, one shard lock at a time, with no allocation. Without age
// tracking (see OldestKeys) it is zero.
func (e *Executor[K]) Ages() Ages {
	var a Ages
	if e.unmade() || !e.ages {
		return a
	}
	now := monotime()
	e.router.Each(func(_ K, m *mailbox.Mailbox) {
		if at, ok := m.HeldSince(); ok {
			held := max(0, time.Duration(now-at))
			a.OldestHeld = max(a.OldestHeld, held)
			if e.cfg.slow > 0 && held > e.cfg.slow {
				a.SlowHolds++
			}
		}
		if at, ok := m.OldestStamp(); ok {
			a.OldestWait = max(a.OldestWait, time.Duration(now-at))
		}
	})
	return a
}

// topKeys returns up to n live keys with the highest score, highest first.
func (e *Executor[K]) topKeys(n int, score func(KeyLoad[K]) int64) []KeyLoad[K] {
	if e.unmade() || n <= 0 {
		return nil
	}
	top := loadHeap[K]{score: score}
	now := int64(0)
	if e.ages {
		now = monotime()
	}
	e.router.Each(func(k K, m *mailbox.Mailbox) {
		p := m.Pending()
		if p == 0 {
			return
		}
		l := KeyLoad[K]{Key: e.nameOf(k, m), Pending: p}
		if now != 0 {
			if at, ok := m.HeldSince(); ok {
				l.Held = max(0, time.Duration(now-at))
			}
			if at, ok := m.OldestStamp(); ok {
				l.OldestWait = max(0, time.Duration(now-at))
			}
		}
		top.offer(l, n)
	})
	out := top.s
	sort.Slice(out, func(a, b int) bool { return score(out[a]) > score(out[b]) })
	return out
}

// loadHeap keeps the n KeyLoads with the highest score (a min-heap on it).
type loadHeap[K comparable] struct {
	s     []KeyLoad[K]
	score func(KeyLoad[K]) int64
}

func (h *loadHeap[K]) less(i, j int) bool { return h.score(h.s[i]) < h.score(h.s[j]) }

func (h *loadHeap[K]) offer(l KeyLoad[K], n int) {
	if len(h.s) < n {
		h.s = append(h.s, l)
		for i := len(h.s) - 1; i > 0; {
			p := (i - 1) / 2
			if !h.less(i, p) {
				break
			}
			h.s[p], h.s[i] = h.s[i], h.s[p]
			i = p
		}
		return
	}
	if h.score(l) <= h.score(h.s[0]) {
		return
	}
	h.s[0] = l
	for i := 0; ; {
		c := 2*i + 1
		if c >= len(h.s) {
			break
		}
		if c+1 < len(h.s) && h.less(c+1, c) {
			c++
		}
		if !h.less(c, i) {
			break
		}
		h.s[i], h.s[c] = h.s[c], h.s[i]
		i = c
	}
}

// nameOf names a busy mailbox (locked): its key or, in striped mode, that of
// its oldest task or holder, else the last key that used it (a shared group
// running with nothing queued).
func (e *Executor[K]) nameOf(k K, m *mailbox.Mailbox) K {
	if !e.router.Striped() {
		return k
	}
	t, arg := m.Oldest()
	if c, _ := plainArg[K](arg); c != nil {
		return c.key // in striped mode every plain task has its ctx: see goPlain
	}
	if t == nil {
		t = m.Holder()
	}
	if t == nil {
		return k
	}
	j := jobOf[K](t)
	if j.multi == nil {
		return j.ctx.key
	}
	stripe := e.router.Index(k) // k last used the stripe, so it maps to it
	for _, jk := range *j.multi {
		if e.router.Index(jk) == stripe {
			return jk
		}
	}
	return k
}
