package executor_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

// TestRoomAdmitsInOrder: calls waiting for executor-wide room on one key,
// each visibly parked before the next is made, run in the order they
// parked, even when room for several of them appears at once (here two
// tasks end together): the room lets in one call of a key at a time, and
// the next only once the one before has its place in the key's queue.
func TestRoomAdmitsInOrder(t *testing.T) {
	const waiters = 4
	for _, striped := range []bool{false, true} {
		for _, kind := range []string{"Do", "Go", "Submit"} {
			t.Run(fmt.Sprintf("%s/striped=%v", kind, striped), func(t *testing.T) {
				for round := range 20 {
					synctest.Test(t, func(t *testing.T) {
						admitsInOrder(t, round, kind, striped, waiters)
					})
					if t.Failed() {
						return
					}
				}
			})
		}
	}
}

func admitsInOrder(t *testing.T, round int, kind string, striped bool, waiters int) {
	opts := []executor.Option{executor.WithWorkers(2), executor.WithMaxPending(2),
		executor.WithPolicy(backpressure.Block())}
	if striped {
		opts = append(opts, executor.WithStripes(4))
	}
	e, err := executor.New[int](opts...)
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	gate := make(chan struct{})
	for k := 1; k <= 2; k++ {
		if err := e.Go(bg, k, func(context.Context) error { <-gate; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	synctest.Wait()
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i := range waiters {
		fn := func(context.Context) error {
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			return nil
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			switch kind {
			case "Do":
				err = e.Do(bg, 0, fn)
			case "Go":
				err = e.Go(bg, 0, fn)
			default:
				var task *executor.Task
				if task, err = e.Submit(bg, 0, fn); err == nil {
					err = task.Wait(bg)
				}
			}
			if err != nil {
				t.Errorf("round %d: %s %d: got %v; want nil", round, kind, i, err)
			}
		}()
		synctest.Wait() // i waits in the room before i+1 is made
	}
	if s := e.Stats(); s.Submitted != 2 {
		t.Fatalf("round %d: Submitted %d; want 2, with %d waiting for room", round, s.Submitted, waiters)
	}
	close(gate) // two units of room at once
	wg.Wait()
	if err := e.Close(bg); err != nil {
		t.Errorf("round %d: Close: %v", round, err)
	}
	if want := []int{0, 1, 2, 3}; !slices.Equal(order, want) {
		t.Errorf("round %d: %s calls ran in the order %v; want %v, the order they waited in", round, kind, order, want)
	}
}

// TestRoomLetsInOtherKeysTogether: room for two calls waiting on
// different keys lets both in at once, so a waiter need not wait for the
// one let in before it to take its place; a waiter on the key of one still
// on its way waits for it, so calls on one key enter its queue in the
// order they waited. The first waiter is held on its way (between its
// reservation and its key's lock) by a test hook.
func TestRoomLetsInOtherKeysTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, err := executor.New[string](executor.WithWorkers(4), executor.WithMaxPending(2),
			executor.WithPolicy(backpressure.Block()))
		if err != nil {
			t.Fatal(err)
		}
		bg := context.Background()
		held := make(chan struct{})
		release := sync.OnceFunc(func() { close(held) })
		defer release()
		var onWay atomic.Int32 // calls on "a" between their reservation and the lock
		executor.OnReserved(e, func(key string) {
			if key == "a" {
				onWay.Add(1)
				<-held
			}
		})
		gateX, gateY := make(chan struct{}), make(chan struct{})
		e.Go(bg, "x", func(context.Context) error { <-gateX; return nil })
		e.Go(bg, "y", func(context.Context) error { <-gateY; return nil })
		synctest.Wait() // both places taken
		var mu sync.Mutex
		var ran []string
		call := func(key, name string) chan error {
			done := make(chan error, 1)
			go func() {
				done <- e.Do(bg, key, func(context.Context) error {
					mu.Lock()
					ran = append(ran, name)
					mu.Unlock()
					return nil
				})
			}()
			synctest.Wait() // it waits in the room before the next comes
			return done
		}
		a1, b, a2 := call("a", "a1"), call("b", "b"), call("a", "a2")
		close(gateX) // one place: a1 is let in, and held on its way
		synctest.Wait()
		if n := onWay.Load(); n != 1 {
			t.Fatalf("%d calls on a on their way; want 1 (a1)", n)
		}
		close(gateY) // another place, while a1 is still on its way
		synctest.Wait()
		select {
		case err := <-b:
			if err != nil {
				t.Fatalf("b: %v", err)
			}
		default:
			t.Fatal("b still waits while a1 is on its way; want it let in with the second place")
		}
		// b's place is free again, but a2 is on a1's key: it waits for a1.
		if n := onWay.Load(); n != 1 {
			t.Fatalf("%d calls on a on their way; want 1: a2 must wait until a1 has its place", n)
		}
		release()
		for name, ch := range map[string]chan error{"a1": a1, "a2": a2} {
			if err := <-ch; err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		if err := e.Close(bg); err != nil {
			t.Errorf("Close: %v", err)
		}
		if i, j := slices.Index(ran, "a1"), slices.Index(ran, "a2"); i < 0 || j < i {
			t.Errorf("ran %v; want a1 before a2, the order they waited in", ran)
		}
	})
}

// globalWaitKeyReject waits at the executor-wide cap and refuses at a
// key's; exit makes its next question about a key call runtime.Goexit.
type globalWaitKeyReject struct{ exit atomic.Bool }

func (p *globalWaitKeyReject) Decide(l backpressure.Load) backpressure.Verdict {
	switch l.Full() {
	case backpressure.ScopeGlobal:
		return backpressure.Wait
	case backpressure.ScopeKey:
		return backpressure.Reject
	}
	if l.TotalLimit == 0 && p.exit.CompareAndSwap(true, false) {
		runtime.Goexit()
	}
	return backpressure.Admit
}

// TestRoomTurnPassesOn: a call let in from the executor-wide waiting room
// that is then refused at its key, or whose goroutine a Policy ends with
// runtime.Goexit there, still lets the next waiter in: nothing waits for
// it forever.
func TestRoomTurnPassesOn(t *testing.T) {
	for _, how := range []string{"refused", "goexit"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { turnPassesOn(t, how) })
		})
	}
}

func turnPassesOn(t *testing.T, how string) {
	p := &globalWaitKeyReject{}
	e, err := executor.New[string](executor.WithWorkers(4), executor.WithMaxPending(2),
		executor.WithMaxQueuePerKey(1), executor.WithPolicy(p))
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	full, x := make(chan struct{}), make(chan struct{})
	e.Go(bg, "full", func(context.Context) error { <-full; return nil }) // holds key full
	e.Go(bg, "x", func(context.Context) error { <-x; return nil })
	synctest.Wait()
	first, second := make(chan error, 1), make(chan error, 1)
	key := "full" // refused there once let in
	if how != "refused" {
		key = "free"
	}
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		first <- e.Do(bg, key, func(context.Context) error { return nil })
	}()
	synctest.Wait()
	go func() { second <- e.Do(bg, "other", func(context.Context) error { return nil }) }()
	synctest.Wait()
	if s := e.Stats(); s.Submitted != 2 {
		t.Fatalf("Submitted %d; want 2, with two calls waiting for room", s.Submitted)
	}
	p.exit.Store(how == "goexit")
	close(x) // room for one
	synctest.Wait()
	<-exited
	select {
	case err := <-first:
		if how == "goexit" {
			t.Errorf("first call returned %v; want its goroutine ended by the Policy", err)
		} else if !errors.Is(err, executor.ErrBusy) {
			t.Errorf("first call: got %v; want ErrBusy from its key", err)
		}
	default:
		if how != "goexit" {
			t.Errorf("first call has not returned")
		}
	}
	select {
	case err := <-second:
		if err != nil {
			t.Errorf("second call: got %v; want nil", err)
		}
	default:
		t.Fatalf("second call still waits; want it let in once the first had its turn")
	}
	close(full)
	if err := e.Close(bg); err != nil {
		t.Errorf("Close: %v", err)
	}
	if s := e.Stats(); !balanced(s) || s.Queued != 0 || s.Running != 0 {
		t.Errorf("Stats after Close: %+v; want idle and balanced", s)
	}
}

// TestRoomLeaveWhileLetIn: a waiter whose ctx ends as room appears either
// takes the room or leaves; either way the waiter behind it gets in and
// the room's count is whole, round after round.
func TestRoomLeaveWhileLetIn(t *testing.T) {
	for round := range 50 {
		synctest.Test(t, func(t *testing.T) {
			e, err := executor.New[int](executor.WithWorkers(2), executor.WithMaxPending(1),
				executor.WithPolicy(backpressure.Block()))
			if err != nil {
				t.Fatal(err)
			}
			bg := context.Background()
			gate := make(chan struct{})
			e.Go(bg, 1, func(context.Context) error { <-gate; return nil })
			synctest.Wait()
			ctx, cancel := context.WithCancel(bg)
			first, second := make(chan error, 1), make(chan error, 1)
			go func() { first <- e.Do(ctx, 0, func(context.Context) error { return nil }) }()
			synctest.Wait()
			go func() { second <- e.Do(bg, 0, func(context.Context) error { return nil }) }()
			synctest.Wait()
			go cancel()
			close(gate)
			if err := <-first; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("round %d: first call: got %v; want nil or context.Canceled", round, err)
			}
			if err := <-second; err != nil {
				t.Errorf("round %d: second call: got %v; want nil", round, err)
			}
			// The room is whole: one call at a time still gets in.
			if err := e.Do(bg, 2, func(context.Context) error { return nil }); err != nil {
				t.Errorf("round %d: a later call: got %v; want nil", round, err)
			}
			if err := e.Close(bg); err != nil {
				t.Errorf("round %d: Close: %v", round, err)
			}
			if s := e.Stats(); !balanced(s) || s.Queued != 0 || s.Running != 0 {
				t.Errorf("round %d: Stats after Close: %+v; want idle and balanced", round, s)
			}
		})
		if t.Failed() {
			return
		}
	}
}

// unwatchable is a ctx whose end nothing can watch: Done is nil, and Err
// reports its end once end is called. It stands for a task that entered its
// queue after the waiting room's watch looked (see watchGlobal), whose end
// only a sweep notices.
type unwatchable struct {
	context.Context
	ended atomic.Bool
}

func (u *unwatchable) end()                  { u.ended.Store(true) }
func (u *unwatchable) Done() <-chan struct{} { return nil }
func (u *unwatchable) Err() error {
	if u.ended.Load() {
		return context.Canceled
	}
	return nil
}

// TestRoomNestedAfterSweep: a nested call at the executor-wide cap whose
// sweep frees room for a call waiting in the room and for itself waits for
// that call to take its place, then is admitted: it is not refused for the
// moment the waiter it let in is still on its way to its key. (The tasks
// it sweeps have a ctx the room's watch cannot see: a watched one's end
// lets the waiter in before the nested call comes.)
func TestRoomNestedAfterSweep(t *testing.T) {
	for round := range 20 {
		synctest.Test(t, func(t *testing.T) {
			e, err := executor.New[string](executor.WithWorkers(2), executor.WithMaxPending(4),
				executor.WithPolicy(backpressure.Block()))
			if err != nil {
				t.Fatal(err)
			}
			bg := context.Background()
			nest, x := make(chan struct{}), make(chan struct{})
			nested := make(chan error, 1)
			e.Go(bg, "t", func(ctx context.Context) error {
				<-nest
				nested <- e.Do(ctx, "n", func(context.Context) error { return nil })
				return nil
			})
			e.Go(bg, "x", func(context.Context) error { <-x; return nil })
			doomed := &unwatchable{Context: bg}
			cancel := doomed.end
			for range 2 {
				e.Go(doomed, "t", func(context.Context) error { return nil }) // queued behind the first
			}
			synctest.Wait()
			waiter := make(chan error, 1)
			go func() { waiter <- e.Do(bg, "w", func(context.Context) error { return nil }) }()
			synctest.Wait()
			if s := e.Stats(); s.Submitted != 4 {
				t.Fatalf("round %d: Submitted %d; want 4, with one call waiting for room", round, s.Submitted)
			}
			cancel() // noticed by the nested call's sweep
			close(nest)
			if err := <-nested; err != nil {
				t.Errorf("round %d: nested Do: got %v; want nil: its sweep made room for the waiter and for it", round, err)
			}
			if err := <-waiter; err != nil {
				t.Errorf("round %d: waiting Do: got %v; want nil", round, err)
			}
			close(x)
			if err := e.Close(bg); err != nil {
				t.Errorf("round %d: Close: %v", round, err)
			}
			if s := e.Stats(); !balanced(s) || s.Canceled != 2 || s.Queued != 0 || s.Running != 0 {
				t.Errorf("round %d: Stats after Close: %+v; want idle and balanced, the 2 swept canceled", round, s)
			}
		})
		if t.Failed() {
			return
		}
	}
}
