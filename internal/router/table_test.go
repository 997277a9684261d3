package router

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"testing"
)

// checkTable compares t with the model and checks its counts and its
// invariant, in its slots and in the old slots of a rebuild under way:
// every entry is reachable from its home without crossing an empty slot,
// and at least one slot is empty.
func checkTable(t *testing.T, tb *table[int], model map[int]*node[int], seed maphash.Seed) {
	t.Helper()
	if tb.live != len(model) {
		t.Fatalf("live %d, want %d", tb.live, len(model))
	}
	seen := map[*node[int]]bool{}
	used := checkSlots(t, "", tb.tags, tb.nodes, 0, model, seen, seed)
	if used != tb.used {
		t.Fatalf("used %d, counted %d", tb.used, used)
	}
	if o := tb.old; o != nil {
		before := len(seen)
		checkSlots(t, "old ", o.tags, o.nodes, o.next, model, seen, seed)
		if len(seen)-before != o.live || o.live == 0 {
			t.Fatalf("old slots hold %d entries; live says %d (a rebuild ends once none is left)", len(seen)-before, o.live)
		}
	}
	if len(seen) != len(model) {
		t.Fatalf("entries %d, want %d", len(seen), len(model))
	}
	for k, n := range model {
		if got := tb.find(maphash.Comparable(seed, k), k); got != n {
			t.Fatalf("find(%d) = %p, want %p", k, got, n)
		}
	}
}

// checkSlots checks one set of slots for checkTable (those before from
// must be free, moved) and returns how many are not empty.
func checkSlots(t *testing.T, which string, tags []uint8, nodes []*node[int], from int,
	model map[int]*node[int], seen map[*node[int]]bool, seed maphash.Seed) int {
	t.Helper()
	used := 0
	for i, g := range tags {
		if g != empty {
			used++
		}
		if g <= tomb {
			if nodes[i] != nil {
				t.Fatalf("%sslot %d is free (%d) but keeps a node", which, i, g)
			}
			continue
		}
		if i < from {
			t.Fatalf("%sslot %d was moved but still holds an entry", which, i)
		}
		n := nodes[i]
		h := maphash.Comparable(seed, n.key)
		if g != tagOf(h) {
			t.Fatalf("%sslot %d: tag %d, want %d", which, i, g, tagOf(h))
		}
		for j := homeIn(h, len(tags)); j != i; j = (j + 1) & (len(tags) - 1) {
			if tags[j] == empty {
				t.Fatalf("%skey %d in slot %d is cut off from its home by empty slot %d", which, n.key, i, j)
			}
		}
		if model[n.key] != n || seen[n] {
			t.Fatalf("%skey %d filed but not in the model, or filed twice", which, n.key)
		}
		seen[n] = true
	}
	if len(tags) > 0 && used == len(tags) {
		t.Fatalf("%sslots: none empty: a miss would probe for ever", which)
	}
	return used
}

// TestTableModel drives a table with random inserts, removes and misses
// against a map, over key ranges small enough for many collisions and
// tombstones, and through growth and shrinking.
func TestTableModel(t *testing.T) {
	seed := maphash.MakeSeed()
	for _, keys := range []int{4, 40, 400, 4000} {
		rng := rand.New(rand.NewPCG(uint64(keys), 7))
		tb := table[int]{seed: seed}
		model := map[int]*node[int]{}
		maxLen := 0
		for step := range 60000 {
			k := rng.IntN(keys)
			h := maphash.Comparable(seed, k)
			// Phases: fill, churn, drain (so that the table shrinks).
			phase := step * 3 / 60000
			add := rng.IntN(4) < 3-phase
			switch n := model[k]; {
			case n == nil && add:
				if tb.find(h, k) != nil {
					t.Fatalf("find(%d) found a key never filed", k)
				}
				n = &node[int]{key: k}
				tb.insert(h, n)
				model[k] = n
			case n != nil && !add:
				tb.remove(n)
				delete(model, k)
				if tb.find(h, k) != nil {
					t.Fatalf("find(%d) after remove", k)
				}
			}
			maxLen = max(maxLen, len(tb.tags))
			if step%97 == 0 {
				checkTable(t, &tb, model, seed)
			}
		}
		for k, n := range model {
			tb.remove(n)
			delete(model, k)
		}
		checkTable(t, &tb, model, seed)
		if len(tb.tags) > minTable {
			t.Errorf("%d keys: an empty table keeps %d slots (peak %d); want at most %d", keys, len(tb.tags), maxLen, minTable)
		}
	}
}

// TestTableCollisions files keys whose probe sequences all start at one
// slot, so that every find and remove walks one cluster, and checks how
// removes leave tombstones inside the cluster and clear them at its end.
func TestTableCollisions(t *testing.T) {
	seed := maphash.MakeSeed()
	tb := table[int]{seed: seed, tags: make([]uint8, minTable), nodes: make([]*node[int], minTable)}
	const n = minTable - 1 // the most a table of minTable slots holds

	// Keys whose home is slot 0, filed in that order: slots 0 to n-1.
	var nodes []*node[int]
	for k := 0; len(nodes) < n; k++ {
		if h := maphash.Comparable(seed, k); tb.home(h) == 0 {
			nodes = append(nodes, &node[int]{key: k})
			tb.put(h, nodes[len(nodes)-1])
		}
	}
	find := func(i int) *node[int] { k := nodes[i].key; return tb.find(maphash.Comparable(seed, k), k) }
	for _, i := range []int{1, 3, 4} { // a table of minTable slots never rebuilds on remove
		tb.remove(nodes[i])
	}
	if tb.used != n || tb.live != n-3 {
		t.Fatalf("after removes inside the cluster: used %d, live %d; want %d, %d", tb.used, tb.live, n, n-3)
	}
	for i := range nodes {
		want := nodes[i]
		if i == 1 || i == 3 || i == 4 {
			want = nil
		}
		if got := find(i); got != want {
			t.Fatalf("find(key %d) = %p, want %p", nodes[i].key, got, want)
		}
	}
	// Removing the cluster's last entry frees it and the tombstones
	// before it back to the last live entry (slot 2).
	tb.remove(nodes[6])
	tb.remove(nodes[5])
	if tb.used != 3 || tb.live != 2 {
		t.Fatalf("after removing the cluster's tail: used %d, live %d; want 3, 2", tb.used, tb.live)
	}
	for i, g := range tb.tags[3:] {
		if g != empty {
			t.Fatalf("slot %d is %d after the tail went; want empty", i+3, g)
		}
	}
	if find(2) != nodes[2] || find(0) != nodes[0] || find(6) != nil {
		t.Fatal("the cluster's head was lost")
	}
}

// TestTableHomeSkipsShardBits checks that the keys of one router shard
// spread over the table: they share the hash bits that picked the shard,
// however many shards there are (here 4,096, as on a machine with 256 Ps),
// and home must not use those bits.
func TestTableHomeSkipsShardBits(t *testing.T) {
	seed := maphash.MakeSeed()
	tb := table[int]{seed: seed, tags: make([]uint8, 1024)}
	const shardBits = 12
	seen := map[int]bool{}
	found := 0
	for k := 0; found < 1024; k++ {
		h := maphash.Comparable(seed, k)
		if h&(1<<shardBits-1) != 0 {
			continue // another shard's key
		}
		found++
		seen[tb.home(h)] = true
	}
	// 1,024 random homes in 1,024 slots cover about 63 % of them.
	if len(seen) < 512 {
		t.Errorf("1,024 keys of one shard start their probes at %d of 1,024 slots; want at least 512", len(seen))
	}
}

// TestTableMovesInSteps fills a table to 100,000 entries and drains it,
// through every growth and shrinking, and checks that no insert or remove
// moves more than moveStep old slots: a rebuild never runs to its end in
// one call, as it once did (see table), unless its last entries are
// within the call's step (or the call removes the last one).
func TestTableMovesInSteps(t *testing.T) {
	const n = 100_000
	seed := maphash.MakeSeed()
	tb := table[int]{seed: seed}
	nodes := make([]*node[int], n)
	rebuilds := 0
	check := func(op string, i int, gone *node[int], f func()) {
		o, next := tb.old, 0
		last := -1 // the old slots' last entry, other than the one removed
		if o != nil {
			next = o.next
			for j := len(o.tags) - 1; j >= next; j-- {
				if o.tags[j] > tomb && o.nodes[j] != gone {
					last = j
					break
				}
			}
		}
		f()
		switch {
		case o == nil:
			if tb.old != nil {
				rebuilds++
			}
		case tb.old == o:
			if tb.old.next-next > moveStep {
				t.Fatalf("%s %d moved %d old slots; want at most %d", op, i, tb.old.next-next, moveStep)
			}
		case last >= next+moveStep:
			t.Fatalf("%s %d finished a rebuild with %d old slots left to move", op, i, last-next+1)
		}
	}
	for i := range n {
		nodes[i] = &node[int]{key: i}
		check("insert", i, nil, func() { tb.insert(maphash.Comparable(seed, i), nodes[i]) })
	}
	for i := range n {
		check("remove", i, nodes[i], func() { tb.remove(nodes[i]) })
	}
	if tb.live != 0 || len(tb.tags) > minTable || tb.old != nil {
		t.Fatalf("drained: live %d, %d slots, rebuild under way %v", tb.live, len(tb.tags), tb.old != nil)
	}
	if rebuilds < 15 {
		t.Fatalf("%d rebuilds; want the growth and shrinking of 100,000 entries", rebuilds)
	}
}

// BenchmarkTableRebuild is one whole rebuild of a table of 100,000 string
// keys (into a table of its size, so that it can be repeated): the work
// that the inserts and removes after a rebuild starts share, moveStep old
// slots each, and that a shard that size once paused for (see table).
func BenchmarkTableRebuild(b *testing.B) {
	const n = 100_000
	seed := maphash.MakeSeed()
	tb := table[string]{seed: seed}
	for i := range n {
		k := fmt.Sprintf("key-%08d", i)
		tb.insert(maphash.Comparable(seed, k), &node[string]{key: k})
	}
	b.ResetTimer()
	for range b.N {
		tb.rebuild(len(tb.tags))
		tb.moveTo(len(tb.old.tags))
	}
}
