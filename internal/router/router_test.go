package router_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alitto/pond/v2"

	"github.com/perkey/perkey/internal/mailbox"
	"github.com/perkey/perkey/internal/router"
)

// work is a mailbox.Work that counts its runs, checks that no two tasks of
// one key overlap, and signals when it is settled.
type work struct {
	busy    *atomic.Int32 // per key
	overlap *atomic.Int32
	gate    chan struct{} // nil: run at once
	ran     atomic.Int32
	done    chan struct{}
}

func (w *work) Run() {
	if w.busy.Add(1) != 1 {
		w.overlap.Add(1)
	}
	w.ran.Add(1)
	if w.gate != nil {
		<-w.gate
	}
	w.busy.Add(-1)
}

func (w *work) Settle()       { close(w.done) }
func (w *work) Promote() bool { return true }

func newRunner(t *testing.T, slots int) *mailbox.Runner {
	pool := pond.NewPool(0)
	r := mailbox.NewRunner(pool, slots, 4, mailbox.RunnerOptions{})
	t.Cleanup(func() {
		r.Wait()
		pool.StopAndWait()
	})
	return r
}

// submit queues w on key the way the executor does: find the mailbox under
// its lock, enqueue, unlock (which retires an idle mailbox), dispatch.
func submit[K comparable](rt *router.Router[K], key K, w *work) {
	t := new(mailbox.Turn)
	t.Init(w, false)
	m := rt.Acquire(key)
	dispatch := m.Enqueue(t.Entry())
	m.Release()
	if dispatch {
		m.Dispatch()
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// TestAcquireRetire: a mailbox exists while it has work and retires when it
// drains; an Acquire that leaves it idle retires it at once.
func TestAcquireRetire(t *testing.T) {
	rt := router.New[string](newRunner(t, 2), 0)
	if rt.Striped() {
		t.Fatalf("Striped() with 0 stripes: got true; want false")
	}
	m := rt.Acquire("a") // (Live takes the shard locks: not while one is held)
	m.Release()
	if got := rt.Live(); got != 0 {
		t.Errorf("Live after an idle Unlock: got %d; want 0", got)
	}

	var busy, overlap atomic.Int32
	w := &work{busy: &busy, overlap: &overlap, gate: make(chan struct{}), done: make(chan struct{})}
	submit(rt, "a", w)
	if got := rt.Live(); got != 1 {
		t.Errorf("Live with a task pending: got %d; want 1", got)
	}
	m1 := rt.Acquire("a")
	m1.Release()
	m2 := rt.Acquire("a")
	m2.Release()
	if m1 != m2 {
		t.Errorf("Acquire of a live key: got two mailboxes; want the same one")
	}
	seen := map[string]int{}
	rt.Each(func(k string, m *mailbox.Mailbox) { seen[k] = m.Pending() })
	if len(seen) != 1 || seen["a"] != 1 {
		t.Errorf("Each: got %v; want map[a:1]", seen)
	}
	close(w.gate)
	<-w.done
	waitFor(t, "the mailbox to retire", func() bool { return rt.Live() == 0 })
	rt.Each(func(k string, m *mailbox.Mailbox) { t.Errorf("Each after retirement: visited %q", k) })
}

// TestKeyOf: KeyOf names the key a mailbox serves now, also once the
// mailbox has retired and been reused for another key.
func TestKeyOf(t *testing.T) {
	rt := router.New[string](newRunner(t, 2), 0)
	last := map[*mailbox.Mailbox]string{}
	reused := 0
	for i := range 5000 {
		key := fmt.Sprintf("k%d", i)
		m := rt.Acquire(key)
		got := rt.KeyOf(m)
		m.Release() // idle: it retires, and its node is kept for another key
		if got != key {
			t.Fatalf("KeyOf the mailbox of %q: got %q", key, got)
		}
		if _, ok := last[m]; ok {
			reused++
		}
		last[m] = key
	}
	if reused == 0 {
		t.Fatalf("no mailbox was reused for another key: the test checks nothing")
	}
}

// TestStripes: in striped mode keys hash onto a fixed set of mailboxes; two
// keys on one stripe share it, and Live counts busy stripes.
func TestStripes(t *testing.T) {
	const stripes = 4
	rt := router.New[int](newRunner(t, 2), stripes)
	if !rt.Striped() {
		t.Fatalf("Striped() with %d stripes: got false; want true", stripes)
	}
	byStripe := map[int][]int{}
	for k := range 100 {
		i := rt.Index(k)
		if i < 0 || i >= stripes {
			t.Fatalf("Index(%d) = %d; want in [0, %d)", k, i, stripes)
		}
		byStripe[i] = append(byStripe[i], k)
	}
	for _, ks := range byStripe {
		if len(ks) < 2 {
			continue
		}
		a, b := ks[0], ks[1]
		if !rt.Same(a, b) {
			t.Errorf("Same(%d, %d) on one stripe: got false; want true", a, b)
		}
		ma := rt.Acquire(a)
		ma.Release()
		mb := rt.Acquire(b)
		mb.Release()
		if ma != mb {
			t.Errorf("keys %d and %d on one stripe: got two mailboxes; want one", a, b)
		}
	}
	if got := rt.Live(); got != 0 {
		t.Errorf("Live with nothing pending: got %d; want 0", got)
	}
	var busy, overlap atomic.Int32
	w := &work{busy: &busy, overlap: &overlap, gate: make(chan struct{}), done: make(chan struct{})}
	submit(rt, 7, w)
	if got := rt.Live(); got != 1 {
		t.Errorf("Live with one busy stripe: got %d; want 1", got)
	}
	close(w.gate)
	<-w.done
	waitFor(t, "the stripe to go idle", func() bool { return rt.Live() == 0 })
}

// TestRetireRace hammers a few keys whose mailboxes retire and come back
// all the time: no submission is lost, none runs beside another of its key,
// and every mailbox is gone at the end.
func TestRetireRace(t *testing.T) {
	for _, stripes := range []int{0, 2} {
		t.Run(fmt.Sprintf("stripes=%d", stripes), func(t *testing.T) {
			rt := router.New[int](newRunner(t, 3), stripes)
			const keys, callers, each = 3, 6, 400
			busy := make([]atomic.Int32, keys)
			var overlap atomic.Int32
			var wg sync.WaitGroup
			var all sync.Mutex
			var ws []*work
			for c := range callers {
				wg.Go(func() {
					for i := range each {
						k := (c + i) % keys
						if stripes > 0 {
							k = 0 // one counter per stripe would be needed; use one key
						}
						w := &work{busy: &busy[k], overlap: &overlap, done: make(chan struct{})}
						submit(rt, k, w)
						if i%3 == 0 {
							<-w.done // let the mailbox drain now and then
						}
						all.Lock()
						ws = append(ws, w)
						all.Unlock()
					}
				})
			}
			wg.Wait()
			for _, w := range ws {
				<-w.done
				if n := w.ran.Load(); n != 1 {
					t.Fatalf("a task ran %d times; want 1", n)
				}
			}
			if n := overlap.Load(); n != 0 {
				t.Errorf("got %d overlapping runs within a key; want 0", n)
			}
			waitFor(t, "every mailbox to retire", func() bool { return rt.Live() == 0 })
		})
	}
}

// BenchmarkLive measures Live, which takes every shard lock in turn (64
// shards on up to 4 cores): what Stats and ActiveKeys pay so that
// submissions keep their live counts without an atomic operation.
func BenchmarkLive(b *testing.B) {
	pool := pond.NewPool(0)
	defer pool.StopAndWait()
	rt := router.New[string](mailbox.NewRunner(pool, 2, 4, mailbox.RunnerOptions{}), 0)
	for b.Loop() {
		_ = rt.Live()
	}
}

// TestFind: Find returns a busy key's mailbox, locked, and for a key with
// none returns nil without making one.
func TestFind(t *testing.T) {
	rt := router.New[string](newRunner(t, 1), 0)
	if m := rt.Find("a"); m != nil {
		m.Release()
		t.Fatal("Find on a key never used returned a mailbox")
	}
	if n := rt.Live(); n != 0 {
		t.Fatalf("Live after Find on an unused key = %d; want 0", n)
	}
	var busy, overlap atomic.Int32
	w := &work{busy: &busy, overlap: &overlap, gate: make(chan struct{}), done: make(chan struct{})}
	submit(rt, "a", w)
	m := rt.Acquire("a")
	m.Release()
	found := rt.Find("a")
	if found != m {
		t.Errorf("Find on a busy key returned %p; want its mailbox %p", found, m)
	}
	if found != nil {
		found.Release()
	}
	close(w.gate)
	select {
	case <-w.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the task never ended")
	}
	if m := rt.Find("b"); m != nil {
		m.Release()
		t.Error("Find on another unused key returned a mailbox")
	}
}

// hold takes a plain hold on key's mailbox, as an uncontended Do does, and
// reports whether the mailbox could be held.
func hold[K comparable](rt *router.Router[K], key K) (*mailbox.Mailbox, bool) {
	m := rt.Acquire(key)
	ok := m.CanHold(false)
	if ok {
		m.HoldPlain()
	}
	m.Release()
	return m, ok
}

// TestFastHoldLive: a plain hold given back without the lock (a fast hold)
// leaves its mailbox idle but unretired; Live and Each settle it first, so
// they count and walk only live keys, and the next Acquire in its shard
// settles or retires it. Keys of one shard take turns at the shard's one
// fast hold.
func TestFastHoldLive(t *testing.T) {
	rt := router.New[int](newRunner(t, 2), 0)
	a, b := 0, 1
	for rt.Index(b) != rt.Index(a) {
		b++
	}
	c := b + 1
	for rt.Index(c) == rt.Index(a) {
		c++ // another shard
	}

	m, ok := hold(rt, a)
	if !ok {
		t.Fatal("an idle key cannot be held")
	}
	if got := rt.Live(); got != 1 {
		t.Errorf("Live while a is held: %d; want 1", got)
	}
	m.UnholdPlain()
	if got := rt.Live(); got != 0 {
		t.Errorf("Live after a's hold was given back: %d; want 0", got)
	}
	rt.Each(func(k int, _ *mailbox.Mailbox) { t.Errorf("Each after the give-back visited %d", k) })

	// Held and given back again and again, by one caller and by turns.
	for i := range 100 {
		k := []int{a, b, c}[i%3]
		m, ok := hold(rt, k)
		if !ok {
			t.Fatalf("round %d: idle key %d cannot be held", i, k)
		}
		if got := rt.Live(); got != 1 {
			t.Fatalf("round %d: Live while %d is held: %d; want 1", i, k, got)
		}
		m.UnholdPlain()
		if i%2 == 0 {
			if got := rt.Live(); got != 0 {
				t.Fatalf("round %d: Live after %d's give-back: %d; want 0", i, k, got)
			}
		}
	}

	// Two keys of one shard held at once: both are live, neither is lost.
	ma, _ := hold(rt, a)
	mb, ok := hold(rt, b)
	if !ok {
		t.Fatal("b cannot be held while a, on its shard, is")
	}
	seen := map[int]int{}
	rt.Each(func(k int, m *mailbox.Mailbox) { seen[k] = m.Pending() })
	if len(seen) != 2 || seen[a] != 1 || seen[b] != 1 {
		t.Errorf("Each with a and b held: %v; want map[%d:1 %d:1]", seen, a, b)
	}
	mb.UnholdPlain()
	ma.UnholdPlain()
	if got := rt.Live(); got != 0 {
		t.Errorf("Live after both were given back: %d; want 0", got)
	}

	// A key queued on behind a held one: the held one's give-back hands
	// on to it, and the queued task runs.
	m, _ = hold(rt, a)
	var busy, overlap atomic.Int32
	w := &work{busy: &busy, overlap: &overlap, done: make(chan struct{})}
	submit(rt, a, w)
	m.UnholdPlain()
	select {
	case <-w.done:
	case <-time.After(20 * time.Second):
		t.Fatal("gave up waiting for the task queued behind a fast hold")
	}
	waitFor(t, "the key to retire", func() bool { return rt.Live() == 0 })
}

// TestLocal: Local is one value per lock, shared by the mailboxes under it
// (a shard's, or a stripe's) and kept while they come and go.
func TestLocal(t *testing.T) {
	for _, stripes := range []int{0, 4} {
		rt := router.New[int](newRunner(t, 2), stripes)
		byIndex := map[int]*any{}
		for k := range 64 {
			m := rt.Acquire(k)
			l := m.Local()
			m.Release()
			if l == nil {
				t.Fatalf("stripes=%d: Local of key %d is nil", stripes, k)
			}
			i := rt.Index(k)
			if prev, ok := byIndex[i]; ok && prev != l {
				t.Errorf("stripes=%d: keys of shard or stripe %d have different Locals", stripes, i)
			}
			for j, other := range byIndex {
				if j != i && other == l {
					t.Errorf("stripes=%d: shards or stripes %d and %d share a Local", stripes, i, j)
				}
			}
			byIndex[i] = l
		}
		if len(byIndex) < 2 {
			t.Fatalf("stripes=%d: 64 keys fell on %d shards or stripes; want several", stripes, len(byIndex))
		}
	}
}

// TestFastHoldModel holds and gives back keys of two shards in a random
// order, many at once, against a model of which keys are held: Acquire of
// a held key returns its mailbox (the fast-hold shortcut included), of a
// free key one that can be held, and Live and Each see exactly the held
// keys, whichever key had its shard's fast hold last.
func TestFastHoldModel(t *testing.T) {
	rt := router.New[int](newRunner(t, 2), 0)
	var keys []int
	for _, shard := range []int{rt.Index(0), rt.Index(1)} {
		n := 0
		for k := 0; n < 6; k++ {
			if rt.Index(k) == shard && !slices.Contains(keys, k) {
				keys = append(keys, k)
				n++
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	held := map[int]*mailbox.Mailbox{}
	for step := range 20_000 {
		k := keys[r.IntN(len(keys))]
		switch m, ok := held[k]; {
		case ok && r.IntN(2) == 0:
			m.UnholdPlain()
			delete(held, k)
		case ok:
			got := rt.Acquire(k)
			can := got.CanHold(false)
			got.Release()
			if got != m || can {
				t.Fatalf("step %d: Acquire of held key %d: the same mailbox %v, holdable %v; want true, false", step, k, got == m, can)
			}
		default:
			m, ok := hold(rt, k)
			if !ok {
				t.Fatalf("step %d: free key %d cannot be held", step, k)
			}
			held[k] = m
		}
		if step%7 != 0 {
			continue
		}
		if got := rt.Live(); got != len(held) {
			t.Fatalf("step %d: Live %d; want %d", step, got, len(held))
		}
		seen := map[int]*mailbox.Mailbox{}
		rt.Each(func(k int, m *mailbox.Mailbox) { seen[k] = m })
		if !maps.Equal(seen, held) {
			t.Fatalf("step %d: Each visited %v; want the held keys %v", step, seen, held)
		}
	}
	for _, m := range held {
		m.UnholdPlain()
	}
	if got := rt.Live(); got != 0 {
		t.Errorf("Live after every hold was given back: %d; want 0", got)
	}
}
