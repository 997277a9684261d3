package router

import (
	"hash/maphash"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/perkey/perkey/internal/mailbox"
)

// Router maps keys of type K to live mailboxes.
type Router[K comparable] struct {
	seed    maphash.Seed
	mask    uint64
	shards  []shard[K]  // dynamic mode
	stripes []stripe[K] // striped mode
	runner  *mailbox.Runner
	live    atomic.Int64 // striped mode: stripes that are not idle (see Live)
}

// shard is a home of mailboxes and their Owner; home's lock guards both.
type shard[K comparable] struct {
	home mailbox.Home
	t    table[K] // the filed nodes by key; guarded by home's lock
	idle *node[K] // a retired node left in t for a moment (see Retire); guarded by home's lock
	fast *node[K] // the one node that may have a fast hold (see Linger); guarded by home's lock
	// spares[:nspare] are retired nodes kept for reuse; guarded by home's
	// lock. With the padding, a shard is 256 bytes, so each shard's lock and
	// what its home keeps beside it start a cache line (TestShardSize).
	spares [maxSpares]*node[K]
	nspare int
	live   int // mailboxes that are not idle; guarded by home's lock (see Live)
	_      [24]byte
}

// maxSpares is how many retired nodes (with their rings) a shard keeps for
// keys that come and go while it has live mailboxes (one after: see quiet).
const maxSpares = 8

// node is a dynamic mailbox and its key; mb.Mark says whether it is filed
// in its shard's table (shard-locked). nodeOf finds it from the mailbox.
type node[K comparable] struct {
	key K
	mb  mailbox.Mailbox
}

// nodeOf returns the node holding m, a shard's mailbox: only Acquire Inits
// those, each a node's mb, so stepping back by mb's offset stays in the
// node's allocation, as unsafe.Pointer's rules allow (checkptr: TestNodeOf).
func nodeOf[K comparable](m *mailbox.Mailbox) *node[K] {
	return (*node[K])(unsafe.Add(unsafe.Pointer(m), -unsafe.Offsetof(node[K]{}.mb)))
}

// stripe is a home with one mailbox, and its Owner.
type stripe[K comparable] struct {
	home mailbox.Home
	mb   mailbox.Mailbox // guarded by home's lock
	busy bool            // counted in live; guarded by home's lock
	last K               // the key that last acquired the stripe; guarded by home's lock
	r    *Router[K]
}

// New returns a router whose mailboxes run on r: with stripes > 0 a fixed
// table of that many, else mailboxes that come and go with their keys.
func New[K comparable](r *mailbox.Runner, stripes int) *Router[K] {
	rt := &Router[K]{seed: maphash.MakeSeed(), runner: r}
	if stripes > 0 {
		rt.stripes = make([]stripe[K], stripes)
		for i := range rt.stripes {
			s := &rt.stripes[i]
			s.r = rt
			s.home.Init(r, s)
			s.mb.Init(&s.home)
		}
		return rt
	}
	n := 1
	for n < 16*runtime.GOMAXPROCS(0) {
		n <<= 1
	}
	n = max(n, 64)
	rt.shards = make([]shard[K], n)
	rt.mask = uint64(n - 1)
	for i := range rt.shards {
		s := &rt.shards[i]
		s.home.Init(r, s)
		s.t.seed = rt.seed
	}
	return rt
}

// Hash is key's hash, which picks its shard or stripe. The executor's waiting
// room tells keys apart by it: keys sharing a hash are ordered as if one.
func (rt *Router[K]) Hash(key K) uint64 { return maphash.Comparable(rt.seed, key) }

func (rt *Router[K]) Striped() bool { return rt.stripes != nil }

// Index returns the stripe (striped mode) or shard a key maps to.
func (rt *Router[K]) Index(key K) int {
	h := rt.Hash(key)
	if rt.stripes != nil {
		return int(h % uint64(len(rt.stripes)))
	}
	return int(h & rt.mask)
}

// Same reports whether two keys share a mailbox: equal, or on one stripe.
func (rt *Router[K]) Same(a, b K) bool {
	if a == b {
		return true
	}
	return rt.stripes != nil && rt.Index(a) == rt.Index(b)
}

// Acquire returns key's mailbox with its lock held, creating it if need
// be. The caller must end with m.Release, which retires it if idle.
func (rt *Router[K]) Acquire(key K) *mailbox.Mailbox {
	if rt.stripes != nil {
		s := &rt.stripes[rt.Index(key)]
		s.home.Lock()
		s.last = key
		if !s.busy {
			s.busy = true
			rt.live.Add(1)
		}
		return &s.mb
	}
	h := rt.Hash(key)
	s := &rt.shards[h&rt.mask]
	s.home.Lock()
	f := s.fast
	if f != nil && f.key == key {
		// The fast node again (the uncontended Do): live, filed; no lookup.
		f.mb.Claim()
		return &f.mb
	}
	n := s.t.find(h, key) // not f: f is filed under its own key
	if f != nil && f.mb.Released() {
		s.retireFast()
		if n != nil && !n.mb.Mark {
			n = nil // it was the idle entry, evicted as f took its place
		}
	}
	if n != nil && n == s.idle {
		s.idle = nil // back from retirement: live again
		s.live++
	}
	if n == nil {
		if s.nspare > 0 {
			s.nspare--
			n, s.spares[s.nspare] = s.spares[s.nspare], nil
		} else {
			n = new(node[K])
			n.mb.Init(&s.home)
		}
		n.key, n.mb.Mark = key, true
		s.t.insert(h, n)
		s.live++
	}
	return &n.mb
}

// KeyOf returns m's key, unlocked, for whoever holds m or runs its tasks
// (mailbox.Plain): it is written locked as the node is filed and changes only
// after it retires, which it cannot with a task pending. Not for a stripe.
func (rt *Router[K]) KeyOf(m *mailbox.Mailbox) K { return nodeOf[K](m).key }

// Find is Acquire that never makes a mailbox: it returns nil, with nothing
// held, if the key has none. The caller ends with m.Release.
func (rt *Router[K]) Find(key K) *mailbox.Mailbox {
	if rt.stripes != nil {
		st := &rt.stripes[rt.Index(key)] // a stripe always exists
		st.home.Lock()
		return &st.mb
	}
	h := rt.Hash(key)
	s := &rt.shards[h&rt.mask]
	s.home.Lock()
	s.settleFast() // the caller reads m, and changes nothing a fast hold needs Claim for
	if n := s.t.find(h, key); n != nil {
		return &n.mb
	}
	s.home.Unlock()
	return nil
}

// Linger allows m a fast hold (mailbox.Owner; locked) if no other node of
// the shard may have one: with one a shard, settleFast needs no walk.
func (s *shard[K]) Linger(m *mailbox.Mailbox) bool {
	n := nodeOf[K](m)
	if s.fast == nil {
		s.fast = n
	}
	return s.fast == n
}

// settleFast settles and retires the shard's fast-hold node if its hold
// was given back (locked), so that what follows sees only live mailboxes.
func (s *shard[K]) settleFast() {
	if f := s.fast; f != nil && f.mb.Released() {
		s.retireFast()
	}
}

// retireFast settles s.fast's released hold and, if that left it idle,
// retires it as the shard's idle entry (locked). A drive loop scheduled
// before the hold began may still be due; the node then retires as it ends.
func (s *shard[K]) retireFast() {
	f := s.fast
	f.mb.Claim()
	if f.mb.Idle() {
		s.Retire(&f.mb) // clears s.fast
	}
}

// Retire retires an idle mailbox (locked, from the mailbox). It stops
// counting as live at once, but its table entry stays until the shard's
// next retirement: a key reused by one caller (the uncontended Do) costs
// no delete and insert per call, and a shard keeps at most one idle entry.
func (s *shard[K]) Retire(m *mailbox.Mailbox) {
	n := nodeOf[K](m)
	if !n.mb.Mark || s.idle == n {
		return
	}
	if s.fast == n {
		s.fast = nil
	}
	s.live--
	if old := s.idle; old != nil {
		s.evict(old)
	}
	s.idle = n
	if s.live == 0 {
		s.quiet()
	}
}

// Spares kept while a shard has live mailboxes keep a plain-task ring of up
// to busyRing slots; a quiet shard's one spare keeps up to quietRing.
const (
	busyRing  = 64
	quietRing = 16
)

// evict removes idle n from the table, kept as a spare if there is room (locked).
func (s *shard[K]) evict(n *node[K]) {
	s.t.remove(n)
	n.mb.Mark = false
	if s.nspare < maxSpares {
		var zero K
		n.key = zero
		n.mb.Reset(busyRing)
		s.spares[s.nspare] = n
		s.nspare++
	}
}

// quiet drops all spares but one, and that one's ring past quietRing, once
// no mailbox of the shard is live (locked): memory follows the busy keys.
// evict Reset the spares, so only the ring is left to trim: cheap for a key
// that retires on every call (one caller, no fast hold).
func (s *shard[K]) quiet() {
	for s.nspare > 1 {
		s.nspare--
		s.spares[s.nspare] = nil
	}
	if s.nspare == 1 {
		s.spares[0].mb.TrimRing(quietRing)
	}
}

// Linger refuses fast holds: a stripe's plain holds end under its lock.
func (s *stripe[K]) Linger(*mailbox.Mailbox) bool { return false }

// Retire marks an idle stripe as not busy (called locked).
func (s *stripe[K]) Retire(*mailbox.Mailbox) {
	if s.busy {
		s.busy = false
		s.r.live.Add(-1)
	}
}

// Live is the number of keys (stripes) with a live mailbox, exact per shard
// as read: each shard counts under the lock its submissions take anyway (no
// atomic), and Live takes each in turn. Do not call it with a mailbox locked.
func (rt *Router[K]) Live() int {
	n := int(rt.live.Load())
	for i := range rt.shards {
		s := &rt.shards[i]
		s.home.Lock()
		s.settleFast()
		n += s.live
		s.home.Unlock()
	}
	return n
}

// Barrier takes and releases every shard and stripe lock in turn: whoever
// held one has let go by its return, and whoever takes one afterwards sees
// what the caller wrote before (Close writes closed, then waits here: a
// plain task is accepted under its shard's lock after reading closed).
func (rt *Router[K]) Barrier() {
	for i := range rt.stripes {
		rt.stripes[i].home.Lock()
		//lint:ignore SA2001 the lock is taken to wait for its holder
		rt.stripes[i].home.Unlock()
	}
	for i := range rt.shards {
		rt.shards[i].home.Lock()
		//lint:ignore SA2001 the lock is taken to wait for its holder
		rt.shards[i].home.Unlock()
	}
}

// Each calls f, locked, with every live mailbox and a key mapping to it (a
// stripe's last), one lock at a time; f must not call back into the router.
func (rt *Router[K]) Each(f func(key K, m *mailbox.Mailbox)) {
	for i := range rt.stripes {
		s := &rt.stripes[i]
		s.home.Lock()
		if s.busy {
			f(s.last, &s.mb)
		}
		s.home.Unlock()
	}
	for i := range rt.shards {
		s := &rt.shards[i]
		s.home.Lock()
		s.settleFast()
		s.t.each(func(n *node[K]) {
			if n != s.idle {
				f(n.key, &n.mb)
			}
		})
		s.home.Unlock()
	}
}
