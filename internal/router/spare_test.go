package router

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/alitto/pond/v2"

	"github.com/perkey/perkey/internal/mailbox"
)

// oneSlotRunner is a runner with one execution slot, stopped when t ends.
func oneSlotRunner(t *testing.T) *mailbox.Runner {
	pool := pond.NewPool(0)
	r := mailbox.NewRunner(pool, 1, 4, mailbox.RunnerOptions{})
	t.Cleanup(func() {
		r.Wait()
		pool.StopAndWait()
	})
	return r
}

// TestSpares: while a shard has a live mailbox, the mailboxes of keys
// that retire are kept as spares, up to maxSpares, and reused for new keys;
// once nothing in the shard is live it keeps one.
func TestSpares(t *testing.T) {
	r := oneSlotRunner(t)
	rt := New[string](r, 0)
	var ks []string // keys of shard 0
	for i := 0; len(ks) < maxSpares+4; i++ {
		if k := fmt.Sprint("k", i); rt.Index(k) == 0 {
			ks = append(ks, k)
		}
	}
	s := &rt.shards[0]
	spares := func() (n, live int) {
		s.home.Lock()
		defer s.home.Unlock()
		return s.nspare, s.live
	}
	// Every key but the last is held (an inline hold, as an uncontended Do
	// takes), so all are live at once; then all but ks[0] retire.
	holds := make([]mailbox.Turn, len(ks)-1)
	for i := range holds {
		m := rt.Acquire(ks[i])
		holds[i].Init(nil, false)
		m.Hold(&holds[i])
		m.Release()
	}
	for i := 1; i < len(holds); i++ {
		holds[i].Vacate()
	}
	if n, live := spares(); n != maxSpares || live != 1 {
		t.Fatalf("busy shard after %d retirements: %d spares, %d live; want %d and 1", len(holds)-1, n, live, maxSpares)
	}
	m := rt.Acquire(ks[len(ks)-1]) // a new key takes a spare
	n := s.nspare
	m.Release()
	if n != maxSpares-1 {
		t.Errorf("a new key in a busy shard left %d spares; want %d (it reuses one)", n, maxSpares-1)
	}
	holds[0].Vacate()
	if n, live := spares(); n != 1 || live != 0 {
		t.Errorf("quiet shard: %d spares, %d live; want 1 and 0", n, live)
	}
}

// TestNodeOf: every mailbox Acquire hands out leads back to the node that
// holds it and is filed under the key (run it with -race: checkptr checks
// the step back from the mailbox to its node), for key types whose size
// puts the mailbox at different offsets.
func TestNodeOf(t *testing.T) {
	r := oneSlotRunner(t)
	t.Run("string", func(t *testing.T) {
		checkNodeOf(t, New[string](r, 0), func(i int) string { return fmt.Sprint("k", i) })
	})
	t.Run("byte", func(t *testing.T) { checkNodeOf(t, New[byte](r, 0), func(i int) byte { return byte(i) }) })
	type wide struct{ a, b, c int64 }
	t.Run("struct", func(t *testing.T) { checkNodeOf(t, New[wide](r, 0), func(i int) wide { return wide{int64(i), 1, 2} }) })
}

func checkNodeOf[K comparable](t *testing.T, rt *Router[K], key func(int) K) {
	const n = 200
	ms := make([]*mailbox.Mailbox, n)
	holds := make([]mailbox.Turn, n) // held, each key stays live and filed
	for i := range ms {
		m := rt.Acquire(key(i))
		holds[i].Init(nil, false)
		m.Hold(&holds[i])
		m.Release()
		ms[i] = m
	}
	defer func() {
		for i := range holds {
			holds[i].Vacate()
		}
	}()
	for i, m := range ms {
		k := key(i)
		nd := nodeOf[K](m)
		if &nd.mb != m {
			t.Fatalf("key %v: nodeOf gives a node whose mailbox is %p, not %p", k, &nd.mb, m)
		}
		if got := rt.KeyOf(m); got != k {
			t.Fatalf("KeyOf gives %v, want %v", got, k)
		}
		if f := rt.Find(k); f != m {
			t.Fatalf("key %v: Find gives %p, Acquire gave %p", k, f, m)
		} else {
			f.Release()
		}
	}
}

// TestShardSize: a shard is a whole number of cache lines, so that in the
// router's array of shards every shard's lock, and the count its home keeps
// beside it (mailbox.Mailbox.Count), start a line of their own.
func TestShardSize(t *testing.T) {
	for name, size := range map[string]uintptr{
		"string":   unsafe.Sizeof(shard[string]{}),
		"int":      unsafe.Sizeof(shard[int]{}),
		"[64]byte": unsafe.Sizeof(shard[[64]byte]{}),
	} {
		if size%64 != 0 {
			t.Errorf("shard[%s] is %d bytes; want a multiple of 64", name, size)
		}
	}
	if off := unsafe.Offsetof(shard[string]{}.home); off != 0 {
		t.Errorf("a shard's home is at offset %d; want 0", off)
	}
}
