// Package lockbased is the bank service as it is usually written with locks:
// a map of one *sync.RWMutex per account id, created on first use, and
// transfers that lock two accounts in id order. It serves the same API as
// package bank and exists to be read beside it (see ../README.md); the
// end-to-end test runs both.
//
// What it costs, compared with package bank:
//   - locks grows by one mutex for every id any request ever named, including
//     ids that never became accounts; removing one safely needs a reference
//     count.
//   - transfer must lock in a global order (here: by id) or two opposite
//     transfers deadlock, and must special-case from == to or it deadlocks on
//     itself.
//   - a hot account has no bound: every request for it parks a goroutine on
//     its mutex until the client gives up.
package lockbased

import (
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/perkey/perkey/examples/bank/api"
)

// Server is the lock-based bank service.
type Server struct {
	opTime time.Duration // WithOpTime; 0 = instant

	mu    sync.Mutex               // guards locks
	locks map[string]*sync.RWMutex // one per id ever seen; never shrinks

	accounts sync.Map // id → *account; balance guarded by locks[id]
	mux      *http.ServeMux
}

type account struct {
	balance int64
}

// balance is an account as the API shows it.
type balance struct {
	ID      string `json:"id"`
	Balance int64  `json:"balance"`
}

// Option configures a Server.
type Option func(*Server)

// WithOpTime makes every operation take d while it holds its accounts, as
// package bank's WithOpTime does, so that the two can be loaded alike. A
// request whose client goes away stops waiting.
func WithOpTime(d time.Duration) Option {
	return func(s *Server) { s.opTime = max(0, d) }
}

// New returns a Server with no accounts.
func New(opts ...Option) *Server {
	s := &Server{locks: make(map[string]*sync.RWMutex), mux: http.NewServeMux()}
	for _, o := range opts {
		o(s)
	}
	s.mux.HandleFunc("GET /accounts/{id}", s.balance)
	s.mux.HandleFunc("POST /accounts/{id}/deposit", s.deposit)
	s.mux.HandleFunc("POST /transfer", s.transfer)
	return s
}

// Handler returns the service's HTTP handler: the same API as package
// bank's, with the same strict decoding and JSON errors (package api).
func (s *Server) Handler() http.Handler { return api.JSONErrors(s.mux) }

// lock returns id's mutex, creating it on first use.
func (s *Server) lock(id string) *sync.RWMutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.locks[id]
	if !ok {
		l = new(sync.RWMutex)
		s.locks[id] = l
	}
	return l
}

func (s *Server) lookup(id string) *account {
	a, _ := s.accounts.Load(id)
	acct, _ := a.(*account)
	return acct
}

func (s *Server) balance(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	l := s.lock(id) // a GET for a typo leaves a mutex behind forever
	l.RLock()
	defer l.RUnlock()
	if !s.work(w, r) {
		return
	}
	a := s.lookup(id)
	if a == nil {
		fail(w, http.StatusNotFound, "no such account")
		return
	}
	writeJSON(w, http.StatusOK, balance{id, a.balance})
}

func (s *Server) deposit(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var amount int64
	if err := api.Decode(w, r, map[string]any{"amount": &amount}); err != nil {
		api.FailDecode(w, err)
		return
	}
	if amount <= 0 {
		fail(w, http.StatusBadRequest, "amount must be positive")
		return
	}
	l := s.lock(id)
	l.Lock() // no bound, no ctx: a hot account parks every request here
	defer l.Unlock()
	if !s.work(w, r) {
		return
	}
	a := s.lookup(id)
	if a == nil {
		a = new(account)
		s.accounts.Store(id, a)
	}
	if a.balance > math.MaxInt64-amount {
		fail(w, http.StatusConflict, "balance would overflow")
		return
	}
	a.balance += amount
	writeJSON(w, http.StatusOK, balance{id, a.balance})
}

func (s *Server) transfer(w http.ResponseWriter, r *http.Request) {
	var req struct {
		From, To string
		Amount   int64
	}
	if err := api.Decode(w, r, map[string]any{"from": &req.From, "to": &req.To, "amount": &req.Amount}); err != nil {
		api.FailDecode(w, err)
		return
	}
	switch {
	case req.From == "" || req.To == "":
		fail(w, http.StatusBadRequest, "from and to are required")
		return
	case req.Amount <= 0:
		fail(w, http.StatusBadRequest, "amount must be positive")
		return
	}
	if req.From == req.To {
		// Required: locking the same mutex twice deadlocks.
		fail(w, http.StatusBadRequest, "from and to must differ")
		return
	}
	// Lock in id order, or A→B and B→A deadlock each holding one account.
	first, second := req.From, req.To
	if second < first {
		first, second = second, first
	}
	l1, l2 := s.lock(first), s.lock(second)
	l1.Lock()
	defer l1.Unlock()
	l2.Lock()
	defer l2.Unlock()
	if !s.work(w, r) {
		return
	}

	from, to := s.lookup(req.From), s.lookup(req.To)
	switch {
	case from == nil || to == nil:
		fail(w, http.StatusNotFound, "no such account")
		return
	case from.balance < req.Amount:
		fail(w, http.StatusConflict, "insufficient funds")
		return
	case to.balance > math.MaxInt64-req.Amount:
		fail(w, http.StatusConflict, "balance would overflow")
		return
	}
	from.balance -= req.Amount
	to.balance += req.Amount
	writeJSON(w, http.StatusOK, struct {
		From balance `json:"from"`
		To   balance `json:"to"`
	}{balance{req.From, from.balance}, balance{req.To, to.balance}})
}

// work spends an operation's time (WithOpTime) while the caller holds its
// locks, and answers 503 and returns false if the client goes away first:
// the operation is then abandoned.
func (s *Server) work(w http.ResponseWriter, r *http.Request) bool {
	if s.opTime == 0 {
		return true
	}
	t := time.NewTimer(s.opTime)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		fail(w, http.StatusServiceUnavailable, r.Context().Err().Error())
		return false
	}
}

// Locks reports how many mutexes the server holds: one per id ever seen.
func (s *Server) Locks() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.locks)
}

func fail(w http.ResponseWriter, status int, msg string) { api.Fail(w, status, msg) }

func writeJSON(w http.ResponseWriter, status int, v any) { api.WriteJSON(w, status, v) }
