package executor

import (
	"fmt"
	"strings"

	"github.com/perkey/perkey/internal/mailbox"
)

// DebugState describes e's runner and every live mailbox, for a test that
// found the executor wedged.
func DebugState[K comparable](e *Executor[K]) string {
	var b strings.Builder
	fmt.Fprintf(&b, "runner %v, stats %+v\n", e.runner, e.Stats())
	e.router.Each(func(k K, m *mailbox.Mailbox) { fmt.Fprintf(&b, "  key %v: %v\n", k, m) })
	return b.String()
}

// WatchedRooms is how many keys' waiting rooms have a watch on the ctxs
// ahead of them (see watchKey): 0 once nobody waits for room.
func WatchedRooms[K comparable](e *Executor[K]) int {
	e.watchMu.Lock()
	defer e.watchMu.Unlock()
	return len(e.watches)
}

// WatchedCtxs is how many distinct ctxs the watch on key's waiting room
// watches (see watchKey).
func WatchedCtxs[K comparable](e *Executor[K], key K) int {
	e.watchMu.Lock()
	defer e.watchMu.Unlock()
	if w := e.watches[key]; w != nil {
		return len(w.watched)
	}
	return 0
}

// GlobalWatch is how many distinct ctxs the watch on the executor's
// waiting room watches, and whether there is one (see watchGlobal).
func GlobalWatch[K comparable](e *Executor[K]) (ctxs int, ok bool) {
	e.watchMu.Lock()
	defer e.watchMu.Unlock()
	return len(e.global.watched), e.global.waiters > 0
}

// Waiting is how many of key's tasks wait, not started, as plain slots and
// as turns.
func Waiting[K comparable](e *Executor[K], key K) (plain, turns int) {
	m := e.router.Find(key)
	if m == nil {
		return 0, 0
	}
	defer m.Release()
	m.EachWaiting(func(*mailbox.Turn) { turns++ })
	m.TakePlain(func(any) bool { plain++; return false })
	return plain, turns
}

// OnReserved makes admit call f with the key of each submission that has
// reserved room, before it locks its key's mailbox (see Executor.reserved).
// Set it before e is used.
func OnReserved[K comparable](e *Executor[K], f func(key K)) { e.reserved = f }

// RoomWatchAfter is how long a wait for room lasts before it watches what
// holds the room (see lateWatch).
const RoomWatchAfter = roomWatchAfter

// WatchAtOnce makes every wait for room watch what holds the room as it
// begins (see lateWatch), for a test whose model has no clock for it.
func WatchAtOnce[K comparable](e *Executor[K]) { e.watchAfter = 0 }

// CapSweepSmall is the most tasks a scope may hold and still be swept at
// every refusal at its cap; CapSweepEvery how often a larger one is (see
// capSweep).
const (
	CapSweepSmall = capSweepSmall
	CapSweepEvery = capSweepEvery
)

// SweepAtOnce makes every cap sweep every scope at every refusal (see
// capSweep), for a test whose model has no clock for the limit.
func SweepAtOnce[K comparable](e *Executor[K]) { e.sweepEvery = 0 }

// QueueSlots is how many slots key's queue holds, tombstones included (see
// mailbox.Mailbox.Slots); 0 if key has no mailbox.
func QueueSlots[K comparable](e *Executor[K], key K) int {
	m := e.router.Find(key)
	if m == nil {
		return 0
	}
	defer m.Release()
	return m.Slots()
}
