package executor

import (
	"context"
	"slices"
	"time"

	"github.com/perkey/perkey/internal/mailbox"
)

// Watching the room a waiting submission waits for: nothing watches a queued
// task's ctx (see "Lazy cancellation" in admit.go), so a task whose ctx ended
// would hold room, and a submission waiting for it would wait, until its
// queue reached it. So while anyone waits for room, the ctxs of the
// asynchronous tasks holding it are watched (context.AfterFunc), and the end
// of one sweeps the keys its tasks were seen on (sweepKey, on AfterFunc's
// goroutine, where the swept tasks' callbacks run); synchronous tasks'
// callers withdraw them. A wait is watched only once it has lasted
// roomWatchAfter (lateWatch): a room whose tasks move lets its waiters in
// before then, and one that stands still at most roomWatchAfter after a ctx
// ahead ended (ARCHITECTURE.md, "Cancellation", has the costs). Arrival at a
// cap still sweeps first (admit; a large room at most once per capSweepEvery).

// roomWatch is the watch shared by the waiters of one room, a key's
// (watchKey) or the executor's (watchGlobal), guarded by Executor.watchMu.
// It watches each distinct ctx once and ends with the last waiter. It costs
// the waiters, never a queued task, and no more than what holds room: each
// look drops what it missed (prune).
type roomWatch[K comparable] struct {
	waiters int                                // submissions that use it
	watched map[<-chan struct{}]*watchedCtx[K] // by Done channel
	gen     uint64                             // bumped by each look
	looked  int                                // len(watched) after the last look
}

// watchedCtx is one ctx a roomWatch watches.
type watchedCtx[K comparable] struct {
	stop func() bool // its context.AfterFunc's
	keys []K         // the keys its tasks were seen on: swept as it ends
	gen  uint64      // the newest look (or add) that found it
}

// seen is a ctx a look found, and the key of its task.
type seen[K comparable] struct {
	ctx context.Context
	key K
}

// watchKey watches, for a submission waiting in key's room (m locked), the
// ctxs of what is ahead of it or parked since (eachAhead), and own (its ctx
// if asynchronous). If any can end it joins key's watch, reports true and
// calls leaveKey as it leaves; if none can, nothing ahead of it ever needs
// watching (what is let in before it was parked ahead of it): no cost.
func (e *Executor[K]) watchKey(m *mailbox.Mailbox, key K, own context.Context) (joined bool) {
	e.watchMu.Lock()
	defer e.watchMu.Unlock()
	w := e.watches[key]
	var gen uint64 // 0 until something to watch is found (a look's gen is never 0)
	add := func(ctx context.Context) {
		if w == nil {
			if e.watches == nil {
				e.watches = make(map[K]*roomWatch[K])
			}
			w = newRoomWatch[K]()
			e.watches[key] = w
		}
		if gen == 0 {
			gen = w.look()
		}
		e.watch(w, gen, ctx, key)
	}
	e.eachAhead(m, add)
	if own != nil && ctxDone(own) != nil {
		add(own)
	}
	if gen == 0 {
		return false
	}
	w.prune(gen)
	w.waiters++ // last, as in joinGlobal: a ctx's Done is user code
	return true
}

// roomWatchAfter is how long a wait for room lasts before it is watched.
const roomWatchAfter = time.Millisecond

// newStoppedTimer makes a timer for Executor.timers.
func newStoppedTimer() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

// lateWatch watches a wait for room (key's, or global) once it lasted watchAfter.
type lateWatch[K comparable] struct {
	e      *Executor[K]
	key    K
	own    context.Context // the waiting submission's ctx if asynchronous (job.watched)
	global bool
	t      *time.Timer // from timers, once armed
	joined bool        // watch joined the room's watch: stop leaves it
}

// arm starts the wait's clock; the waiter calls watch as the channel fires.
func (w *lateWatch[K]) arm() <-chan time.Time {
	w.t = w.e.timers.Get().(*time.Timer)
	w.t.Reset(w.e.watchAfter)
	return w.t.C
}

// watch joins the room's watch for the rest of the wait. No mailbox: the
// waiter was let in and its queue drained since, so nothing to watch.
func (w *lateWatch[K]) watch() {
	if w.global {
		w.e.watchGlobal(w.key, w.own)
		w.joined = true
		return
	}
	if m := w.e.router.Find(w.key); m != nil {
		w.joined = w.e.watchKey(m, w.key, w.own)
		m.Release()
	}
}

// stop ends the wait's watch, if any, and gives its timer back.
func (w *lateWatch[K]) stop() {
	if w.t != nil {
		w.t.Stop()
		w.e.timers.Put(w.t)
	}
	switch {
	case !w.joined:
	case w.global:
		w.e.leaveGlobal()
	default:
		w.e.leaveKey(w.key)
	}
}

// leaveKey is a waiter leaving key's room; the last one ends its watch.
func (e *Executor[K]) leaveKey(key K) {
	e.watchMu.Lock()
	defer e.watchMu.Unlock()
	if e.watches[key].leave() {
		delete(e.watches, key)
	}
}

// watchGlobal is watchKey for the executor's room; the caller, on key, holds
// no shard lock (it takes each in turn) and calls leaveGlobal as it leaves.
// The watch is kept between waits: one with nothing to watch allocates none.
func (e *Executor[K]) watchGlobal(key K, own context.Context) {
	gen, look := e.joinGlobal(key, own)
	if !look {
		return
	}
	// Unlocked: the shard locks come before watchMu (see watchKey). What
	// others add meanwhile carries gen or newer, and stays.
	var ahead []seen[K]
	e.router.Each(func(k K, m *mailbox.Mailbox) {
		e.eachAhead(m, func(ctx context.Context) { ahead = append(ahead, seen[K]{ctx, k}) })
	})
	e.watchMu.Lock()
	defer e.watchMu.Unlock()
	for _, s := range ahead {
		e.watch(&e.global, gen, s.ctx, s.key)
	}
	e.global.prune(gen)
}

// joinGlobal makes the caller a waiter of the executor's watch, adds own,
// and reports whether it is to look at every queue (as gen): the first
// waiter does, and a later one once the watch has doubled since the last
// look (O(1) amortised); nobody else takes room while anyone waits.
func (e *Executor[K]) joinGlobal(key K, own context.Context) (gen uint64, look bool) {
	e.watchMu.Lock()
	defer e.watchMu.Unlock()
	w := &e.global
	if w.watched == nil {
		w.watched = make(map[<-chan struct{}]*watchedCtx[K])
	}
	look = w.waiters == 0 || len(w.watched) > 2*w.looked+16
	gen = w.gen
	if look {
		gen = w.look()
	}
	if own != nil {
		e.watch(w, gen, own, key) // before the caller counts: own's Done is user code
	}
	w.waiters++
	e.globalWaiters.Add(1) // before the look: see watchLate
	return gen, look
}

// leaveGlobal is a waiter leaving the executor's room (see watchGlobal).
func (e *Executor[K]) leaveGlobal() {
	e.watchMu.Lock()
	defer e.watchMu.Unlock()
	e.global.leave()
	e.globalWaiters.Add(-1)
}

// watchLate adds own, the ctx of an asynchronous submission on key that
// holds executor-wide room and is about to be queued (or parked) on m,
// locked, to the executor's watch if anyone waits there. A waiter's look
// may have passed m before the submission, reserved earlier, was queued:
// either this load sees the waiter, counted before its look, or the look
// takes m's lock after the submission queued and finds it.
func (e *Executor[K]) watchLate(key K, own context.Context) {
	if e.globalWaiters.Load() == 0 {
		return
	}
	e.watchMu.Lock()
	defer e.watchMu.Unlock()
	if w := &e.global; w.waiters > 0 {
		e.watch(w, w.gen, own, key)
	}
}

func newRoomWatch[K comparable]() *roomWatch[K] {
	return &roomWatch[K]{watched: make(map[<-chan struct{}]*watchedCtx[K])}
}

// eachAhead is eachAsync for the ctxs that can end (Done not nil).
func (e *Executor[K]) eachAhead(m *mailbox.Mailbox, f func(ctx context.Context)) {
	e.eachAsync(m, func(ctx context.Context) {
		if ctxDone(ctx) != nil {
			f(ctx)
		}
	})
}

// eachAsync calls f (m locked) with the caller's ctx of each of m's
// unstarted asynchronous tasks (queued, or in a running batch) and parked
// asynchronous submissions; a plain Go with context.Background() has none.
func (e *Executor[K]) eachAsync(m *mailbox.Mailbox, f func(ctx context.Context)) {
	async := func(t *mailbox.Turn) {
		if j := jobOf[K](t); j.async {
			f(j.ctx.caller())
		}
	}
	m.EachWaiting(async)
	m.EachParked(async)
	m.TakePlain(func(arg any) bool {
		if ctx := plainCaller[K](arg); ctx != nil {
			f(ctx)
		}
		return false // looked at, never taken
	})
}

// look starts a look at what is ahead; prune then drops what it missed.
func (w *roomWatch[K]) look() uint64 {
	w.gen++
	return w.gen
}

// watch adds ctx, found on key by the look gen (or added since), to w.
func (e *Executor[K]) watch(w *roomWatch[K], gen uint64, ctx context.Context, key K) {
	d := ctxDone(ctx)
	if d == nil {
		return // never ends
	}
	c := w.watched[d]
	if c == nil {
		c = &watchedCtx[K]{gen: gen}
		if c.stop = ctxAfterFunc(ctx, func() { e.watchEnded(w, d, c) }); c.stop == nil {
			return // its methods panic: never watched
		}
		w.watched[d] = c
	}
	if c.gen < gen {
		c.gen, c.keys = gen, c.keys[:0] // found by a newer look: its keys are the look's
	}
	if n := len(c.keys); n == 0 || c.keys[n-1] != key { // a key's tasks are found together
		c.keys = append(c.keys, key)
	}
}

// watchEnded sweeps the keys of c, a watched ctx that has ended.
func (e *Executor[K]) watchEnded(w *roomWatch[K], d <-chan struct{}, c *watchedCtx[K]) {
	e.watchMu.Lock()
	keys := slices.Clone(c.keys)
	if w.watched[d] == c {
		delete(w.watched, d) // nothing more to watch on it
	}
	e.watchMu.Unlock()
	for _, k := range keys {
		e.sweepKey(k)
	}
}

// prune stops watching what the look gen did not find.
func (w *roomWatch[K]) prune(gen uint64) {
	for d, c := range w.watched {
		if c.gen < gen {
			c.stop()
			delete(w.watched, d)
		}
	}
	w.looked = len(w.watched)
}

// leave is a waiter leaving w; the last one ends the watch (true).
func (w *roomWatch[K]) leave() bool {
	if w.waiters--; w.waiters > 0 {
		return false
	}
	for _, c := range w.watched {
		c.stop()
	}
	clear(w.watched)
	return true
}

// sweepKey sweeps key's mailbox, if it has one (see sweep).
func (e *Executor[K]) sweepKey(key K) {
	if m := e.router.Find(key); m != nil && !e.sweep(m) {
		m.Release()
	}
}
