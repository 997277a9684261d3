package metrics

import (
	"reflect"
	"time"

	"github.com/perkey/perkey/executor"
)

// firstScan is how many keys a scrape asks OldestKeys for first; most
// scrapes need no more (see scanAges).
const firstScan = 64

// source is an attached executor with what a scrape reads from it beyond
// executor.Gauges: its Settings and its OldestKeys, where it has them.
type source struct {
	g        executor.Gauges
	settings func() executor.Settings // nil if g has no Settings method
	oldest   func(n int) []age        // nil if g has no OldestKeys method
}

// age is what a scrape reads of one executor.KeyLoad.
type age struct{ held, wait time.Duration }

// newSource finds g's Settings and OldestKeys. Gauges is not generic, so
// OldestKeys, whose result is a []executor.KeyLoad[K] for g's key type K,
// is found and called by reflection, once a scrape; Settings is not
// generic and is asserted.
func newSource(g executor.Gauges) source {
	s := source{g: g}
	if st, ok := g.(interface{ Settings() executor.Settings }); ok {
		s.settings = st.Settings
	}
	s.oldest = oldestKeysOf(g)
	return s
}

var durationType = reflect.TypeFor[time.Duration]()

// oldestKeysOf returns a function that calls g.OldestKeys(n) and reads each
// KeyLoad's Held and OldestWait, or nil if g has no such method.
func oldestKeysOf(g executor.Gauges) func(n int) []age {
	m := reflect.ValueOf(g).MethodByName("OldestKeys")
	if !m.IsValid() {
		return nil
	}
	t := m.Type()
	if t.NumIn() != 1 || t.In(0).Kind() != reflect.Int || t.NumOut() != 1 || t.Out(0).Kind() != reflect.Slice {
		return nil
	}
	elem := t.Out(0).Elem()
	if elem.Kind() != reflect.Struct {
		return nil
	}
	held, okHeld := elem.FieldByName("Held")
	wait, okWait := elem.FieldByName("OldestWait")
	if !okHeld || !okWait || held.Type != durationType || wait.Type != durationType {
		return nil
	}
	return func(n int) []age {
		ls := m.Call([]reflect.Value{reflect.ValueOf(n)})[0]
		out := make([]age, ls.Len())
		for i := range out {
			l := ls.Index(i)
			out[i] = age{held: time.Duration(l.FieldByIndex(held.Index).Int()), wait: time.Duration(l.FieldByIndex(wait.Index).Int())}
		}
		return out
	}
}

// ages is what a scrape reports of an executor's live work.
type ages struct {
	held      time.Duration // the oldest hold's age
	wait      time.Duration // the oldest queued task's wait
	slowHolds int           // holds older than the slow-task threshold
}

// scanAges reads the ages of s's live work. OldestKeys lists keys by the
// larger of Held and OldestWait, oldest first, so the first keys settle
// every figure unless the last of them is still older than one of the
// figures found (or than the threshold): then an unseen key could change
// it, and scanAges asks once more for every active key. With no task
// queued (queued, from Stats), the oldest wait is 0 without a look.
func scanAges(s source, active, queued int, slow time.Duration) ages {
	if s.oldest == nil {
		return ages{}
	}
	ls := s.oldest(firstScan)
	a := tally(ls, slow)
	if len(ls) == firstScan {
		last := ls[len(ls)-1]
		score := max(last.held, last.wait)
		if score > a.held || (queued > 0 && score > a.wait) || (slow > 0 && last.held > slow) {
			a = tally(s.oldest(max(active, firstScan+1)), slow)
		}
	}
	return a
}

func tally(ls []age, slow time.Duration) ages {
	var a ages
	for _, l := range ls {
		a.held = max(a.held, l.held)
		a.wait = max(a.wait, l.wait)
		if slow > 0 && l.held > slow {
			a.slowHolds++
		}
	}
	return a
}
