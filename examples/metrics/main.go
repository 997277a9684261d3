// Command metrics runs a perkey executor under a synthetic load, one hot
// key and many cold ones, and serves what an operator would look at:
//
//	/metrics        Prometheus metrics (package metrics, with promhttp)
//	/debug/perkey   live page: configuration, Stats and rates, percentiles,
//	                the stuck keys with their ages and the hot keys (package debugpage)
//
// It prints a line a second: rates, queued, running, the panics of that
// second, the hottest key and the key whose work is oldest, with its age.
// Recovered panics are counted there; their stacks are printed only with
// -stacks.
//
// Usage:
//
//	go run ./examples/metrics [-addr 127.0.0.1:8080] [-duration 0] [-leak] [-stuck [-stuck-for d]] [-real-keys] [-stacks]
//
// If the default address is taken, it serves on a free port of the same
// host instead and says so; an address given with -addr must be free.
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
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

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
	fallback bool          // if addr is taken, listen on a free port of its host instead
	duration time.Duration // stop after this long; 0 runs until interrupted
	keys     int           // cold key space
	leak     bool          // leave one task per second hanging, as a leaked exit path would
	stuck    bool          // hold key "stuck" from the start until the end
	stuckFor time.Duration // with stuck: give it back after this long; 0: at the end
	realKeys bool          // also hold and queue on keys shaped like production keys
	stacks   bool          // log each recovered panic with its stack
	logs     io.Writer     // where the executor logs; nil: stderr
}

// defaultAddr is where the example listens unless -addr says otherwise.
const defaultAddr = "127.0.0.1:8080"

func main() {
	var cfg config
	flag.StringVar(&cfg.addr, "addr", defaultAddr, "listen address; port 0 picks a free port (if the default is taken, a free port is picked and printed)")
	flag.DurationVar(&cfg.duration, "duration", 0, "stop after this long (0: run until interrupted)")
	flag.IntVar(&cfg.keys, "keys", 100_000, "number of distinct cold keys")
	flag.BoolVar(&cfg.leak, "leak", false, "leave one task a second hanging, to show what a leak looks like")
	flag.BoolVar(&cfg.stuck, "stuck", false, `hold key "stuck" with one task that returns only at the end, to show a stuck key`)
	flag.DurationVar(&cfg.stuckFor, "stuck-for", 0, `with -stuck: give key "stuck" back after this long, to show an alert resolve (0: at the end)`)
	flag.BoolVar(&cfg.realKeys, "real-keys", false, "also hold keys shaped like production ones (a UUID, an 80-character composite, 200 runes, multibyte) with a task queued behind each")
	flag.BoolVar(&cfg.stacks, "stacks", false, "log every recovered panic with its stack (by default they are counted on the status line)")
	flag.Parse()
	cfg.fallback = true
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "addr" {
			cfg.fallback = false // the user chose it: no surprises
		}
	})
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
	slowTask     = time.Second           // tasks take milliseconds: a key held for a second is stuck
	closeTimeout = 5 * time.Second
)

// run serves the endpoints and drives the load until ctx ends, then stops
// the load, closes the executor and shuts the server down. It prints the
// URLs to out once it is listening, then a status line a second.
func run(ctx context.Context, cfg config, out io.Writer) error {
	m := metrics.New("perkey")
	e, err := executor.New[string](
		executor.WithObserver(m), // without it m would count nothing (perkey_executors_attached 0)
		executor.WithWorkers(workers),
		executor.WithMaxQueuePerKey(maxPerKey),
		executor.WithSlowTaskWarning(slowTask), // counts perkey_tasks_slow_total
		executor.WithLogger(logger(cfg)),
	)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	page := debugpage.Handler(e, debugpage.WithLatency(m)) // one handler: it keeps the counters rates are computed from
	mux.Handle("/debug/perkey", page)
	mux.Handle("/debug/perkey/", page)
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<p><a href="/metrics">/metrics</a> · <a href="/debug/perkey">/debug/perkey</a></p>`)
	})

	ln, err := listen(cfg, out)
	if err != nil {
		_ = e.Close(context.Background())
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	fmt.Fprintf(out, "serving %s/metrics and %s/debug/perkey\n", base, base)

	if cfg.stuck {
		if err := hold(ctx, e, cfg.stuckFor, out); err != nil {
			_ = srv.Close()
			return errors.Join(err, e.Close(context.Background()))
		}
	}
	if cfg.realKeys {
		if err := holdReal(ctx, e, out); err != nil {
			_ = srv.Close()
			return errors.Join(err, e.Close(context.Background()))
		}
	}
	load(ctx, e, cfg, out)

	closeCtx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	errClose := e.Close(closeCtx)
	errShutdown := srv.Shutdown(closeCtx)
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return errors.Join(errClose, errShutdown)
}

// listen listens on cfg.addr. If that is taken and cfg.fallback is set (the
// address is the default, not one the user chose), it listens on a free
// port of the same host instead and says so on out; otherwise the error
// says how to choose another address.
func listen(cfg config, out io.Writer) (net.Listener, error) {
	ln, err := net.Listen("tcp", cfg.addr)
	if err == nil || !errors.Is(err, syscall.EADDRINUSE) {
		return ln, err
	}
	if !cfg.fallback {
		return nil, fmt.Errorf("%w: choose another address with -addr (port 0 picks a free one)", err)
	}
	host, _, splitErr := net.SplitHostPort(cfg.addr)
	if splitErr != nil {
		return nil, err
	}
	ln, err2 := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err2 != nil {
		return nil, errors.Join(err, err2)
	}
	fmt.Fprintf(out, "%s is in use; listening on %s instead (choose an address with -addr)\n", cfg.addr, ln.Addr())
	return ln, nil
}

// logger is the executor's logger: JSON lines of warnings and errors, as
// its default, on cfg.logs. Recovered panics are counted on the status
// line rather than logged, unless cfg.stacks asks for their stacks.
func logger(cfg config) *zap.Logger {
	w := cfg.logs
	if w == nil {
		w = os.Stderr
	}
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.Lock(zapcore.AddSync(w)), zap.WarnLevel)
	if !cfg.stacks {
		core = dropPanics{core}
	}
	return zap.New(core)
}

// dropPanics is a core that drops the executor's "task panicked" entries.
type dropPanics struct{ zapcore.Core }

func (c dropPanics) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if ent.Message == "task panicked" {
		return ce
	}
	return c.Core.Check(ent, ce)
}

func (c dropPanics) With(fields []zapcore.Field) zapcore.Core { return dropPanics{c.Core.With(fields)} }

// load runs the callers and the status line until ctx ends and returns once
// they all have.
func load(ctx context.Context, e *executor.Executor[string], cfg config, out io.Writer) {
	var wg sync.WaitGroup
	wg.Go(func() { report(ctx, e, out) })
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

// hold runs a task on key "stuck" that returns when ctx ends or, if d > 0,
// after d, and prints when it started and when it returned: the debug
// page's stuck table lists the key first meanwhile, with an age of at
// least the time since it started.
func hold(ctx context.Context, e *executor.Executor[string], d time.Duration, out io.Writer) error {
	started := make(chan struct{})
	if _, err := e.Submit(context.Background(), "stuck", func(context.Context) error {
		close(started)
		if d <= 0 {
			<-ctx.Done()
			return nil
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
			fmt.Fprintf(out, "key %q given back at %s\n", "stuck", time.Now().UTC().Format(time.RFC3339Nano))
		}
		return nil
	}); err != nil {
		return err
	}
	<-started
	// Read after the task started, so no later than its age's origin.
	fmt.Fprintf(out, "key %q held since %s\n", "stuck", time.Now().UTC().Format(time.RFC3339Nano))
	return nil
}

// realKeys are keys shaped like production ones, for the debug page: a
// UUID, an 80-character composite key, a 200-rune key and a multibyte one.
var realKeys = []string{
	"3f2b8c1e-9d4a-4e7b-b1f0-2c6d8e9a0b17",
	"tenant:acme-industries-intl:user:3f2b8c1e-9d4a-4e7b-b1f0-2c6d8e9a0b17:cart:item4",
	strings.Repeat("session/0123456789abcdef/", 8),
	"注文:東京都渋谷区:ユーザー:山田太郎:カート",
}

// holdReal holds each of realKeys until ctx ends, with one task queued
// behind it, so that they top the oldest-work table after "stuck" and the
// hot keys table after "hot".
func holdReal(ctx context.Context, e *executor.Executor[string], out io.Writer) error {
	for _, k := range realKeys {
		started := make(chan struct{})
		if _, err := e.Submit(context.Background(), k, func(context.Context) error {
			close(started)
			<-ctx.Done()
			return nil
		}); err != nil {
			return err
		}
		<-started
		if _, err := e.Submit(context.Background(), k, func(context.Context) error { return nil }); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "holding %d keys shaped like production ones\n", len(realKeys))
	return nil
}

// report prints a status line to out every second until ctx ends.
func report(ctx context.Context, e *executor.Executor[string], out io.Writer) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	started := e.Settings().Started
	prev, last := e.Stats(), time.Now()
	for {
		var now time.Time
		select {
		case <-ctx.Done():
			return
		case now = <-tick.C:
		}
		cur := e.Stats()
		fmt.Fprintln(out, status(now.Sub(started), now.Sub(last), prev, cur, e.HotKeys(1), e.OldestKeys(1)))
		prev, last = cur, now
	}
}

// status is one status line: uptime; the rates of the counters between prev
// and cur, taken interval apart, and the panics between them; the gauges
// of cur; the hottest key and the key whose work is oldest, if any.
func status(up, interval time.Duration, prev, cur executor.Stats, hot, oldest []executor.KeyLoad[string]) string {
	rate := func(from, to uint64) float64 {
		if interval <= 0 || to < from {
			return 0
		}
		return float64(to-from) / interval.Seconds()
	}
	line := fmt.Sprintf("up %v  submitted %.0f/s  completed %.0f/s  rejected %.0f/s  canceled %.0f/s  panicked %d  queued %d  running %d  slow %d",
		up.Round(time.Second), rate(prev.Submitted, cur.Submitted), rate(prev.Completed, cur.Completed),
		rate(prev.Rejected, cur.Rejected), rate(prev.Canceled, cur.Canceled), cur.Panicked-min(prev.Panicked, cur.Panicked),
		cur.Queued, cur.Running, cur.Slow)
	if len(hot) > 0 {
		line += fmt.Sprintf("  hottest %s (%d pending)", hot[0].Key, hot[0].Pending)
	}
	if len(oldest) > 0 {
		line += fmt.Sprintf("  oldest %s (%v)", oldest[0].Key, round(max(oldest[0].Held, oldest[0].OldestWait)))
	}
	return line
}

// round keeps about three significant digits of d: 850µs, 2.3ms, 11.2s.
func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
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
