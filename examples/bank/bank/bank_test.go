package bank_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perkey/perkey/examples/bank/bank"
	"github.com/perkey/perkey/examples/bank/lockbased"
	"github.com/perkey/perkey/executor"
)

// timeout bounds every wait in these tests; they take milliseconds when
// nothing is wrong.
const timeout = 5 * time.Second

// newBank returns a bank.Server closed when the test ends (after the HTTP
// server that uses it, since cleanups run last-in first-out).
func newBank(t *testing.T, opts ...bank.Option) *bank.Server {
	t.Helper()
	srv, err := bank.New(opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return srv
}

// client talks to an httptest server started for one test.
type client struct {
	url string
	hc  *http.Client
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// start serves h until the test ends, then closes the server and the
// client's idle connections so no goroutine is left.
func start(t *testing.T, h http.Handler) *client {
	t.Helper()
	ts := httptest.NewServer(h)
	hc := ts.Client()
	hc.Transport.(*http.Transport).MaxIdleConnsPerHost = 64 // reuse, not churn, connections
	t.Cleanup(func() {
		ts.Close()
		hc.CloseIdleConnections()
	})
	return &client{url: ts.URL, hc: hc}
}

func (c *client) call(ctx context.Context, method, path, body string) (response, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, rd)
	if err != nil {
		return response{}, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}, err
}

func (c *client) deposit(ctx context.Context, id string, amount int64) (response, error) {
	return c.call(ctx, http.MethodPost, "/accounts/"+id+"/deposit", fmt.Sprintf(`{"amount":%d}`, amount))
}

func (c *client) transfer(ctx context.Context, from, to string, amount int64) (response, error) {
	return c.call(ctx, http.MethodPost, "/transfer", fmt.Sprintf(`{"from":%q,"to":%q,"amount":%d}`, from, to, amount))
}

// balance returns id's balance, failing the test unless the answer is 200.
func (c *client) balance(t *testing.T, id string) int64 {
	t.Helper()
	r, err := c.call(t.Context(), http.MethodGet, "/accounts/"+id, "")
	if err != nil {
		t.Fatalf("GET %s: %v", id, err)
	}
	if r.status != http.StatusOK {
		t.Fatalf("GET %s: status %d (%s); want 200", id, r.status, r.body)
	}
	var b bank.Balance
	if err := json.Unmarshal(r.body, &b); err != nil {
		t.Fatalf("GET %s: %v in %s", id, err, r.body)
	}
	return b.Balance
}

// TestConservation fires 2,000 concurrent requests from 32 goroutines at 20
// accounts — deposits, transfers in both directions between overlapping
// pairs, balance reads — and checks that every answer is 200 or 409 and that
// the total balance is what was there plus what was deposited. Both the
// perkey service and the lock-based one it replaces must pass; the race
// detector checks that neither touches a balance unguarded.
func TestConservation(t *testing.T) {
	const (
		accounts = 20
		initial  = 1000
		requests = 2000
		clients  = 32
		ghosts   = 10 // reads of ids that never become accounts
	)
	tests := []struct {
		name string
		// setup returns the handler and a check run once everything is done.
		setup func(t *testing.T) (http.Handler, func(t *testing.T))
	}{
		{"perkey", func(t *testing.T) (http.Handler, func(t *testing.T)) {
			srv := newBank(t)
			return srv.Handler(), func(t *testing.T) {
				// Nothing is left per account: poll, a mailbox retires
				// just after its last task.
				deadline := time.Now().Add(timeout)
				for srv.Stats().ActiveKeys != 0 {
					if time.Now().After(deadline) {
						t.Fatalf("ActiveKeys = %d; want 0 (%+v)", srv.Stats().ActiveKeys, srv.Stats())
					}
					time.Sleep(time.Millisecond)
				}
				s := srv.Stats()
				if s.Completed+s.Canceled != s.Submitted {
					t.Errorf("Completed+Canceled = %d; want Submitted = %d", s.Completed+s.Canceled, s.Submitted)
				}
			}
		}},
		{"lockbased", func(t *testing.T) (http.Handler, func(t *testing.T)) {
			srv := lockbased.New()
			return srv.Handler(), func(t *testing.T) {
				// The lock map keeps a mutex for every id ever named.
				if got, want := srv.Locks(), accounts+ghosts; got != want {
					t.Errorf("Locks() = %d; want %d", got, want)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, check := tt.setup(t)
			c := start(t, h)
			ctx := t.Context()
			id := func(i int) string { return "acct-" + strconv.Itoa(i) }
			for i := range accounts {
				if r, err := c.deposit(ctx, id(i), initial); err != nil || r.status != http.StatusOK {
					t.Fatalf("opening %s: %v %d %s", id(i), err, r.status, r.body)
				}
			}

			var (
				next      atomic.Int64 // requests handed out
				deposited atomic.Int64 // sum of accepted deposits
				mu        sync.Mutex   // guards statuses
				statuses  = map[string]map[int]int{}
				wg        sync.WaitGroup
			)
			record := func(op string, r response, err error) {
				if err != nil {
					t.Errorf("%s: %v", op, err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if statuses[op] == nil {
					statuses[op] = map[int]int{}
				}
				statuses[op][r.status]++
			}
			for g := range clients {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(g), 1))
					for next.Add(1) <= requests {
						a := rng.IntN(accounts)
						switch op := rng.IntN(10); {
						case op < 3:
							amount := 1 + rng.Int64N(100)
							r, err := c.deposit(ctx, id(a), amount)
							if err == nil && r.status == http.StatusOK {
								deposited.Add(amount)
							}
							record("deposit", r, err)
						case op < 8:
							// Neighbours overlap (a→a+1, a+1→a+2, …) and both
							// directions occur, so DoMany calls chain and cross.
							b := (a + 1 + rng.IntN(2)) % accounts
							if rng.IntN(2) == 0 {
								a, b = b, a
							}
							r, err := c.transfer(ctx, id(a), id(b), 1+rng.Int64N(600))
							record("transfer", r, err)
						default:
							r, err := c.call(ctx, http.MethodGet, "/accounts/"+id(a), "")
							record("balance", r, err)
						}
					}
				})
			}
			wg.Wait()

			for op, byStatus := range statuses {
				for status, n := range byStatus {
					ok := status == http.StatusOK || (op == "transfer" && status == http.StatusConflict)
					if !ok {
						t.Errorf("%s: %d answers with status %d; want only 200 (or 409 for a transfer)", op, n, status)
					}
				}
			}
			t.Logf("statuses: %v; deposited %d", statuses, deposited.Load())

			for i := range ghosts {
				r, err := c.call(ctx, http.MethodGet, "/accounts/ghost-"+strconv.Itoa(i), "")
				if err != nil || r.status != http.StatusNotFound {
					t.Errorf("GET ghost-%d: %v, status %d; want 404", i, err, r.status)
				}
			}

			var total int64
			for i := range accounts {
				b := c.balance(t, id(i))
				if b < 0 {
					t.Errorf("%s balance = %d; want >= 0", id(i), b)
				}
				total += b
			}
			if want := int64(accounts*initial) + deposited.Load(); total != want {
				t.Errorf("total balance = %d; want %d (opening %d + deposits %d)",
					total, want, accounts*initial, deposited.Load())
			}
			check(t)
		})
	}
}

// hotBank returns a client for a bank whose account "hot" takes at most two
// pending requests and whose writes to "hot" block until release is called.
// release is idempotent and also runs when the test ends.
func hotBank(t *testing.T) (c *client, srv *bank.Server, release func()) {
	t.Helper()
	gate := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	srv = newBank(t, bank.WithMaxQueuePerKey(2),
		bank.WithBeforeWrite(func(ctx context.Context, ids []string) error {
			if !slices.Contains(ids, "hot") {
				return nil
			}
			select {
			case <-gate:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}))
	c = start(t, srv.Handler())
	t.Cleanup(release) // before the HTTP server waits for its handlers
	return c, srv, release
}

type outcome struct {
	r   response
	err error
}

// depositAsync deposits 1 into id from a new goroutine and reports on out.
// The test waits for the goroutine before its cleanups run.
func depositAsync(t *testing.T, ctx context.Context, c *client, id string, out chan<- outcome) {
	var done sync.WaitGroup
	done.Go(func() {
		r, err := c.deposit(ctx, id, 1)
		out <- outcome{r, err}
	})
	t.Cleanup(done.Wait)
}

func recv(t *testing.T, ch <-chan outcome) outcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(timeout):
		t.Fatalf("no answer after %v", timeout)
		return outcome{}
	}
}

// waitStats polls srv's stats until ok holds.
func waitStats(t *testing.T, srv *bank.Server, what string, ok func(s executor.Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for s := srv.Stats(); !ok(s); s = srv.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: stats %+v", what, s)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestHotAccount makes one account hot: two deposits hold its places (one
// stuck in its write, one queued behind it) and every other request for it
// is answered 429 at once with a Retry-After of at least one second, while
// other accounts go on as usual.
func TestHotAccount(t *testing.T) {
	c, _, release := hotBank(t)
	ctx := t.Context()
	if r, err := c.deposit(ctx, "cold", 5); err != nil || r.status != http.StatusOK {
		t.Fatalf("deposit cold: %v %d %s", err, r.status, r.body)
	}

	const n = 10
	out := make(chan outcome, n)
	for range n {
		depositAsync(t, ctx, c, "hot", out)
	}
	for range n - 2 {
		o := recv(t, out)
		if o.err != nil {
			t.Fatalf("deposit hot: %v", o.err)
		}
		if o.r.status != http.StatusTooManyRequests {
			t.Fatalf("deposit hot: status %d (%s); want 429", o.r.status, o.r.body)
		}
		ra := o.r.header.Get("Retry-After")
		if secs, err := strconv.Atoi(ra); err != nil || secs < 1 {
			t.Errorf("Retry-After = %q; want whole seconds >= 1", ra)
		}
	}

	// The hot account is full, the others are not.
	if got := c.balance(t, "cold"); got != 5 {
		t.Errorf("cold balance = %d; want 5", got)
	}
	if r, err := c.deposit(ctx, "cold", 1); err != nil || r.status != http.StatusOK {
		t.Errorf("deposit cold while hot is full: %v %d %s; want 200", err, r.status, r.body)
	}
	// A transfer touching the full account is refused as a whole, at once.
	if r, err := c.transfer(ctx, "cold", "hot", 1); err != nil || r.status != http.StatusTooManyRequests {
		t.Errorf("transfer cold→hot while hot is full: %v %d %s; want 429", err, r.status, r.body)
	}
	if got := c.balance(t, "cold"); got != 6 {
		t.Errorf("cold balance after refused transfer = %d; want 6", got)
	}

	release()
	for range 2 {
		if o := recv(t, out); o.err != nil || o.r.status != http.StatusOK {
			t.Errorf("held deposit: %v %d %s; want 200", o.err, o.r.status, o.r.body)
		}
	}
	if got := c.balance(t, "hot"); got != 2 {
		t.Errorf("hot balance = %d; want 2", got)
	}
}

// TestClientGoesAway checks that a request whose client disconnects while it
// waits for a hot account gives its place back at once: the next request is
// accepted instead of refused.
func TestClientGoesAway(t *testing.T) {
	c, srv, release := hotBank(t)
	ctx := t.Context()
	out := make(chan outcome, 3)

	depositAsync(t, ctx, c, "hot", out) // runs, stuck in its write
	waitStats(t, srv, "the first deposit to run", func(s executor.Stats) bool { return s.Running == 1 })
	leaving, leave := context.WithCancel(ctx)
	gone := make(chan outcome, 1)
	depositAsync(t, leaving, c, "hot", gone) // queued behind it
	waitStats(t, srv, "the second deposit to queue", func(s executor.Stats) bool { return s.Queued == 1 })
	if r, err := c.deposit(ctx, "hot", 1); err != nil || r.status != http.StatusTooManyRequests {
		t.Fatalf("third deposit: %v %d; want 429", err, r.status)
	}

	leave()
	if o := recv(t, gone); o.err == nil {
		t.Errorf("canceled deposit: status %d; want a client error", o.r.status)
	}
	// The server sees the connection close and the executor gives the
	// place back.
	waitStats(t, srv, "the canceled deposit to leave the queue", func(s executor.Stats) bool {
		return s.Queued == 0 && s.Canceled == 1
	})
	depositAsync(t, ctx, c, "hot", out)
	waitStats(t, srv, "a new deposit to take the freed place", func(s executor.Stats) bool { return s.Queued == 1 })

	release()
	for range 2 {
		if o := recv(t, out); o.err != nil || o.r.status != http.StatusOK {
			t.Errorf("deposit: %v %d %s; want 200", o.err, o.r.status, o.r.body)
		}
	}
	if got := c.balance(t, "hot"); got != 2 {
		t.Errorf("hot balance = %d; want 2", got)
	}
}

// TestErrors checks the answers to bad requests.
func TestErrors(t *testing.T) {
	srv := newBank(t)
	c := start(t, srv.Handler())
	ctx := t.Context()
	if r, err := c.deposit(ctx, "a", 10); err != nil || r.status != http.StatusOK {
		t.Fatalf("deposit a: %v %d", err, r.status)
	}
	tests := []struct {
		name         string
		method, path string
		body         string
		want         int
	}{
		{"unknown account", "GET", "/accounts/nobody", "", http.StatusNotFound},
		{"zero deposit", "POST", "/accounts/a/deposit", `{"amount":0}`, http.StatusBadRequest},
		{"negative deposit", "POST", "/accounts/a/deposit", `{"amount":-5}`, http.StatusBadRequest},
		{"bad json", "POST", "/accounts/a/deposit", `{"amount":`, http.StatusBadRequest},
		{"unknown field", "POST", "/accounts/a/deposit", `{"amount":1,"x":2}`, http.StatusBadRequest},
		{"overflow", "POST", "/accounts/a/deposit", `{"amount":9223372036854775807}`, http.StatusConflict},
		{"transfer to self", "POST", "/transfer", `{"from":"a","to":"a","amount":1}`, http.StatusBadRequest},
		{"transfer missing to", "POST", "/transfer", `{"from":"a","amount":1}`, http.StatusBadRequest},
		{"transfer to unknown", "POST", "/transfer", `{"from":"a","to":"b","amount":1}`, http.StatusNotFound},
		{"wrong method", "DELETE", "/accounts/a", "", http.StatusMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := c.call(ctx, tt.method, tt.path, tt.body)
			if err != nil {
				t.Fatal(err)
			}
			if r.status != tt.want {
				t.Errorf("%s %s %s: status %d (%s); want %d", tt.method, tt.path, tt.body, r.status, r.body, tt.want)
			}
		})
	}
	if r, err := c.deposit(ctx, "b", 1); err != nil || r.status != http.StatusOK {
		t.Fatalf("deposit b: %v %d", err, r.status)
	}
	if r, err := c.transfer(ctx, "a", "b", 11); err != nil || r.status != http.StatusConflict {
		t.Errorf("transfer more than the balance: %v %d; want 409", err, r.status)
	}
	if r, err := c.transfer(ctx, "a", "b", 10); err != nil || r.status != http.StatusOK {
		t.Errorf("transfer the whole balance: %v %d; want 200", err, r.status)
	}
	if a, b := c.balance(t, "a"), c.balance(t, "b"); a != 0 || b != 11 {
		t.Errorf("balances a=%d b=%d; want 0 and 11", a, b)
	}

	// After Close the service answers 503.
	if err := srv.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if r, err := c.call(ctx, "GET", "/accounts/a", ""); err != nil || r.status != http.StatusServiceUnavailable {
		t.Errorf("GET after Close: %v %d; want 503", err, r.status)
	}
}

// TestOpTime is the README's way to reach 429 by hand: with WithOpTime, a
// cap of 1 and one worker, every request to an account while an operation
// holds it is answered 429 with a Retry-After of at least a second, and
// each operation takes at least the time set.
func TestOpTime(t *testing.T) {
	t.Run("429", func(t *testing.T) {
		srv := newBank(t, bank.WithMaxQueuePerKey(1), bank.WithWorkers(1), bank.WithOpTime(time.Hour))
		c := start(t, srv.Handler())
		ctx := t.Context()
		leaving, leave := context.WithCancel(ctx)
		defer leave()
		held := make(chan outcome, 1)
		depositAsync(t, leaving, c, "alice", held) // takes an hour, unless its client goes away
		waitStats(t, srv, "the first deposit to run", func(s executor.Stats) bool { return s.Running == 1 })

		for _, call := range []struct {
			name string
			do   func() (response, error)
		}{
			{"deposit", func() (response, error) { return c.deposit(ctx, "alice", 1) }},
			{"balance", func() (response, error) { return c.call(ctx, http.MethodGet, "/accounts/alice", "") }},
			{"transfer", func() (response, error) { return c.transfer(ctx, "bob", "alice", 1) }},
		} {
			r, err := call.do()
			if err != nil {
				t.Fatalf("%s: %v", call.name, err)
			}
			if r.status != http.StatusTooManyRequests {
				t.Errorf("%s while alice is held: status %d (%s); want 429", call.name, r.status, r.body)
			}
			if secs, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || secs < 1 {
				t.Errorf("%s: Retry-After = %q; want whole seconds >= 1", call.name, r.header.Get("Retry-After"))
			}
		}

		// The held deposit's client goes away: the operation stops waiting
		// and changes nothing.
		leave()
		if o := recv(t, held); o.err == nil {
			t.Errorf("held deposit: status %d; want a client error", o.r.status)
		}
		waitStats(t, srv, "the held deposit to end", func(s executor.Stats) bool { return s.ActiveKeys == 0 })
		if s := srv.Stats(); s.Submitted != 1 || s.Completed != 1 || s.Rejected != 3 {
			t.Errorf("Stats: got %+v; want 1 submitted and completed (the held deposit), 3 rejected", s)
		}
	})

	t.Run("each operation takes the time", func(t *testing.T) {
		const d = 20 * time.Millisecond
		srv := newBank(t, bank.WithOpTime(d))
		c := start(t, srv.Handler())
		for _, call := range []struct {
			name string
			do   func() (response, error)
		}{
			{"deposit", func() (response, error) { return c.deposit(t.Context(), "alice", 5) }},
			{"deposit", func() (response, error) { return c.deposit(t.Context(), "bob", 5) }},
			{"balance", func() (response, error) { return c.call(t.Context(), http.MethodGet, "/accounts/alice", "") }},
			{"transfer", func() (response, error) { return c.transfer(t.Context(), "alice", "bob", 1) }},
		} {
			begin := time.Now()
			r, err := call.do()
			if err != nil || r.status != http.StatusOK {
				t.Fatalf("%s: %v %d %s; want 200", call.name, err, r.status, r.body)
			}
			if took := time.Since(begin); took < d {
				t.Errorf("%s took %v; want at least %v", call.name, took, d)
			}
		}
	})

	t.Run("negative", func(t *testing.T) {
		if _, err := bank.New(bank.WithOpTime(-time.Second)); err == nil {
			t.Error("New(WithOpTime(-1s)): got nil; want an error")
		}
	})
}
