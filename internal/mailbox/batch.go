package mailbox

import "math"

// maxCut caps a batch's plain tasks (a bit each in extra.plainClaim).
const maxCut = 32

// cutRuns caps a batch's turns once a group's run ends in it: the cut walks
// each turn, cold, before the first runs, so large runs go one a batch.
const cutRuns = 64

// batch is a running batch's slots as they were cut: n slots of buf (and
// args, nil if all nil; stamps, if kept) from index first on.
type batch struct {
	buf      []slot
	args     []any
	stamps   []int64
	first, n int
}

// runBatch runs the exclusive single-key tasks (plain or turns) at the queue's
// head in queue order, up to budget (a group's run counts one, a tombstone none),
// and returns how many it took (m locked on entry and return). It cuts under one
// lock and runs unlocked, m.hold holdPlain so new submissions queue behind; its
// slots stay in the ring until it ends (a resize copies, never overwrites them).
// A task taken out before it starts is skipped: a turn loses its start CAS to its
// canceler (Entry.release frees its place), a plain task its claim to TakePlain.
func (m *Mailbox) runBatch(budget int) int {
	q := &m.q
	buf, args := q.buf(), q.argBuf()
	var (
		n, units, plains, taken int
		g                       *Group // the group of the run being taken, if any
		start                   *Turn  // the turn that starts that run
		inRun                   int    // turns taken of that run
	)
	for ; n < q.queued() && n < math.MaxUint16; n++ {
		k := q.at(n) // no batch runs: the queue starts at head
		if buf[k].fn != nil {
			if units == budget || plains == maxCut || g != nil && taken >= cutRuns {
				break
			}
			units++
			plains++
			taken++
			g = nil
			continue
		}
		e := entryAt(buf, args, k)
		if e == nil {
			continue // a tombstone
		}
		t := e.t
		if t.many != nil || e.shared {
			break
		}
		if eg := t.group(); eg == nil || eg != g || inRun == eg.Max || !eg.joins(start, t) {
			if units == budget || g != nil && taken >= cutRuns {
				break // the budget is spent, or enough of a group's runs
			}
			units++ // a new unit: a turn, or the first of a group's run
			g, start, inRun = eg, t, 0
		}
		inRun++
		taken++
		e.at = inBatch
	}
	b := batch{buf: buf, args: args, first: int(q.head), n: n}
	if st := m.stamps(); st != nil {
		b.stamps = *st
	}
	q.cut, q.taken = uint16(n), q.taken+uint32(n)
	if n > 1 {
		// Each plain task is claimed as it starts (see claim): a sweep or a
		// Close that gives up while one runs takes those behind it.
		m.more().plainClaim.Store(0)
	}
	if plains > 0 && m.aux == nil {
		m.aux = m.home.r.opt.Plain.NewAux(m) // before the batch reads it unlocked
	}
	m.hold = holdPlain
	m.home.mu.Unlock()
	m.runFrom(b, 0, 0, 0, 0)
	m.home.mu.Lock()
	m.endBatch()
	return units
}

// runFrom runs batch b from slot i on (plain: plain slots before i; turns,
// plains: tasks that ran). If a task never returns (runtime.Goexit; its Work
// or Plain accounted for it), the deferred call ends it and hands the rest of
// the batch, the mailbox and the slot to a fresh loop, keeping FIFO order.
func (m *Mailbox) runFrom(b batch, i, plain, turns, plains int) {
	var (
		running  *Turn   // a turn in Run
		grouped  []*Turn // the turns of a group's run in Run
		inPlain  bool    // a plain task in RunPlain
		plainArg any     // that task's arg
		next     int     // the slot after what runs
	)
	defer func() {
		switch {
		case running != nil:
			m.finishRun(m.x.Load(), running)
			turns++
		case grouped != nil:
			m.finishRuns(m.x.Load(), grouped)
			turns += len(grouped)
		case inPlain:
			m.ranBatched(m.x.Load(), 1)
			m.home.r.opt.Plain.SettlePlain(plainArg)
			plains++
		default:
			return
		}
		// Copies: capturing the loop's variables would move them to the heap.
		b, i, plain, turns, plains := b, next, plain, turns, plains
		m.home.r.takeOver(func() {
			m.runFrom(b, i, plain, turns, plains)
			m.home.mu.Lock()
			m.endBatch()
			m.home.mu.Unlock()
		}, item{m})
	}()
	r := m.home.r
	clock, p := r.opt.Clock, r.opt.Plain
	x := m.x.Load() // made by runBatch if n > 1, by Init if the runner has a clock; nil: a batch of one
	mask := len(b.buf) - 1
	var scratch []*Turn
	for i < b.n {
		k := (b.first + i) & mask
		if fn := b.buf[k].fn; fn != nil {
			plain++
			if !claim(x, plain-1) {
				i++
				continue // taken out (TakePlain), which ends it
			}
			var stamp int64
			if b.stamps != nil {
				stamp = b.stamps[k]
			}
			if clock != nil {
				x.heldSince.Store(held(clock()))
			}
			plainArg, next, inPlain = argAt(b.args, k), i+1, true
			p.RunPlain(m, fn, plainArg, stamp, b.n-i)
			inPlain = false
			plains++
			m.ranBatched(x, 1)
			p.SettlePlain(plainArg)
			i++
			continue
		}
		e := entryAt(b.buf, b.args, k)
		if e == nil {
			i++
			continue // a tombstone
		}
		t := e.t
		if g := t.group(); g != nil {
			if scratch == nil {
				// The run ends with the batch: size it by what is left.
				scratch = make([]*Turn, 0, min(g.Max, b.n-i))
			}
			scratch = scratch[:0]
			j := i
			for c := 0; j < b.n && c < g.Max; j++ {
				f := entryAt(b.buf, b.args, (b.first+j)&mask)
				if f == nil {
					if b.buf[(b.first+j)&mask].fn != nil {
						break // a plain task ends the run
					}
					continue // a tombstone
				}
				if f.t.group() != g || !g.joins(t, f.t) {
					break
				}
				c++
				if f.t.state.CompareAndSwap(Queued, Running) {
					scratch = append(scratch, f.t)
				}
			}
			if x != nil {
				x.cursor.Store(uint64(j)<<32 | uint64(plain)) // the run has started
			}
			if len(scratch) > 0 {
				if clock != nil {
					x.heldSince.Store(held(clock()))
				}
				grouped, next = scratch, j
				g.Run(scratch)
				grouped = nil
				m.finishRuns(x, scratch)
				turns += len(scratch)
			}
			i = j
			continue
		}
		if x != nil {
			x.cursor.Store(uint64(i)<<32 | uint64(plain))
		}
		if t.state.CompareAndSwap(Queued, Running) {
			if clock != nil {
				x.heldSince.Store(held(clock()))
			}
			running, next = t, i+1
			t.work.Run()
			running = nil
			m.finishRun(x, t)
			turns++
		}
		i++
	}
	if r.opt.Ran != nil && turns+plains > 0 {
		r.opt.Ran(m, turns, plains)
	}
}

// claim reports whether the caller, the loop starting plain task i of a running
// batch or TakePlain taking it out, got it first. x is nil only in a batch of
// one, which TakePlain leaves alone.
func claim(x *extra, i int) bool {
	return x == nil || x.plainClaim.Or(1<<i)&(1<<i) == 0
}

// finishRun frees a batched turn's place (ranBatched), then settles it.
func (m *Mailbox) finishRun(x *extra, t *Turn) {
	m.ranBatched(x, 1)
	t.Finish()
	t.work.Settle()
}

// finishRuns is finishRun for a run's turns not Left: one add frees all
// places before any settles (whoever sees a task end finds its place free).
func (m *Mailbox) finishRuns(x *extra, ts []*Turn) {
	n := 0
	for _, t := range ts {
		if t.state.Load() != Done {
			n++
		}
	}
	m.ranBatched(x, n)
	for _, t := range ts {
		if t.state.Load() != Done {
			t.Finish()
			t.work.Settle()
		}
	}
}

// ranBatched frees the places of n batched tasks that ran and admits parked
// submissions (queued behind the batch); x is m.x as the loop loaded it (nil:
// a batch of one). Places go to x.ran, which endBatch takes off pending under
// the lock (see count), so no add per task bounces pending's line, which every
// submitter writes; submitters keep off x's (stamps). ARCHITECTURE.md, "The queue".
func (m *Mailbox) ranBatched(x *extra, n int) {
	if x == nil {
		m.pending.Add(-int32(n))
		return // nothing parked, and the runner measures nothing (Init)
	}
	x.ran.Add(int32(n))
	if x.parked.Load() > 0 {
		m.home.mu.Lock()
		m.promote()
		m.home.mu.Unlock()
	}
	if x.measure {
		x.served.Add(int32(n))
	}
}

// endBatch drops the batch that ran from the ring, with the tombstones left
// at the queue's head meanwhile, and releases its hold (locked).
func (m *Mailbox) endBatch() {
	q := &m.q
	n := int(q.cut)
	q.cut = 0
	q.drop(n, m.stamps())
	q.trim(m.stamps())
	if x := m.x.Load(); x != nil {
		x.plainClaim.Store(0)
		x.cursor.Store(0)
		if ran := x.ran.Load(); ran != 0 {
			// Both under the lock, which every reader of count holds.
			m.pending.Add(-ran)
			x.ran.Store(0)
		}
	}
	m.hold = holdNone
	m.clearHeld()
	m.decay()
	m.promote()
}
