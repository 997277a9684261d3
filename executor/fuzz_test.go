package executor_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/executor"
)

// FuzzExecutor drives an executor with a byte stream of operations —
// Submit, Do, DoShared, DoMany, cancel, release (a running task returns,
// fails or panics) and Close — and checks it after every step against a
// small sequential reference model. The header picks the configuration:
// workers, throughput, caps, and three modes: striped (WithStripes(1), so
// every key shares one mailbox), blocking (backpressure.Block, so a call at
// a cap waits in a FIFO waiting room instead of being refused) and, if not
// blocking, aging (backpressure.MaxQueueDelay(10ms): a key whose oldest
// waiting task has waited longer is refused; one operation then lets the
// bubble's clock run 6ms instead of releasing a task). A fourth bit,
// nesting (0x40 on workers), lets one operation make a running task call Do
// from inside its fn, with its own ctx, on any key (with 0x80 on the global
// cap, also DoShared, or DoMany on two keys): the model knows which of
// those calls are refused (ErrReentrant on a key the task or one it is
// nested in holds, or behind a DoMany that needs such a key; its ctx's
// error, ErrClosed, ErrBusy, under Block at the global cap too), that the
// task lends its worker while the call waits, for its turn or for room, and
// needs one back when the call returns.
//
// A fifth mode, exiting (0x40 on throughput together with 0x80 on the
// global cap, which no input before it set together; with nesting, 0x80
// also means every nested kind), adds behavior 3, a fn that calls
// runtime.Goexit, and Go (a Submit whose behavior byte has 0x20): the model
// expects ErrGoexit from a Wait, from a Do whose fn ran on a worker and from
// the error handler; a call whose fn ran on the caller's goroutine (an
// inline Do, or a nested call inline on its task's goroutine) never
// returns, its goroutine exits (errGone), and a nested call's Goexit so
// ends the fn that made it too. A Go's failure (fn's error, its panic,
// ErrGoexit, its ctx's error, ErrClosed) must reach the error handler
// exactly once with its key, and nothing else may; its own return says only
// whether it was accepted.
//
// Two more modes ride on an extension byte, read after the header when the
// global cap byte has 0x08 without 0x10 or 0x20 (b&0x38 == 0x08, which no
// input before them had): its bits pick them.
//
//   - Wait-for (0x01, with nesting): the model knows the wait-for graph
//     (see waitsOn) and expects a nested call to be refused with
//     ErrDeadlock exactly when its wait would close a cycle, and no other
//     to be; nested calls then also include Task.Wait on a Submit's Task
//     (and with batching, Batcher.Do), the calls it used to skip are made,
//     and cancel can end a nested Wait. A wait whose cycle the executor
//     cannot see (see wouldClose) is not made.
//   - Batching (0x02; (b>>2)&3 picks WithMaxBatch from 1 to 4): ops 0 and
//     1 with 0x08 are Batcher.Submit and Batcher.Do, messages that the
//     model batches as the drive loop must (see fuzzDrive): a batch is the
//     consecutive messages at the head of the key's queue when the loop
//     detaches them, at most the max, cut by any other task; each
//     message ends with the batch's outcome, which its first message's
//     behavior picks (0: per message, 0x40 on a message's behavior byte
//     fails it through BatchErrors; 1: the whole batch fails; 2: panic;
//     3: runtime.Goexit), and one canceled while queued is left out.
//
// Every task body blocks on its own gate until the driver releases it, and
// the whole run happens in a synctest bubble: after each operation
// synctest.Wait returns only once every goroutine is blocked, so the
// executor's state is settled and the model can say exactly what it must
// be. The model keeps each key's FIFO of accepted tasks and checks:
//
//   - a task runs only when every earlier task on each of its keys has
//     ended (for a shared task: every earlier exclusive one);
//   - at most WithWorkers tasks run (a task waiting in a nested call does
//     not count), and while a worker is free every task the model says may
//     run is running and every nested call that ended has returned (nothing
//     stalls);
//   - admission: per-key and global caps, ErrClosed after Close, a ctx that
//     already ended is refused and counted nowhere; under Block, which
//     waiting call enters when a task ends or a waiting call gives up;
//     under MaxQueueDelay, the age of each key's oldest waiting task;
//   - each call's result (nil, fn's error, *PanicError, ErrGoexit, ctx's
//     error, ErrBusy, ErrClosed, or none: the goroutine exited), delivered
//     exactly once and only after its task ended (for Go: through the
//     error handler);
//   - lazy cancellation: when the ctx of a queued Go, Submit or Batcher
//     message nobody waits on ends, the task is doomed: the executor may
//     end it (ctx's error) at any time, and the model learns that it did at
//     the next settled moment, but it must have by the time it reaches the
//     head of its queue with a worker free (it never runs, and the key's
//     next task goes ahead), a Task.Wait on it is made (a blocking
//     executor's Submit waits at once), a cap it holds room under would
//     refuse a call or make it wait (the executor sweeps first: per key,
//     or every queue for the global cap), or Close gives up; until then it
//     is queued and pending like any other task;
//   - a giving-up Close ends every task that has not started, at once;
//   - Stats (every counter, exactly), ActiveKeys and HotKeys.
func FuzzExecutor(f *testing.F) {
	// Header: workers, throughput, per-key cap, global cap. Then ops.
	f.Add([]byte{1, 1, 0, 0, 0, 0x10, 0, 0x21, 5, 5, 5, 5})
	f.Add([]byte{2, 2, 3, 0, 0, 0, 0, 1, 1, 1, 8, 9, 2, 2, 3, 3, 4, 5, 5, 5, 5, 5, 5})
	f.Add([]byte{0, 0, 2, 4, 3, 0, 1, 3, 1, 2, 3, 2, 0, 4, 0, 5, 0, 5, 0, 5, 1, 7, 0})
	f.Add([]byte{1, 3, 0, 0, 2, 0, 2, 0, 2, 1, 0, 2, 2, 0, 5, 0, 5, 1, 5, 0})
	f.Add([]byte{2, 1, 0, 0, 0, 0, 0, 1, 0, 2, 3, 0, 1, 7, 1, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 3, 2, 1, 0, 4, 1, 4, 2, 7, 0, 5, 0, 5, 0})
	f.Add([]byte{2, 0, 4, 5, 3, 1, 2, 0, 3, 2, 1, 1, 0, 0x12, 1, 6, 0, 4, 3, 6, 1, 7, 1, 6, 0, 6, 0})
	// Striped (0x80 on workers), blocking (0x80 on throughput), both;
	// aging (0x80 on the key cap), alone and striped.
	f.Add([]byte{1, 2, 0x80, 0, 0, 0, 0, 0, 1, 0, 2, 0, 6, 0, 6, 0, 1, 0, 0, 1, 5, 0, 1, 1, 5, 0, 5, 0})
	f.Add([]byte{0x80, 0, 0x83, 0, 0, 0, 0, 1, 1, 6, 0, 0, 2, 0, 4, 1, 6, 0, 0, 1, 0, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0x81, 1, 0, 0, 0, 0, 0, 1, 2, 0, 3, 0, 2, 1, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0x81, 0x82, 2, 4, 1, 0, 0, 1, 1, 0, 1, 2, 0, 1, 0, 0, 4, 2, 5, 0, 4, 0, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{1, 0x80, 0, 3, 0, 0, 0, 1, 1, 0, 3, 2, 0, 0, 1, 0, 4, 3, 5, 0, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0, 0x81, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 2, 5, 0, 7, 0, 5, 0})
	// Nesting (0x40 on workers; op 6 makes a running task call Do): a
	// nested call; one waiting for key room under Block; one refused at
	// Block's global cap; refused on held keys, down a chain; withdrawn
	// when its task's ctx ends.
	f.Add([]byte{0x40, 0, 0, 0, 1, 0, 0, 6, 0, 1, 0, 5, 0, 5, 0})
	f.Add([]byte{0x41, 0x80, 2, 0, 0, 1, 0, 0, 1, 0, 1, 0, 0, 6, 1, 1, 0, 5, 0, 5, 0, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0x42, 0x80, 0, 3, 1, 0, 0, 1, 1, 0, 1, 2, 0, 6, 0, 2, 0, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0x41, 0, 0, 0, 3, 0, 0, 1, 6, 0, 1, 0, 6, 0, 2, 0, 6, 0, 0, 0, 5, 0, 5, 0})
	f.Add([]byte{0x40, 0, 0, 0, 1, 0, 0, 0, 1, 0, 6, 0, 1, 0, 4, 0, 5, 0, 5, 0})
	// Every nested kind (0x80 on the global cap): a nested DoShared; a
	// nested DoMany; one on a held key; one behind a DoMany, on its second
	// key, that waits for the calling task's key.
	f.Add([]byte{0x41, 0, 0, 0x80, 1, 0, 0, 6, 0, 1, 0, 1, 5, 0, 5, 0})
	f.Add([]byte{0x41, 0, 0, 0x80, 1, 0, 0, 6, 0, 1, 0, 2, 2, 5, 0, 5, 0})
	f.Add([]byte{0x40, 0, 0, 0x80, 1, 0, 0, 6, 0, 1, 0, 2, 0, 5, 0})
	f.Add([]byte{0x40, 0, 0, 0x80, 1, 0, 0, 1, 1, 0, 3, 1, 0, 0, 6, 1, 2, 0, 2, 0, 5, 0, 5, 0, 5, 0})
	// Exiting (0x40 on throughput with 0x80 on the global cap; behavior
	// 3 calls runtime.Goexit, 0x20 on a Submit's behavior makes it a Go):
	// an inline Do that exits (its goroutine with it); a queued Do that
	// exits on a worker (ErrGoexit) and the key's next task; a Submit that
	// exits and one behind it; Go tasks that fail, panic and exit; Go
	// tasks canceled while queued (lazily) and doomed by a giving-up Close; a
	// nested Do inline on its task's goroutine that exits and takes its
	// task (an inline Do) with it; a nested Do that exits on a worker;
	// under Block a Go that waits for key room; striped, a DoMany whose
	// keys share the stripe, inline, that exits.
	f.Add([]byte{1, 0x40, 0, 0x80, 1, 0, 3, 5, 0})
	f.Add([]byte{0, 0x40, 0, 0x80, 1, 0, 0, 1, 0, 3, 5, 0, 5, 0})
	f.Add([]byte{0, 0x40, 0, 0x80, 0, 0, 3, 0, 0, 0, 5, 0, 5, 0})
	f.Add([]byte{1, 0x40, 0, 0x80, 0, 0, 0x21, 0, 0, 0x22, 0, 1, 0x23, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0, 0x40, 0, 0x80, 0, 0, 0x20, 0, 0, 0x20, 0, 0, 0x20, 4, 1, 7, 1, 5, 0})
	f.Add([]byte{0x41, 0x40, 0, 0x80, 1, 0, 0, 6, 0, 1, 3, 0, 5, 0})
	f.Add([]byte{0x41, 0x40, 0, 0x80, 0, 1, 0, 1, 0, 0, 6, 1, 1, 3, 0, 5, 0, 5, 0})
	f.Add([]byte{0, 0xc0, 2, 0x80, 0, 0, 0x20, 0, 0, 0x20, 0, 0, 0x23, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0x80, 0x40, 0, 0x80, 3, 0, 3, 1, 5, 0})
	// More exiting: under Block a Do admitted from the global waiting room
	// that runs inline and exits; under MaxQueueDelay a Submit that exits
	// once its key's queue has aged; a Go whose nested Do exits inline on
	// its worker, ending the Go with ErrGoexit; a task that exits after a
	// giving-up Close doomed the one behind it; a shared group, both
	// inline, whose first member exits.
	f.Add([]byte{2, 0xc0, 0, 0x83, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 3, 5, 0, 5, 1})
	f.Add([]byte{1, 0x40, 0x80, 0x80, 0, 0, 3, 0, 0, 0, 6, 5, 0, 5, 0})
	f.Add([]byte{0x41, 0x40, 0, 0x80, 0, 0, 0x20, 6, 0, 1, 3, 0, 5, 0})
	f.Add([]byte{1, 0x40, 0, 0x80, 0, 0, 3, 0, 0, 0, 7, 1, 5, 0})
	f.Add([]byte{2, 0x40, 0, 0x80, 2, 0, 3, 2, 0, 0, 5, 0, 5, 0})
	// Wait-for (0x08 on the global cap, without 0x10 and 0x20, and an
	// extension byte with 0x01; nesting on): rings of 2 and 3 tasks, one
	// of whose nested Dos is refused with ErrDeadlock, after which the
	// others go ahead once its task returns; a Task.Wait on a task that
	// waits for the waiter (refused), and the other order, where the Do
	// that closes the cycle waits on the caller's own Task (refused); a
	// DoMany from outside holding one key while it waits for the other;
	// a nested DoMany; chains a -> b -> c, a wait behind queued tasks and a
	// Wait on a task in a chain, none refused; under Block a wait for key
	// room in the cycle; a nested DoShared queued behind a shared call that
	// waits for a worker, which joins the shared group (not refused); under
	// Block, waits for room on a key two shared calls hold, one of them
	// blocked on the caller: a DoShared, not refused, which joins once the
	// other returns; a Do, refused once it is in; and, with both shared
	// calls blocked, a Do whose cycle the executor cannot see (skipped).
	f.Add([]byte{0x40, 0, 0, 0x08, 1, 0, 0, 0, 0, 1, 0, 6, 0, 1, 0, 0, 6, 0, 0, 0, 0, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0x41, 0, 0, 0x08, 1, 0, 0, 0, 0, 1, 0, 0, 2, 0, 6, 0, 1, 0, 0, 6, 0, 2, 0, 0, 6, 0, 0, 0, 0, 5, 0, 5, 0, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0x40, 0, 0, 0x08, 1, 0, 0, 0, 0, 1, 0, 6, 0, 1, 0, 0, 6, 0, 0, 0, 3, 0, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0x40, 0, 0, 0x08, 1, 0, 0, 0, 0, 1, 0, 6, 1, 0, 0, 3, 0, 6, 0, 1, 0, 0, 5, 0, 5, 0})
	f.Add([]byte{0x41, 0, 0, 0x08, 1, 0, 1, 0, 3, 0, 0, 1, 0, 2, 0, 6, 1, 0, 0, 0, 6, 0, 2, 0, 0, 5, 0, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0x41, 0, 0, 0x08, 1, 0, 0, 0, 0, 1, 0, 6, 0, 1, 0, 2, 2, 6, 0, 0, 0, 0, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0x41, 0, 0, 0x08, 1, 0, 0, 0, 0, 1, 0, 0, 2, 0, 6, 0, 1, 0, 0, 6, 0, 2, 0, 0, 5, 0, 5, 0, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0x41, 0, 0, 0x08, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 2, 0, 6, 1, 0, 0, 0, 6, 1, 2, 0, 3, 2, 5, 0, 5, 0, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0x41, 0x80, 2, 0x08, 1, 0, 0, 0, 0, 1, 0, 0, 1, 0, 6, 0, 1, 0, 0, 6, 0, 0, 0, 0, 5, 0, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0x40, 0, 0, 0x08, 1, 0, 0, 0, 2, 1, 0, 6, 1, 0, 0, 0, 0, 2, 0, 2, 1, 0, 6, 0, 1, 0, 1, 5, 0, 5, 0, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0x41, 0x80, 2, 0x08, 1, 0, 0, 0, 2, 1, 0, 6, 1, 0, 0, 0, 2, 1, 0, 6, 0, 1, 0, 1, 5, 1, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0x41, 0x80, 2, 0x08, 1, 0, 0, 0, 2, 1, 0, 6, 1, 0, 0, 0, 2, 1, 0, 6, 0, 1, 0, 0, 5, 1, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0x41, 0x80, 2, 0x08, 1, 0, 0, 0, 2, 1, 0, 6, 1, 0, 0, 0, 2, 1, 0, 6, 1, 0, 0, 0, 6, 0, 1, 0, 0, 5, 0, 5, 0, 5, 0, 5, 0, 5, 0})
	// Batching (the extension byte's 0x02; 0x08 more: WithMaxBatch(3)):
	// five messages behind a busy key in batches of 3 and 2; a Submit
	// between messages splits them; per-message failure, a whole batch's
	// error, a panic; a message canceled while queued is left out; with
	// WithThroughput(3) a message queued behind a detached batch waits for
	// the next; striped, one run of messages of two keys, one call per key;
	// striped and exiting, a Goexit in a run's first call ends the later
	// one's messages unrun; Batcher.Do alone inline, then queued with
	// others; under Block a message waiting for key room joins the batch;
	// a giving-up Close with messages queued; with WithThroughput(3) and
	// WithMaxBatch(2), runs of messages queued together are cut together
	// (a batch ends at a run only once it holds 64 tasks).
	f.Add([]byte{0, 0, 0, 0x08, 0x0a, 0, 0, 0, 0x08, 0, 0, 0x08, 0, 0, 0x08, 0, 0, 0x08, 0, 0, 0x08, 0, 0, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0, 0, 0, 0x08, 0x0a, 0, 0, 0, 0x08, 0, 0, 0x08, 0, 0, 0, 0, 0, 0x08, 0, 0, 5, 0, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0, 0, 0, 0x08, 0x0a, 0, 0, 0, 0x08, 0, 0, 0x08, 0, 0x40, 0x08, 0, 0, 0x08, 0, 1, 0x08, 0, 0x40, 0x08, 0, 0, 0x08, 0, 2, 0x08, 0, 0, 5, 0, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0, 0, 0, 0x08, 0x0a, 0, 0, 0, 0x08, 0, 0, 0x08, 0, 0, 0x08, 0, 0, 4, 2, 5, 0, 5, 0})
	f.Add([]byte{0, 2, 0, 0x08, 0x0a, 0, 1, 0, 0, 0, 0, 0x08, 0, 0, 5, 0, 0x08, 0, 0, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0x80, 0, 0, 0x08, 0x0a, 0, 0, 0, 0x08, 1, 0, 0x08, 1, 0, 0x08, 0, 0, 0x08, 2, 0, 5, 0, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0x80, 0x40, 0, 0x88, 0x0a, 0, 0, 0, 0x08, 1, 3, 0x08, 1, 0, 0x08, 0, 0, 0x08, 2, 0, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{1, 0, 0, 0x08, 0x0a, 0x09, 0, 0, 5, 0, 0, 0, 0, 0x09, 0, 0, 0x09, 0, 0x40, 0x08, 0, 0, 5, 0, 5, 0})
	f.Add([]byte{1, 0x80, 2, 0x08, 0x0a, 0, 0, 0, 0x08, 0, 0, 0x08, 0, 0, 5, 0, 5, 0})
	f.Add([]byte{1, 0, 0, 0x08, 0x0a, 0, 0, 0, 0x08, 0, 0, 0x08, 0, 0, 7, 1, 5, 0})
	f.Add([]byte{0, 2, 0, 0x08, 0x06, 0x08, 0, 0, 0x08, 0, 0, 0x08, 0, 0, 0x08, 0, 0, 5, 0, 0x08, 0, 0, 5, 0, 5, 0, 5, 0})
	// Both (0x03 and WithMaxBatch(3)): a nested call from inside a batch's
	// fn; a cycle through a batch blocked in a nested Do (refused); a Wait
	// on a running message whose batch then calls into the waiter's key
	// (refused); a nested Batcher.Do alone inline, then riding in a batch.
	f.Add([]byte{0x41, 0, 0, 0x08, 0x0b, 0, 0, 0, 0x08, 0, 0, 5, 0, 6, 0, 1, 0, 0, 5, 0, 5, 0})
	f.Add([]byte{0x41, 0, 0, 0x08, 0x0b, 0, 1, 0, 0x08, 0, 0, 6, 1, 1, 0, 0, 6, 0, 0, 0, 0, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0x41, 0, 0, 0x08, 0x0b, 0, 1, 0, 0x08, 0, 0, 6, 0, 0, 0, 3, 1, 6, 0, 1, 0, 0, 5, 0, 5, 0})
	f.Add([]byte{0x41, 0, 0, 0x08, 0x0b, 0, 0, 0, 6, 0, 1, 0x40, 4, 5, 0, 0, 1, 0, 0x08, 1, 0, 6, 0, 1, 0, 4, 5, 1, 5, 0, 5, 0})
	// Lazy cancellation: a Submit canceled while queued ends only when
	// noticed; at a key cap (FailFast) the key is swept before it refuses;
	// at the global cap every queue is; under Block a Go canceled while
	// queued is swept before a Go would wait for key room; a Wait on a
	// Submit whose ctx ended withdraws it; a task canceled behind a running
	// one is passed over when the worker reaches it. And a giving-up Close
	// with tasks taken into a drive loop's batch behind a running one
	// (WithThroughput(3)): they end with ErrClosed at once.
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 1, 5, 0, 5, 0})
	f.Add([]byte{0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 4, 1, 0, 0, 0, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 1, 0, 1, 0, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0, 0xc0, 2, 0x80, 0, 0, 0x20, 0, 0, 0x20, 4, 1, 0, 0, 0x20, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0x41, 0, 0, 0x08, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 4, 2, 6, 0, 0, 0, 3, 2, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 7, 1, 5, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 400 {
			data = data[:400] // keep one input fast
		}
		synctest.Test(t, func(t *testing.T) { newFuzzRun(t, data).run() })
	})
}

const fuzzKeys = 3

// The aging mode's MaxQueueDelay, and how far one "time passes" step moves
// the clock: waits are multiples of the tick, never equal to the limit.
const (
	fuzzAge  = 10 * time.Millisecond
	fuzzTick = 6 * time.Millisecond
)

type fuzzTask struct {
	id       int
	kind     string
	keys     []int
	qs       []int // the model's queues the task is in (one per mailbox)
	shared   bool
	park     int           // where it waits for room, if it does: parkGlobal, parkKey
	accepted bool          // counted in Submitted and queued
	at       time.Duration // when it was accepted, on the bubble's clock since t0
	behavior int           // 0 ok, 1 error, 2 panic, 3 runtime.Goexit (exiting mode)
	gate     chan struct{}
	cancel   context.CancelFunc
	endless  bool // its ctx never ends (a Go or Submit: nothing can withdraw it)

	started  bool // the driver saw it start
	released bool // the driver opened its gate
	ended    bool // the model says it has ended
	doomed   bool // not started when Close gave up: ended with ErrClosed at once
	want     error
	alt      error // also acceptable (a nested call's fn's ctx may end first)

	// Lazy cancellation: the ctx of a queued Go, Submit or Batcher message
	// nobody waits on ended. The executor may end it (ctx's error) at any
	// time, and must by the time it reaches the head of its queue with a
	// worker free, a Wait on it is made, a cap sweeps its queue, or Close
	// gives up; until then it is queued like any other.
	lazy    bool
	noticed bool // lazy, and the driver saw it end this step (settle ends it)

	task   *executor.Task  // Submit
	result chan error      // blocking calls
	got    bool            // the result was collected
	ran    *fuzzStartFlags // set by the body

	// Exiting mode. Goroutines: the one fn ran on, and the one that made
	// the call (a blocking call's, 0 for Submit and Go); equal, fn ran
	// inline.
	ranOn, callerG uint64
	mustQueue      bool       // arrived behind others, or waited for room: never inline
	goRet          chan error // Go called aside (Block): what Go returned
	goReturned     bool       // and it was read
	handled        []error    // Go: the failures the error handler was handed for it

	// Nesting mode.
	nest        chan *fuzzTask  // nested calls for the running body to make
	outer       *fuzzTask       // a nested call's task: whose fn made it
	inner       *fuzzTask       // the nested call the body is in, until its result is read
	trigger     context.Context // a nested call's: its ctx ends when this does
	ctxCanceled bool            // the ctx fn got has ended (its caller's, or an outer one's)

	// Wait-for mode: a nested Task.Wait's task, what it waits for.
	waitOn *fuzzTask

	// Batching mode.
	msg     bool        // a Batcher message (Batcher.Submit, Batcher.Do)
	msgFail bool        // fails itself (BatchErrors) in a batch whose first message has behavior 0
	lead    *fuzzTask   // the first message of the BatchFunc call it ran in (itself, if it led)
	batch   []*fuzzTask // the messages of the call it led, in order
	claimed bool        // taken into a run of its group whose call for its key has not come yet (striped)
}

// Waiting rooms of a blocking executor.
const (
	parkGlobal = 1 + iota // for WithMaxPending room, executor-wide
	parkKey               // for WithMaxQueuePerKey room on its key
)

type fuzzStartFlags struct {
	mu      sync.Mutex
	started map[int]int    // task id -> times started
	ranOn   map[int]uint64 // task id -> the goroutine its fn ran on
	caller  map[int]uint64 // task id -> the goroutine that made its blocking call
	calls   []fuzzCall     // BatchFunc calls since the last step, in order
}

// fuzzCall is one call of the Batcher's fn: its key and its messages.
type fuzzCall struct {
	key int
	ids []int
}

// setCaller records that the calling goroutine makes task id's call.
func (f *fuzzStartFlags) setCaller(id int) {
	g := goid()
	f.mu.Lock()
	f.caller[id] = g
	f.mu.Unlock()
}

// goid is the calling goroutine's id, from its stack trace's header.
func goid() uint64 {
	var buf [64]byte
	b := bytes.TrimPrefix(buf[:runtime.Stack(buf[:], false)], []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		panic("goid: " + err.Error())
	}
	return id
}

// errGone is the result of a call that never returned: fn ran on the
// calling goroutine and called runtime.Goexit, which ended that goroutine.
var errGone = errors.New("fuzz: the call never returned (its goroutine exited)")

// fuzzHandler records what the error handler is handed.
type fuzzHandler struct {
	mu   sync.Mutex
	recs []fuzzHandled
}

type fuzzHandled struct {
	key any
	err error
}

func (h *fuzzHandler) handle(key any, err error) {
	h.mu.Lock()
	h.recs = append(h.recs, fuzzHandled{key, err})
	h.mu.Unlock()
}

type fuzzRun struct {
	t    *testing.T
	data []byte
	pos  int

	workers, throughput, keyCap, globalCap int
	striped, block, nesting, nestAll       bool
	exiting                                bool // behavior 3 (Goexit) and Go
	waitFor, batching                      bool // the extension byte's modes
	maxBatch                               int  // WithMaxBatch, batching
	handler                                fuzzHandler
	age                                    time.Duration // MaxQueueDelay's d; 0: not aging
	t0                                     time.Time     // the bubble's clock at the start

	e       *executor.Executor[int]
	batcher *executor.Batcher[int, *fuzzTask]
	flags   *fuzzStartFlags
	drv     [fuzzKeys]fuzzDrive // batching: each queue's drive loop
	tasks   []*fuzzTask
	queue   [fuzzKeys][]*fuzzTask // accepted, not ended, FIFO (striped: all in queue 0)

	// Calls waiting for room (blocking mode), FIFO.
	parkedG []*fuzzTask
	// entering: a call let in from parkedG is taking its place in its
	// key's queue; nobody else is let in meanwhile (see made).
	entering bool
	parkedK  [fuzzKeys][]*fuzzTask

	trace []string // what each step did, for failure reports

	closing, gaveUp bool
	closes          []fuzzClose

	want executor.Stats // expected counters (ActiveKeys, Queued, Running computed)
}

type fuzzClose struct {
	giveUp bool
	want   error // ctx's error if it gave up on live tasks, else nil
	result chan error
	got    bool
}

func newFuzzRun(t *testing.T, data []byte) *fuzzRun {
	r := &fuzzRun{t: t, data: data, flags: &fuzzStartFlags{
		started: map[int]int{}, ranOn: map[int]uint64{}, caller: map[int]uint64{}}}
	b := r.next()
	r.workers, r.striped, r.nesting = 1+int(b%3), b&0x80 != 0, b&0x40 != 0
	b = r.next()
	r.throughput, r.block = 1+int(b%3), b&0x80 != 0
	exiting := b&0x40 != 0
	b = r.next()
	if c := b % 5; c > 1 {
		r.keyCap = int(c)
	}
	if b&0x80 != 0 && !r.block {
		r.age = fuzzAge
	}
	b = r.next()
	if c := b % 8; c > 2 {
		r.globalCap = int(c)
	}
	r.nestAll = r.nesting && b&0x80 != 0
	r.exiting = exiting && b&0x80 != 0
	if b&0x38 == 0x08 {
		x := r.next()
		r.waitFor = r.nesting && x&0x01 != 0
		r.batching = x&0x02 != 0
		r.maxBatch = 1 + int(x>>2&3)
		if r.batching && r.block {
			// A call handed global room enqueues itself while the drive
			// loop that gave the room back goes on: which of the two
			// comes first decides the batch, and is not for the model to
			// say. Block's global room is fuzzed without batches.
			r.globalCap = 0
		}
	}
	return r
}

// nestKinds is how many kinds of nested call the wait-for mode draws
// from: Do, DoShared, DoMany, Task.Wait and, batching, Batcher.Do.
func (r *fuzzRun) nestKinds() byte {
	if r.batching {
		return 5
	}
	return 4
}

// msgBehavior decodes a message's behavior byte: its behavior (as for any
// task, from the low bits) and whether it fails itself (0x40).
func (r *fuzzRun) msgBehavior(b byte) (int, bool) {
	return int(b&0x0f) % int(r.behaviors()), b&0x40 != 0
}

// behaviors is how many task behaviors the run draws from.
func (r *fuzzRun) behaviors() byte {
	if r.exiting {
		return 4
	}
	return 3
}

func (r *fuzzRun) next() byte {
	if r.pos >= len(r.data) {
		return 0
	}
	b := r.data[r.pos]
	r.pos++
	return b
}

func (r *fuzzRun) run() {
	t := r.t
	opts := []executor.Option{executor.WithWorkers(r.workers), executor.WithThroughput(r.throughput)}
	if r.keyCap > 0 {
		opts = append(opts, executor.WithMaxQueuePerKey(r.keyCap))
	}
	if r.globalCap > 0 {
		opts = append(opts, executor.WithMaxPending(r.globalCap))
	}
	if r.striped {
		opts = append(opts, executor.WithStripes(1))
	}
	if r.block {
		opts = append(opts, executor.WithPolicy(backpressure.Block()))
	}
	if r.age > 0 {
		opts = append(opts, executor.WithPolicy(backpressure.MaxQueueDelay(r.age)))
	}
	if r.exiting {
		opts = append(opts, executor.WithErrorHandler(r.handler.handle))
	}
	r.t0 = time.Now()
	e, err := executor.New[int](opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	// The model lets a waiter in as soon as a ctx ahead of it ends, and
	// has a cap drop every ended task before it refuses; the delay before
	// a wait watches (TestContextWaitingRoomWatchesOnce) and the limit on
	// sweeps of large scopes (TestCapSweepLimited) are not part of it.
	executor.WatchAtOnce(e)
	executor.SweepAtOnce(e)
	r.e = e
	if r.batching {
		r.batcher, err = executor.NewBatcher(e, r.batchFn, executor.WithMaxBatch(r.maxBatch))
		if err != nil {
			t.Fatalf("NewBatcher: %v", err)
		}
	}
	for step := 0; r.pos < len(r.data); step++ {
		op := r.next()
		desc := r.apply(op)
		r.trace = append(r.trace, desc)
		synctest.Wait()
		r.settle()
		r.check(fmt.Sprintf("step %d (%s)", step, desc))
		if t.Failed() {
			r.dump()
			return
		}
	}
	// Wind down: close (draining) and release everything.
	if !r.closing {
		r.close(false)
	}
	for round := 0; ; round++ {
		synctest.Wait()
		r.settle()
		r.check(fmt.Sprintf("wind-down round %d", round))
		if t.Failed() {
			r.dump()
			return
		}
		if len(r.running()) == 0 {
			break
		}
		idle := r.idle()
		if len(idle) == 0 {
			t.Errorf("wind-down round %d: tasks run, all in nested calls that never return", round)
			r.dump()
			return
		}
		for _, ft := range idle {
			r.release(ft)
		}
	}
	for i, c := range r.closes {
		if !c.got {
			t.Errorf("Close #%d: still blocked with nothing pending; want it returned", i)
		}
	}
	// A Close that gave up may have returned while tasks still ran; once
	// nothing runs, another returns nil.
	if err := e.Close(context.Background()); err != nil {
		t.Errorf("Close once nothing runs: got %v; want nil", err)
	}
	synctest.Wait()
	r.settle()
	r.check("after the last Close")
	for _, ft := range r.tasks {
		if !ft.ended || (!ft.got && (ft.result != nil || ft.kind == "Go")) {
			t.Errorf("task %d (%s): ended %v, result collected %v; want both", ft.id, ft.kind, ft.ended, ft.got)
		}
	}
	if s := e.Stats(); s.ActiveKeys != 0 || s.Queued != 0 || s.Running != 0 || !balanced(s) {
		t.Errorf("final Stats: got %+v; want idle and balanced", s)
	}
}

// apply performs one operation and updates the model.
func (r *fuzzRun) apply(op byte) string {
	switch op % 8 {
	case 0:
		if r.batching && op&0x08 != 0 {
			return r.submit("BSubmit")
		}
		return r.submit("Submit")
	case 1:
		if r.batching && op&0x08 != 0 {
			return r.submit("BDo")
		}
		return r.submit("Do")
	case 2:
		return r.submit("DoShared")
	case 3:
		return r.submit("DoMany")
	case 4:
		// Cancel a task's ctx (queued: withdrawn; running: no effect;
		// waiting for room: gives up, never accepted).
		live := append(r.live(), r.parked()...)
		if r.waitFor {
			live = append(live, r.waiting()...)
		}
		live = slices.DeleteFunc(live, func(ft *fuzzTask) bool { return ft.endless })
		if len(live) == 0 {
			return "cancel (none)"
		}
		ft := live[int(r.next())%len(live)]
		ft.cancel()
		r.ctxEnded(ft)
		return fmt.Sprintf("cancel %d", ft.id)
	case 5, 6:
		if op%8 == 6 && r.nesting && (r.age == 0 || r.next()%2 == 0) {
			return r.nestCall()
		}
		if op%8 == 6 && r.age > 0 {
			time.Sleep(fuzzTick) // the bubble's clock runs once every goroutine waits
			return fmt.Sprintf("time passes (%v)", fuzzTick)
		}
		running := r.idle()
		if len(running) == 0 {
			return "release (none)"
		}
		ft := running[int(r.next())%len(running)]
		r.release(ft)
		return fmt.Sprintf("release %d", ft.id)
	default:
		giveUp := r.next()%2 == 1
		r.close(giveUp)
		return fmt.Sprintf("Close(giveUp=%v)", giveUp)
	}
}

func (r *fuzzRun) submit(kind string) string {
	k := int(r.next() % fuzzKeys)
	b := r.next()
	if kind == "Submit" && r.exiting && b&0x20 != 0 {
		kind = "Go"
	}
	ft := &fuzzTask{id: len(r.tasks), kind: kind, keys: []int{k}, behavior: int(b % r.behaviors()),
		gate: make(chan struct{}), nest: make(chan *fuzzTask, 1), ran: r.flags}
	if kind == "BSubmit" || kind == "BDo" {
		ft.msg = true
		ft.behavior, ft.msgFail = r.msgBehavior(b)
	}
	if kind == "DoMany" {
		ft.keys = dedupInts([]int{k, int(r.next() % fuzzKeys)})
		if r.block && r.keyCap > 0 {
			// A DoMany at a key's cap polls for room rather than waiting
			// in line: its turn is not for the model to say.
			ft.kind, ft.keys = "Do", ft.keys[:1]
		}
	}
	if r.age > 0 && (kind == "DoMany" || kind == "DoShared") {
		// A granted task that waits for its other mailboxes or for a
		// slot is no longer queued, so its age does not count; when that
		// happens is not for the model to say.
		ft.kind, ft.keys = "Do", ft.keys[:1]
	}
	kind = ft.kind
	ft.shared = kind == "DoShared"
	for _, k := range ft.keys {
		if q := r.q(k); !slices.Contains(ft.qs, q) {
			ft.qs = append(ft.qs, q)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	ft.cancel = cancel
	preCanceled := b&0x10 != 0
	if preCanceled {
		cancel()
	} else if (kind == "Go" || kind == "Submit") && b&0x40 != 0 {
		// A ctx that never ends (context.Background(), or one without
		// cancel): nothing withdraws the task. It takes the same queue as
		// every other task.
		ctx, ft.endless = context.WithoutCancel(ctx), true
		if b&0x20 != 0 {
			ctx = context.Background()
		}
	}
	fn := r.body(ft)
	// What the model expects of admission.
	var refuse error
	switch {
	case preCanceled:
		refuse = context.Canceled
	case r.closing:
		refuse = executor.ErrClosed
	case r.block:
		// Waits for room instead: see arrive.
	case r.globalFull() && (!r.sweep(allQueues) || r.globalFull()):
		// (Before the cap refuses it, every queue is swept once.)
		refuse = executor.ErrBusy
	case slices.ContainsFunc(ft.qs, r.keyFull) && (!r.sweep(ft.qs) || slices.ContainsFunc(ft.qs, r.keyFull)):
		// Its key is at its cap, or its queue too old, even once the
		// queues of its keys are swept.
		refuse = executor.ErrBusy
	}
	r.tasks = append(r.tasks, ft)
	if (kind == "Submit" || kind == "Go" || kind == "BSubmit") && !r.block {
		var err error
		switch kind {
		case "Go":
			err = r.e.Go(ctx, k, fn)
		case "BSubmit":
			ft.task, err = r.batcher.Submit(ctx, k, ft)
		default:
			ft.task, err = r.e.Submit(ctx, k, fn)
		}
		if refuse != nil {
			if !errors.Is(err, refuse) {
				r.t.Errorf("task %d %s: got %v; want %v", ft.id, kind, err, refuse)
			}
			r.refused(ft, refuse)
			ft.got = true // its result was the call's error
			return fmt.Sprintf("%s %d on %d refused", kind, ft.id, k)
		}
		if err != nil {
			r.t.Errorf("task %d %s: got %v; want it accepted", ft.id, kind, err)
			ft.ended, ft.got = true, true
			return kind + " failed"
		}
	} else if kind == "Go" {
		// A blocking Go may wait for room: call it aside. What it returns
		// says only whether it was accepted.
		ft.goRet = make(chan error, 1)
		go func() { ft.goRet <- r.e.Go(ctx, k, fn) }()
		if refuse != nil {
			r.refused(ft, refuse)
			return fmt.Sprintf("Go %d on %d refused", ft.id, k)
		}
	} else {
		ft.result = make(chan error, 1)
		go func() {
			if kind != "Submit" && kind != "BSubmit" {
				r.flags.setCaller(ft.id) // fn may run on this goroutine
			}
			returned := false
			defer func() {
				if !returned {
					ft.result <- errGone // fn ran here and called runtime.Goexit
				}
			}()
			var err error
			switch kind {
			case "Submit":
				// A blocking Submit may wait for room: call it aside,
				// and report its Task's result.
				var task *executor.Task
				task, err = r.e.Submit(ctx, k, fn)
				if err == nil {
					err = task.Wait(context.Background())
				}
			case "BSubmit":
				var task *executor.Task
				task, err = r.batcher.Submit(ctx, k, ft)
				if err == nil {
					err = task.Wait(context.Background())
				}
			case "BDo":
				err = r.batcher.Do(ctx, k, ft)
			case "Do":
				err = r.e.Do(ctx, k, fn)
			case "DoShared":
				err = r.e.DoShared(ctx, k, fn)
			default:
				err = r.e.DoMany(ctx, ft.keys, fn)
			}
			returned = true
			ft.result <- err
		}()
		if refuse != nil {
			ft.want = refuse
			r.refused(ft, refuse)
			return fmt.Sprintf("%s %d on %v refused", kind, ft.id, ft.keys)
		}
	}
	what := r.arrive(ft)
	ft.mustQueue = mustQueue(r, ft)
	return fmt.Sprintf("%s %d on %v behavior %d%s", kind, ft.id, ft.keys, ft.behavior, what)
}

// body is ft's fn: it records its start, then makes the nested calls it
// is given until its gate opens, and ends as ft.behavior says.
func (r *fuzzRun) body(ft *fuzzTask) func(context.Context) error {
	return func(ctx context.Context) error {
		g := goid()
		r.flags.mu.Lock()
		r.flags.started[ft.id]++
		r.flags.ranOn[ft.id] = g
		r.flags.mu.Unlock()
		for {
			select {
			case <-ft.gate:
				switch ft.behavior {
				case 1:
					return errTask
				case 2:
					panic(ft.id)
				case 3:
					runtime.Goexit()
				}
				return nil
			case in := <-ft.nest:
				r.nestedCall(ctx, in)
			}
		}
	}
}

// errMsg is the error of a message that fails itself (msgFail).
var errMsg = errors.New("fuzz: message failed")

// batchFn is the Batcher's fn. It records the call, then serves its first
// message as body serves a task: its gate ends the call, as that message's
// behavior says (0: each message succeeds or fails itself, through
// BatchErrors; 1: the whole batch fails; 2: it panics; 3: it calls
// runtime.Goexit), and its nest channel makes nested calls with the
// batch's ctx.
func (r *fuzzRun) batchFn(ctx context.Context, key int, msgs []*fuzzTask) error {
	g := goid()
	ids := make([]int, len(msgs))
	r.flags.mu.Lock()
	for i, m := range msgs {
		ids[i] = m.id
		r.flags.started[m.id]++
		r.flags.ranOn[m.id] = g
	}
	r.flags.calls = append(r.flags.calls, fuzzCall{key: key, ids: ids})
	r.flags.mu.Unlock()
	lead := msgs[0]
	for {
		select {
		case <-lead.gate:
			switch lead.behavior {
			case 1:
				return errTask
			case 2:
				panic(lead.id)
			case 3:
				runtime.Goexit()
			}
			var errs executor.BatchErrors
			for i, m := range msgs {
				if m.msgFail {
					if errs == nil {
						errs = make(executor.BatchErrors, len(msgs))
					}
					errs[i] = errMsg
				}
			}
			if errs != nil {
				return errs
			}
			return nil
		case in := <-lead.nest:
			r.nestedCall(ctx, in)
		}
	}
}

// nestedCall makes the nested call in and sends its result; if in's fn
// runs inline, on this goroutine, and calls runtime.Goexit, the call never
// returns and the fn making it ends with it.
func (r *fuzzRun) nestedCall(ctx context.Context, in *fuzzTask) {
	r.flags.setCaller(in.id)
	returned := false
	defer func() {
		if !returned {
			in.result <- errGone
		}
	}()
	err := r.nested(ctx, in)
	returned = true
	in.result <- err
}

// nested makes the nested call in with fn's ctx, which it can end early.
func (r *fuzzRun) nested(ctx context.Context, in *fuzzTask) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(in.trigger, cancel)()
	switch in.kind {
	case "nested DoShared":
		return r.e.DoShared(ctx, in.keys[0], r.body(in))
	case "nested DoMany":
		return r.e.DoMany(ctx, in.keys, r.body(in))
	case "nested BDo":
		return r.batcher.Do(ctx, in.keys[0], in)
	case "nested Wait":
		return in.waitOn.task.Wait(ctx)
	}
	return r.e.Do(ctx, in.keys[0], r.body(in))
}

// nestCall makes a running task whose fn is idle call Do (with nestAll
// also DoShared or DoMany) on keys from inside its fn, and says what the
// model expects of it.
func (r *fuzzRun) nestCall() string {
	idle := r.idle()
	if len(idle) == 0 {
		return "nest (none)"
	}
	o := idle[int(r.next())%len(idle)]
	k := int(r.next() % fuzzKeys)
	bb := r.next()
	in := &fuzzTask{id: len(r.tasks), kind: "nested Do", keys: []int{k},
		behavior: int(bb % r.behaviors()), gate: make(chan struct{}), nest: make(chan *fuzzTask, 1),
		ran: r.flags, outer: o, result: make(chan error, 1), ctxCanceled: o.ctxCanceled}
	if r.nestAll || r.waitFor {
		kinds := byte(3)
		if r.waitFor {
			kinds = r.nestKinds()
		}
		switch r.next() % kinds {
		case 1:
			in.kind, in.shared = "nested DoShared", true
		case 2:
			in.kind, in.keys = "nested DoMany", dedupInts([]int{k, int(r.next() % fuzzKeys)})
		case 3:
			return r.nestWait(o, in, r.next())
		case 4:
			in.kind, in.msg = "nested BDo", true
			in.behavior, in.msgFail = r.msgBehavior(bb)
		}
		// As in submit: a DoMany polls at a key cap under Block, and under
		// MaxQueueDelay a granted DoMany or DoShared stops counting as
		// queued when the model cannot say.
		if (in.kind == "nested DoShared" || in.kind == "nested DoMany") &&
			(r.age > 0 || (r.block && r.keyCap > 0 && !in.shared)) {
			in.kind, in.keys, in.shared = "nested Do", in.keys[:1], false
		}
	}
	for _, k := range in.keys {
		if q := r.q(k); !slices.Contains(in.qs, q) {
			in.qs = append(in.qs, q)
		}
	}
	chainHolds := func(q int) bool {
		for x := o; x != nil; x = x.outer {
			if slices.Contains(x.qs, q) {
				return true
			}
		}
		return false
	}
	held := slices.ContainsFunc(in.qs, chainHolds)
	// Per queue, in the call's key order (the order a DoMany takes them):
	// a DoMany queued there that needs a key the chain holds (the call would
	// wait for it, and it for the chain), else a key cap or (aging) a queue
	// too old.
	perKey := func() error {
		for _, q := range in.qs {
			if slices.ContainsFunc(r.queue[q], func(t *fuzzTask) bool {
				return !t.started && len(t.qs) > 1 && slices.ContainsFunc(t.qs, chainHolds)
			}) {
				return executor.ErrReentrant
			}
			if !r.block && r.keyFull(q) {
				return executor.ErrBusy
			}
		}
		return nil
	}
	if !o.ctxCanceled && !r.closing && !held && r.sweepsFor(in.qs) &&
		(r.waitFor || r.batching || slices.ContainsFunc(in.qs, func(q int) bool { return r.waitsOnItself(o, q) })) {
		// Its admission would sweep (see sweep), which the model cannot
		// take back if the call is then not made (see nestWaits and
		// below). (Sweeping only takes waits away: a call that would not
		// wait on its own task before the sweep does not after it.)
		return fmt.Sprintf("task %d: %s on %v skipped: its admission would sweep, and it may not be made", o.id, in.kind, in.keys)
	}
	var refuse, alt error
	switch {
	case o.ctxCanceled:
		refuse = context.Canceled
	case r.closing:
		// After a giving-up Close fn's ctx ends too, but through a
		// goroutine: the call may see it or not.
		refuse = executor.ErrClosed
		if held {
			refuse = executor.ErrReentrant
		}
		if r.gaveUp {
			alt = context.Canceled
		}
	case held:
		refuse = executor.ErrReentrant
	case r.globalFull() && (!r.sweep(allQueues) || r.globalFull()):
		refuse = executor.ErrBusy // (under Block a nested call never waits for global room)
	default:
		refuse = perKey()
		if refuse == executor.ErrBusy && r.sweep(in.qs) {
			refuse = perKey() // asked again once the queues of its keys are swept
		}
	}
	if refuse == nil && !r.waitFor && !r.batching &&
		slices.ContainsFunc(in.qs, func(q int) bool { return r.waitsOnItself(o, q) }) {
		// A longer cycle of waits, through other tasks' nested calls:
		// outside the wait-for mode, not for the fuzzer (see wouldClose).
		return fmt.Sprintf("task %d: %s on %v skipped: it would wait on its own task", o.id, in.kind, in.keys)
	}
	in.trigger, in.cancel = context.WithCancel(context.Background())
	if refuse == nil && (r.waitFor || r.batching) {
		return r.nestWaits(o, in)
	}
	r.tasks = append(r.tasks, in)
	o.inner = in
	o.nest <- in
	if refuse != nil {
		r.refused(in, refuse)
		in.alt = alt
		return fmt.Sprintf("task %d: %s %d on %v refused", o.id, in.kind, in.id, in.keys)
	}
	what := r.arriveKey(in)
	in.mustQueue = mustQueue(r, in)
	return fmt.Sprintf("task %d: %s %d on %v behavior %d%s", o.id, in.kind, in.id, in.keys, in.behavior, what)
}

// nestWaits makes the nested call in, which nothing refuses before it
// would wait, in the wait-for or batching mode: it is queued (or waits
// for key room) and then refused with ErrDeadlock if its wait would close a
// cycle (see wouldClose). Outside the wait-for mode such a call is skipped.
func (r *fuzzRun) nestWaits(o, in *fuzzTask) string {
	what := r.arriveKey(in)
	cycle, seen := r.wouldClose(in, chainOf(o))
	switch {
	case cycle && !seen:
		r.unarrive(in)
		return fmt.Sprintf("task %d: %s on %v skipped: it closes a cycle the executor does not see (see wouldClose)", o.id, in.kind, in.keys)
	case cycle && !r.waitFor:
		r.unarrive(in)
		return fmt.Sprintf("task %d: %s on %v skipped: it would wait on its own task", o.id, in.kind, in.keys)
	}
	r.tasks = append(r.tasks, in)
	o.inner = in
	o.nest <- in
	if cycle {
		r.deadlocked(in)
		return fmt.Sprintf("task %d: %s %d on %v refused with ErrDeadlock", o.id, in.kind, in.id, in.keys)
	}
	in.mustQueue = mustQueue(r, in)
	return fmt.Sprintf("task %d: %s %d on %v behavior %d%s", o.id, in.kind, in.id, in.keys, in.behavior, what)
}

// nestWait makes o's fn wait, with its ctx, for the Task of a Submit (or a
// Batcher.Submit) that pick chooses: the wait-for mode's nested Task.Wait.
// Like a Do it is refused with ErrReentrant on a key o's chain holds, or
// behind a DoMany that needs one, and with ErrDeadlock if it would close a
// cycle; unlike a Do it checks nothing else, its ctx last: it returns the
// task's result once the task ends, or its ctx's error if that ends first.
func (r *fuzzRun) nestWait(o, in *fuzzTask, pick byte) string {
	var cands []*fuzzTask
	for _, ft := range r.tasks {
		if ft.task != nil {
			cands = append(cands, ft)
		}
	}
	if len(cands) == 0 || r.gaveUp {
		// After a giving-up Close, the tasks it dooms end on the drive
		// loops' schedule, which a Wait would race.
		return fmt.Sprintf("task %d: nested Wait (none)", o.id)
	}
	tg := cands[int(pick)%len(cands)]
	if tg.lazy && !tg.ended && o.ctxCanceled {
		// Its Wait's select would pick between the two ctxs at random:
		// whether it withdraws the task is not for the model to say.
		return fmt.Sprintf("task %d: nested Wait on %d skipped: both ctxs ended", o.id, tg.id)
	}
	in.kind, in.keys, in.waitOn = "nested Wait", tg.keys, tg
	in.trigger, in.cancel = context.WithCancel(context.Background())
	chain := chainOf(o)
	holds := func(q int) bool { return chainHoldsQ(chain, q) }
	ended, refuse := tg.ended, error(nil)
	switch {
	case ended:
		// Its result, at once: Wait checks nothing once the task ended.
	case slices.ContainsFunc(tg.qs, holds):
		refuse = executor.ErrReentrant
	case !tg.started && slices.ContainsFunc(r.ahead(tg, tg.qs[0]), func(t *fuzzTask) bool {
		return !t.started && len(t.qs) > 1 && slices.ContainsFunc(t.qs, holds)
	}):
		refuse = executor.ErrReentrant // queued behind a DoMany that waits for the chain
	default:
		cycle, seen := r.wouldClose(tg, chain)
		switch {
		case cycle && !seen:
			return fmt.Sprintf("task %d: nested Wait on %d skipped: it closes a cycle the executor does not see (see wouldClose)", o.id, tg.id)
		case cycle:
			refuse = executor.ErrDeadlock
		case o.ctxCanceled:
			refuse = context.Canceled
		}
	}
	r.tasks = append(r.tasks, in)
	o.inner = in
	o.nest <- in
	if ended {
		in.ended, in.want, in.alt = true, tg.want, tg.alt
		return fmt.Sprintf("task %d: nested Wait %d on ended %d", o.id, in.id, tg.id)
	}
	if refuse != nil {
		// (A Wait whose own ctx ended may or may not withdraw a lazily
		// doomed task first: either is right, as it may end any time.)
		in.ended, in.want = true, refuse
		return fmt.Sprintf("task %d: nested Wait %d on %d refused (%v)", o.id, in.id, tg.id, refuse)
	}
	if tg.lazy {
		// Wait watches the task's ctx, which has ended: it withdraws
		// the task at once and returns why it never ran.
		r.want.Canceled++
		r.end(tg, context.Canceled)
		return fmt.Sprintf("task %d: nested Wait %d on %d, whose ctx ended: withdrawn", o.id, in.id, tg.id)
	}
	return fmt.Sprintf("task %d: nested Wait %d on %d", o.id, in.id, tg.id)
}

// deadlocked ends a nested call refused with ErrDeadlock: a queued one was
// accepted and then withdrawn (canceled); one waiting for room never was.
func (r *fuzzRun) deadlocked(in *fuzzTask) {
	if in.park == 0 {
		r.want.Canceled++
	}
	r.end(in, executor.ErrDeadlock)
}

// unarrive takes back what arriveKey did for a call that is not made.
func (r *fuzzRun) unarrive(in *fuzzTask) {
	is := func(o *fuzzTask) bool { return o == in }
	if in.park == parkKey {
		r.parkedK[in.qs[0]] = slices.DeleteFunc(r.parkedK[in.qs[0]], is)
		return
	}
	r.want.Submitted--
	for _, q := range in.qs {
		r.queue[q] = slices.DeleteFunc(r.queue[q], is)
	}
	in.accepted = false
}

// chainOf is o and the tasks it is nested in: the tasks a wait of o's
// fn holds up.
func chainOf(o *fuzzTask) map[*fuzzTask]bool {
	chain := map[*fuzzTask]bool{}
	for x := o; x != nil; x = x.outer {
		chain[x] = true
	}
	return chain
}

// chainHoldsQ reports whether a task of chain holds queue q.
func chainHoldsQ(chain map[*fuzzTask]bool, q int) bool {
	for x := range chain {
		if slices.Contains(x.qs, q) {
			return true
		}
	}
	return false
}

// ahead lists the live tasks ahead of ft in queue q.
func (r *fuzzRun) ahead(ft *fuzzTask, q int) []*fuzzTask {
	i := slices.Index(r.queue[q], ft)
	if i < 0 {
		return nil
	}
	return r.queue[q][:i]
}

// The wait-for graph. A task waits for:
//
//   - nothing if it runs and is not blocked in a nested call (it will
//     return once released); for its nested call's task (or, for a nested
//     Wait, the task waited for) if it is; a message riding in a batch
//     waits as the batch does (its first message), and one that ran in a
//     call before its group's run's last as that run's running call does;
//   - if queued (or taken into its drive loop's batch, or claimed by its
//     group's run), for every task ahead of it in each of its queues, but
//     for a shared task only for the exclusive ones (it joins the shared
//     ones);
//   - if waiting for key room, for room: for all the tasks of the key's
//     queue together, since any one of them leaving lets it in (once in,
//     it is queued, and its wait is checked again then, as the executor
//     checks it again);
//   - for nothing if it waits for global room (nested calls never do) or
//     has ended.
//
// A wait closes a cycle when what it waits for reaches, through these
// edges, the task making it or one that task is nested in: every one of
// those waits for it. A task reaches them if one of the tasks it waits for
// does, but one waiting for room only if all of the key's tasks do.

// blockedOn is what task x, running, waits for: its nested call's.
func blockedOn(x *fuzzTask) []*fuzzTask {
	in := x.inner
	switch {
	case in == nil || in.ended:
		return nil
	case in.waitOn != nil:
		return []*fuzzTask{in.waitOn}
	}
	return []*fuzzTask{in}
}

// waitsOn lists what ft waits for now (see above).
func (r *fuzzRun) waitsOn(ft *fuzzTask) []*fuzzTask {
	switch {
	case ft.ended:
		return nil
	case ft.released:
		// It ran in a call that is not its group's run's last: it settles
		// once the run's last call returns (see release).
		if u := r.unitOf(ft); u != nil {
			for _, m := range u.tasks {
				if m.started && !m.released {
					return []*fuzzTask{m.lead}
				}
			}
		}
		return nil
	case ft.started && ft.lead != nil && ft.lead != ft:
		return []*fuzzTask{ft.lead}
	case ft.started:
		return blockedOn(ft)
	case ft.park != 0 || !ft.accepted:
		return nil
	}
	var out []*fuzzTask
	for _, q := range ft.qs {
		for _, o := range r.ahead(ft, q) {
			if !ft.shared || !o.shared {
				out = append(out, o)
			}
		}
	}
	return out
}

// viaBatch reports whether ft, started, runs as a message of a call of
// the BatchFunc made by a drive loop (not alone, inline, by Batcher.Do).
func (ft *fuzzTask) viaBatch() bool { return ft.msg && ft.started && !ft.inline() }

// wouldClose reports whether a wait of chain's innermost task on start (its
// nested call, just queued or waiting for room, or the task its Wait is
// on) would close a cycle: whether start waits, through the graph, for a
// task of chain. The executor decides at the moment the call would wait,
// which is now: a task that could start before the check (a nested DoMany
// on free keys, granted by a free worker) waits for nothing either way.
//
// seen is whether the executor's search sees the cycle. It counts a wait
// for room as a wait for the key's holder when one task holds the key
// exclusively, and as no wait otherwise: behind shared holders that all
// wait for the chain (a limit the package doc names) or behind a DoMany
// granted the key but not running (a fault, reported with the change that
// wrote this) it sees no cycle where the graph has one. The callers do not
// make such a wait: its tasks would wait until a ctx ends.
func (r *fuzzRun) wouldClose(start *fuzzTask, chain map[*fuzzTask]bool) (cycle, seen bool) {
	return r.stuck(start, chain, false)[start], r.stuck(start, chain, true)[start]
}

// stuck returns the tasks (of the run's, and start) that wait, through the
// graph, for a task of chain (and those tasks), the least set closed under
// the rules above; seen: with waits for room as the executor counts them.
func (r *fuzzRun) stuck(start *fuzzTask, chain map[*fuzzTask]bool, seen bool) map[*fuzzTask]bool {
	type node struct {
		ft  *fuzzTask
		on  []*fuzzTask
		all bool // stuck only if everything in on is
	}
	var nodes []node
	tasks := r.tasks
	if !slices.Contains(tasks, start) {
		tasks = append(slices.Clip(tasks), start) // a call about to be made
	}
	for _, ft := range tasks {
		switch {
		case ft.ended || chain[ft]:
		case ft.park != parkKey:
			nodes = append(nodes, node{ft: ft, on: r.waitsOn(ft)})
		case !seen:
			nodes = append(nodes, node{ft: ft, on: r.queue[ft.qs[0]], all: true})
		default:
			if q := r.queue[ft.qs[0]]; len(q) > 0 && q[0].started && !q[0].shared {
				nodes = append(nodes, node{ft: ft, on: q[:1]}) // the exclusive holder
			}
		}
	}
	out := map[*fuzzTask]bool{}
	for x := range chain {
		out[x] = true
	}
	for grew := true; grew; {
		grew = false
		for _, n := range nodes {
			if out[n.ft] || len(n.on) == 0 {
				continue
			}
			in := func(x *fuzzTask) bool { return out[x] }
			if (n.all && !slices.ContainsFunc(n.on, func(x *fuzzTask) bool { return !in(x) })) ||
				(!n.all && slices.ContainsFunc(n.on, in)) {
				out[n.ft], grew = true, true
			}
		}
	}
	return out
}

// waitsOnItself reports whether a nested call of o's on queue q would
// wait, through the tasks it would wait for, on o or a task o is nested in:
// two tasks calling into each other's keys, or a task calling into a key
// that a DoMany waiting for one of its keys is ahead on.
func (r *fuzzRun) waitsOnItself(o *fuzzTask, q int) bool {
	chain := map[*fuzzTask]bool{}
	for x := o; x != nil; x = x.outer {
		chain[x] = true
	}
	seen := map[*fuzzTask]bool{}
	var reaches func(ft *fuzzTask) bool
	reaches = func(ft *fuzzTask) bool {
		if chain[ft] {
			return true
		}
		if seen[ft] || ft.ended {
			return false
		}
		seen[ft] = true
		for _, d := range r.waitsFor(ft) {
			if reaches(d) {
				return true
			}
		}
		return false
	}
	for _, d := range append(slices.Clone(r.queue[q]), r.parkedK[q]...) {
		if reaches(d) {
			return true
		}
	}
	return false
}

// waitsFor lists, conservatively, the tasks ft cannot go on without: for a
// task in a nested call, that call; for a queued task, every task ahead of
// it in its queues; for a call waiting for key room, that key's tasks and
// the calls ahead of it.
func (r *fuzzRun) waitsFor(ft *fuzzTask) []*fuzzTask {
	switch {
	case ft.started:
		if ft.inner != nil && !ft.inner.ended {
			return []*fuzzTask{ft.inner}
		}
		return nil
	case ft.park == parkKey:
		q := ft.qs[0]
		i := slices.Index(r.parkedK[q], ft)
		return append(slices.Clone(r.queue[q]), r.parkedK[q][:max(i, 0)]...)
	case ft.park == parkGlobal:
		return nil // any reservation given back will do
	}
	var out []*fuzzTask
	for _, q := range ft.qs {
		i := slices.Index(r.queue[q], ft)
		out = append(out, r.queue[q][:max(i, 0)]...)
	}
	return out
}

// ctxEnded applies the end of ft's ctx: a call waiting for room gives up; a
// queued task is withdrawn at once if its caller waits for it (a Do, a
// Task.Wait in progress) or a call waits for room at its key, else it is
// lazily doomed (see fuzzTask.lazy); a
// running one goes on but its fn's ctx has ended, and so has that of the
// nested call it is in.
func (r *fuzzRun) ctxEnded(ft *fuzzTask) {
	switch {
	case ft.ended || ft.lazy:
	case ft.waitOn != nil:
		ft.ended, ft.want = true, context.Canceled // a nested Wait: its task is unaffected
	case ft.claimed || (ft.started && ft.viaBatch()):
		// Its call has its ctx, and the batch's fn a ctx of the batch's
		// own, not canceled by any one message's.
	case ft.park != 0:
		r.end(ft, context.Canceled)
	case !ft.started && r.unwatched(ft):
		ft.lazy = true
		// A call waiting for room at one of its keys watches the ctxs of
		// the tasks ahead of it (watchKey), and one waiting for global
		// room those of every task holding room (watchGlobal): its end
		// sweeps the keys it was seen on at once.
		for _, q := range ft.qs {
			if len(r.parkedK[q]) > 0 || len(r.parkedG) > 0 {
				r.sweep([]int{q})
			}
		}
	case !ft.started:
		r.end(ft, context.Canceled)
		r.want.Canceled++
	default:
		ft.ctxCanceled = true
		if ft.inner != nil {
			r.ctxEnded(ft.inner)
		}
	}
}

// unwatched reports whether nobody waits for ft, queued: a Go, or a Submit
// or Batcher.Submit whose Task nobody waits on (a blocking executor's
// Submit is called aside and its Task waited for at once; a nested Wait
// may be on it).
func (r *fuzzRun) unwatched(ft *fuzzTask) bool {
	switch ft.kind {
	case "Go":
	case "Submit", "BSubmit":
		if ft.result != nil {
			return false
		}
	default:
		return false
	}
	return !slices.ContainsFunc(r.waiting(), func(w *fuzzTask) bool { return w.waitOn == ft })
}

// lazyIn lists the lazily doomed tasks of queues qs that have not ended.
func (r *fuzzRun) lazyIn(qs []int) []*fuzzTask {
	var out []*fuzzTask
	for _, q := range qs {
		for _, ft := range r.queue[q] {
			if ft.lazy && !ft.ended && !slices.Contains(out, ft) {
				out = append(out, ft)
			}
		}
	}
	return out
}

// allQueues is every queue of the model.
var allQueues = func() []int {
	qs := make([]int, fuzzKeys)
	for q := range qs {
		qs[q] = q
	}
	return qs
}()

// sweep is the executor's sweep of queues qs before a cap refuses a call
// or makes it wait: every lazily doomed task there ends at once, with its
// ctx's error. It reports whether it ended any.
func (r *fuzzRun) sweep(qs []int) bool {
	swept := r.lazyIn(qs)
	for _, ft := range swept {
		if !ft.ended { // (ending one may admit a call that sweeps too)
			r.want.Canceled++
			r.end(ft, context.Canceled)
		}
	}
	return len(swept) > 0
}

// globalFull reports whether the global cap would refuse a call, or make
// it wait: every reservation is held, or (blocking) others wait ahead.
func (r *fuzzRun) globalFull() bool {
	return r.globalCap > 0 && (r.reservations() >= r.globalCap || len(r.parkedG) > 0)
}

// keyFull reports whether queue q's cap, or its age, would refuse a call
// or (blocking) make it wait.
func (r *fuzzRun) keyFull(q int) bool {
	if r.keyCap > 0 && len(r.queue[q])+len(r.parkedK[q]) >= r.keyCap {
		return true
	}
	old := r.oldestWaiting(q)
	return r.age > 0 && old != nil && time.Since(r.t0)-old.at > r.age
}

// sweepsFor reports whether admitting a call on queues qs now could
// sweep: a cap it meets would refuse it or make it wait while a lazily
// doomed task is queued where that cap sweeps.
func (r *fuzzRun) sweepsFor(qs []int) bool {
	if r.globalFull() && len(r.lazyIn(allQueues)) > 0 {
		return true
	}
	return slices.ContainsFunc(qs, func(q int) bool { return r.keyFull(q) && len(r.lazyIn([]int{q})) > 0 })
}

// idle lists the running tasks whose fn waits for the driver: not in a
// nested call (a batch's fn is its first message's).
func (r *fuzzRun) idle() []*fuzzTask {
	var out []*fuzzTask
	for _, ft := range r.running() {
		if ft.inner == nil && (ft.lead == nil || ft.lead == ft) {
			out = append(out, ft)
		}
	}
	return out
}

// waiting lists the nested Waits that wait.
func (r *fuzzRun) waiting() []*fuzzTask {
	var out []*fuzzTask
	for _, ft := range r.tasks {
		if ft.waitOn != nil && !ft.ended {
			out = append(out, ft)
		}
	}
	return out
}

// q is the model's queue for key k: its own, or in striped mode the one
// every key shares.
func (r *fuzzRun) q(k int) int {
	if r.striped {
		return 0
	}
	return k
}

// arrive admits an accepted call, or in blocking mode parks it where the
// executor must: in the global waiting room while the global cap is reached
// or others wait there (no barging), else in its key's waiting room while
// the key is full or others wait there, else it is accepted.
func (r *fuzzRun) arrive(ft *fuzzTask) string {
	if r.block && r.globalFull() && (!r.sweep(allQueues) || r.globalFull()) {
		ft.park = parkGlobal
		r.parkedG = append(r.parkedG, ft)
		return " (waits for global room)"
	}
	return r.arriveKey(ft)
}

// arriveKey is arrive past the global cap.
func (r *fuzzRun) arriveKey(ft *fuzzTask) string {
	if r.block && r.keyCap > 0 {
		q := ft.qs[0] // blocking calls at a key cap are single-key (see submit)
		if r.keyFull(q) && (!r.sweep(ft.qs) || r.keyFull(q)) {
			ft.park = parkKey
			r.parkedK[q] = append(r.parkedK[q], ft)
			return " (waits for key room)"
		}
	}
	ft.park, ft.accepted, ft.at = 0, true, time.Since(r.t0)
	r.want.Submitted++
	for _, q := range ft.qs {
		r.queue[q] = append(r.queue[q], ft)
	}
	return ""
}

// oldestWaiting returns queue q's oldest task that has not started, or nil.
func (r *fuzzRun) oldestWaiting(q int) *fuzzTask {
	for _, ft := range r.queue[q] {
		if !ft.started {
			return ft
		}
	}
	return nil
}

// reservations counts what the global cap counts: accepted tasks that
// have not ended, and calls waiting in a key's room (they passed the
// global cap).
func (r *fuzzRun) reservations() int {
	n := len(r.live())
	for _, p := range r.parkedK {
		n += len(p)
	}
	return n
}

// parked lists the calls waiting for room.
func (r *fuzzRun) parked() []*fuzzTask {
	out := slices.Clone(r.parkedG)
	for _, p := range r.parkedK {
		out = append(out, p...)
	}
	return out
}

// made is called when room may have appeared on queues qs, and globally:
// each key's waiting room admits its oldest calls while the key has room,
// then each global reservation given back goes to the oldest call in the
// global waiting room (which then passes the key's cap or waits there).
// The executor works in that order: a task ends (or leaves) its mailboxes,
// admitting parked calls under each mailbox lock, before it gives its
// global reservation back.
func (r *fuzzRun) made(qs []int) {
	if r.closing {
		return // waiting calls were sent away
	}
	for _, q := range qs {
		for len(r.parkedK[q]) > 0 && len(r.queue[q]) < r.keyCap {
			ft := r.parkedK[q][0]
			r.parkedK[q] = r.parkedK[q][1:]
			ft.park, ft.accepted = 0, true
			r.want.Submitted++
			r.queue[q] = append(r.queue[q], ft)
			if ft.outer == nil {
				continue
			}
			// A nested call's wait is checked again once it is in, now
			// queued: it is refused (and withdrawn) if it closes a cycle,
			// as the executor's search sees it (a cycle it does not see
			// would last until a ctx ends: see wouldClose).
			if _, seen := r.wouldClose(ft, chainOf(ft.outer)); seen {
				r.want.Canceled++
				r.end(ft, executor.ErrDeadlock)
			}
		}
	}
	// One waiter at a time is let in from the global room: the next only
	// once it has its place (or was refused), even if its admission sweeps
	// and so ends tasks (a made within this one), as the room's turn does.
	for !r.entering && len(r.parkedG) > 0 && r.reservations() < r.globalCap {
		ft := r.parkedG[0]
		r.parkedG = r.parkedG[1:]
		r.entering = true
		r.arriveKey(ft)
		r.entering = false
	}
}

func (r *fuzzRun) refused(ft *fuzzTask, err error) {
	ft.ended, ft.want = true, err
	if errors.Is(err, executor.ErrBusy) {
		r.want.Rejected++
	}
}

func (r *fuzzRun) release(ft *fuzzTask) {
	close(ft.gate)
	if ft.behavior == 3 {
		r.exit(ft)
		return
	}
	// A batch's fn ends every message of the call (a task is a call of
	// one). In striped mode a call that is not its group's run's last
	// (keys share the stripe) leaves its messages in the mailbox, ran but
	// not settled, until the run's last call returns: only then do their
	// Wait and Do return (they end together, as Batcher's doc says).
	u := r.unitOf(ft)
	members := ft.batch
	if members == nil {
		members = []*fuzzTask{ft}
	}
	for _, m := range members {
		m.released = true
		m.want = nil
		switch ft.behavior {
		case 1:
			m.want = errTask
		case 2:
			m.want = &executor.PanicError{Value: ft.id}
			r.want.Panicked++
		default:
			if m.msgFail {
				m.want = errMsg
			}
		}
		r.want.Completed++
	}
	if u != nil && slices.ContainsFunc(u.tasks, func(m *fuzzTask) bool { return m.claimed && !m.ended }) {
		return // a later call comes
	}
	for _, m := range members {
		r.end(m, m.want)
	}
	r.settleUnit(u)
}

// settleUnit ends the messages of unit u's earlier calls, which ran (see
// release).
func (r *fuzzRun) settleUnit(u *fuzzUnit) {
	if u == nil {
		return
	}
	for _, m := range u.tasks {
		if m.released && !m.ended {
			r.end(m, m.want)
		}
	}
}

// exit ends ft's fn through runtime.Goexit: every message of its call if
// it leads one, and, in striped mode, the messages claimed for the later
// calls of its group's run, which never come (ErrGoexit, canceled). A
// nested call whose fn ran inline, on the goroutine of the fn that made
// it, takes that fn with it: it ends through Goexit too, and so on up the
// chain.
func (r *fuzzRun) exit(ft *fuzzTask) {
	for x := ft; ; x = x.outer {
		u := r.unitOf(x)
		members := x.batch
		if members == nil {
			members = []*fuzzTask{x}
		}
		for _, m := range members {
			m.released = true // its fn is gone; its gate no longer matters
			r.want.Completed++
			r.end(m, m.exited())
		}
		if u != nil {
			// The drive loop's goroutine exits: a fresh one runs the rest
			// of its batch, then drives the key with a full budget.
			r.drv[x.qs[0]].fresh = true
			for _, m := range u.tasks {
				if m.claimed && !m.ended {
					r.want.Canceled++
					r.end(m, executor.ErrGoexit)
				}
			}
			r.settleUnit(u)
		}
		if x.outer == nil || !x.inline() {
			return
		}
	}
}

// mustQueue reports whether ft, which has just arrived, can never run on
// its caller's goroutine: it is a DoMany on more than one mailbox, it waits
// for key room (it is then queued when admitted), or it was queued behind a
// task it may not run beside. A call that waits for global room enters
// like any other once it has it, and may then run inline.
func mustQueue(r *fuzzRun, ft *fuzzTask) bool {
	return len(ft.qs) > 1 || ft.park == parkKey || (ft.park == 0 && !r.mayRun(ft))
}

// inline reports whether ft's fn ran on the goroutine that made its call.
func (ft *fuzzTask) inline() bool { return ft.callerG != 0 && ft.ranOn == ft.callerG }

// exited is the result of a call whose fn ended through runtime.Goexit:
// none, if fn ran on the calling goroutine (it exited), else ErrGoexit.
func (ft *fuzzTask) exited() error {
	if ft.inline() {
		return errGone
	}
	return executor.ErrGoexit
}

// end ends ft: an accepted task leaves its queues, a waiting call its
// waiting room; either may make room for waiting calls.
func (r *fuzzRun) end(ft *fuzzTask, want error) {
	ft.ended, ft.want = true, want
	for _, w := range r.tasks {
		if w.waitOn == ft && !w.ended {
			w.ended, w.want, w.alt = true, want, ft.alt // a nested Wait on it returns its result
		}
	}
	is := func(o *fuzzTask) bool { return o == ft }
	switch ft.park {
	case parkGlobal:
		r.parkedG = slices.DeleteFunc(r.parkedG, is)
		return // it held no reservation
	case parkKey:
		q := ft.qs[0]
		r.parkedK[q] = slices.DeleteFunc(r.parkedK[q], is)
		r.made(nil) // its global reservation is given back
		return
	}
	for _, q := range ft.qs {
		r.queue[q] = slices.DeleteFunc(r.queue[q], is)
	}
	r.made(ft.qs)
}

func (r *fuzzRun) close(giveUp bool) {
	ctx, cancel := context.WithCancel(context.Background())
	if giveUp {
		cancel()
	}
	c := fuzzClose{giveUp: giveUp, result: make(chan error, 1)}
	if giveUp && len(r.live()) > 0 {
		c.want = context.Canceled
	}
	go func() {
		c.result <- r.e.Close(ctx)
		cancel()
	}()
	r.closes = append(r.closes, c)
	r.closing = true
	for _, ft := range r.parked() {
		r.end(ft, executor.ErrClosed) // sent away; never accepted
		if giveUp && ft.outer != nil {
			// The giving-up Close also ends the ctx of the fn that waits:
			// whichever the call sees first is right.
			ft.alt = context.Canceled
		}
	}
	if giveUp && !r.gaveUp {
		r.gaveUp = true
		for _, ft := range r.waiting() {
			// Its fn's ctx ends, and with it the Wait's: it returns that
			// error unless the task it waits for ends first.
			ft.ended, ft.want, ft.alt = true, context.Canceled, executor.ErrClosed
		}
		// Every task that has not started ends with ErrClosed at once,
		// those a drive loop has taken into a batch behind a running task
		// (and messages claimed for a later call of a running group)
		// included: none may linger until a worker frees up.
		for _, ft := range r.live() {
			if !ft.started {
				ft.doomed = true
				r.want.Canceled++
				r.end(ft, executor.ErrClosed)
				if ft.outer != nil {
					// The fn that waits for it sees its ctx end too.
					ft.alt = context.Canceled
				}
			}
		}
	}
}

// live lists accepted tasks that have not ended, oldest first.
func (r *fuzzRun) live() []*fuzzTask {
	var out []*fuzzTask
	for _, ft := range r.tasks {
		if ft.accepted && !ft.ended {
			out = append(out, ft)
		}
	}
	return out
}

func (r *fuzzRun) running() []*fuzzTask {
	var out []*fuzzTask
	for _, ft := range r.live() {
		if ft.started && !ft.released {
			out = append(out, ft)
		}
	}
	return out
}

// mayRun reports whether the model lets ft run now: every earlier task on
// each of its keys has ended (for a shared task, every earlier exclusive one).
func (r *fuzzRun) mayRun(ft *fuzzTask) bool { return r.mayRunWith(ft, nil) }

// mayRunWith is mayRun for a message of a batch: the messages of its
// call (with) may be ahead of it.
func (r *fuzzRun) mayRunWith(ft *fuzzTask, with []*fuzzTask) bool {
	for _, q := range ft.qs {
		for _, o := range r.queue[q] {
			if o == ft {
				break
			}
			if (!ft.shared || !o.shared) && !slices.Contains(with, o) && !o.released && !o.noticed {
				return false // (a released task has ended, or ran in its group's run: see release; a noticed one has ended)
			}
		}
	}
	return true
}

// settle reads what happened since the last step: which tasks started and
// which results arrived, and resolves tasks doomed by a giving-up Close.
func (r *fuzzRun) settle() {
	t := r.t
	r.flags.mu.Lock()
	started := maps(r.flags.started)
	ranOn, caller := maps(r.flags.ranOn), maps(r.flags.caller)
	calls := r.flags.calls
	r.flags.calls = nil
	r.flags.mu.Unlock()
	r.matchHandled()
	// Lazily doomed tasks the executor ended since the last step: they
	// leave their queues once the drive loops are checked (they took
	// their place in a batch), but start no one's wait.
	for _, ft := range r.tasks {
		if ft.lazy && !ft.ended && r.resultReady(ft) {
			ft.noticed = true
		}
	}
	// The BatchFunc's calls: who led each, and who rode along.
	for _, c := range calls {
		ms := make([]*fuzzTask, len(c.ids))
		for i, id := range c.ids {
			ms[i] = r.tasks[id]
			if !ms[i].msg || ms[i].keys[0] != c.key || ms[i].lead != nil {
				t.Errorf("BatchFunc called on key %d with %v: task %d (%s on %v) is not a message of that key, or ran before",
					c.key, c.ids, id, ms[i].kind, ms[i].keys)
			}
		}
		if len(ms) > r.maxBatch {
			t.Errorf("BatchFunc called with %d messages %v; want at most WithMaxBatch(%d)", len(ms), c.ids, r.maxBatch)
		}
		for _, m := range ms {
			m.lead = ms[0]
		}
		ms[0].batch = ms
	}
	now := map[*fuzzTask]bool{} // started since the last step
	for _, ft := range r.tasks {
		n := started[ft.id]
		if n > 1 {
			t.Errorf("task %d ran %d times; want at most once", ft.id, n)
		}
		if n == 1 && !ft.started {
			ft.started, ft.claimed, now[ft] = true, false, true
			ft.ranOn, ft.callerG = ranOn[ft.id], caller[ft.id]
			var with []*fuzzTask // the call it rode in
			if ft.lead != nil {
				with = ft.lead.batch
			}
			switch {
			case ft.inline() && ft.mustQueue:
				t.Errorf("task %d (%s on %v) ran on its caller's goroutine, but it had to wait in line or for room",
					ft.id, ft.kind, ft.keys)
			case ft.doomed:
				t.Errorf("task %d (%s) started after Close gave up on it", ft.id, ft.kind)
			case ft.lazy:
				t.Errorf("task %d (%s on %v) started after its ctx ended (while it was queued)", ft.id, ft.kind, ft.keys)
			case ft.ended && !ft.released:
				t.Errorf("task %d (%s) started after it ended with %v", ft.id, ft.kind, ft.want)
			case !r.mayRunWith(ft, with):
				t.Errorf("task %d (%s on %v) started before an earlier task of its keys ended (queues %v)",
					ft.id, ft.kind, ft.keys, r.queueIDs())
			}
		}
	}
	if r.batching {
		r.drives(now)
	}
	for _, ft := range r.tasks {
		if ft.noticed && !ft.ended {
			r.notice(ft)
		}
	}
}

// notice ends a lazily doomed task the executor has ended: canceled, with
// its ctx's error.
func (r *fuzzRun) notice(ft *fuzzTask) {
	ft.noticed = false
	r.want.Canceled++
	r.end(ft, context.Canceled)
}

// fuzzDrive models, in batching mode, the drive loops of one queue. A
// mailbox runs its queue in drive loops, each with a budget of
// WithThroughput units: a loop detaches the exclusive single-key tasks at
// the head of the queue, as many units as its budget has left (a unit is a
// task, or a run of up to WithMaxBatch consecutive messages of one key,
// which one call of the BatchFunc gets; a run ends the batch once it holds
// 64 tasks, the mailbox's cutRuns), runs
// them in order, and detaches again while budget is left and the head is
// such a task; else it ends (and if it ran out of budget a fresh loop comes
// once a worker is free). So a batch is what was queued when its loop
// detached it, not when it starts: a message queued behind a detached
// batch waits for the next one. The model learns that a fresh loop began
// when it sees the head of an idle queue start; everything else it
// predicts, and every task a drive loop starts must be the one it says.
type fuzzDrive struct {
	units  []fuzzUnit // detached and not finished, in order
	left   int        // the budget left once they have run
	live   bool       // a loop runs the units, or is about to detach more
	fresh  bool       // a Goexit handed the loop on: its next detach has a full budget
	unsure bool       // Close gave up: loops abandon the tasks as they reach them
}

// fuzzUnit is a unit of a drive loop's batch.
type fuzzUnit struct {
	group bool          // a run of messages
	tasks []*fuzzTask   // as detached
	begun bool          // it runs
	calls [][]*fuzzTask // a group's: the messages it took, one call per run of one key
	at    int           // the call running
}

// runsInBatch reports whether ft, accepted, is a task a drive loop
// detaches: exclusive, of one mailbox, not waiting for room.
func runsInBatch(ft *fuzzTask) bool {
	return ft.accepted && ft.park == 0 && len(ft.qs) == 1 && !ft.shared
}

// allRan reports whether every task of ts has ended or ran (see release).
func allRan(ts []*fuzzTask) bool {
	for _, ft := range ts {
		if !ft.ended && !ft.released {
			return false
		}
	}
	return true
}

// unitTasks is how many tasks units hold.
func unitTasks(units []fuzzUnit) int {
	n := 0
	for _, u := range units {
		n += len(u.tasks)
	}
	return n
}

// detach is a drive loop of queue q detaching its batch with budget.
func (r *fuzzRun) detach(q, budget int) {
	d := &r.drv[q]
	d.units, d.live = nil, true
	for _, ft := range r.queue[q] {
		if !runsInBatch(ft) {
			break
		}
		if n := len(d.units); ft.msg && n > 0 && d.units[n-1].group && len(d.units[n-1].tasks) < r.maxBatch &&
			ft.keys[0] == d.units[n-1].tasks[0].keys[0] { // a run is one key's (striped mode: not a stripe's)
			d.units[n-1].tasks = append(d.units[n-1].tasks, ft)
			continue
		}
		if n := len(d.units); n == budget || n > 0 && d.units[n-1].group && unitTasks(d.units) >= 64 {
			break // the budget is spent, or enough runs of messages (the mailbox's cutRuns)
		}
		d.units = append(d.units, fuzzUnit{group: ft.msg, tasks: []*fuzzTask{ft}})
	}
	d.left = budget - len(d.units)
}

// advance returns what unit u starts now: all of it, or its group's first
// call, when it begins (the messages of later calls are claimed: they run
// whatever their ctx does), or its next call once the one before ended.
func (r *fuzzRun) advance(u *fuzzUnit) []*fuzzTask {
	if u.begun {
		if u.group && u.at+1 < len(u.calls) && allRan(u.calls[u.at]) {
			u.at++
			return u.calls[u.at]
		}
		return nil
	}
	u.begun = true
	// Those withdrawn since it was detached are skipped, and those whose
	// ctx ended are noticed now: they never run, and end (they leave the
	// queue: a later batch does not take them).
	var live []*fuzzTask
	for _, ft := range u.tasks {
		if ft.lazy && !ft.ended && !ft.noticed {
			r.t.Errorf("queue %d: a drive loop reached task %d (%s), whose ctx ended, but it has not ended",
				ft.qs[0], ft.id, ft.kind)
			ft.noticed = true
		}
		if ft.noticed && !ft.ended {
			r.notice(ft)
		}
		if !ft.ended {
			live = append(live, ft)
		}
	}
	if !u.group {
		return live
	}
	for i := 0; i < len(live); {
		j := i + 1
		for j < len(live) && live[j].keys[0] == live[i].keys[0] {
			j++
		}
		u.calls = append(u.calls, live[i:j])
		i = j
	}
	if len(u.calls) == 0 {
		return nil // every message was left out: no call
	}
	for _, c := range u.calls[1:] {
		for _, m := range c {
			m.claimed = true
		}
	}
	return u.calls[0]
}

// unitOf returns the unit x runs in, if a drive loop runs it.
func (r *fuzzRun) unitOf(x *fuzzTask) *fuzzUnit {
	if !r.batching || len(x.qs) != 1 {
		return nil
	}
	d := &r.drv[x.qs[0]]
	if !d.live || len(d.units) == 0 || !slices.Contains(d.units[0].tasks, x) {
		return nil
	}
	return &d.units[0]
}

// drives moves each queue's drive loop on past what ended this step and
// checks what the loops started (now) against it.
func (r *fuzzRun) drives(now map[*fuzzTask]bool) {
	for q := range r.queue {
		d := &r.drv[q]
		if r.gaveUp {
			d.unsure = true
		}
		want := r.drive(q)
		if d.unsure {
			continue
		}
		for !d.live && r.freshLoop(q, now) {
			// (A loop that passed over tasks whose ctx ended and ran out
			// of budget goes on at once if nothing else waits for a
			// worker: as a fresh loop does.)
			r.detach(q, r.throughput)
			want = r.drive(q)
		}
		var got []*fuzzTask
		for _, ft := range r.queue[q] {
			if now[ft] && !ft.inline() && runsInBatch(ft) {
				got = append(got, ft)
			}
		}
		if !slices.Equal(got, want) {
			r.t.Errorf("queue %d: drive loops started %v; want %v (queue %v, drive units %v)",
				q, ids(got), ids(want), ids(r.queue[q]), d.unitIDs())
		}
	}
}

// drive moves queue q's live drive loop on past what ended this step, and
// returns what it starts now.
func (r *fuzzRun) drive(q int) []*fuzzTask {
	d := &r.drv[q]
	var want []*fuzzTask
	for d.live {
		for len(d.units) > 0 && allEnded(d.units[0].tasks) {
			d.units = d.units[1:]
		}
		if len(d.units) > 0 {
			u := &d.units[0]
			if d.unsure && !u.begun {
				break
			}
			if want = r.advance(u); len(want) == 0 && allEnded(u.tasks) {
				continue // every task of it had its ctx end: the loop goes on
			}
			break
		}
		budget := d.left
		if d.fresh {
			budget, d.fresh = r.throughput, false
		}
		if d.unsure || budget == 0 || len(r.queue[q]) == 0 || !runsInBatch(r.queue[q][0]) {
			d.live = false // it yields (a fresh loop comes), or ends
			break
		}
		r.detach(q, budget)
	}
	return want
}

// freshLoop reports whether a fresh drive loop began on idle queue q this
// step: its head started, or the head's ctx had ended and the executor
// noticed it (only a loop reaching it does: see nestWait), as it would
// start, and so took it into the loop's batch.
func (r *fuzzRun) freshLoop(q int, now map[*fuzzTask]bool) bool {
	queue := r.queue[q]
	if len(queue) == 0 || !runsInBatch(queue[0]) {
		return false
	}
	if queue[0].noticed {
		return true
	}
	h := queue[0]
	return now[h] && !h.inline()
}

func allEnded(ts []*fuzzTask) bool {
	return !slices.ContainsFunc(ts, func(ft *fuzzTask) bool { return !ft.ended })
}

func ids(ts []*fuzzTask) []int {
	out := make([]int, len(ts))
	for i, ft := range ts {
		out[i] = ft.id
	}
	return out
}

func (d *fuzzDrive) unitIDs() [][]int {
	var out [][]int
	for _, u := range d.units {
		out = append(out, ids(u.tasks))
	}
	return out
}

// matchHandled hands each failure the error handler was handed since the
// last step to the Go task it must be for: of that key, accepted, handed
// nothing yet, and either ended with that failure or lazily doomed (its
// ctx's error). Tasks of one key that want the same failure are
// interchangeable; the oldest takes it.
func (r *fuzzRun) matchHandled() {
	r.handler.mu.Lock()
	recs := r.handler.recs
	r.handler.recs = nil
	r.handler.mu.Unlock()
	for _, rec := range recs {
		var match *fuzzTask
		for _, ft := range r.tasks {
			if ft.kind != "Go" || !ft.accepted || len(ft.handled) > 0 || rec.key != any(ft.keys[0]) {
				continue
			}
			is := func(want error) bool { return want != nil && sameOutcome(rec.err, want) }
			if (ft.ended && (is(ft.want) || is(ft.alt))) || (ft.lazy && !ft.ended && is(context.Canceled)) {
				match = ft
				break
			}
		}
		if match == nil {
			r.t.Errorf("error handler handed key %v, %v: no accepted Go task has that failure", rec.key, rec.err)
			continue
		}
		match.handled = append(match.handled, rec.err)
	}
}

// resultReady reports, without consuming it, whether ft's call has returned.
func (r *fuzzRun) resultReady(ft *fuzzTask) bool {
	if ft.kind == "Go" {
		return len(ft.handled) > 0 // a Go that never ran ends with why, handed to the handler
	}
	if ft.task != nil {
		select {
		case <-ft.task.Done():
			return true
		default:
			return false
		}
	}
	return len(ft.result) > 0
}

func maps[V any](m map[int]V) map[int]V {
	out := make(map[int]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (r *fuzzRun) queueIDs() [fuzzKeys][]int {
	var out [fuzzKeys][]int
	for k, q := range r.queue {
		for _, ft := range q {
			out[k] = append(out[k], ft.id)
		}
	}
	return out
}

// check compares the executor with the model at a settled moment.
func (r *fuzzRun) check(at string) {
	t := r.t
	t.Helper()
	// Results: present exactly for the tasks that ended, and as expected.
	for _, ft := range r.tasks {
		if ft.got {
			continue
		}
		if ft.kind == "Go" {
			r.checkGo(at, ft)
			continue
		}
		ready := r.resultReady(ft)
		if ft.outer != nil && ft.ended && !ready {
			continue // its task has not got a worker back yet: see below
		}
		if ready != ft.ended {
			t.Errorf("%s: task %d (%s on %v): call returned %v, model ended %v (want %v)",
				at, ft.id, ft.kind, ft.keys, ready, ft.ended, ft.want)
			continue
		}
		if !ready {
			continue
		}
		var err error
		if ft.task != nil {
			err = ft.task.Wait(context.Background())
		} else {
			err = <-ft.result
		}
		ft.got = true
		if ft.outer != nil {
			ft.outer.inner = nil // its fn is back: it holds a worker again
		}
		if !sameOutcome(err, ft.want) && (ft.alt == nil || !sameOutcome(err, ft.alt)) {
			t.Errorf("%s: task %d (%s on %v): got %v; want %v", at, ft.id, ft.kind, ft.keys, err, ft.want)
		}
	}
	if len(r.live()) == 0 {
		// Close may poll for its pool's workers to exit; let the fake
		// clock move on so it can.
		time.Sleep(time.Millisecond)
		synctest.Wait()
	}
	for i := range r.closes {
		c := &r.closes[i]
		if c.got {
			continue
		}
		// A giving-up Close returns at once (its ctx had ended), whatever
		// still runs; a draining one once nothing is live.
		done := c.giveUp || len(r.live()) == 0
		if len(c.result) > 0 != done {
			t.Errorf("%s: Close #%d returned %v; want %v (live tasks %d)", at, i, len(c.result) > 0, done, len(r.live()))
			continue
		}
		if done {
			c.got = true
			err := <-c.result
			if !errors.Is(err, c.want) || (err == nil) != (c.want == nil) {
				t.Errorf("%s: Close #%d (giveUp %v): got %v; want %v", at, i, c.giveUp, err, c.want)
			}
		}
	}
	// Running: within the bound, and nothing that may run is left waiting
	// while a worker is free.
	running := r.running()
	busy := r.idle() // a task in a nested call lent its worker
	if len(busy) > r.workers {
		t.Errorf("%s: %d tasks running outside nested calls; want <= %d workers", at, len(busy), r.workers)
	}
	if len(busy) < r.workers {
		for _, ft := range r.running() {
			if ft.inner != nil && ft.inner.ended {
				t.Errorf("%s: task %d: its nested call %d ended and a worker is free, but the call has not returned",
					at, ft.id, ft.inner.id)
			}
		}
	}
	if len(busy) < r.workers {
		// (A task whose ctx ended lazily must have ended by now: it
		// reached the head of its queue with a worker free.)
		for _, ft := range r.live() {
			if !ft.started && r.mayRun(ft) {
				what := "it has not started"
				if ft.lazy {
					what = "its ctx ended and it has not ended"
				}
				t.Errorf("%s: task %d (%s on %v) may run and a worker is free, but %s (queues %v)",
					at, ft.id, ft.kind, ft.keys, what, r.queueIDs())
			}
		}
	}
	// Stats, exactly: a lazily doomed task counts as queued until the
	// driver sees it end, at a settled moment.
	want := r.want
	active := 0 // keys with work
	for q := range r.queue {
		if len(r.queue[q]) > 0 {
			active++
		}
	}
	want.ActiveKeys = active
	want.Running = len(running)
	want.Queued = int(want.Submitted-want.Completed-want.Canceled) - want.Running
	got := r.e.Stats()
	// A key whose last task was withdrawn while its drive loop waited for
	// a worker stays live until that loop gets one and retires it: with
	// every worker busy, ActiveKeys may run ahead of the keys with work.
	lag := 0
	if len(busy) == r.workers && got.ActiveKeys > active {
		lag = got.ActiveKeys - active
		got.ActiveKeys = active
	}
	if got != want {
		t.Errorf("%s: Stats: got %+v; want %+v", at, got, want)
	}
	if !balanced(got) {
		t.Errorf("%s: Stats do not add up: %+v", at, got)
	}
	if n := r.e.ActiveKeys(); n < active || n > active+lag {
		t.Errorf("%s: ActiveKeys: got %d; want %d", at, n, active+lag)
	}
	// HotKeys agrees with the queues (a lazily doomed task is pending
	// until it ends).
	hot := r.e.HotKeys(fuzzKeys)
	for _, kl := range hot {
		if n := len(r.queue[r.q(kl.Key)]); kl.Pending != n {
			t.Errorf("%s: HotKeys: key %d has %d pending; want %d", at, kl.Key, kl.Pending, n)
		}
	}
	if len(hot) != active {
		t.Errorf("%s: HotKeys: got %v; want %d keys", at, hot, active)
	}
}

// checkGo checks a Go call: what Go returned (nil once accepted, else why
// not), and once its task has ended, that a failure reached the error
// handler exactly once (matchHandled) and success never did.
func (r *fuzzRun) checkGo(at string, ft *fuzzTask) {
	t := r.t
	t.Helper()
	if ft.goRet != nil && !ft.goReturned {
		ready := len(ft.goRet) > 0
		// Accepted, or refused (a call waiting for room that Close sent
		// away or whose ctx ended is refused too): Go has returned.
		if want := ft.accepted || ft.ended; ready != want {
			t.Errorf("%s: task %d (Go on %v): Go returned %v; want %v (accepted %v, ended %v)",
				at, ft.id, ft.keys, ready, want, ft.accepted, ft.ended)
			return
		}
		if !ready {
			return
		}
		err := <-ft.goRet
		ft.goReturned = true
		var want error
		if !ft.accepted {
			want = ft.want
		}
		if !sameOutcome(err, want) && (ft.alt == nil || ft.accepted || !sameOutcome(err, ft.alt)) {
			t.Errorf("%s: task %d (Go on %v): Go returned %v; want %v", at, ft.id, ft.keys, err, want)
		}
	}
	if !ft.accepted {
		if len(ft.handled) > 0 {
			t.Errorf("%s: task %d (Go on %v), never accepted: the error handler was handed %v", at, ft.id, ft.keys, ft.handled)
		}
		ft.got = ft.ended
		return
	}
	switch {
	case len(ft.handled) > 1:
		t.Errorf("%s: task %d (Go on %v): the error handler was handed %v; want one failure", at, ft.id, ft.keys, ft.handled)
	case !ft.ended:
		if len(ft.handled) > 0 {
			t.Errorf("%s: task %d (Go on %v): the error handler was handed %v before it ended", at, ft.id, ft.keys, ft.handled)
		}
	case ft.want == nil:
		if len(ft.handled) > 0 {
			t.Errorf("%s: task %d (Go on %v) succeeded; the error handler was handed %v", at, ft.id, ft.keys, ft.handled)
		}
		ft.got = true
	case len(ft.handled) == 0:
		t.Errorf("%s: task %d (Go on %v) ended with %v; the error handler was handed nothing", at, ft.id, ft.keys, ft.want)
		ft.got = true
	default:
		ft.got = true // matchHandled gave it only a failure it may end with
	}
}

func sameOutcome(got, want error) bool {
	var wp, gp *executor.PanicError
	if errors.As(want, &wp) {
		return errors.As(got, &gp) && gp.Value == wp.Value
	}
	if want == nil {
		return got == nil
	}
	return errors.Is(got, want)
}

func (r *fuzzRun) dump() {
	r.t.Logf("config: workers %d, throughput %d, key cap %d, global cap %d, striped %v, blocking %v, max queue delay %v, nesting %v (all kinds %v), exiting %v",
		r.workers, r.throughput, r.keyCap, r.globalCap, r.striped, r.block, r.age, r.nesting, r.nestAll, r.exiting)
	for i, d := range r.trace {
		r.t.Logf("step %d: %s", i, d)
	}
	for _, ft := range r.tasks {
		r.t.Logf("task %d: %s on %v shared %v behavior %d started %v released %v ended %v doomed %v want %v inline %v handled %v",
			ft.id, ft.kind, ft.keys, ft.shared, ft.behavior, ft.started, ft.released, ft.ended, ft.doomed, ft.want, ft.inline(), ft.handled)
	}
	// Let everything finish so the bubble can exit.
	for _, ft := range r.tasks {
		if !ft.released {
			ft.released = true
			close(ft.gate)
		}
	}
	if !r.closing {
		_ = r.e.Close(context.Background())
	}
	for i := range r.closes {
		if !r.closes[i].got {
			<-r.closes[i].result
		}
	}
}
