package router

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"testing"
)

// checkTable compares t with the model and checks its counts and its
// invariant: every entry is reachable from its home without crossing an
// empty slot, and at least one slot is empty.
func checkTable(t *testing.T, tb *table[int], model map[int]*node[int], seed maphash.Seed) {
	t.Helper()
	if tb.live != len(model) {
		t.Fatalf("live %d, want %d", tb.live, len(model))
	}
	used, seen := 0, 0
	for i, g := range tb.tags {
		if g != empty {
			used++
		}
		if g <= tomb {
			if tb.nodes[i] != nil {
				t.Fatalf("slot %d is free (%d) but keeps a node", i, g)
			}
			continue
		}
		n := tb.nodes[i]
		h := maphash.Comparable(seed, n.key)
		if g != tagOf(h) {
			t.Fatalf("slot %d: tag %d, want %d", i, g, tagOf(h))
		}
		for j := tb.home(h); j != i; j = (j + 1) & (len(tb.tags) - 1) {
			if tb.tags[j] == empty {
				t.Fatalf("key %d in slot %d is cut off from its home %d by empty slot %d", n.key, i, tb.home(h), j)
			}
		}
		if model[n.key] != n {
			t.Fatalf("key %d filed but not in the model", n.key)
		}
		seen++
	}
	if seen != len(model) || used != tb.used {
		t.Fatalf("entries %d (want %d), used %d (counted %d)", seen, len(model), used, tb.used)
	}
	if len(tb.tags) > 0 && used == len(tb.tags) {
		t.Fatal("no empty slot: a miss would probe for ever")
	}
	for k, n := range model {
		if got := tb.find(maphash.Comparable(seed, k), k); got != n {
			t.Fatalf("find(%d) = %p, want %p", k, got, n)
		}
	}
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
			if step%997 == 0 {
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

// BenchmarkTableRebuild is one rebuild of a table of 100,000 string keys
// (into a table of its size, so that it can be repeated): about the pause
// a shard that size takes, under its lock, as it grows (see table).
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
	}
}
