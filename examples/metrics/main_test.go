package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perkey/perkey/debugpage"
	"github.com/perkey/perkey/executor"
)

// TestRun runs the example briefly and checks what it shows: the hot key on
// both endpoints (rejections on the metrics, its name on the debug page),
// the stuck key listed first among the oldest keys, and status lines that
// name both.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a load generator")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, config{addr: "127.0.0.1:0", keys: 1000, leak: true, stuck: true, realKeys: true, logs: io.Discard}, pw)
		pw.Close()
	}()
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // nobody is reading any more
			}
		}
		io.Copy(io.Discard, pr)
	}()
	next := func(what string) string {
		t.Helper()
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("no %s: the example's output ended", what)
			}
			return line
		case <-ctx.Done():
			t.Fatalf("no %s from the example", what)
			return ""
		}
	}
	line := next("first line")
	base := regexp.MustCompile(`http://[0-9.:]+`).FindString(line)
	if base == "" {
		t.Fatalf("no URL in %q", line)
	}
	if line := next("held-since line"); !strings.HasPrefix(line, `key "stuck" held since `) {
		t.Fatalf("second line: got %q; want the time the stuck key was held from", line)
	}

	if line := next("real keys line"); !strings.HasPrefix(line, "holding 4 keys") {
		t.Fatalf("third line: got %q; want the keys shaped like production ones", line)
	}

	rejected := regexp.MustCompile(`(?m)^perkey_tasks_rejected_total\{reason="key"\} (\S+)$`)
	attached := regexp.MustCompile(`(?m)^perkey_executors_attached 1$`)
	for {
		text := fetch(t, base+"/metrics")
		var s debugpage.Snapshot
		if err := json.Unmarshal([]byte(fetch(t, base+"/debug/perkey/json")), &s); err != nil {
			t.Fatalf("decoding the debug JSON: %v", err)
		}
		n := 0.0
		if m := rejected.FindStringSubmatch(text); m != nil {
			n, _ = strconv.ParseFloat(m[1], 64)
		}
		if n > 0 && attached.MatchString(text) && len(s.HotKeys) > 0 && s.HotKeys[0].Key == "hot" && s.HotKeys[0].Pending > 1 &&
			len(s.OldestKeys) > 0 && s.OldestKeys[0].Key == "stuck" && s.OldestKeys[0].Held > slowTask && s.Latency != nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no hot and stuck keys seen: rejected{key} = %v, hot keys %+v, oldest keys %+v", n, s.HotKeys, s.OldestKeys)
		case <-time.After(50 * time.Millisecond):
		}
	}
	status := regexp.MustCompile(`^up \d+s  submitted \d+/s  .*  hottest hot \(\d+ pending\)  oldest stuck \(\S+\)$`)
	for line := next("status line"); !status.MatchString(line); line = next("status line") {
		t.Logf("not yet: %s", line)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}

func TestStatus(t *testing.T) {
	prev := executor.Stats{Submitted: 1000, Completed: 900, Rejected: 10, Panicked: 5}
	cur := executor.Stats{Submitted: 3000, Completed: 2800, Rejected: 410, Canceled: 4, Panicked: 8, Queued: 31, Running: 16, Slow: 1}
	hot := []executor.KeyLoad[string]{{Key: "hot", Pending: 32, OldestWait: 40 * time.Millisecond}}
	old := []executor.KeyLoad[string]{{Key: "stuck", Pending: 1, Held: 12345 * time.Millisecond}}
	for _, c := range []struct {
		name        string
		hot, oldest []executor.KeyLoad[string]
		want        string
	}{
		{"busy", hot, old, "up 1m5s  submitted 1000/s  completed 950/s  rejected 200/s  canceled 2/s  panicked 3  queued 31  running 16  slow 1" +
			"  hottest hot (32 pending)  oldest stuck (12.3s)"},
		{"idle", nil, nil, "up 1m5s  submitted 1000/s  completed 950/s  rejected 200/s  canceled 2/s  panicked 3  queued 31  running 16  slow 1"},
	} {
		if got := status(65*time.Second+300*time.Millisecond, 2*time.Second, prev, cur, c.hot, c.oldest); got != c.want {
			t.Errorf("%s:\ngot  %q\nwant %q", c.name, got, c.want)
		}
	}
}

// TestListen: a taken default address falls back to a free port and says
// so; a taken address the user chose is an error that names -addr.
func TestListen(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	var out strings.Builder
	ln, err := listen(config{addr: taken.Addr().String(), fallback: true}, &out)
	if err != nil {
		t.Fatalf("default address taken: %v", err)
	}
	defer ln.Close()
	if ln.Addr().String() == taken.Addr().String() {
		t.Fatalf("listening on the taken address %s", ln.Addr())
	}
	want := taken.Addr().String() + " is in use; listening on " + ln.Addr().String() + " instead (choose an address with -addr)\n"
	if out.String() != want {
		t.Errorf("got %q; want %q", out.String(), want)
	}
	_, err = listen(config{addr: taken.Addr().String()}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "address already in use: choose another address with -addr") {
		t.Errorf("chosen address taken: got %v; want an error naming -addr", err)
	}
}

// TestPanicsCounted: recovered panics are not logged by default (the status
// line counts them), and are logged with their stacks with -stacks; other
// warnings are logged either way.
func TestPanicsCounted(t *testing.T) {
	for _, stacks := range []bool{false, true} {
		var logs strings.Builder
		e, err := executor.New[string](executor.WithLogger(logger(config{stacks: stacks, logs: &logs})),
			executor.WithSlowTaskWarning(time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		err = e.Do(ctx, "k", func(context.Context) error { panic("boom") })
		if _, ok := errors.AsType[*executor.PanicError](err); !ok {
			t.Fatalf("Do: got %v; want a *PanicError", err)
		}
		if err := e.Do(ctx, "slow", func(context.Context) error { time.Sleep(20 * time.Millisecond); return nil }); err != nil {
			t.Fatal(err)
		}
		if err := e.Close(ctx); err != nil {
			t.Fatal(err)
		}
		got := logs.String()
		if logged := strings.Contains(got, `"msg":"task panicked"`) && strings.Contains(got, `"stack":"goroutine`); logged != stacks {
			t.Errorf("-stacks=%v: panic logged with its stack: %v\n%s", stacks, logged, got)
		}
		if !strings.Contains(got, `"msg":"task running long"`) {
			t.Errorf("-stacks=%v: no slow-task warning logged:\n%s", stacks, got)
		}
	}
}

func fetch(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	if _, err := io.Copy(&b, resp.Body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	return b.String()
}
