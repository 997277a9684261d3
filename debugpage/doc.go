// Package debugpage serves a live view of an executor over HTTP, in the
// manner of net/http/pprof and expvar: an HTML page that answers "which
// key is stuck, and since when?" and refreshes itself every second, and
// the same data as JSON. The page shows the executor's configuration
// (workers, caps, throughput, policy, stripes) and uptime, its Stats with
// their rates per second, the wait and run time percentiles of a
// LatencySource, the keys whose work is oldest (the stuck keys, with their
// ages) and the keys with the most pending tasks (the hot keys). (Its name
// keeps it clear of runtime/debug.)
//
//	h := debugpage.Handler(e, debugpage.WithLatency(collector)) // collector: the *metrics.Collector e observes
//	mux.Handle("/debug/perkey", h)
//	mux.Handle("/debug/perkey/", h) // for /debug/perkey/json
//
// Everything is computed on the server, so the first paint is complete
// (rates included) and a refresh is formatted as the first paint was: the
// page's script swaps in the server's newly rendered HTML.
//
// The page names keys, which metrics never do: mount it where only
// operators can reach it, as you would pprof.
//
// The package owns no goroutine and registers nothing by itself. It must
// never change the executor it shows, and must not import package metrics
// (another module): a LatencySource is an interface for that reason.
package debugpage
