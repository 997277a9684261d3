// Command metrics runs a perkey executor under a synthetic load, one hot
// key and many cold ones, and serves what an operator would look at:
//
//	/metrics        Prometheus metrics (package metrics, with promhttp)
//	/debug/perkey   live page with Stats and the hot keys (package debugpage)
//
// Usage:
//
//	go run ./examples/metrics [-addr 127.0.0.1:8080] [-duration 0] [-leak]
//
// See README.md for what to look at.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/debugpage"
	"github.com/perkey/perkey/executor"
	"github.com/perkey/perkey/metrics"
)

// config is what the flags set.
type config struct {
	addr     string        // where to listen
	duration time.Duration // stop after this long; 0 runs until interrupted
	keys     int           // cold key space
	leak     bool          // leave one task per second hanging, as a leaked exit path would
}

func main() {
	var cfg config
	flag.StringVar(&cfg.addr, "addr", "127.0.0.1:8080", "listen address (port 0 picks a free port)")
	flag.DurationVar(&cfg.duration, "duration", 0, "stop after this long (0: run until interrupted)")
	flag.IntVar(&cfg.keys, "keys", 100_000, "number of distinct cold keys")
	flag.BoolVar(&cfg.leak, "leak", false, "leave one task a second hanging, to show what a leak looks like")
	flag.Parse()
	if cfg.keys < 1 {
		log.Fatal("-keys must be at least 1")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.duration)
		defer cancel()
	}
	if err := run(ctx, cfg, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// Load shape: the hot key gets more callers than it can serve, capped per
// key so that the excess is rejected; cold keys are spread thin.
const (
	workers      = 16
	maxPerKey    = 32                    // cap on one key's pending tasks
	hotCallers   = 48                    // goroutines calling Do on the hot key
	hotWork      = 2 * time.Millisecond  // the hot key serves about 500 tasks/s
	hotDeadline  = 50 * time.Millisecond // a hot caller gives up after this
	coldCallers  = 16                    // goroutines calling Do on random cold keys
	coldThink    = 2 * time.Millisecond  // pause between a cold caller's calls
	panicOneIn   = 2000                  // one cold task in this many panics
	rejectPause  = 10 * time.Millisecond // a rejected caller's backoff when ErrBusy has no hint
	closeTimeout = 5 * time.Second
)

// run serves the endpoints and drives the load until ctx ends, then stops
// the load, closes the executor and shuts the server down. It prints the
// URLs to out once it is listening.
func run(ctx context.Context, cfg config, out io.Writer) error {
	m := metrics.New("perkey")
	e, err := executor.New[string](
		executor.WithObserver(m),
		executor.WithWorkers(workers),
		executor.WithMaxQueuePerKey(maxPerKey),
	)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.Handle("/debug/perkey", debugpage.Handler(e))
	mux.Handle("/debug/perkey/", debugpage.Handler(e))
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<p><a href="/metrics">/metrics</a> · <a href="/debug/perkey">/debug/perkey</a></p>`)
	})

	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	fmt.Fprintf(out, "serving %s/metrics and %s/debug/perkey\n", base, base)

	load(ctx, e, cfg)

	closeCtx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	errClose := e.Close(closeCtx)
	errShutdown := srv.Shutdown(closeCtx)
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return errors.Join(errClose, errShutdown)
}

// load runs the callers until ctx ends and returns once they all have.
func load(ctx context.Context, e *executor.Executor[string], cfg config) {
	var wg sync.WaitGroup
	for range hotCallers {
		wg.Go(func() { hot(ctx, e) })
	}
	for range coldCallers {
		wg.Go(func() { cold(ctx, e, cfg.keys) })
	}
	if cfg.leak {
		wg.Go(func() { leak(ctx, e) })
	}
	wg.Wait()
}

// hot calls Do on one key with a deadline, backing off when rejected.
func hot(ctx context.Context, e *executor.Executor[string]) {
	for ctx.Err() == nil {
		callCtx, cancel := context.WithTimeout(ctx, hotDeadline)
		err := e.Do(callCtx, "hot", func(ctx context.Context) error { return pause(ctx, hotWork) })
		cancel()
		if be, ok := errors.AsType[*backpressure.BusyError](err); ok {
			wait := be.RetryAfter()
			if wait <= 0 {
				wait = rejectPause
			}
			_ = pause(ctx, wait)
		}
	}
}

// cold calls Do on random keys from a large key space; a few tasks panic.
func cold(ctx context.Context, e *executor.Executor[string], keys int) {
	for ctx.Err() == nil {
		key := "user-" + strconv.Itoa(rand.IntN(keys))
		work := time.Duration(500+rand.IntN(2500)) * time.Microsecond
		_ = e.Do(ctx, key, func(ctx context.Context) error {
			if rand.IntN(panicOneIn) == 0 {
				panic("cold task failed badly")
			}
			return pause(ctx, work)
		})
		_ = pause(ctx, coldThink)
	}
}

// leak leaves one task a second hanging until ctx ends, the way a task
// stuck on a call without a deadline would.
func leak(ctx context.Context, e *executor.Executor[string]) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		// A fresh ctx: the hanging task is detached from this loop.
		_, _ = e.Submit(context.Background(), "stuck-"+strconv.Itoa(n), func(context.Context) error {
			<-ctx.Done()
			return nil
		})
	}
}

// pause sleeps for d or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
