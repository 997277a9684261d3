// Command perkey-soak runs mixed, faulty load against perkey executors,
// restarting them under load, and checks that nothing overlaps, reorders,
// gets lost, runs twice or leaks, that every ring of nested calls waiting
// for each other is broken with ErrDeadlock, and that Batcher batches stay
// within WithMaxBatch and hand each message its own outcome. It prints a
// table of the load held, the faults survived, every invariant's violation
// count and the heap, and exits with status 1 if any invariant broke or the
// heap grew by more than 16 MiB. The package doc of its internal/soak says
// what each invariant means.
//
//	go run ./cmd/perkey-soak -duration 60s
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/perkey/perkey/cmd/perkey-soak/internal/soak"
)

func main() {
	var cfg soak.Config
	flag.DurationVar(&cfg.Duration, "duration", 60e9, "how long the load runs")
	flag.IntVar(&cfg.Producers, "producers", 32, "concurrent producers")
	flag.IntVar(&cfg.Keys, "keys", 10_000, "key space (Zipf distributed: a few hot keys, a long tail)")
	flag.IntVar(&cfg.Workers, "workers", 8, "WithWorkers of every executor")
	flag.Uint64Var(&cfg.Seed, "seed", 1, "seed for every random choice")
	flag.DurationVar(&cfg.RestartEvery, "restart-every", 2e9, "how long each executor lives before it is closed under load")
	policies := flag.String("policies", strings.Join(soak.Policies, ","), "backpressure policies the executor generations rotate through")
	quiet := flag.Bool("quiet", false, "print only the final table, no line per executor generation")
	flag.Parse()
	if cfg.Duration <= 0 || cfg.Producers <= 0 || cfg.Keys <= 0 || cfg.Workers <= 0 || cfg.RestartEvery <= 0 {
		fmt.Fprintln(os.Stderr, "perkey-soak: -duration, -producers, -keys, -workers and -restart-every must be positive")
		os.Exit(2)
	}
	cfg.Policies = strings.Split(*policies, ",")
	if !*quiet {
		cfg.Progress = os.Stderr
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := soak.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "perkey-soak:", err)
		os.Exit(2)
	}
	rep.Print(os.Stdout)
	if !rep.Passed() {
		os.Exit(1)
	}
}
