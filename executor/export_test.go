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
