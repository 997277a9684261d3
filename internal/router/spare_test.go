package router

import (
	"fmt"
	"testing"

	"github.com/alitto/pond/v2"

	"github.com/perkey/perkey/internal/mailbox"
)

// TestSpares: while a shard has a live mailbox, the mailboxes of keys
// that retire are kept as spares, up to maxSpares, and reused for new keys;
// once nothing in the shard is live it keeps one.
func TestSpares(t *testing.T) {
	pool := pond.NewPool(0)
	r := mailbox.NewRunner(pool, 1, 4, mailbox.RunnerOptions{})
	t.Cleanup(func() {
		r.Wait()
		pool.StopAndWait()
	})
	rt := New[string](r, 0)
	var ks []string // keys of shard 0
	for i := 0; len(ks) < maxSpares+4; i++ {
		if k := fmt.Sprint("k", i); rt.Index(k) == 0 {
			ks = append(ks, k)
		}
	}
	s := &rt.shards[0]
	spares := func() (n, live int) {
		s.mu.Lock()
		defer s.mu.Unlock()
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
