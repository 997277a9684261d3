// Package bank is a small HTTP service that keeps account balances in memory
// and guards them with a perkey executor instead of locks.
//
// Endpoints (Go 1.22 http.ServeMux patterns):
//
//	GET  /accounts/{id}          → 200 {"id":"alice","balance":100}
//	POST /accounts/{id}/deposit  {"amount":100} → 200 {"id":"alice","balance":200}
//	POST /transfer               {"from":"alice","to":"bob","amount":50}
//	                             → 200 {"from":{...},"to":{...}}
//
// A deposit opens the account if it does not exist yet. A body must be
// exactly one JSON object with the documented member names, each once,
// spelled as shown (see api.Decode). Errors are JSON {"error":"..."}: 400
// for a bad request, 404 for an unknown account or path, 405 for a method
// a path does not take, 409 for insufficient funds, 413 for a body over
// 1 KiB, 429 with a Retry-After header when an account's queue is full,
// 503 when the server is closing.
//
// Every operation on an account runs as a task on that account's id: balance
// reads with DoShared (they run together, like RLock), deposits with Do, and
// transfers with DoMany on both ids. There is no lock ordering to get right,
// no mutex left behind per account id ever seen, and a hot account is
// answered with 429 instead of an ever-growing queue of goroutines. Compare
// package lockbased, the version this replaces.
package bank

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/debugpage"
	"github.com/perkey/perkey/examples/bank/api"
	"github.com/perkey/perkey/executor"
)

var (
	errNoAccount    = errors.New("bank: no such account")
	errInsufficient = errors.New("bank: insufficient funds")
	errOverflow     = errors.New("bank: balance would overflow")
)

// Server is the bank service. Create it with New, serve Handler, and call
// Close once the HTTP server has stopped calling the handler.
type Server struct {
	exec        *executor.Executor[string]
	beforeWrite func(ctx context.Context, ids []string) error // nil if none
	opTime      time.Duration                                 // WithOpTime; 0 = instant
	mux         *http.ServeMux

	// accounts maps an account id to its *account.
	//
	// perkey serialises tasks per key, not across keys: tasks for different
	// ids run at the same time, so the table that maps ids to accounts must
	// itself be safe for concurrent use across ids (a plain map would race
	// when one deposit opens an account while another task looks up a
	// different id). sync.Map fits exactly: each entry is written once, by
	// the first deposit, inside that id's task, then only read — the
	// "disjoint sets of keys" case sync.Map is built for. The balance inside
	// the *account is a plain int64 guarded by the executor, not by the map.
	accounts sync.Map
}

// account is one account's state. balance is guarded by the executor: it is
// read only inside a task holding id (shared or exclusive) and written only
// inside an exclusive one.
type account struct {
	balance int64
}

// Option configures a Server.
type Option func(*config)

type config struct {
	exec        []executor.Option
	beforeWrite func(ctx context.Context, ids []string) error
	opTime      time.Duration
}

// WithMaxQueuePerKey caps the requests pending (queued + running) on one
// account; one more is answered 429 Too Many Requests at once. 0, the
// default, means no cap.
func WithMaxQueuePerKey(n int) Option {
	return func(c *config) { c.exec = append(c.exec, executor.WithMaxQueuePerKey(n)) }
}

// WithWorkers bounds how many account operations run at once, all accounts
// together. The default is the executor's (executor.DefaultWorkers or
// GOMAXPROCS, whichever is larger).
func WithWorkers(n int) Option {
	return func(c *config) { c.exec = append(c.exec, executor.WithWorkers(n)) }
}

// WithObserver passes o to the executor (executor.WithObserver): a
// *metrics.Collector there exports the bank's executor to Prometheus.
func WithObserver(o executor.Observer) Option {
	return func(c *config) { c.exec = append(c.exec, executor.WithObserver(o)) }
}

// WithBeforeWrite sets a function called inside every deposit and transfer,
// while the accounts in ids are held and before they change: the place where
// a real service would write to its database. An error from f fails the
// request with 500 (or 503 if it is ctx's error) and changes nothing. Tests
// use it to make an account slow.
func WithBeforeWrite(f func(ctx context.Context, ids []string) error) Option {
	return func(c *config) { c.beforeWrite = f }
}

// WithOpTime makes every operation (read, deposit, transfer) take d while
// it holds its accounts, as if each waited on a database; a request whose
// client goes away stops waiting. The default, 0, makes operations
// instant: then requests to one account seldom overlap, and a person with
// curl cannot fill its queue. d must not be negative.
func WithOpTime(d time.Duration) Option {
	return func(c *config) { c.opTime = d }
}

// New returns a Server with no accounts. A bad option value is an error.
func New(opts ...Option) (*Server, error) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	if c.opTime < 0 {
		return nil, fmt.Errorf("bank: WithOpTime(%v): must not be negative", c.opTime)
	}
	exec, err := executor.New[string](c.exec...)
	if err != nil {
		return nil, fmt.Errorf("bank: %w", err)
	}
	s := &Server{exec: exec, beforeWrite: c.beforeWrite, opTime: c.opTime, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /accounts/{id}", s.balance)
	s.mux.HandleFunc("POST /accounts/{id}/deposit", s.deposit)
	s.mux.HandleFunc("POST /transfer", s.transfer)
	return s, nil
}

// Handler returns the service's HTTP handler. It answers paths and
// methods it has no route for in JSON too (404, 405).
func (s *Server) Handler() http.Handler { return api.JSONErrors(s.mux) }

// DebugPage returns the executor's live debug page (package debugpage):
// the accounts with the most requests pending, and those whose requests
// are oldest. Mount it on /debug/perkey and /debug/perkey/.
func (s *Server) DebugPage(opts ...debugpage.Option) http.Handler {
	return debugpage.Handler(s.exec, opts...)
}

// Close stops the executor: requests still in the handler finish, new ones
// are answered 503. Call it after http.Server.Shutdown (or
// httptest.Server.Close) so no request is cut short. If ctx ends first, Close
// returns ctx's error once running operations have returned.
func (s *Server) Close(ctx context.Context) error { return s.exec.Close(ctx) }

// Stats returns the executor's counters: Stats().ActiveKeys is the number of
// accounts with a request queued or running, not of accounts ever seen.
func (s *Server) Stats() executor.Stats { return s.exec.Stats() }

// Balance is an account as the API shows it.
type Balance struct {
	ID      string `json:"id"`
	Balance int64  `json:"balance"`
}

// DepositRequest is the body of POST /accounts/{id}/deposit.
type DepositRequest struct {
	Amount int64 `json:"amount"`
}

// TransferRequest is the body of POST /transfer.
type TransferRequest struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Amount int64  `json:"amount"`
}

// TransferResponse is the answer to a successful transfer.
type TransferResponse struct {
	From Balance `json:"from"`
	To   Balance `json:"to"`
}

func (s *Server) balance(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var out Balance
	// Shared: reads of one account run together, and wait only for the
	// writes queued before them.
	err := s.exec.DoShared(r.Context(), id, func(ctx context.Context) error {
		if err := s.work(ctx); err != nil {
			return err
		}
		a := s.lookup(id)
		if a == nil {
			return errNoAccount
		}
		out = Balance{ID: id, Balance: a.balance}
		return nil
	})
	reply(w, out, err)
}

func (s *Server) deposit(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var req DepositRequest
	// Decode before taking the account: a slow client must not hold it.
	if err := api.Decode(w, r, map[string]any{"amount": &req.Amount}); err != nil {
		api.FailDecode(w, err)
		return
	}
	if req.Amount <= 0 {
		fail(w, http.StatusBadRequest, "amount must be positive")
		return
	}
	var out Balance
	err := s.exec.Do(r.Context(), id, func(ctx context.Context) error {
		if err := s.work(ctx); err != nil {
			return err
		}
		a := s.lookup(id)
		if a != nil && a.balance > math.MaxInt64-req.Amount {
			return errOverflow
		}
		if err := s.write(ctx, id); err != nil {
			return err
		}
		if a == nil {
			// Only a task holding id opens id: no one else can store it
			// between the lookup and here.
			a = new(account)
			s.accounts.Store(id, a)
		}
		a.balance += req.Amount
		out = Balance{ID: id, Balance: a.balance}
		return nil
	})
	reply(w, out, err)
}

func (s *Server) transfer(w http.ResponseWriter, r *http.Request) {
	var req TransferRequest
	if err := api.Decode(w, r, map[string]any{"from": &req.From, "to": &req.To, "amount": &req.Amount}); err != nil {
		api.FailDecode(w, err)
		return
	}
	switch {
	case req.From == "" || req.To == "":
		fail(w, http.StatusBadRequest, "from and to are required")
		return
	case req.From == req.To:
		// Not a hazard here (DoMany removes duplicate keys), just meaningless.
		fail(w, http.StatusBadRequest, "from and to must differ")
		return
	case req.Amount <= 0:
		fail(w, http.StatusBadRequest, "amount must be positive")
		return
	}
	var out TransferResponse
	// Both accounts at once, in any order: DoMany needs no lock ordering
	// and cannot deadlock against other transfers or deposits.
	ids := []string{req.From, req.To}
	err := s.exec.DoMany(r.Context(), ids, func(ctx context.Context) error {
		if err := s.work(ctx); err != nil {
			return err
		}
		from, to := s.lookup(req.From), s.lookup(req.To)
		switch {
		case from == nil || to == nil:
			return errNoAccount
		case from.balance < req.Amount:
			return errInsufficient
		case to.balance > math.MaxInt64-req.Amount:
			return errOverflow
		}
		if err := s.write(ctx, ids...); err != nil {
			return err
		}
		from.balance -= req.Amount
		to.balance += req.Amount
		out = TransferResponse{
			From: Balance{ID: req.From, Balance: from.balance},
			To:   Balance{ID: req.To, Balance: to.balance},
		}
		return nil
	})
	reply(w, out, err)
}

// lookup returns the account id, or nil. Call it inside a task holding id.
func (s *Server) lookup(id string) *account {
	a, _ := s.accounts.Load(id)
	acct, _ := a.(*account)
	return acct
}

// work spends an operation's time (WithOpTime). Call it inside the task:
// the accounts stay held meanwhile. It returns ctx's error if ctx ends
// first.
func (s *Server) work(ctx context.Context) error {
	if s.opTime == 0 {
		return nil
	}
	wait, cancel := context.WithTimeout(ctx, s.opTime)
	defer cancel()
	<-wait.Done()
	return ctx.Err() // nil unless ctx itself ended
}

func (s *Server) write(ctx context.Context, ids ...string) error {
	if s.beforeWrite == nil {
		return nil
	}
	return s.beforeWrite(ctx, ids)
}

// reply writes v as JSON, or the HTTP status that err maps to.
func reply(w http.ResponseWriter, v any, err error) {
	var busy *backpressure.BusyError
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, v)
	case errors.As(err, &busy):
		// The account's queue is full: tell the client when to come back
		// instead of queueing it behind everyone else.
		w.Header().Set("Retry-After", strconv.FormatInt(retryAfter(busy.RetryAfter()), 10))
		fail(w, http.StatusTooManyRequests, err.Error())
	case errors.Is(err, errNoAccount):
		fail(w, http.StatusNotFound, err.Error())
	case errors.Is(err, errInsufficient), errors.Is(err, errOverflow):
		fail(w, http.StatusConflict, err.Error())
	case errors.Is(err, executor.ErrClosed):
		fail(w, http.StatusServiceUnavailable, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The client went away before its turn (its place in the queue was
		// given back at once) or while its write was under way (the write
		// was abandoned). Nobody is likely to read this.
		fail(w, http.StatusServiceUnavailable, err.Error())
	default:
		fail(w, http.StatusInternalServerError, err.Error())
	}
}

// retryAfter converts d to whole seconds for a Retry-After header: rounded
// up, and at least 1 (0 would invite an immediate retry, and d is 0 when the
// executor has no estimate yet).
func retryAfter(d time.Duration) int64 {
	return max(1, int64(math.Ceil(d.Seconds())))
}

func fail(w http.ResponseWriter, status int, msg string) { api.Fail(w, status, msg) }

func writeJSON(w http.ResponseWriter, status int, v any) { api.WriteJSON(w, status, v) }
