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
// ahead of them (see watchAhead): 0 once nobody waits for room.
func WatchedRooms[K comparable](e *Executor[K]) int {
	e.watchMu.Lock()
	defer e.watchMu.Unlock()
	return len(e.watches)
}

// WatchedCtxs is how many distinct ctxs the watch on key's waiting room
// watches (see watchAhead).
func WatchedCtxs[K comparable](e *Executor[K], key K) int {
	e.watchMu.Lock()
	defer e.watchMu.Unlock()
	if w := e.watches[key]; w != nil {
		return len(w.watched)
	}
	return 0
}
