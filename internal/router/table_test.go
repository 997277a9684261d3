package router

import (
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
		var tb table[int]
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
				tb.insert(h, n, seed)
				model[k] = n
			case n != nil && !add:
				tb.remove(h, n, seed)
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
			tb.remove(maphash.Comparable(seed, k), n, seed)
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
	tb := table[int]{tags: make([]uint8, minTable), nodes: make([]*node[int], minTable)}
	const n = minTable - 1 // the most a table of minTable slots holds

	h := func(k int) uint64 { return uint64(k+2) << 56 } // home 0, tag k+2
	nodes := make([]*node[int], n)
	for k := range nodes {
		nodes[k] = &node[int]{key: k}
		tb.put(h(k), nodes[k])
	}
	find := func(k int) *node[int] { return tb.find(h(k), k) }
	var noSeed maphash.Seed // a table of minTable slots never rebuilds on remove
	for _, k := range []int{1, 3, 4} {
		tb.remove(h(k), nodes[k], noSeed)
	}
	if tb.used != n || tb.live != n-3 {
		t.Fatalf("after removes inside the cluster: used %d, live %d; want %d, %d", tb.used, tb.live, n, n-3)
	}
	for k := range nodes {
		want := nodes[k]
		if k == 1 || k == 3 || k == 4 {
			want = nil
		}
		if got := find(k); got != want {
			t.Fatalf("find(%d) = %p, want %p", k, got, want)
		}
	}
	// Removing the cluster's last entry frees it and the tombstones
	// before it back to the last live entry (slot 2).
	tb.remove(h(6), nodes[6], noSeed)
	tb.remove(h(5), nodes[5], noSeed)
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
