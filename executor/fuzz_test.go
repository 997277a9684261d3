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
//   - Stats (every counter) and ActiveKeys.
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
	// tasks canceled while queued and doomed by a giving-up Close; a
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

	started  bool // the driver saw it start
	released bool // the driver opened its gate
	ended    bool // the model says it has ended
	doomed   bool // not started when Close gave up: must end with ErrClosed
	want     error
	alt      error // also acceptable: a doomed task's ctx ended while it lingered

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
	handler                                fuzzHandler
	age                                    time.Duration // MaxQueueDelay's d; 0: not aging
	t0                                     time.Time     // the bubble's clock at the start

	e     *executor.Executor[int]
	flags *fuzzStartFlags
	tasks []*fuzzTask
	queue [fuzzKeys][]*fuzzTask // accepted, not ended, FIFO (striped: all in queue 0)

	// Calls waiting for room (blocking mode), FIFO.
	parkedG []*fuzzTask
	parkedK [fuzzKeys][]*fuzzTask

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
	return r
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
	r.e = e
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
		return r.submit("Submit")
	case 1:
		return r.submit("Do")
	case 2:
		return r.submit("DoShared")
	case 3:
		return r.submit("DoMany")
	case 4:
		// Cancel a task's ctx (queued: withdrawn; running: no effect;
		// waiting for room: gives up, never accepted).
		live := append(r.live(), r.parked()...)
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
	case r.globalCap > 0 && r.pendingTasks() >= r.globalCap:
		refuse = executor.ErrBusy
	default:
		for _, q := range ft.qs {
			if r.keyCap > 0 && len(r.queue[q]) >= r.keyCap {
				refuse = executor.ErrBusy
			}
			if old := r.oldestWaiting(q); r.age > 0 && old != nil && time.Since(r.t0)-old.at > r.age {
				refuse = executor.ErrBusy // the key's queue is too old
			}
		}
	}
	r.tasks = append(r.tasks, ft)
	if (kind == "Submit" || kind == "Go") && !r.block {
		var err error
		if kind == "Go" {
			err = r.e.Go(ctx, k, fn)
		} else {
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
			if kind != "Submit" {
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
	in := &fuzzTask{id: len(r.tasks), kind: "nested Do", keys: []int{k},
		behavior: int(r.next() % r.behaviors()), gate: make(chan struct{}), nest: make(chan *fuzzTask, 1),
		ran: r.flags, outer: o, result: make(chan error, 1), ctxCanceled: o.ctxCanceled}
	if r.nestAll {
		switch r.next() % 3 {
		case 1:
			in.kind, in.shared = "nested DoShared", true
		case 2:
			in.kind, in.keys = "nested DoMany", dedupInts([]int{k, int(r.next() % fuzzKeys)})
		}
		// As in submit: a DoMany polls at a key cap under Block, and under
		// MaxQueueDelay a granted DoMany or DoShared stops counting as
		// queued when the model cannot say.
		if in.kind != "nested Do" && (r.age > 0 || (r.block && r.keyCap > 0 && !in.shared)) {
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
	// wait for it, and it for the chain), else a key cap.
	var perKey error
	for _, q := range in.qs {
		if slices.ContainsFunc(r.queue[q], func(t *fuzzTask) bool {
			return !t.started && len(t.qs) > 1 && slices.ContainsFunc(t.qs, chainHolds)
		}) {
			perKey = executor.ErrReentrant
			break
		}
		if !r.block && r.keyCap > 0 && len(r.queue[q]) >= r.keyCap {
			perKey = executor.ErrBusy
			break
		}
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
	case r.globalCap > 0 && r.block && (r.reservations() >= r.globalCap || len(r.parkedG) > 0):
		refuse = executor.ErrBusy // a nested call never waits for global room
	case r.globalCap > 0 && !r.block && r.pendingTasks() >= r.globalCap:
		refuse = executor.ErrBusy
	case perKey != nil:
		refuse = perKey
	case r.age > 0:
		if old := r.oldestWaiting(in.qs[0]); old != nil && time.Since(r.t0)-old.at > r.age {
			refuse = executor.ErrBusy
		}
	}
	if refuse == nil && slices.ContainsFunc(in.qs, func(q int) bool { return r.waitsOnItself(o, q) }) {
		// A longer cycle of waits, through other tasks' nested calls (see
		// the package doc): the caller's to avoid, not for the fuzzer.
		return fmt.Sprintf("task %d: %s on %v skipped: it would wait on its own task", o.id, in.kind, in.keys)
	}
	in.trigger, in.cancel = context.WithCancel(context.Background())
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

// ctxEnded applies the end of ft's ctx: a call waiting for room gives up, a
// queued task is withdrawn, a running one goes on but its fn's ctx has
// ended, and so has that of the nested call it is in.
func (r *fuzzRun) ctxEnded(ft *fuzzTask) {
	switch {
	case ft.ended:
	case ft.park != 0:
		r.end(ft, context.Canceled)
	case !ft.started && !ft.doomed:
		r.end(ft, context.Canceled)
		r.want.Canceled++
	case ft.doomed:
		// Close gave up on it but it has not ended yet (it waits in
		// a drive loop's batch): whichever reason wins is right.
		ft.alt = context.Canceled
	default:
		ft.ctxCanceled = true
		if ft.inner != nil {
			r.ctxEnded(ft.inner)
		}
	}
}

// idle lists the running tasks whose fn waits for the driver: not in a
// nested call.
func (r *fuzzRun) idle() []*fuzzTask {
	var out []*fuzzTask
	for _, ft := range r.running() {
		if ft.inner == nil {
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
	if r.block && r.globalCap > 0 && (r.reservations() >= r.globalCap || len(r.parkedG) > 0) {
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
		if len(r.queue[q])+len(r.parkedK[q]) >= r.keyCap {
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
		}
	}
	for len(r.parkedG) > 0 && r.reservations() < r.globalCap {
		ft := r.parkedG[0]
		r.parkedG = r.parkedG[1:]
		r.arriveKey(ft)
	}
}

func (r *fuzzRun) refused(ft *fuzzTask, err error) {
	ft.ended, ft.want = true, err
	if errors.Is(err, executor.ErrBusy) {
		r.want.Rejected++
	}
}

func (r *fuzzRun) release(ft *fuzzTask) {
	ft.released = true
	close(ft.gate)
	var want error
	switch ft.behavior {
	case 1:
		want = errTask
	case 2:
		want = &executor.PanicError{Value: ft.id}
		r.want.Panicked++
	case 3:
		want = ft.exited()
	}
	r.want.Completed++
	r.end(ft, want)
	// A nested call whose fn ran inline, on the goroutine of the fn that
	// made it, takes that fn with it: it ends through Goexit too, and so
	// on up the chain.
	for x := ft; ft.behavior == 3 && x.outer != nil && x.inline(); x = x.outer {
		o := x.outer
		o.released = true // its fn is gone; its gate no longer matters
		r.want.Completed++
		r.end(o, o.exited())
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
		for _, ft := range r.live() {
			if !ft.started {
				ft.doomed = true
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

func (r *fuzzRun) pendingTasks() int { return len(r.live()) }

// mayRun reports whether the model lets ft run now: every earlier task on
// each of its keys has ended (for a shared task, every earlier exclusive one).
func (r *fuzzRun) mayRun(ft *fuzzTask) bool {
	for _, q := range ft.qs {
		for _, o := range r.queue[q] {
			if o == ft {
				break
			}
			if !ft.shared || !o.shared {
				return false
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
	r.flags.mu.Unlock()
	r.matchHandled()
	for _, ft := range r.tasks {
		n := started[ft.id]
		if n > 1 {
			t.Errorf("task %d ran %d times; want at most once", ft.id, n)
		}
		if n == 1 && !ft.started {
			ft.started = true
			ft.ranOn, ft.callerG = ranOn[ft.id], caller[ft.id]
			switch {
			case ft.inline() && ft.mustQueue:
				t.Errorf("task %d (%s on %v) ran on its caller's goroutine, but it had to wait in line or for room",
					ft.id, ft.kind, ft.keys)
			case ft.ended && !ft.released:
				t.Errorf("task %d (%s) started after it ended with %v", ft.id, ft.kind, ft.want)
			case ft.doomed:
				t.Errorf("task %d (%s) started after Close gave up on it", ft.id, ft.kind)
			case !r.mayRun(ft):
				t.Errorf("task %d (%s on %v) started before an earlier task of its keys ended (queues %v)",
					ft.id, ft.kind, ft.keys, r.queueIDs())
			}
		}
	}
	// Doomed tasks end with ErrClosed; they may linger until a worker
	// frees up, but never past the last running task.
	for _, ft := range r.tasks {
		if ft.doomed && !ft.ended && r.resultReady(ft) {
			r.want.Canceled++
			r.end(ft, executor.ErrClosed)
		}
	}
	if len(r.running()) == 0 {
		for _, ft := range r.tasks {
			if ft.doomed && !ft.ended {
				t.Errorf("task %d (%s): not ended once nothing runs after Close gave up; want ErrClosed", ft.id, ft.kind)
				r.want.Canceled++
				r.end(ft, executor.ErrClosed)
			}
		}
	}
}

// matchHandled hands each failure the error handler was handed since the
// last step to the Go task it must be for: of that key, accepted, handed
// nothing yet, and either ended with that failure or doomed by a giving-up
// Close (ErrClosed). Tasks of one key that want the same failure are
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
			if (ft.ended && (is(ft.want) || is(ft.alt))) ||
				(ft.doomed && !ft.ended && (is(executor.ErrClosed) || is(ft.alt))) {
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
		return len(ft.handled) > 0 // a doomed Go ends with ErrClosed, handed to the handler
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
	if len(busy) < r.workers && !r.gaveUp {
		for _, ft := range r.live() {
			if !ft.started && r.mayRun(ft) {
				t.Errorf("%s: task %d (%s on %v) may run and a worker is free, but it has not started (queues %v)",
					at, ft.id, ft.kind, ft.keys, r.queueIDs())
			}
		}
	}
	// Stats.
	want := r.want
	active, settled := 0, 0 // keys with work; and without doomed nested calls
	for q := range r.queue {
		if len(r.queue[q]) > 0 {
			active++
		}
		if len(r.queue[q]) > r.doomedNested(q) {
			settled++
		}
	}
	want.ActiveKeys = active
	want.Running = len(running)
	want.Queued = int(want.Submitted-want.Completed-want.Canceled) - want.Running
	got := r.e.Stats()
	if got.ActiveKeys >= settled && got.ActiveKeys < active {
		// A doomed nested call has left its queue, and no one can tell
		// until its task has a worker back to return it (see doomedNested).
		got.ActiveKeys = active
	}
	// A key whose last task was withdrawn while its drive loop waited for
	// a worker stays live until that loop gets one and retires it: with
	// every worker busy, ActiveKeys may run ahead of the keys with work.
	lag := 0
	if len(busy) == r.workers && got.ActiveKeys > active {
		lag = got.ActiveKeys - active
		got.ActiveKeys = active
	}
	if r.gaveUp && !r.allSettled() {
		// Doomed tasks may still count as queued.
		got.Queued, want.Queued = 0, 0
		got.Canceled, want.Canceled = 0, 0
	}
	if got != want {
		t.Errorf("%s: Stats: got %+v; want %+v", at, got, want)
	}
	if n := r.e.ActiveKeys(); n < settled || n > active+lag {
		t.Errorf("%s: ActiveKeys: got %d; want %d", at, n, active+lag)
	}
	// HotKeys agrees with the queues.
	hot := r.e.HotKeys(fuzzKeys)
	for _, kl := range hot {
		q := r.q(kl.Key)
		if n := len(r.queue[q]); kl.Pending > n || kl.Pending < n-r.doomedNested(q) {
			t.Errorf("%s: HotKeys: key %d has %d pending; want %d", at, kl.Key, kl.Pending, n)
		}
	}
	if len(hot) < settled || len(hot) > active {
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

// doomedNested counts the nested calls in queue q that a giving-up Close
// doomed and the model has not seen end. Such a call leaves its queue at
// once, but its result comes back only once its task has a worker again,
// which, with every worker busy, the model cannot say: until then the
// key's pending count may be lower than the model's queue.
func (r *fuzzRun) doomedNested(q int) int {
	n := 0
	for _, ft := range r.queue[q] {
		if ft.doomed && ft.outer != nil && !ft.ended {
			n++
		}
	}
	return n
}

func (r *fuzzRun) allSettled() bool {
	for _, ft := range r.tasks {
		if ft.doomed && !ft.ended {
			return false
		}
	}
	return true
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
