package router

import "hash/maphash"

// table is a shard's index of its filed nodes, guarded by the shard's lock:
// open addressing, linear probing on the hash that picked the shard. Unlike
// a map[K]*node[K] it takes 9 bytes a slot (a tag byte, a node pointer: no
// key), hashes no key twice, compares keys only where the tag matches, and
// shrinks (BenchmarkBytesPerWaitingKey). A removed entry leaves a tombstone
// for the probes through it, until a rebuild: when entries and tombstones
// fill 7/8, or entries fall to 1/8 of a table larger than minTable.
//
// A rebuild is incremental, as a Go map's growth: the old slots stay beside
// the new (old), each insert and remove moves the next moveStep of them, and
// a lookup that misses the new slots asks the old, so no call pays for the
// whole table under the shard lock (BenchmarkTableRebuild). The move ends
// before the new slots fill (see rebuild); if not, insert finishes it first.
type table[K comparable] struct {
	seed  maphash.Seed // the router's: a key's hash is maphash.Comparable(seed, key)
	tags  []uint8      // per slot: empty, tomb, or the entry's tag (see tagOf)
	nodes []*node[K]
	live  int          // entries, here and in old
	used  int          // entries and tombstones in tags
	old   *oldTable[K] // the slots a rebuild is moving entries out of, or nil
}

// oldTable is a table's slots before its rebuild; entries of tags[next:] are
// still to move. Nothing is added; a removed entry leaves a tombstone.
type oldTable[K comparable] struct {
	tags  []uint8
	nodes []*node[K]
	next  int // slots before it have been moved
	live  int // entries still here
}

// moveStep is how many old slots each insert and remove moves (see table).
const moveStep = 16

const (
	empty uint8 = 0
	tomb  uint8 = 1

	// minTable is the smallest table size; a table that small is never shrunk.
	minTable = 8
)

// tagOf is the tag stored for hash h: its top byte, moved off the two values
// that mark free slots (the slot comes from other bits: see home). The table
// hashes a key again only to remove or rebuild.
func tagOf(h uint64) uint8 {
	t := uint8(h >> 56)
	if t <= tomb {
		t += 2
	}
	return t
}

// home is the slot where h's probe starts in t. It skips the low bits, which
// pick the shard (16 per P: under homeShift bits up to a million Ps).
func (t *table[K]) home(h uint64) int { return homeIn(h, len(t.tags)) }

func homeIn(h uint64, size int) int { return int(h>>homeShift) & (size - 1) }

// homeShift is how many low bits of a hash home skips.
const homeShift = 24

func (t *table[K]) find(h uint64, key K) *node[K] {
	if t.live == 0 {
		return nil
	}
	if i := probe(t.tags, t.nodes, h, key); i >= 0 {
		return t.nodes[i]
	}
	if o := t.old; o != nil {
		if i := probe(o.tags, o.nodes, h, key); i >= 0 {
			return o.nodes[i]
		}
	}
	return nil
}

// probe returns the slot of tags and nodes where key (hash h) is, or -1.
func probe[K comparable](tags []uint8, nodes []*node[K], h uint64, key K) int {
	tag, mask := tagOf(h), len(tags)-1
	if mask < 0 {
		return -1
	}
	for i := homeIn(h, len(tags)); ; i = (i + 1) & mask {
		switch g := tags[i]; {
		case g == empty:
			return -1
		case g == tag && nodes[i].key == key:
			return i
		}
	}
}

// insert files n, whose key hashes to h and is not in t.
func (t *table[K]) insert(h uint64, n *node[K]) {
	t.move()
	if (t.used+t.moving()+1)*8 > len(t.tags)*7 { // moving: they come here too
		t.rebuild(max(minTable, 2*nextPow2(t.live+1)))
	}
	t.put(h, n)
}

// moving is how many entries a rebuild under way has still to move.
func (t *table[K]) moving() int {
	if t.old == nil {
		return 0
	}
	return t.old.live
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
	h := maphash.Comparable(t.seed, n.key)
	if o := t.old; o != nil && o.take(h, n) {
		t.live--
	} else {
		t.take(h, n)
	}
	t.move() // ends the rebuild if n was the last entry it had to move
	if len(t.tags) > minTable && t.live*8 < len(t.tags) {
		t.rebuild(max(minTable, 2*nextPow2(t.live)))
	}
}

// take takes n out of the old slots, leaving a tombstone; false if absent.
func (o *oldTable[K]) take(h uint64, n *node[K]) bool {
	i := probe(o.tags, o.nodes, h, n.key)
	if i < 0 {
		return false
	}
	o.tags[i], o.nodes[i] = tomb, nil
	o.live--
	return true
}

// take takes n, whose key hashes to h, out of t's slots.
func (t *table[K]) take(h uint64, n *node[K]) {
	mask := len(t.tags) - 1
	i := t.home(h)
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
}

// rebuild starts moving every entry into size fresh slots (a power of two,
// at least twice the entries), dropping tombstones; the current slots become
// old (see table). A grown table's new slots start at most half full, and
// its old ones (at most 7/8 full, half as many) are all moved before inserts
// could fill the new to 7/8; a shrunk table's take four times its entries.
func (t *table[K]) rebuild(size int) {
	if o := t.old; o != nil {
		t.moveTo(len(o.tags)) // the last rebuild ends first
	}
	t.old = &oldTable[K]{tags: t.tags, nodes: t.nodes, live: t.live}
	t.tags, t.nodes, t.used = make([]uint8, size), make([]*node[K], size), 0
	t.move()
}

// move moves the next moveStep old slots' entries, ending a rebuild when done.
func (t *table[K]) move() {
	if o := t.old; o != nil {
		t.moveTo(min(len(o.tags), o.next+moveStep))
	}
}

// moveTo moves the entries of the old slots up to end (t.old is set).
func (t *table[K]) moveTo(end int) {
	o := t.old
	for ; o.next < end && o.live > 0; o.next++ {
		if o.tags[o.next] > tomb {
			n := o.nodes[o.next]
			o.tags[o.next], o.nodes[o.next] = tomb, nil // the probes through it go on
			o.live--
			t.live--                                    // put counts it again
			t.put(maphash.Comparable(t.seed, n.key), n) // filed: n.key is set
		}
	}
	if o.live == 0 {
		t.old = nil
	}
}

func (t *table[K]) each(f func(n *node[K])) {
	for i, g := range t.tags {
		if g > tomb {
			f(t.nodes[i])
		}
	}
	if o := t.old; o != nil {
		for i := o.next; i < len(o.tags); i++ {
			if o.tags[i] > tomb {
				f(o.nodes[i])
			}
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
