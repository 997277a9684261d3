package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
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
		done <- run(ctx, config{addr: "127.0.0.1:0", keys: 1000, leak: true, stuck: true}, pw)
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
	prev := executor.Stats{Submitted: 1000, Completed: 900, Rejected: 10}
	cur := executor.Stats{Submitted: 3000, Completed: 2800, Rejected: 410, Canceled: 4, Queued: 31, Running: 16, Slow: 1}
	hot := []executor.KeyLoad[string]{{Key: "hot", Pending: 32, OldestWait: 40 * time.Millisecond}}
	old := []executor.KeyLoad[string]{{Key: "stuck", Pending: 1, Held: 12345 * time.Millisecond}}
	for _, c := range []struct {
		name        string
		hot, oldest []executor.KeyLoad[string]
		want        string
	}{
		{"busy", hot, old, "up 1m5s  submitted 1000/s  completed 950/s  rejected 200/s  canceled 2/s  queued 31  running 16  slow 1" +
			"  hottest hot (32 pending)  oldest stuck (12.3s)"},
		{"idle", nil, nil, "up 1m5s  submitted 1000/s  completed 950/s  rejected 200/s  canceled 2/s  queued 31  running 16  slow 1"},
	} {
		if got := status(65*time.Second+300*time.Millisecond, 2*time.Second, prev, cur, c.hot, c.oldest); got != c.want {
			t.Errorf("%s:\ngot  %q\nwant %q", c.name, got, c.want)
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
