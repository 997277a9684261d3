package executor_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

// Per-key state needs no lock of its own when only the key's tasks touch it:
// they run one at a time. What several keys share, such as the map that
// finds each key's state, still needs its own synchronisation: here a
// sync.Map (a plain map written from tasks of different keys is a data
// race).
func ExampleExecutor_Do() {
	exec, err := executor.New[string]()
	if err != nil {
		panic(err)
	}
	defer exec.Close(context.Background())

	type account struct{ balance int } // touched only by its key's tasks
	var accounts sync.Map              // shared by every key: string -> *account

	var wg sync.WaitGroup
	for _, id := range []string{"alice", "bob", "carol"} {
		for range 100 {
			wg.Go(func() {
				err := exec.Do(context.Background(), id, func(context.Context) error {
					v, _ := accounts.LoadOrStore(id, new(account))
					v.(*account).balance += 10 // no lock: id's tasks run one at a time
					return nil
				})
				if err != nil {
					panic(err)
				}
			})
		}
	}
	wg.Wait()
	for _, id := range []string{"alice", "bob", "carol"} {
		v, _ := accounts.Load(id)
		fmt.Println(id, v.(*account).balance)
	}
	// Output:
	// alice 1000
	// bob 1000
	// carol 1000
}

// Fire and forget from an HTTP handler. The request's ctx ends when the
// handler returns, and a task whose ctx ends before it starts is withdrawn
// without running: queued with r.Context(), most of these tasks would never
// run. context.WithoutCancel keeps the request's values and drops its end.
func ExampleExecutor_Go() {
	exec, err := executor.New[string]()
	if err != nil {
		panic(err)
	}

	var mu sync.Mutex // the audit log is shared by every key: it needs its own lock
	audit := map[string][]string{}

	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders/{id}/{event}", func(w http.ResponseWriter, r *http.Request) {
		id, event := r.PathValue("id"), r.PathValue("event")
		err := exec.Go(context.WithoutCancel(r.Context()), id, func(ctx context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			audit[id] = append(audit[id], event)
			return nil
		})
		switch {
		case errors.Is(err, executor.ErrBusy):
			http.Error(w, err.Error(), http.StatusTooManyRequests)
		case err != nil:
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for _, path := range []string{"/orders/1/created", "/orders/2/created", "/orders/1/paid", "/orders/1/shipped"} {
		resp, err := http.Post(srv.URL+path, "text/plain", nil)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Println(path, resp.StatusCode)
	}

	// Close runs every accepted task before it returns.
	if err := exec.Close(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println("order 1:", audit["1"])
	fmt.Println("order 2:", audit["2"])
	// Output:
	// /orders/1/created 202
	// /orders/2/created 202
	// /orders/1/paid 202
	// /orders/1/shipped 202
	// order 1: [created paid shipped]
	// order 2: [created]
}

// A consumer loop submits each message under its key with the loop's own
// ctx, which lives as long as the consumer: messages of one key are handled
// in order, different keys in parallel. Ending that ctx withdraws the
// messages still queued; Close, with a ctx of its own, lets every accepted
// message finish first.
func Example_consumerLoop() {
	type message struct{ key, body string }
	queue := make(chan message)
	go func() {
		for _, m := range []message{
			{"user-1", "a"}, {"user-2", "x"}, {"user-1", "b"}, {"user-2", "y"}, {"user-1", "c"},
		} {
			queue <- m
		}
		close(queue)
	}()

	var mu sync.Mutex // shared by every key
	handled := map[string]string{}
	exec, err := executor.New[string](executor.WithErrorHandler(func(key any, err error) {
		fmt.Println("message of", key, "failed:", err)
	}))
	if err != nil {
		panic(err)
	}

	// In a service this ctx would come from signal.NotifyContext: it ends only
	// when the consumer stops.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	for m := range queue {
		err := exec.Go(ctx, m.key, func(ctx context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			handled[m.key] += m.body
			return nil
		})
		if err != nil {
			fmt.Println("not accepted:", err)
		}
	}
	if err := exec.Close(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println(handled["user-1"], handled["user-2"])
	// Output: abc xy
}

// Call runs fn holding the key, like Do, and returns fn's value. Each
// flight's seat counter is touched only by its key's tasks; the map that
// finds it is only read once set up, so it needs no lock.
func ExampleCall() {
	exec, err := executor.New[string]()
	if err != nil {
		panic(err)
	}
	defer exec.Close(context.Background())

	type flight struct{ next, seats int }
	flights := map[string]*flight{"LH400": {seats: 2}, "BA117": {seats: 1}}

	book := func(code string) (int, error) {
		return executor.Call(context.Background(), exec, code, func(context.Context) (int, error) {
			f := flights[code]
			if f.next == f.seats {
				return 0, errors.New("flight " + code + " is full")
			}
			f.next++
			return f.next, nil
		})
	}
	for _, code := range []string{"LH400", "BA117", "LH400", "BA117"} {
		seat, err := book(code)
		fmt.Println(code, seat, err)
	}
	// Output:
	// LH400 1 <nil>
	// BA117 1 <nil>
	// LH400 2 <nil>
	// BA117 0 flight BA117 is full
}

// A per-key cap turns a hot key into immediate rejections.
func ExampleWithMaxQueuePerKey() {
	exec, _ := executor.New[string](executor.WithMaxQueuePerKey(1))
	defer exec.Close(context.Background())

	release := make(chan struct{})
	task, _ := exec.Submit(context.Background(), "hot", func(context.Context) error {
		<-release
		return nil
	})
	err := exec.Do(context.Background(), "hot", func(context.Context) error { return nil })
	var busy *backpressure.BusyError
	fmt.Println(errors.Is(err, executor.ErrBusy), errors.As(err, &busy) && busy.Limit == 1)
	fmt.Println(err)
	close(release)
	task.Wait(context.Background())
	// Output:
	// true true
	// perkey: key "hot" is busy: 1 pending, limit 1
}

// DoMany holds several keys at once, in any order, without deadlock. The
// map is only read once set up; each account is touched only by tasks
// that hold its key.
func ExampleExecutor_DoMany() {
	exec, _ := executor.New[string]()
	defer exec.Close(context.Background())

	type account struct{ balance int }
	accounts := map[string]*account{"alice": {100}, "bob": {0}}
	transfer := func(from, to string, amount int) error {
		return exec.DoMany(context.Background(), []string{from, to}, func(context.Context) error {
			if accounts[from].balance < amount {
				return errors.New("insufficient funds")
			}
			accounts[from].balance -= amount
			accounts[to].balance += amount
			return nil
		})
	}
	fmt.Println(transfer("alice", "bob", 30), transfer("bob", "alice", 50))
	fmt.Println(accounts["alice"].balance, accounts["bob"].balance)
	// Output:
	// <nil> insufficient funds
	// 70 30
}

// A call from inside a task, with the task's ctx, on a key the task already
// holds fails at once instead of deadlocking. With another key it is fine.
func ExampleErrReentrant() {
	exec, _ := executor.New[string]()
	defer exec.Close(context.Background())

	err := exec.Do(context.Background(), "a", func(ctx context.Context) error {
		if err := exec.Do(ctx, "b", func(context.Context) error { return nil }); err != nil {
			return err
		}
		return exec.Do(ctx, "a", func(context.Context) error { return nil })
	})
	fmt.Println(errors.Is(err, executor.ErrReentrant))
	// Output: true
}

// With WithReentrant, a nested call on a key the task holds runs inline.
func ExampleWithReentrant() {
	exec, _ := executor.New[string](executor.WithReentrant())
	defer exec.Close(context.Background())

	err := exec.Do(context.Background(), "a", func(ctx context.Context) error {
		return exec.Do(ctx, "a", func(context.Context) error {
			fmt.Println("inner ran inline")
			return nil
		})
	})
	fmt.Println(err)
	// Output:
	// inner ran inline
	// <nil>
}

// Submit returns at once; Wait gives fn's error.
func ExampleExecutor_Submit() {
	exec, _ := executor.New[int]()
	defer exec.Close(context.Background())

	var tasks []*executor.Task
	for i := range 3 {
		t, _ := exec.Submit(context.Background(), 1, func(context.Context) error {
			fmt.Println("step", i)
			return nil
		})
		tasks = append(tasks, t)
	}
	for _, t := range tasks {
		t.Wait(context.Background())
	}
	// Output:
	// step 0
	// step 1
	// step 2
}

// A Batcher hands a key's queued messages to one call, here a bulk write to
// a sink. While a slow write holds account 1, its next three events queue
// and then reach the sink in one call, in order; account 2's event goes
// alone.
func ExampleBatcher() {
	exec, _ := executor.New[string]()
	defer exec.Close(context.Background())

	var mu sync.Mutex // the sink is shared by every key
	var writes []string
	sink := func(account string, events []string) {
		mu.Lock()
		defer mu.Unlock()
		writes = append(writes, account+": "+strings.Join(events, ","))
	}

	store, err := executor.NewBatcher(exec, func(ctx context.Context, account string, events []string) error {
		sink(account, events) // one bulk write for the whole batch
		return nil            // or executor.BatchErrors, to fail single messages
	})
	if err != nil {
		panic(err)
	}

	// A slow write holds account 1: started, so its next events queue behind it.
	started, release := make(chan struct{}), make(chan struct{})
	exec.Go(context.Background(), "acct-1", func(context.Context) error { close(started); <-release; return nil })
	<-started
	var tasks []*executor.Task
	for _, m := range []struct{ account, event string }{
		{"acct-1", "open"}, {"acct-1", "deposit"}, {"acct-1", "withdraw"},
	} {
		t, _ := store.Submit(context.Background(), m.account, m.event)
		tasks = append(tasks, t)
	}
	close(release)
	for _, t := range tasks {
		t.Wait(context.Background())
	}
	if err := store.Do(context.Background(), "acct-2", "open"); err != nil {
		panic(err)
	}
	for _, w := range writes {
		fmt.Println(w)
	}
	// Output:
	// acct-1: open,deposit,withdraw
	// acct-2: open
}
