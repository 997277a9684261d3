// Command ratios reads the output of bench's BenchmarkThroughput (go test
// -bench, any -count) and prints Markdown tables of the medians, cell by
// cell, for BENCHMARKS.md:
//
//   - for each api and feed, perkey's tasks/s over the plain actor's, by ctx
//     kind and key count (above 1 perkey is faster); where the input has
//     impl=floor, the floor's over the actor's and perkey's over the
//     floor's; likewise for impl=actor-ctx;
//   - for each api and feed, perkey's ns per task with a cancelable ctx
//     over its ns per task with context.Background();
//   - each impl's medians themselves (tasks/s, B and allocs per task).
//
// Usage:
//
//	go run ./bench/ratios throughput.out
//
// Lines of other benchmarks are ignored. It reads standard input if no
// file is given.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Dimensions in the order the tables show them. Only values the input has
// are shown; values it has that are not listed here come after, in the
// order first seen.
var (
	apis  = []string{"Go", "Submit"}
	feeds = []string{"owned", "shared"}
	ctxs  = []string{"background", "cancel-shared", "cancel-per-task"}
	keys  = []string{"1", "16", "1024", "100000"}
)

// cell names one sub-benchmark without its impl.
type cell struct{ api, feed, ctx, keys string }

// samples holds every value of each unit, per cell and impl.
type samples map[cell]map[string]map[string][]float64

func main() {
	in := io.Reader(os.Stdin)
	if len(os.Args) > 2 {
		fmt.Fprintln(os.Stderr, "usage: ratios [file]")
		os.Exit(2)
	}
	if len(os.Args) == 2 {
		f, err := os.Open(os.Args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer f.Close()
		in = f
	}
	s, n, err := parse(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if len(s) == 0 {
		fmt.Fprintln(os.Stderr, "ratios: no BenchmarkThroughput results in the input")
		os.Exit(1)
	}
	write(os.Stdout, s, n)
}

// parse reads go test output and returns the Throughput samples and the
// largest number of samples of any one cell and impl.
func parse(r io.Reader) (samples, int, error) {
	s := make(samples)
	most := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	seen := make(map[string]bool)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "BenchmarkThroughput/") {
			continue
		}
		c, impl, ok := name(f[0])
		if !ok {
			continue
		}
		if s[c] == nil {
			s[c] = make(map[string]map[string][]float64)
		}
		if s[c][impl] == nil {
			s[c][impl] = make(map[string][]float64)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, 0, fmt.Errorf("ratios: %q: %v", sc.Text(), err)
			}
			s[c][impl][f[i+1]] = append(s[c][impl][f[i+1]], v)
			most = max(most, len(s[c][impl][f[i+1]]))
		}
		for _, d := range []struct {
			list *[]string
			v    string
		}{{&apis, "api=" + c.api}, {&feeds, "feed=" + c.feed}, {&ctxs, "ctx=" + c.ctx}, {&keys, "keys=" + c.keys}} {
			_, v, _ := strings.Cut(d.v, "=")
			seen[d.v] = true
			if !slices.Contains(*d.list, v) {
				*d.list = append(*d.list, v)
			}
		}
	}
	for _, d := range []struct {
		list *[]string
		dim  string
	}{{&apis, "api="}, {&feeds, "feed="}, {&ctxs, "ctx="}, {&keys, "keys="}} {
		*d.list = slices.DeleteFunc(*d.list, func(v string) bool { return !seen[d.dim+v] })
	}
	return s, most, sc.Err()
}

// name splits BenchmarkThroughput/api=A/feed=F/ctx=C/keys=K/impl=I-P.
func name(full string) (cell, string, bool) {
	var c cell
	var impl string
	for _, part := range strings.Split(full, "/")[1:] {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return c, "", false
		}
		switch k {
		case "api":
			c.api = v
		case "feed":
			c.feed = v
		case "ctx":
			c.ctx = v
		case "keys":
			c.keys = v
		case "impl":
			if i := strings.LastIndexByte(v, '-'); i > 0 {
				if _, err := strconv.Atoi(v[i+1:]); err == nil {
					v = v[:i] // the -GOMAXPROCS suffix
				}
			}
			impl = v
		}
	}
	return c, impl, impl != "" && c.api != "" && c.feed != "" && c.ctx != "" && c.keys != ""
}

func median(v []float64) (float64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2], true
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2, true
}

func (s samples) median(c cell, impl, unit string) (float64, bool) {
	return median(s[c][impl][unit])
}

// keyHeader is the header of a table with a column per key count.
func keyHeader(first string) string {
	h := "| " + first + " |"
	sep := "|---|"
	for _, k := range keys {
		n, err := strconv.Atoi(k)
		label := k
		if err == nil {
			label = thousands(n)
		}
		if k == "1" {
			h += " 1 key |"
		} else {
			h += " " + label + " keys |"
		}
		sep += "---|"
	}
	return h + "\n" + sep
}

// thousands writes n with commas: 100,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func ctxLabel(ctx string) string {
	switch ctx {
	case "background":
		return "`context.Background()`"
	case "cancel-shared":
		return "one cancelable ctx shared by all tasks"
	case "cancel-per-task":
		return "a cancelable ctx per task"
	}
	return ctx
}

func write(w io.Writer, s samples, n int) {
	fmt.Fprintf(w, "Medians of up to %d runs per cell.\n", n)
	ratios(w, s, "perkey", "actor", "perkey's tasks/s over the plain actor's")
	// impl=floor, where the input has it: what the guarantees cost (the
	// floor over the actor) and what the rest of perkey costs (perkey over
	// the floor).
	ratios(w, s, "floor", "actor", "the floor's tasks/s over the plain actor's")
	ratios(w, s, "perkey", "floor", "perkey's tasks/s over the floor's")
	// impl=actor-ctx: what the ctx the contract gives each fn costs the
	// actor, the most any executor of the contract could reach.
	ratios(w, s, "actor-ctx", "actor", "the actor-ctx's tasks/s over the plain actor's")
	ratios(w, s, "perkey", "actor-ctx", "perkey's tasks/s over the actor-ctx's")
	for _, api := range apis {
		if !slices.Contains(ctxs, "background") || len(ctxs) < 2 {
			break // nothing to compare with Background
		}
		for _, feed := range feeds {
			fmt.Fprintf(w, "\n`%s`, %s feed: perkey's ns per task with a cancelable ctx over with `context.Background()`\n\n%s\n", api, feed, keyHeader("ctx"))
			for _, ctx := range ctxs {
				if ctx == "background" {
					continue
				}
				fmt.Fprintf(w, "| %s |", ctxLabel(ctx))
				for _, k := range keys {
					c, bg := cell{api, feed, ctx, k}, cell{api, feed, "background", k}
					p, ok1 := s.median(c, "perkey", "ns/op")
					b, ok2 := s.median(bg, "perkey", "ns/op")
					if ok1 && ok2 && b > 0 {
						fmt.Fprintf(w, " %.2f |", p/b)
					} else {
						fmt.Fprint(w, " – |")
					}
				}
				fmt.Fprintln(w)
			}
		}
	}
	for _, impl := range []string{"actor", "perkey", "floor", "actor-ctx"} {
		if !s.has(impl) {
			continue
		}
		fmt.Fprintf(w, "\nimpl=%s: M tasks/s, B/task, allocs/task\n\n%s\n", impl, keyHeader("api, feed, ctx"))
		for _, api := range apis {
			for _, feed := range feeds {
				if !s.hasAny(api, feed, impl) {
					continue // the floor has no Submit
				}
				for _, ctx := range ctxs {
					fmt.Fprintf(w, "| `%s` %s %s |", api, feed, ctx)
					for _, k := range keys {
						c := cell{api, feed, ctx, k}
						t, ok1 := s.median(c, impl, "tasks/s")
						b, ok2 := s.median(c, impl, "B/op")
						// allocs/task, where the harness reports it, is
						// allocs/op unrounded.
						a, ok3 := s.median(c, impl, "allocs/task")
						if !ok3 {
							a, ok3 = s.median(c, impl, "allocs/op")
						}
						switch {
						case ok1 && ok2 && ok3:
							fmt.Fprintf(w, " %.2f M, %.0f B, %.2f |", t/1e6, b, a)
						case ok1:
							fmt.Fprintf(w, " %.2f M |", t/1e6)
						default:
							fmt.Fprint(w, " – |")
						}
					}
					fmt.Fprintln(w)
				}
			}
		}
	}
}

// ratios writes, for each api and feed where both impls have a cell, num's
// median tasks/s over den's, by ctx kind and key count.
func ratios(w io.Writer, s samples, num, den, title string) {
	for _, api := range apis {
		for _, feed := range feeds {
			if !s.hasAny(api, feed, num) || !s.hasAny(api, feed, den) {
				continue
			}
			fmt.Fprintf(w, "\n`%s`, %s feed: %s\n\n%s\n", api, feed, title, keyHeader("ctx"))
			for _, ctx := range ctxs {
				fmt.Fprintf(w, "| %s |", ctxLabel(ctx))
				for _, k := range keys {
					c := cell{api, feed, ctx, k}
					p, ok1 := s.median(c, num, "tasks/s")
					a, ok2 := s.median(c, den, "tasks/s")
					if ok1 && ok2 && a > 0 {
						fmt.Fprintf(w, " %.2f |", p/a)
					} else {
						fmt.Fprint(w, " – |")
					}
				}
				fmt.Fprintln(w)
			}
		}
	}
}

// has reports whether any cell has samples of impl.
func (s samples) has(impl string) bool {
	for _, im := range s {
		if im[impl] != nil {
			return true
		}
	}
	return false
}

// hasAny reports whether any cell of api and feed has samples of impl.
func (s samples) hasAny(api, feed, impl string) bool {
	for c, im := range s {
		if c.api == api && c.feed == feed && im[impl] != nil {
			return true
		}
	}
	return false
}
