package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// serve starts impl's service on an httptest server, closed (and the
// service with it) when the test ends.
func serve(t *testing.T, impl string) string {
	t.Helper()
	svc, err := newService(options{impl: impl, perKey: 64})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc.handler)
	t.Cleanup(func() {
		srv.Close()
		if err := svc.close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return srv.URL
}

// answer is a response: its status, headers and body.
type answer struct {
	status int
	header http.Header
	body   string
}

func call(t *testing.T, method, url, body string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header, string(b)}
}

// badInputs are the requests both implementations must refuse, with the
// status and the error they must answer; none may change a balance.
var badInputs = []struct {
	name, method, path, body string
	status                   int
	err                      string
}{
	{"trailing data", "POST", "/accounts/a/deposit", `{"amount":1}garbage`, 400,
		"bad request body: trailing data after the JSON object"},
	{"a second JSON value", "POST", "/accounts/a/deposit", `{"amount":1}{"amount":1000}`, 400,
		"bad request body: a second JSON value (an object) after the object: send one object"},
	{"a second value after white space", "POST", "/accounts/a/deposit", "{\"amount\":1}\n2", 400,
		"bad request body: a second JSON value (a number) after the object: send one object"},
	{"duplicate field", "POST", "/accounts/a/deposit", `{"amount":1,"amount":1000}`, 400,
		`bad request body: duplicate field "amount"`},
	{"wrongly cased field", "POST", "/accounts/a/deposit", `{"Amount":1}`, 400,
		`bad request body: unknown field "Amount": names are case-sensitive, did you mean "amount"?`},
	{"wrongly cased transfer field", "POST", "/transfer", `{"from":"a","TO":"b","amount":1}`, 400,
		`bad request body: unknown field "TO": names are case-sensitive, did you mean "to"?`},
	{"unknown field", "POST", "/accounts/a/deposit", `{"amount":1,"x":2}`, 400,
		`bad request body: unknown field "x"`},
	{"not an object", "POST", "/accounts/a/deposit", `[1]`, 400,
		"bad request body: want a JSON object, got an array"},
	{"empty body", "POST", "/accounts/a/deposit", ``, 400,
		"bad request body: empty body: want a JSON object"},
	{"cut short", "POST", "/accounts/a/deposit", `{"amount":`, 400,
		"bad request body: bad JSON: the body ends inside the object"},
	{"a string amount", "POST", "/accounts/a/deposit", `{"amount":"1"}`, 400,
		`bad request body: field "amount": want int64, got a JSON string`},
	{"a fractional amount", "POST", "/accounts/a/deposit", `{"amount":1.5}`, 400,
		`bad request body: field "amount": want int64, got a JSON number 1.5`},
	{"too large", "POST", "/accounts/a/deposit", `{"amount":1` + strings.Repeat(" ", 2000) + `}`, 413,
		"body larger than 1024 bytes"},
	{"zero amount", "POST", "/accounts/a/deposit", `{"amount":0}`, 400, "amount must be positive"},
	{"unknown path", "GET", "/nowhere", ``, 404, "no route for GET /nowhere"},
	{"unknown account path", "GET", "/accounts/a/history", ``, 404, "no route for GET /accounts/a/history"},
	{"wrong method", "DELETE", "/accounts/a", ``, 405,
		"method DELETE not allowed on /accounts/a: allowed GET, HEAD"},
	{"wrong method on transfer", "GET", "/transfer", ``, 405,
		"method GET not allowed on /transfer: allowed POST"},
}

// TestBadInput sends every bad input to both implementations: each gets
// its status and a JSON error, and no balance changes.
func TestBadInput(t *testing.T) {
	for _, impl := range []string{"perkey", "lock"} {
		t.Run(impl, func(t *testing.T) {
			url := serve(t, impl)
			if a := call(t, "POST", url+"/accounts/a/deposit", `{"amount":10}`); a.status != 200 {
				t.Fatalf("opening deposit: %d %s", a.status, a.body)
			}
			if a := call(t, "POST", url+"/accounts/b/deposit", `{"amount":10}`); a.status != 200 {
				t.Fatalf("opening deposit: %d %s", a.status, a.body)
			}
			for _, c := range badInputs {
				a := call(t, c.method, url+c.path, c.body)
				var got struct {
					Error string `json:"error"`
				}
				dec := json.NewDecoder(strings.NewReader(a.body))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&got); err != nil {
					t.Errorf("%s: body %q is not a JSON error: %v", c.name, a.body, err)
				}
				if a.status != c.status || got.Error != c.err {
					t.Errorf("%s: got %d %q; want %d %q", c.name, a.status, got.Error, c.status, c.err)
				}
				if ct := a.header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("%s: Content-Type %q; want application/json", c.name, ct)
				}
				if c.status == 405 && a.header.Get("Allow") == "" {
					t.Errorf("%s: 405 without Allow", c.name)
				}
			}
			for _, id := range []string{"a", "b"} {
				if a := call(t, "GET", url+"/accounts/"+id, ""); a.status != 200 || a.body != fmt.Sprintf("{\"id\":%q,\"balance\":10}\n", id) {
					t.Errorf("balance of %s after the bad inputs: %d %s; want 10", id, a.status, a.body)
				}
			}
			// A good request with white space after the object is fine.
			if a := call(t, "POST", url+"/transfer", "{\"from\":\"a\",\"to\":\"b\",\"amount\":3}\n"); a.status != 200 {
				t.Errorf("transfer: %d %s", a.status, a.body)
			}
		})
	}
}

// TestEndpoints: /metrics and, with -impl perkey, /debug/perkey are served
// beside the API.
func TestEndpoints(t *testing.T) {
	url := serve(t, "perkey")
	call(t, "POST", url+"/accounts/a/deposit", `{"amount":10}`)
	if a := call(t, "GET", url+"/metrics", ""); a.status != 200 || !strings.Contains(a.body, "perkey_tasks_completed_total 1\n") ||
		!strings.Contains(a.body, "perkey_executors_attached 1\n") {
		t.Errorf("/metrics: %d, without the executor's metrics:\n%.2000s", a.status, a.body)
	}
	if a := call(t, "GET", url+"/debug/perkey", ""); a.status != 200 || !strings.Contains(a.body, "<title>/debug/perkey</title>") {
		t.Errorf("/debug/perkey: %d %.500s", a.status, a.body)
	}
	if a := call(t, "GET", url+"/debug/perkey/json", ""); a.status != 200 || !strings.Contains(a.body, `"submitted": 1`) {
		t.Errorf("/debug/perkey/json: %d %.500s", a.status, a.body)
	}

	lock := serve(t, "lock")
	if a := call(t, "GET", lock+"/metrics", ""); a.status != 200 || !strings.Contains(a.body, "go_goroutines") {
		t.Errorf("-impl lock /metrics: %d", a.status)
	}
	if a := call(t, "GET", lock+"/debug/perkey", ""); a.status != 404 || a.body != "{\"error\":\"no debug page: -impl lock has no executor\"}\n" {
		t.Errorf("-impl lock /debug/perkey: %d %s", a.status, a.body)
	}
	if _, err := newService(options{impl: "mutex"}); err == nil || err.Error() != `-impl "mutex": want perkey or lock` {
		t.Errorf("-impl mutex: got %v", err)
	}
}

// TestTimeouts: the server has its timeouts set, and a client that sends
// half a body loses its connection after ReadTimeout.
func TestTimeouts(t *testing.T) {
	svc, err := newService(options{impl: "perkey", perKey: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.close(context.Background())
	hs := newServer(svc.handler)
	if hs.ReadHeaderTimeout != readHeaderTimeout || hs.ReadTimeout != readTimeout || hs.IdleTimeout != idleTimeout ||
		readHeaderTimeout <= 0 || readTimeout <= 0 || idleTimeout <= 0 {
		t.Fatalf("timeouts: header %v, read %v, idle %v", hs.ReadHeaderTimeout, hs.ReadTimeout, hs.IdleTimeout)
	}
	hs.ReadTimeout = 200 * time.Millisecond // the same server, quicker to test
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	defer func() {
		_ = hs.Close()
		<-served
	}()

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST /accounts/a/deposit HTTP/1.1\r\nHost: bank\r\nContent-Length: 100\r\n\r\n{\"amount\":")
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second)) // bounds the test if the server never gives up
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout || string(b) != "{\"error\":\"the body did not arrive within the read timeout\"}\n" {
			t.Errorf("half-sent body: answered %s %s; want 408 and a JSON error, or the connection closed", resp.Status, b)
		}
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("half-sent body held the connection %v; want about the read timeout, 200ms", waited)
	}
	// Nothing was deposited.
	if a := callHandler(t, svc.handler, "GET", "/accounts/a"); a.status != http.StatusNotFound {
		t.Errorf("account a after a half-sent deposit: %d %s; want 404", a.status, a.body)
	}
}

func callHandler(t *testing.T, h http.Handler, method, path string) answer {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return answer{rec.Code, rec.Header(), rec.Body.String()}
}
