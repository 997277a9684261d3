package kafka

import (
	"math/rand/v2"
	"testing"
)

func TestTrackerWatermark(t *testing.T) {
	tr := newTracker()
	if got := tr.watermark(); got != -1 {
		t.Fatalf("empty watermark %d; want -1", got)
	}
	for _, o := range []int64{10, 11, 13, 14} { // 12: a gap (compacted)
		tr.add(o, int32(o), false)
	}
	steps := []struct {
		done int64
		want int64
		held int
	}{
		{13, 10, 3}, // above the watermark: no move
		{10, 11, 2},
		{11, 14, 1}, // 11 and the already-done 13 pop; 12 has no record
		{14, 15, 0},
	}
	for _, s := range steps {
		if !tr.done(s.done) {
			t.Fatalf("done(%d) = false; want true", s.done)
		}
		if got := tr.watermark(); got != s.want || tr.held != s.held {
			t.Errorf("after done(%d): watermark %d, held %d; want %d, %d", s.done, got, tr.held, s.want, s.held)
		}
	}
	if tr.epoch != 14 {
		t.Errorf("epoch %d; want 14 (the record just below the watermark)", tr.epoch)
	}
	if tr.done(14) || tr.done(99) {
		t.Errorf("done on a finished or unknown offset = true; want false")
	}
}

func TestTrackerMetaRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		tr := newTracker()
		n := 1 + rng.IntN(300)
		off := int64(rng.IntN(1000))
		var offs []int64
		for range n {
			off += 1 + int64(rng.IntN(3))
			offs = append(offs, off)
			tr.add(off, 0, false)
		}
		done := make(map[int64]bool)
		for _, o := range offs {
			if rng.IntN(3) == 0 {
				tr.done(o)
				done[o] = true
			}
		}
		wm := tr.watermark()
		meta := tr.meta(nil)
		d, ok := parseMeta(meta)
		if meta == "" {
			ok = true // nothing above the watermark was done
		}
		if !ok {
			t.Fatalf("round %d: parseMeta(%q) failed", round, meta)
		}
		if meta != "" && d.base != wm {
			t.Fatalf("round %d: base %d; want the watermark %d", round, d.base, wm)
		}
		for _, o := range offs {
			if o < wm {
				continue
			}
			if got := meta != "" && d.has(o); got != done[o] {
				t.Fatalf("round %d: offset %d covered %v; want %v", round, o, got, done[o])
			}
		}
	}
}

func TestTrackerMetaTruncated(t *testing.T) {
	tr := newTracker()
	for o := range int64(20000) {
		tr.add(o, 0, false)
	}
	for o := int64(1); o < 20000; o += 2 {
		tr.done(o) // every other record: one range per done record
	}
	meta := tr.meta(nil)
	if len(meta) > maxMeta {
		t.Fatalf("meta is %d bytes; want <= %d", len(meta), maxMeta)
	}
	d, ok := parseMeta(meta)
	if !ok || len(d.ranges) == 0 {
		t.Fatalf("parseMeta failed on a truncated map")
	}
	for o := range int64(20000) {
		if d.has(o) && o%2 == 0 {
			t.Fatalf("offset %d covered but not done", o)
		}
	}
}

func TestParseMetaRejects(t *testing.T) {
	for _, s := range []string{"", "x", metaPrefix, metaPrefix + "!!!", metaPrefix + "AA", "other:AAAA"} {
		if _, ok := parseMeta(s); ok {
			t.Errorf("parseMeta(%q) ok; want rejected", s)
		}
	}
}

func FuzzParseMeta(f *testing.F) {
	tr := newTracker()
	for o := range int64(10) {
		tr.add(o, 0, false)
	}
	tr.done(3)
	tr.done(7)
	f.Add(tr.meta(nil))
	f.Add(metaPrefix + "AAAA")
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := parseMeta(s)
		if !ok {
			return
		}
		prev := d.base
		for _, r := range d.ranges {
			if r[0] <= prev || r[1] < r[0] {
				t.Fatalf("ranges not increasing: %v (base %d)", d.ranges, d.base)
			}
			prev = r[1]
		}
	})
}

// TestMetaCarriesInheritedMap: an assignment that inherited an offset map
// and hands the partition on before fetching that far must pass the
// inherited ranges on, or its successor redoes them (found by
// TestMemberJoinsAndLeaves: a record done by the first owner, skipped by
// the second, was handled again by the third).
func TestMetaCarriesInheritedMap(t *testing.T) {
	tr := newTracker()
	for o := int64(100); o < 105; o++ {
		tr.add(o, 0, false)
		tr.done(o)
	}
	carry := [][2]int64{{103, 104}, {110, 112}, {120, 120}} // 103-104 fetched already
	d, ok := parseMeta(tr.meta(carry))
	if !ok || d.base != 105 {
		t.Fatalf("parseMeta = %+v, %v; want base 105", d, ok)
	}
	for _, o := range []int64{110, 111, 112, 120} {
		if !d.has(o) {
			t.Errorf("carried offset %d missing from %v", o, d.ranges)
		}
	}
	for _, o := range []int64{105, 109, 113, 119, 121} {
		if d.has(o) {
			t.Errorf("offset %d in %v; want only the carried ranges", o, d.ranges)
		}
	}
	// With records in flight, live ranges come first, then the carry.
	tr2 := newTracker()
	for o := int64(0); o < 4; o++ {
		tr2.add(o, 0, false)
	}
	tr2.done(2)
	d2, _ := parseMeta(tr2.meta([][2]int64{{3, 9}}))
	if d2.base != 0 || !d2.has(2) || d2.has(3) || !d2.has(4) || !d2.has(9) || d2.has(10) {
		t.Errorf("meta with live and carried ranges: got %+v; want base 0, {2}, {4..9}", d2)
	}
}
