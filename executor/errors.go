package executor

import (
	"errors"
	"fmt"

	"github.com/perkey/perkey/backpressure"
)

var (
	// ErrBusy means a per-key or global cap refused the task. It is
	// backpressure.ErrBusy; the returned error is a *backpressure.BusyError
	// naming the key, the pending count and the limit.
	ErrBusy = backpressure.ErrBusy
	// ErrClosed means the executor is closed or closing, or Close gave up on
	// the task before it started.
	ErrClosed = errors.New("perkey: executor closed")
	// ErrReentrant means the calling task already holds the key it asked for
	// (see Do), or a DoMany queued on that key waits for a key the task holds
	// (the error then wraps ErrReentrant and says so), or Close was called
	// from inside a task.
	ErrReentrant = errors.New("perkey: task already holds this key")
	// errWaitsOnCaller is ErrReentrant in effect: the call would wait for its
	// own task (see Executor.waitsOnCaller).
	errWaitsOnCaller = fmt.Errorf("%w (through a DoMany queued on the key that waits for a key the task holds)", ErrReentrant)
	// ErrDeadlock means a nested call (Do, DoShared, DoMany or Task.Wait with
	// a task's ctx) would wait in a cycle of tasks, each waiting for a key
	// another holds or is queued ahead on. It is refused at once, and the
	// cycle's other tasks go ahead once the caller returns. A refused Do,
	// DoShared or DoMany never runs fn (it counts as canceled); a refused Wait
	// leaves its Task as it was.
	ErrDeadlock = errors.New("perkey: deadlock: the call would wait in a cycle of tasks waiting for each other's keys")
	// ErrNilFunc means fn is nil.
	ErrNilFunc = errors.New("perkey: nil func")
	// ErrNoKeys means DoMany was given no keys.
	ErrNoKeys = errors.New("perkey: no keys")
	// ErrNilContext means ctx is nil.
	ErrNilContext = errors.New("perkey: nil context")
	// ErrNilTask means Wait was called on a nil *Task, or on a zero Task
	// that no Submit returned.
	ErrNilTask = errors.New("perkey: nil task")
	// ErrInvalidKey means a key can never be serialised: it is not equal to
	// itself (a NaN, or a struct, array or interface value holding one), or
	// its dynamic type cannot be hashed (an interface holding a slice, map
	// or func). The returned error wraps it and names the key's type. A
	// refused key is never enqueued, held or counted.
	ErrInvalidKey = errors.New("perkey: invalid key")
	// ErrGoexit means fn called runtime.Goexit (as t.FailNow does): it
	// neither returned nor panicked. The task counts as completed, and the
	// key's next task runs as after any other end.
	ErrGoexit = errors.New("perkey: task called runtime.Goexit")
	// ErrNilExecutor means a method was called on a nil *Executor, or on a
	// zero Executor: call New.
	ErrNilExecutor = errors.New("perkey: nil executor")
)

// PanicError is returned when fn panics. The panic is recovered on the
// goroutine that ran fn; Stack is that goroutine's stack at the panic.
type PanicError struct {
	Value any
	Stack []byte
}

// Error describes the panic value.
func (p *PanicError) Error() string {
	return fmt.Sprintf("perkey: task panicked: %v", p.Value)
}

// Unwrap returns the panic value if it is an error, so errors.Is can see
// through a panic(err).
func (p *PanicError) Unwrap() error {
	err, _ := p.Value.(error)
	return err
}
