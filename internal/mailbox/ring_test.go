package mailbox

import (
	"context"
	"testing"
	"unsafe"
)

// plainFn is the fn of the plain slots these tests queue: a slot with no
// fn and no arg is a tombstone.
func plainFn(context.Context) error { return nil }

// TestRingGrowthCopies fills a plain ring the way a burst that outruns its
// key's worker does (pushes only), then drains it batch by batch, and
// checks what that costs: the slots copied by growing stay under 4/3 of
// the slots queued (doubling all the way would copy 1.9 times as many
// here), the order is kept, each slot keeps its arg (only some of the
// first half have one), and the draining ring gives its memory back, the
// args buffer included once no queued slot has an arg.
func TestRingGrowthCopies(t *testing.T) {
	const n = 70_000 // just past a power of four, where growing copies the most
	var (
		q      ring
		stamps []int64 // kept, as on a runner that tracks the oldest task
	)
	vals := make([]int, n)
	argOf := func(i int64) any {
		if i < n/2 && i%3 == 0 {
			return &vals[i]
		}
		return nil
	}
	copied, grew := 0, 0
	for i := range n {
		if l := q.len(); q.size() == l {
			copied += l
			grew++
		}
		q.push(plainFn, argOf(int64(i)), int64(i), &stamps)
	}
	t.Logf("%d slots: %d growths, %d slots copied (ring of %d)", n, grew, copied, q.len())
	if copied > 4*n/3 {
		t.Errorf("growing to %d slots copied %d; want at most %d", n, copied, 4*n/3)
	}
	next, under := int64(0), 0
	for q.size() > 0 {
		k := min(q.size(), 64)
		for i := range k {
			if s := stamps[q.at(i)]; s != next {
				t.Fatalf("slot %d holds %d", next, s)
			}
			if a := q.arg(q.at(i)); a != argOf(next) {
				t.Fatalf("slot %d has arg %p; want %p", next, a, argOf(next))
			}
			next++
		}
		q.taken += uint32(k)
		q.drop(k, &stamps)
		// A ring shrinks once it held at most an eighth of its buffer from
		// one drop to the next: it may hold less for one drop.
		if q.len() > 64 && q.size()*8 < q.len() {
			if under++; under > 1 {
				t.Fatalf("a ring of %d slots holds %d after two drops", q.len(), q.size())
			}
		} else {
			under = 0
		}
	}
	if next != n {
		t.Fatalf("drained %d of %d", next, n)
	}
	// The last shrink is a drop behind; an idle mailbox's TrimRing takes
	// the rest.
	if q.len() > 4*64 {
		t.Errorf("a drained ring keeps %d slots; want at most %d", q.len(), 4*64)
	}
	if q.args != nil {
		t.Errorf("a drained ring, resized since its last arg left, keeps its args buffer")
	}
}

// TestRingRefill: a queue that drains at every batch and fills again, as a
// Batcher key's does (a run of up to 1,000 messages cut into a batch, a few
// queued while it runs, the rest before the next cut), keeps its buffer: it
// grows while the first run fills it, then is never resized.
func TestRingRefill(t *testing.T) {
	const run, during = 1000, 10
	var q ring
	var buf *slot
	size := 0
	for cycle := range 12 {
		for q.queued() < run {
			q.push(plainFn, nil, 0, nil)
		}
		n := q.queued() // the drive loop cuts the whole queue into a batch
		q.taken += uint32(n)
		q.cut = uint16(n)
		for range during {
			q.push(plainFn, nil, 0, nil)
		}
		q.cut = 0
		q.drop(n, nil)
		switch {
		case cycle == 0:
			buf, size = q.ptr, q.len()
		case q.ptr != buf:
			t.Fatalf("cycle %d: the ring was resized from %d slots to %d; want its buffer kept", cycle, size, q.len())
		}
	}
}

// TestRingGrowthAllocs: a ring whose tasks all have args (a key of plain
// Submits) grows with two allocations a growth, its slots and their args;
// one whose tasks have none with one, and no args buffer. 16 tasks grow a
// ring 1, 2, 4, 8, 16 slots: 5 growths.
func TestRingGrowthAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation")
	}
	var v int
	for _, tc := range []struct {
		name string
		arg  any
		grow float64 // allocations a growth
	}{{"with args", &v, 2}, {"without", nil, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			allocs := testing.AllocsPerRun(100, func() {
				var q ring
				for range 16 {
					q.push(plainFn, tc.arg, 0, nil)
				}
				if (q.args != nil) != (tc.arg != nil) {
					t.Fatalf("args buffer %v with args %v", q.args != nil, tc.arg != nil)
				}
			})
			if allocs != 5*tc.grow {
				t.Errorf("16 pushes onto an empty ring allocate %v times; want %v, %v a growth", allocs, 5*tc.grow, tc.grow)
			}
		})
	}
}

// TestMailboxSize: the mailbox, the ring and its args pointer included,
// stays at 64 bytes, what a waiting key's table node is sized for (80
// bytes with a string key; see ring).
func TestMailboxSize(t *testing.T) {
	if s := unsafe.Sizeof(Mailbox{}); s != 64 {
		t.Errorf("a Mailbox is %d bytes; want 64", s)
	}
}

// TestRingCompacts: compact closes the gaps that tombstones leave among the
// queued slots, behind a running batch it leaves alone, keeps the order,
// and gives each moved turn's entry its new position, where its slot is.
// A full ring compacts before it grows: one that keeps a batch running while
// every slot queued behind it is taken out again stays at its size.
func TestRingCompacts(t *testing.T) {
	var q ring
	entries := make([]*Entry, 12)
	for i := range entries {
		e := &Entry{}
		e.pos = q.push(nil, e, 0, nil) // a turn, as link queues it
		entries[i] = e
	}
	q.taken, q.cut = 2, 2 // a batch runs the first two
	for _, i := range []int{3, 4, 8} {
		k := q.index(entries[i].pos)
		q.buf()[k], q.argBuf()[k] = slot{}, nil
	}
	if freed := q.compact(nil); freed != 3 {
		t.Fatalf("compact freed %d slots; want 3", freed)
	}
	want := []int{0, 1, 2, 5, 6, 7, 9, 10, 11}
	if q.size() != len(want) {
		t.Fatalf("ring holds %d slots; want %d", q.size(), len(want))
	}
	for i, w := range want {
		e := entries[w]
		if got := entryAt(q.buf(), q.argBuf(), q.at(i)); got != e {
			t.Fatalf("slot %d holds entry %p; want entry %d", i, got, w)
		}
		if k := q.index(e.pos); k != q.at(i) {
			t.Errorf("entry %d: position %d names buffer index %d; its slot is at %d", w, e.pos, k, q.at(i))
		}
	}

	var p ring
	for range 8 {
		p.push(plainFn, nil, 0, nil)
	}
	p.taken, p.cut = 1, 1 // the first runs, and never ends
	size := 0
	for i := range 10_000 {
		p.push(plainFn, nil, 0, nil)
		k := p.at(p.size() - 1)
		p.buf()[k] = slot{} // taken out again (a withdrawal)
		if i == 0 {
			size = p.len() // the ring was full: this one grew it
		}
	}
	if p.len() != size {
		t.Errorf("a ring of %d slots grew to %d with at most 9 slots live", size, p.len())
	}
}

// TestFindPlain: findPlain finds a queued plain task from where it was
// queued (its Place), after compact moved it toward the head too, and with
// the zero Place by a walk; a task taken out, or cut into a batch, is not
// queued.
func TestFindPlain(t *testing.T) {
	var q ring
	args := make([]*int, 12)
	at := make([]Place, 12)
	for i := range args {
		args[i] = new(int)
		at[i] = Place{q.push(plainFn, args[i], 0, nil), true}
	}
	q.taken, q.cut = 2, 2 // a batch runs the first two
	notQueued := map[int]bool{0: true, 1: true}
	for _, i := range []int{3, 4, 8} {
		clearSlot(q.buf(), q.argBuf(), q.index(at[i].pos)) // taken out (a withdrawal)
		notQueued[i] = true
	}
	check := func(when string) {
		t.Helper()
		want := 0 // index among the queued
		for i, arg := range args {
			for _, p := range []Place{at[i], {}} {
				got, queued := q.findPlain(arg, p)
				switch {
				case notQueued[i]:
					if queued {
						t.Errorf("%s: findPlain(task %d, %v) = %d: queued; it is not", when, i, p, got)
					}
				case !queued:
					t.Errorf("%s: findPlain(task %d, %v): not queued", when, i, p)
				case q.buf()[q.at(int(q.cut)+got)].fn == nil || q.arg(q.at(int(q.cut)+got)) != arg:
					t.Errorf("%s: findPlain(task %d, %v) = %d, which holds another", when, i, p, got)
				case when == "compacted" && got != want:
					t.Errorf("%s: findPlain(task %d, %v) = %d; want %d", when, i, p, got, want)
				}
			}
			if !notQueued[i] {
				want++
			}
		}
	}
	check("with gaps")
	if freed := q.compact(nil); freed != 3 {
		t.Fatalf("compact freed %d slots; want 3", freed)
	}
	check("compacted") // tasks 5 on moved toward the head: their Places are stale
}
