package executor_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

// Tasks of one key run one at a time, in submission order.
func ExampleExecutor_Do() {
	exec, err := executor.New[string]()
	if err != nil {
		panic(err)
	}
	defer exec.Close(context.Background())

	balance := map[string]int{}
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			exec.Do(context.Background(), "alice", func(context.Context) error {
				balance["alice"] += 10 // no lock: perkey serialises per key
				return nil
			})
		})
	}
	wg.Wait()
	fmt.Println(balance["alice"], exec.ActiveKeys())
	// Output: 1000 0
}

func ExampleCall() {
	exec, _ := executor.New[int]()
	defer exec.Close(context.Background())

	square, err := executor.Call(context.Background(), exec, 7, func(context.Context) (int, error) {
		return 7 * 7, nil
	})
	fmt.Println(square, err)
	// Output: 49 <nil>
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

// DoMany holds several keys at once, in any order, without deadlock.
func ExampleExecutor_DoMany() {
	exec, _ := executor.New[string]()
	defer exec.Close(context.Background())

	accounts := map[string]int{"alice": 100, "bob": 0}
	transfer := func(from, to string, amount int) error {
		return exec.DoMany(context.Background(), []string{from, to}, func(context.Context) error {
			if accounts[from] < amount {
				return errors.New("insufficient funds")
			}
			accounts[from] -= amount
			accounts[to] += amount
			return nil
		})
	}
	fmt.Println(transfer("alice", "bob", 30), transfer("bob", "alice", 50))
	fmt.Println(accounts["alice"], accounts["bob"])
	// Output:
	// <nil> insufficient funds
	// 70 30
}

// A nested call on a key the task already holds fails instead of deadlocking.
func ExampleErrReentrant() {
	exec, _ := executor.New[string]()
	defer exec.Close(context.Background())

	err := exec.Do(context.Background(), "a", func(ctx context.Context) error {
		return exec.Do(ctx, "a", func(context.Context) error { return nil })
	})
	fmt.Println(err)
	// Output: perkey: task already holds this key
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

// A Batcher hands a key's queued messages to one call: here, the events of
// one account reach the sink in bulk, in order, while a slow write holds the
// key.
func ExampleBatcher() {
	e, _ := executor.New[string]()
	defer e.Close(context.Background())
	store, _ := executor.NewBatcher(e, func(ctx context.Context, account string, events []string) error {
		fmt.Println(account, events) // one bulk write
		return nil
	})
	release := make(chan struct{})
	e.Go(context.Background(), "acct-1", func(context.Context) error { <-release; return nil })
	var tasks []*executor.Task
	for _, ev := range []string{"open", "deposit", "withdraw"} {
		t, _ := store.Submit(context.Background(), "acct-1", ev)
		tasks = append(tasks, t)
	}
	close(release)
	for _, t := range tasks {
		t.Wait(context.Background())
	}
	// Output: acct-1 [open deposit withdraw]
}
