// Command bank serves the in-memory bank over HTTP: account balances
// guarded by a perkey executor (package bank) or, with -impl lock, by a
// mutex per account (package lockbased), on the same API, so that the same
// load can be run against both.
//
//	go run ./examples/bank [-addr 127.0.0.1:8081] [-impl perkey|lock] [-max-queue-per-key 64] [-workers 0] [-slow 0]
//
// Besides the API it serves /metrics (Prometheus: the executor's metrics
// with -impl perkey, and the Go runtime's) and, with -impl perkey,
// /debug/perkey, the executor's live page. It prints curl commands to try,
// and shuts down cleanly on Ctrl-C. With -slow 50ms every operation takes
// 50 ms, so that parallel curls fill an account's queue and get 429 with
// Retry-After (see README.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/perkey/perkey/debugpage"
	"github.com/perkey/perkey/examples/bank/api"
	"github.com/perkey/perkey/examples/bank/bank"
	"github.com/perkey/perkey/examples/bank/lockbased"
	"github.com/perkey/perkey/metrics"
)

// The server's timeouts. Request bodies are a few dozen bytes: a client
// that takes seconds to send one is gone or hostile, and must not keep a
// connection (and a goroutine) for long.
const (
	readHeaderTimeout = 2 * time.Second  // request line and headers
	readTimeout       = 5 * time.Second  // the whole request, body included
	idleTimeout       = 60 * time.Second // a keep-alive connection between requests
)

// options are what the flags set.
type options struct {
	impl    string        // "perkey" or "lock"
	perKey  int           // perkey: requests pending on one account before 429
	workers int           // perkey: operations running at once; 0 = the default
	slow    time.Duration // time each operation takes while it holds its accounts
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "listen address")
	var o options
	flag.StringVar(&o.impl, "impl", "perkey", `"perkey" (accounts guarded by a perkey executor) or "lock" (a mutex per account, the version it replaces)`)
	flag.IntVar(&o.perKey, "max-queue-per-key", 64, "requests pending on one account before 429 (0 = no cap; -impl perkey only)")
	flag.IntVar(&o.workers, "workers", 0, "account operations running at once (0 = the executor's default; -impl perkey only)")
	flag.DurationVar(&o.slow, "slow", 0, "time each operation takes while it holds its accounts, e.g. 50ms (0 = instant)")
	flag.Parse()
	if err := run(*addr, o, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// service is one implementation of the bank, with everything it serves.
type service struct {
	handler http.Handler                    // the API, /metrics and /debug/perkey
	close   func(ctx context.Context) error // after the HTTP server has stopped
}

// newService builds the bank o.impl names and the mux that serves it.
func newService(o options) (*service, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	s := &service{handler: api.JSONErrors(mux), close: func(context.Context) error { return nil }}
	switch o.impl {
	case "perkey":
		m := metrics.New("perkey")
		opts := []bank.Option{bank.WithMaxQueuePerKey(o.perKey), bank.WithOpTime(o.slow), bank.WithObserver(m)}
		if o.workers > 0 {
			opts = append(opts, bank.WithWorkers(o.workers))
		}
		b, err := bank.New(opts...)
		if err != nil {
			return nil, err
		}
		reg.MustRegister(m)
		page := b.DebugPage(debugpage.WithLatency(m))
		mux.Handle("GET /debug/perkey", page)
		mux.Handle("GET /debug/perkey/", page)
		mux.Handle("/", b.Handler())
		s.close = b.Close
	case "lock":
		if o.perKey != 64 || o.workers != 0 {
			log.Print("-impl lock has no per-key cap and no workers: -max-queue-per-key and -workers are ignored")
		}
		mux.HandleFunc("GET /debug/perkey", func(w http.ResponseWriter, _ *http.Request) {
			api.Fail(w, http.StatusNotFound, "no debug page: -impl lock has no executor")
		})
		mux.Handle("/", lockbased.New(lockbased.WithOpTime(o.slow)).Handler())
	default:
		return nil, fmt.Errorf("-impl %q: want perkey or lock", o.impl)
	}
	return s, nil
}

// newServer is the HTTP server for h, with its timeouts set.
func newServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout, IdleTimeout: idleTimeout}
}

func run(addr string, o options, out io.Writer) error {
	svc, err := newService(o)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return errors.Join(err, svc.close(context.Background()))
	}
	hs := newServer(svc.handler)
	printUsage(out, ln.Addr().String(), o)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()

	select {
	case err := <-serveErr:
		return errors.Join(err, svc.close(context.Background()))
	case <-ctx.Done():
	}
	log.Print("shutting down")
	// First stop HTTP (no new requests, wait for running handlers), then
	// the executor, which by then has nothing left to run.
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = hs.Shutdown(shutdown)
	if serr := <-serveErr; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return errors.Join(err, svc.close(shutdown))
}

func printUsage(out io.Writer, addr string, o options) {
	u := "http://" + addr
	fmt.Fprintf(out, `bank (-impl %s) listening on %s

  curl -s -X POST %[3]s/accounts/alice/deposit -d '{"amount":100}'
  curl -s -X POST %[3]s/accounts/bob/deposit -d '{"amount":20}'
  curl -s -X POST %[3]s/transfer -d '{"from":"alice","to":"bob","amount":30}'
  curl -s %[3]s/accounts/bob
  curl -s %[3]s/metrics | grep '^perkey_'
`, o.impl, addr, u)
	if o.impl == "perkey" {
		fmt.Fprintf(out, "  open %s/debug/perkey\n", u)
	}
	if o.impl == "perkey" && o.perKey > 0 && o.slow > 0 {
		// Deposits all at once on one account: its queue fills, and the
		// rest are answered 429 with Retry-After.
		fmt.Fprintf(out, `
  seq 20 | xargs -P 20 -I{} curl -s -o /dev/null -w '%%{http_code} Retry-After: %%header{retry-after}\n' \
    -X POST %s/accounts/alice/deposit -d '{"amount":1}' | sort | uniq -c
`, u)
	}
	fmt.Fprintln(out, "\nCtrl-C to stop.")
}
