// Command bank serves the in-memory bank of package bank over HTTP: account
// balances guarded by a perkey executor instead of locks.
//
//	go run ./examples/bank [-addr 127.0.0.1:8081] [-max-queue-per-key 64] [-workers 0] [-slow 0]
//
// It prints curl commands to try, and shuts down cleanly on Ctrl-C. With
// -slow 50ms every operation takes 50 ms, so that parallel curls fill an
// account's queue and get 429 with Retry-After (see README.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/perkey/perkey/examples/bank/bank"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "listen address")
	perKey := flag.Int("max-queue-per-key", 64, "requests pending on one account before 429 (0 = no cap)")
	workers := flag.Int("workers", 0, "account operations running at once (0 = the executor's default)")
	slow := flag.Duration("slow", 0, "time each operation takes while it holds its accounts, e.g. 50ms (0 = instant)")
	flag.Parse()
	if err := run(*addr, *perKey, *workers, *slow); err != nil {
		log.Fatal(err)
	}
}

func run(addr string, perKey, workers int, slow time.Duration) error {
	opts := []bank.Option{bank.WithMaxQueuePerKey(perKey), bank.WithOpTime(slow)}
	if workers > 0 {
		opts = append(opts, bank.WithWorkers(workers))
	}
	srv, err := bank.New(opts...)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 5 * time.Second}
	printUsage(ln.Addr().String(), perKey > 0 && slow > 0)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()

	select {
	case err := <-serveErr:
		_ = srv.Close(context.Background())
		return err
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
	return errors.Join(err, srv.Close(shutdown))
}

func printUsage(addr string, busy bool) {
	u := "http://" + addr
	fmt.Printf(`bank listening on %s

  curl -s -X POST %[2]s/accounts/alice/deposit -d '{"amount":100}'
  curl -s -X POST %[2]s/accounts/bob/deposit -d '{"amount":20}'
  curl -s -X POST %[2]s/transfer -d '{"from":"alice","to":"bob","amount":30}'
  curl -s %[2]s/accounts/bob
`, addr, u)
	if busy {
		// Deposits all at once on one account: its queue fills, and the
		// rest are answered 429 with Retry-After.
		fmt.Printf(`
  seq 20 | xargs -P 20 -I{} curl -s -o /dev/null -w '%%{http_code} Retry-After: %%header{retry-after}\n' \
    -X POST %s/accounts/alice/deposit -d '{"amount":1}' | sort | uniq -c
`, u)
	}
	fmt.Println("\nCtrl-C to stop.")
}
