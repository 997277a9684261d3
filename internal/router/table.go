package router

import "hash/maphash"

// table is a shard's index of its filed nodes by key: an open-addressing
// hash table with linear probing, keyed by the hash the router already
// computed to pick the shard.
//
// It is not a map[K]*node[K], for two reasons, both measured on the
// waiting key (BenchmarkBytesPerWaitingKey) and the submit path:
//
//   - Size. A slot is a one-byte tag and a node pointer, 9 bytes, where a
//     Go map's is a control byte, the key and the pointer (25 bytes for a
//     string key); the key is in the node already.
//   - Time. A Go map hashes the key a second time; the table reuses the
//     router's hash, and compares keys only where the tag matches. And a
//     Go map never gives memory back, where the table shrinks.
//
// A removed entry leaves a tombstone (so that the probe sequences through
// it still reach what lies behind); tombstones are dropped whenever the
// table is rebuilt, which happens when live entries and tombstones fill
// 7/8 of it, and when the live entries fall to 1/8 of a table larger than
// minTable (memory follows the keys that are busy now). Each rebuild is
// paid for by at least cap/8 inserts or removes since the last one, but it
// is one step under the shard lock, where a Go map grows in pieces: a
// shard of 100,000 keys (6.4 million live keys on 64 shards) pauses its
// keys for about 5 ms as it rebuilds on a 2-core VM (BenchmarkTableRebuild).
//
// A table is guarded by its shard's lock.
type table[K comparable] struct {
	seed  maphash.Seed // the router's: a key's hash is maphash.Comparable(seed, key)
	tags  []uint8      // per slot: empty, tomb, or the entry's tag (see tagOf)
	nodes []*node[K]
	live  int // entries
	used  int // entries and tombstones
}

const (
	empty uint8 = 0
	tomb  uint8 = 1

	// minTable is the smallest table, and the size below which a table is
	// never shrunk.
	minTable = 8
)

// tagOf is the tag stored for hash h: its top byte, moved off the two
// values that mark free slots. The slot index comes from other bits (see
// home), and the shard from the lowest ones.
//
// A key's hash is computed once per lookup, by the router, which picks the
// shard with it; the table needs it again only to remove or rebuild.
func tagOf(h uint64) uint8 {
	t := uint8(h >> 56)
	if t <= tomb {
		t += 2
	}
	return t
}

// home is the slot where the probe for hash h starts, in a table of
// len(t.tags) slots. The lowest bits pick the router shard (16 per P, so
// fewer than homeShift bits for up to a million Ps), so every hash of one
// shard has the same low bits: they are skipped.
func (t *table[K]) home(h uint64) int { return int(h>>homeShift) & (len(t.tags) - 1) }

// homeShift is how many low bits of a hash home skips.
const homeShift = 24

// find returns the node filed under key, whose hash is h, or nil.
func (t *table[K]) find(h uint64, key K) *node[K] {
	if t.live == 0 {
		return nil
	}
	tag, mask := tagOf(h), len(t.tags)-1
	for i := t.home(h); ; i = (i + 1) & mask {
		switch g := t.tags[i]; {
		case g == empty:
			return nil
		case g == tag && t.nodes[i].key == key:
			return t.nodes[i]
		}
	}
}

// insert files n, whose key hashes to h and is not in t.
func (t *table[K]) insert(h uint64, n *node[K]) {
	if (t.used+1)*8 > len(t.tags)*7 {
		t.rebuild(max(minTable, 2*nextPow2(t.live+1)))
	}
	t.put(h, n)
}

// put stores n in the first free slot of h's probe sequence; t has one.
func (t *table[K]) put(h uint64, n *node[K]) {
	mask := len(t.tags) - 1
	i := t.home(h)
	for t.tags[i] > tomb {
		i = (i + 1) & mask
	}
	if t.tags[i] == empty {
		t.used++
	}
	t.tags[i], t.nodes[i] = tagOf(h), n
	t.live++
}

// remove takes n, filed in t under n.key, out of t.
func (t *table[K]) remove(n *node[K]) {
	mask := len(t.tags) - 1
	i := t.home(maphash.Comparable(t.seed, n.key))
	for t.nodes[i] != n {
		i = (i + 1) & mask
	}
	t.nodes[i] = nil
	t.live--
	if next := (i + 1) & mask; t.tags[next] == empty {
		// Nothing's probe goes through i: it can be empty again, and so
		// can the tombstones just before it.
		t.tags[i] = empty
		t.used--
		for j := (i - 1) & mask; t.tags[j] == tomb; j = (j - 1) & mask {
			t.tags[j] = empty
			t.used--
		}
	} else {
		t.tags[i] = tomb
	}
	if len(t.tags) > minTable && t.live*8 < len(t.tags) {
		t.rebuild(max(minTable, 2*nextPow2(t.live)))
	}
}

// rebuild moves every entry into a fresh table of size slots (a power of
// two, more than the live entries), dropping the tombstones.
func (t *table[K]) rebuild(size int) {
	tags, nodes := t.tags, t.nodes
	t.tags, t.nodes = make([]uint8, size), make([]*node[K], size)
	t.live, t.used = 0, 0
	for i, g := range tags {
		if g > tomb {
			n := nodes[i]
			t.put(maphash.Comparable(t.seed, n.key), n) // filed: n.key is set
		}
	}
}

// each calls f for every entry.
func (t *table[K]) each(f func(n *node[K])) {
	for i, g := range t.tags {
		if g > tomb {
			f(t.nodes[i])
		}
	}
}

// nextPow2 is the least power of two at least n (n > 0).
func nextPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}
