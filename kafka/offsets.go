package kafka

import (
	"encoding/base64"
	"encoding/binary"
	"sort"
	"strings"
)

// tracker follows one partition's records from fetch to done and yields the
// commit watermark: the lowest offset not yet done. Records are added in
// offset order and finish in any order.
//
// It is a deque of entries in offset order; done entries at the front are
// popped, so the front is always the oldest unfinished record. Done entries
// behind it stay until it finishes: they are the completed offsets above
// the watermark that the commit metadata carries.
type tracker struct {
	q     []entry // q[head:] live, increasing offsets
	head  int
	held  int   // entries not done
	next  int64 // offset after the last record added; -1 before the first
	epoch int32 // leader epoch of the record just below the watermark
}

type entry struct {
	offset int64
	epoch  int32
	done   bool
}

func newTracker() tracker { return tracker{next: -1, epoch: -1} }

// add appends a record. done adds it already finished (a record the
// offset map says was handled before).
func (t *tracker) add(offset int64, epoch int32, done bool) {
	t.next = offset + 1
	if done && t.len() == 0 {
		t.epoch = epoch
		return
	}
	if t.head > 0 && t.head == len(t.q) {
		t.q, t.head = t.q[:0], 0
	}
	t.q = append(t.q, entry{offset: offset, epoch: epoch, done: done})
	if !done {
		t.held++
	}
}

// done marks offset finished and reports whether it was live and unfinished.
func (t *tracker) done(offset int64) bool {
	live := t.q[t.head:]
	i := sort.Search(len(live), func(i int) bool { return live[i].offset >= offset })
	if i == len(live) || live[i].offset != offset || live[i].done {
		return false
	}
	live[i].done = true
	t.held--
	for t.head < len(t.q) && t.q[t.head].done {
		t.epoch = t.q[t.head].epoch
		t.head++
	}
	if t.head == len(t.q) {
		t.q, t.head = t.q[:0], 0
	} else if t.head > 1024 && t.head > len(t.q)/2 {
		n := copy(t.q, t.q[t.head:])
		t.q, t.head = t.q[:n], 0
	}
	return true
}

// watermark is the offset to commit: the oldest unfinished record, or the
// offset after the last record added. -1 before the first record.
func (t *tracker) watermark() int64 {
	if t.head < len(t.q) {
		return t.q[t.head].offset
	}
	return t.next
}

// len is the span from the oldest unfinished record to the newest, in
// records.
func (t *tracker) len() int { return len(t.q) - t.head }

// offset-map metadata: the completed offsets above a committed watermark,
// as ranges, so a restart can skip them. Format: metaPrefix, then base64
// (raw, standard alphabet) of uvarints: the watermark, then for each range
// its distance from the previous range's end (the watermark for the first)
// and its length minus one. A range [lo, hi] means every record with an
// offset in it was done; offsets with no record (compaction, transaction
// markers) may fall inside.
const (
	metaPrefix = "perkey1:"
	// maxMeta keeps under Kafka's default offset.metadata.max.bytes (4096).
	maxMeta = 4000
)

// meta encodes the done ranges above the watermark, dropping the ranges
// that do not fit in maxMeta (their records are handled again after a
// restart, nothing is lost). carry is the offset map this assignment
// inherited: its ranges beyond the records fetched so far are done too and
// are carried into the new map, or a member that hands the partition on
// before fetching that far would make its next owner redo them. It returns
// "" if there is nothing to encode.
func (t *tracker) meta(carry [][2]int64) string {
	live := t.q[t.head:]
	wm := t.watermark()
	if wm < 0 {
		return ""
	}
	maxRaw := base64.RawStdEncoding.DecodedLen(maxMeta - len(metaPrefix))
	buf := binary.AppendUvarint(nil, uint64(wm))
	prev, ranges := wm, 0
	// add appends the range [lo, hi]; false once the map is full (the range
	// is then left out, and so are all after it).
	add := func(lo, hi int64) bool {
		n := len(buf)
		buf = binary.AppendUvarint(buf, uint64(lo-prev))
		buf = binary.AppendUvarint(buf, uint64(hi-lo))
		if len(buf) > maxRaw {
			buf = buf[:n]
			return false
		}
		prev, ranges = hi, ranges+1
		return true
	}
	full := false
	for i := 0; i < len(live) && !full; {
		if !live[i].done {
			i++
			continue
		}
		j := i
		for j+1 < len(live) && live[j+1].done {
			j++
		}
		full = !add(live[i].offset, live[j].offset)
		i = j + 1
	}
	for _, r := range carry {
		if full {
			break
		}
		floor := prev // ranges follow each other: start past the previous one
		if ranges > 0 {
			floor++
		}
		if lo, hi := max(r[0], t.next, floor), r[1]; hi >= lo {
			full = !add(lo, hi)
		}
	}
	if ranges == 0 {
		return ""
	}
	return metaPrefix + base64.RawStdEncoding.EncodeToString(buf)
}

// doneSet is a decoded offset map: sorted, disjoint ranges.
type doneSet struct {
	base   int64 // the watermark it was written with
	ranges [][2]int64
}

// parseMeta decodes meta; ok is false for anything it did not write.
func parseMeta(s string) (d doneSet, ok bool) {
	rest, found := strings.CutPrefix(s, metaPrefix)
	if !found {
		return d, false
	}
	raw, err := base64.RawStdEncoding.DecodeString(rest)
	if err != nil {
		return d, false
	}
	next := func() (int64, bool) {
		v, n := binary.Uvarint(raw)
		if n <= 0 || v > 1<<62 {
			return 0, false
		}
		raw = raw[n:]
		return int64(v), true
	}
	base, ok := next()
	if !ok {
		return d, false
	}
	d.base = base
	prev := base
	for len(raw) > 0 {
		gap, ok1 := next()
		span, ok2 := next()
		if !ok1 || !ok2 {
			return doneSet{}, false
		}
		lo := prev + gap
		hi := lo + span
		if lo <= prev || hi > 1<<62 {
			return doneSet{}, false
		}
		d.ranges = append(d.ranges, [2]int64{lo, hi})
		prev = hi
	}
	return d, len(d.ranges) > 0
}

// has reports whether offset falls in a done range.
func (d *doneSet) has(offset int64) bool {
	i := sort.Search(len(d.ranges), func(i int) bool { return d.ranges[i][1] >= offset })
	return i < len(d.ranges) && d.ranges[i][0] <= offset
}

// last is the highest offset the set covers.
func (d *doneSet) last() int64 {
	if len(d.ranges) == 0 {
		return -1
	}
	return d.ranges[len(d.ranges)-1][1]
}
