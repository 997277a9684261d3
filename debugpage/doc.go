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
// page's script swaps in the server's newly rendered HTML. Rates cover
// the last 10 s (RateWindow) of samples the handler takes once a second,
// the same window for every viewer, not the time since someone last
// looked.
//
// The JSON names its fields in snake_case and gives every duration in
// seconds, as a number, with "_seconds" ending its name
// ("uptime_seconds": 21.458, "age_seconds": 9.5), and rates ending in
// "_per_second": the conventions of Prometheus, so the page's figures and
// the metrics' read alike, and any client can use them without knowing
// Go's time.Duration. Times are RFC 3339 strings.
//
// Keys are printed with %v, cut to 200 characters. The tables show a key
// longer than 48 characters shortened in the middle (its start and end,
// which usually tell keys apart), with the whole key on hover; key cells
// wrap, so long keys never push one table over another.
//
// The page names keys, which metrics never do: mount it where only
// operators can reach it, as you would pprof.
//
// The package owns no goroutine and registers nothing by itself: a
// handler samples on a timer, from its first request until 5 minutes
// after its latest. It must
// never change the executor it shows, and must not import package metrics
// (another module): a LatencySource is an interface for that reason.
package debugpage
