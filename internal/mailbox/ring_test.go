package mailbox

import (
	"testing"
	"unsafe"
)

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
		q.push(nil, argOf(int64(i)), int64(i), &stamps)
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
			q.push(nil, nil, 0, nil)
		}
		n := q.queued() // the drive loop cuts the whole queue into a batch
		q.taken += uint32(n)
		q.cut = uint16(n)
		for range during {
			q.push(nil, nil, 0, nil)
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
					q.push(nil, tc.arg, 0, nil)
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
