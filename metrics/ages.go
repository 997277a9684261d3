package metrics

import (
	"github.com/perkey/perkey/executor"
)

// source is an attached executor with what a scrape reads from it beyond
// executor.Gauges: its Settings and its Ages, where it has them (an
// *executor.Executor has both; a Gauges of another kind, say a test's,
// may have neither).
type source struct {
	g        executor.Gauges
	settings func() executor.Settings // nil if g has no Settings method
	ages     func() executor.Ages     // nil if g has no Ages method
}

// newSource finds g's Settings and Ages. Neither is generic, so both are
// asserted.
func newSource(g executor.Gauges) source {
	s := source{g: g}
	if st, ok := g.(interface{ Settings() executor.Settings }); ok {
		s.settings = st.Settings
	}
	if a, ok := g.(interface{ Ages() executor.Ages }); ok {
		s.ages = a.Ages
	}
	return s
}

// readAges reads how old s's live work is now: one pass over its live
// mailboxes (executor.Executor.Ages), zero if s has no Ages.
func readAges(s source) executor.Ages {
	if s.ages == nil {
		return executor.Ages{}
	}
	return s.ages()
}
