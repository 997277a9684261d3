// Package debugpage serves a live view of an executor over HTTP, in the
// manner of net/http/pprof and expvar: an HTML page with the executor's Stats
// and its hot keys (the keys with the most pending tasks), which refreshes
// itself every second, and the same data as JSON. (Its name keeps it clear
// of runtime/debug.)
//
//	mux.Handle("/debug/perkey", debugpage.Handler(e))
//	mux.Handle("/debug/perkey/", debugpage.Handler(e)) // for /debug/perkey/json
//
// The page names keys, which metrics never do: mount it where only
// operators can reach it, as you would pprof.
//
// The package owns no goroutine and registers nothing by itself. It must
// never change the executor it shows.
package debugpage
