package executor

import (
	"context"
	"slices"
	"time"

	"github.com/perkey/perkey/internal/mailbox"
)

// Watching the room a waiting submission waits for.
//
// Nothing watches a queued task's ctx (see "Lazy cancellation" in
// admit.go), so a task whose ctx ended would hold room until its queue
// reached it, and a submission waiting for that room would wait for a task
// that will never run. So while anyone waits for room, the ctxs of the
// asynchronous tasks holding it are watched (context.AfterFunc), and the
// end of one sweeps the keys its tasks were seen on (sweepKey, on
// AfterFunc's goroutine, where the swept tasks' callbacks run). Synchronous
// tasks need no watch: their callers withdraw them.
//
// A wait for room, at a key's cap or the executor's, watches only once it
// has lasted roomWatchAfter (lateWatch). A registration costs about 1 µs
// and 500 B per distinct ctx, and a producer held at a cap waits about as
// long as the tasks ahead take to run: with a ctx per task, watching every
// wait from its start cost each task a registration and a look at what
// holds the room, and a producer at a full key ran 3 to 4 times slower
// than since. A room whose
// tasks move lets its waiters in before they watch anything; only one that
// stands still (its tasks blocked, or slow) needs the watch, and then an
// ended ctx ahead lets the waiter in at most roomWatchAfter late. Arrival
// at the cap still sweeps first (admit), so a ctx that ended before the
// wait began never holds it up, unless the room is large and was swept
// less than capSweepEvery before (see "Lazy cancellation" in admit.go).
//
// The waiters of one room share one watch (roomWatch), which watches each
// distinct ctx (by its Done channel) once and ends with the last waiter.
// Its cost is the waiters', never a queued task's, and is bounded by what
// holds room: each look drops what it did not find (prune), so a room that
// never empties (a hot key under Block, each submission with its own ctx)
// keeps no registration per submission it ever let in.
//
//   - A key's room (watchKey): the key's unstarted tasks, queued or in a
//     running batch, and the submissions parked before the waiter, its own
//     included once let in (nobody else enters ahead of it). Each waiter
//     looks at the key's mailbox under its lock.
//   - The executor's room (watchGlobal, WithMaxPending): the same, over
//     every key. The first waiter to watch looks at every mailbox, one shard
//     lock at a time; a later one adds only its own ctx (nobody else takes room
//     while anyone waits), and looks again once the watch has doubled since
//     the last look: O(1) amortised per waiter. A submission that reserved
//     room before a waiter came may be queued after that waiter's look
//     passed its key: it adds its own ctx as it is queued (watchLate).

// roomWatch is the watch shared by the submissions waiting in one room.
// Guarded by Executor.watchMu.
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

// watchKey watches, for a submission waiting in key's room (m locked; see
// lateWatch), the ctxs of what is ahead of it (and of what was parked
// behind it since), and own (its ctx if it is asynchronous). If any of them
// can end it joins key's watch and reports true, and calls leaveKey as it
// leaves; if none can, nothing ahead of it ever needs watching (what is let
// in before it was parked ahead of it), and it costs nothing.
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

// roomWatchAfter is how long a wait for room (a key's or the executor's)
// lasts before it watches what holds the room (see "Watching the room").
const roomWatchAfter = time.Millisecond

// newStoppedTimer makes a timer for Executor.timers.
func newStoppedTimer() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

// lateWatch is the watch of one wait for room, begun once the wait has
// lasted watchAfter (see "Watching the room"): in key's room, or in the
// executor's if global.
type lateWatch[K comparable] struct {
	e      *Executor[K]
	key    K
	own    context.Context // the waiting submission's ctx if asynchronous (job.watched)
	global bool
	t      *time.Timer // from timers, once armed
	joined bool        // watch joined the room's watch: stop leaves it
}

// arm starts the wait's clock: the channel fires once it has lasted
// watchAfter, and the waiter then calls watch.
func (w *lateWatch[K]) arm() <-chan time.Time {
	w.t = w.e.timers.Get().(*time.Timer)
	w.t.Reset(w.e.watchAfter)
	return w.t.C
}

// watch joins the room's watch (watchKey, watchGlobal) for the rest of the
// wait. The key's mailbox is gone only if the waiter was let in and its
// queue drained since: then there is nothing to watch.
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

// leaveKey is a waiter leaving key's room (see watchKey): its watch is
// there until its last waiter leaves.
func (e *Executor[K]) leaveKey(key K) {
	e.watchMu.Lock()
	defer e.watchMu.Unlock()
	if e.watches[key].leave() {
		delete(e.watches, key)
	}
}

// watchGlobal is watchKey for the executor's room: the caller, a
// submission on key about to wait there, calls leaveGlobal as it leaves.
// It takes the router's shard locks, so the caller holds none. The watch
// is kept between waits (emptied as the last waiter leaves), so a wait with
// nothing to watch allocates nothing.
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
// and reports whether the caller is to look at every queue, as gen.
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
// locked, to the executor's watch if anyone waits for room there. A
// waiter's look may have missed the submission: it reserved before the
// waiter came, and m's lock was free when the look passed m. Either this
// load sees the waiter, counted before its look, or the look takes m's
// lock after this submission has queued and finds it there. While nobody
// waits it costs one atomic load.
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

// eachAhead calls f (m locked) with the ctx of each of m's asynchronous
// tasks that have not started, and of its parked asynchronous submissions,
// that can end (Done not nil).
func (e *Executor[K]) eachAhead(m *mailbox.Mailbox, f func(ctx context.Context)) {
	e.eachAsync(m, func(ctx context.Context) {
		if ctxDone(ctx) != nil {
			f(ctx)
		}
	})
}

// eachAsync calls f (m locked) with the caller's ctx of each of m's
// asynchronous tasks that have not started (queued, or in a running batch)
// and of its parked asynchronous submissions. A plain Go with
// context.Background() has none to give.
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

// look starts a look at what is ahead: what it finds is kept, and what was
// watched before it and it does not find is dropped (prune).
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
