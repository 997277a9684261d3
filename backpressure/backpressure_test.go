package backpressure_test

import (
	"errors"
	"testing"
	"time"

	"github.com/perkey/perkey/backpressure"
)

func TestLoadFull(t *testing.T) {
	tests := []struct {
		name string
		load backpressure.Load
		want backpressure.Scope
	}{
		{"no caps", backpressure.Load{Pending: 1000}, 0},
		{"below key cap", backpressure.Load{Pending: 9, Limit: 10}, 0},
		{"at key cap", backpressure.Load{Pending: 10, Limit: 10}, backpressure.ScopeKey},
		{"at global cap", backpressure.Load{TotalPending: 5, TotalLimit: 5}, backpressure.ScopeGlobal},
		{"key cap first", backpressure.Load{Pending: 3, Limit: 3, TotalPending: 5, TotalLimit: 5}, backpressure.ScopeKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.load.Full(); got != tt.want {
				t.Errorf("Full() = %v; want %v", got, tt.want)
			}
		})
	}
}

func TestPolicies(t *testing.T) {
	full := backpressure.Load{Pending: 2, Limit: 2}
	room := backpressure.Load{Pending: 1, Limit: 2}
	old := backpressure.Load{Pending: 1, Limit: 2, OldestWait: 50 * time.Millisecond}
	tests := []struct {
		name   string
		policy backpressure.Policy
		load   backpressure.Load
		want   backpressure.Verdict
	}{
		{"FailFast/room", backpressure.FailFast(), room, backpressure.Admit},
		{"FailFast/full", backpressure.FailFast(), full, backpressure.Reject},
		{"FailFast/old head", backpressure.FailFast(), old, backpressure.Admit},
		{"Block/room", backpressure.Block(), room, backpressure.Admit},
		{"Block/full", backpressure.Block(), full, backpressure.Wait},
		{"MaxQueueDelay/room", backpressure.MaxQueueDelay(10 * time.Millisecond), room, backpressure.Admit},
		{"MaxQueueDelay/old head", backpressure.MaxQueueDelay(10 * time.Millisecond), old, backpressure.Reject},
		{"MaxQueueDelay/young head", backpressure.MaxQueueDelay(time.Second), old, backpressure.Admit},
		{"MaxQueueDelay/full", backpressure.MaxQueueDelay(time.Second), full, backpressure.Reject},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.policy.Decide(tt.load); got != tt.want {
				t.Errorf("Decide(%+v) = %v; want %v", tt.load, got, tt.want)
			}
		})
	}
	if a, ok := backpressure.MaxQueueDelay(time.Second).(backpressure.NeedsQueueAge); !ok || !a.NeedsQueueAge() {
		t.Error("MaxQueueDelay does not ask for queue age")
	}
}

func TestBusyError(t *testing.T) {
	tests := []struct {
		err  *backpressure.BusyError
		want string
	}{
		{&backpressure.BusyError{Key: "acct-1", Scope: backpressure.ScopeKey, Pending: 100, Limit: 100},
			`perkey: key "acct-1" is busy: 100 pending, limit 100`},
		{&backpressure.BusyError{Scope: backpressure.ScopeGlobal, Pending: 7, Limit: 7},
			`perkey: executor is busy: 7 pending, limit 7`},
		{&backpressure.BusyError{Key: 42, Scope: backpressure.ScopeDelay, Wait: 3 * time.Second, Pending: 4},
			`perkey: key 42 is busy: oldest task queued for 3s, 4 pending`},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q; want %q", got, tt.want)
		}
		if !errors.Is(tt.err, backpressure.ErrBusy) {
			t.Errorf("errors.Is(%v, ErrBusy) = false; want true", tt.err)
		}
	}
	if got := (&backpressure.BusyError{Retry: time.Second}).RetryAfter(); got != time.Second {
		t.Errorf("RetryAfter() = %v; want 1s", got)
	}
}
