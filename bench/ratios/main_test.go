package main

import (
	"strings"
	"testing"
)

// TestWrite checks the medians and their ratios for one cell (the floor's
// and the actor-ctx's too), and that the -GOMAXPROCS suffix and other benchmarks' lines are
// ignored.
func TestWrite(t *testing.T) {
	in := `goos: linux
BenchmarkThroughput/api=Go/feed=owned/ctx=background/keys=16/impl=actor-2 	 1000000	 25.0 ns/op	 0 allocs/task	 40000000 tasks/s	 0 B/op	 0 allocs/op
BenchmarkThroughput/api=Go/feed=owned/ctx=background/keys=16/impl=actor-2 	 1000000	 50.0 ns/op	 0 allocs/task	 20000000 tasks/s	 0 B/op	 0 allocs/op
BenchmarkThroughput/api=Go/feed=owned/ctx=background/keys=16/impl=actor-2 	 1000000	 20.0 ns/op	 0 allocs/task	 50000000 tasks/s	 0 B/op	 0 allocs/op
BenchmarkThroughput/api=Go/feed=owned/ctx=background/keys=16/impl=perkey-2 	 1000000	 100 ns/op	 0.25 allocs/task	 10000000 tasks/s	 46 B/op	 0 allocs/op
BenchmarkThroughput/api=Go/feed=owned/ctx=cancel-shared/keys=16/impl=perkey-2 	 1000000	 500 ns/op	 4.1 allocs/task	 2000000 tasks/s	 440 B/op	 4 allocs/op
BenchmarkThroughput/api=Go/feed=owned/ctx=cancel-shared/keys=16/impl=actor-2 	 1000000	 25.0 ns/op	 0 allocs/task	 40000000 tasks/s	 0 B/op	 0 allocs/op
BenchmarkThroughput/api=Go/feed=owned/ctx=background/keys=16/impl=floor-2 	 1000000	 33.3 ns/op	 0.125 allocs/task	 30000000 tasks/s	 69 B/op	 0 allocs/op
BenchmarkThroughput/api=Go/feed=owned/ctx=background/keys=16/impl=actor-ctx-2 	 1000000	 50.0 ns/op	 0.125 allocs/task	 20000000 tasks/s	 32 B/op	 0 allocs/op
BenchmarkHotKey/impl=perkey-2 	 1000000	 100 ns/op
PASS
`
	s, n, err := parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("most samples = %d; want 3", n)
	}
	var out strings.Builder
	write(&out, s, n)
	for _, want := range []string{
		"| `context.Background()` | 0.25 |",                 // 10 M over the actor's median 40 M
		"| one cancelable ctx shared by all tasks | 0.05 |", // 2 M over 40 M
		"| one cancelable ctx shared by all tasks | 5.00 |", // 500 ns over 100 ns
		"| `Go` owned background | 10.00 M, 46 B, 0.25 |",
		"the floor's tasks/s over the plain actor's\n\n| ctx | 16 keys |\n|---|---|\n| `context.Background()` | 0.75 |", // 30 M over 40 M
		"perkey's tasks/s over the floor's\n\n| ctx | 16 keys |\n|---|---|\n| `context.Background()` | 0.33 |",          // 10 M over 30 M
		"| `Go` owned background | 30.00 M, 69 B, 0.12 |",
		"the actor-ctx's tasks/s over the plain actor's\n\n| ctx | 16 keys |\n|---|---|\n| `context.Background()` | 0.50 |", // 20 M over 40 M
		"perkey's tasks/s over the actor-ctx's\n\n| ctx | 16 keys |\n|---|---|\n| `context.Background()` | 0.50 |",          // 10 M over 20 M
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "Submit") || strings.Contains(out.String(), "HotKey") {
		t.Errorf("output shows cells the input does not have:\n%s", out.String())
	}
}
