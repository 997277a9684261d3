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
)

// TestRun runs the example briefly and checks that both endpoints show the
// hot key: rejections on the metrics, and its name on the debug page.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a load generator")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, config{addr: "127.0.0.1:0", keys: 1000, leak: true}, pw)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the example's first line: %v", err)
	}
	go io.Copy(io.Discard, pr)
	base := regexp.MustCompile(`http://[0-9.:]+`).FindString(line)
	if base == "" {
		t.Fatalf("no URL in %q", line)
	}

	rejected := regexp.MustCompile(`(?m)^perkey_tasks_rejected_total\{reason="key"\} (\S+)$`)
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
		if n > 0 && len(s.HotKeys) > 0 && s.HotKeys[0].Key == "hot" && s.HotKeys[0].Pending > 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no hot key seen: rejected{key} = %v, hot keys %+v", n, s.HotKeys)
		case <-time.After(50 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
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
