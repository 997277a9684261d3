package mailbox

import (
	"sync"
	"sync/atomic"

	"github.com/alitto/pond/v2"
)

// item is a ready-queue entry: a *Mailbox to drive, a granted *Turn, or the
// chan of a goroutine awaiting its slot; the zero item takes the next one.
type item struct{ v any }

func (it item) mailbox() *Mailbox { m, _ := it.v.(*Mailbox); return m }

func (it item) turn() *Turn { t, _ := it.v.(*Turn); return t }

func (it item) resume() chan struct{} { c, _ := it.v.(chan struct{}); return c }

// Runner bounds execution to limit slots, each owned by a goroutine: a drive loop
// on pond, or a caller running a task inline. Work without a slot waits in a FIFO
// ready queue, not pond's, so no stale pool job runs a mailbox it no longer owns.
type Runner struct {
	pool       pond.Pool
	limit      int32
	throughput int
	opt        RunnerOptions // fixed at NewRunner

	active atomic.Int32 // slots owned
	nready atomic.Int32 // len(ready), readable without mu

	mu    sync.Mutex // guards ready
	ready readyQueue

	loops sync.WaitGroup // drive loops started and not yet returned

	launchers sync.Pool // of *launcher
}

// launcher starts a mailbox's drive loop, pooled with its func, so neither
// a dispatch nor a mailbox (keeping it for life) pays for a closure.
type launcher struct {
	r  *Runner
	m  *Mailbox
	fn func() // l.run
}

func (l *launcher) run() {
	r, m := l.r, l.m
	l.m = nil
	r.launchers.Put(l)
	r.loop(item{m})
}

// launch starts a drive loop for m on a slot the caller acquired.
func (r *Runner) launch(m *Mailbox) {
	l, _ := r.launchers.Get().(*launcher)
	if l == nil {
		l = &launcher{r: r}
		l.fn = l.run
	}
	l.m = m
	r.spawn(l.fn)
}

// RunnerOptions each cost a little per task, so each is off unless set.
type RunnerOptions struct {
	// TrackOldest keeps each plain task's stamp (EnqueuePlain) for
	// Mailbox.OldestStamp (else 0), at 8 bytes per ring slot.
	TrackOldest bool

	// MeasureService counts the tasks each mailbox serves while a queue
	// stands, for Mailbox.ServiceTime (else 0), at an atomic add per task.
	MeasureService bool

	// Ran, if set, is called unlocked once every task of a batch on m has
	// settled, even after a Goexit, with how many turns (Turn.Batched) and
	// plain tasks ran, so the executor gives back what they held at once.
	// With Plain and the turns' Work, a drive loop's only call back up.
	Ran func(m *Mailbox, turns, plains int)

	// Plain runs plain tasks (EnqueuePlain); it must be set if any are queued.
	Plain Plain

	// Clock, if set, is read as a hold begins, for Mailbox.HeldSince (and a
	// lower bound in ServiceTime): one call per task. Its times must be
	// within 2^62 of its zero; a hold begun at 0 counts as none.
	Clock func() int64

	// Room is how many tasks a mailbox may have pending before submissions
	// that park (Mailbox.Park) wait for room; 0 means no cap.
	Room int

	// Released, if set, is called when a slot is given back and nothing
	// took it, for an owner waiting for Active() == 0; it must not block.
	Released func()
}

// NewRunner returns a Runner of limit slots on pool; throughput is drive's budget.
func NewRunner(pool pond.Pool, limit, throughput int, opt RunnerOptions) *Runner {
	return &Runner{pool: pool, limit: int32(limit), throughput: throughput, opt: opt}
}

// TryAcquire takes a free slot without waiting.
func (r *Runner) TryAcquire() bool {
	for {
		n := r.active.Load()
		if n >= r.limit {
			return false
		}
		if r.active.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Acquire takes a slot, waiting behind the work already in the ready queue
// if none is free. A nested call uses it to get back the slot it lent.
func (r *Runner) Acquire() {
	if r.nready.Load() == 0 && r.TryAcquire() {
		return
	}
	ch := make(chan struct{})
	r.push(item{ch})
	r.kick()
	<-ch
}

// Release gives up a slot owned by a goroutine that will run nothing else;
// the slot goes to the head of the ready queue, if any.
func (r *Runner) Release() {
	r.active.Add(-1)
	r.kick()
	r.released()
}

func (r *Runner) released() {
	if r.opt.Released != nil {
		r.opt.Released()
	}
}

func (r *Runner) Active() int { return int(r.active.Load()) }

// Wait blocks until every drive loop started so far has returned.
func (r *Runner) Wait() { r.loops.Wait() }

// Dispatch schedules a drive loop for m, which its caller marked driven.
func (r *Runner) Dispatch(m *Mailbox) {
	if r.nready.Load() == 0 && r.TryAcquire() {
		r.launch(m)
		return
	}
	r.push(item{m})
	r.kick()
}

func (r *Runner) requeue(m *Mailbox) { r.push(item{m}) }

func (r *Runner) push(it item) {
	r.mu.Lock()
	r.ready.push(it)
	r.nready.Add(1)
	r.mu.Unlock()
}

func (r *Runner) pop() (item, bool) {
	r.mu.Lock()
	it, ok := r.ready.pop()
	if ok {
		r.nready.Add(-1)
	}
	r.mu.Unlock()
	return it, ok
}

// kick starts ready work while slots are free. Pushers call it after
// pushing and releasers after releasing, so whichever of the two comes
// second sees the other: no item waits while a slot is free.
func (r *Runner) kick() {
	for r.nready.Load() > 0 && r.TryAcquire() {
		it, ok := r.pop()
		if !ok {
			r.active.Add(-1)
			r.released()
			continue
		}
		r.start(it)
	}
}

// start runs it on the slot its caller acquired.
func (r *Runner) start(it item) {
	switch v := it.v.(type) {
	case chan struct{}:
		close(v) // the slot passes to the waiting goroutine
	case *Mailbox:
		r.launch(v)
	default:
		r.spawn(func() { r.loop(it) })
	}
}

func (r *Runner) spawn(f func()) {
	r.loops.Add(1)
	if err := r.pool.Go(f); err != nil {
		go f() // pool stopped or full: accepted work is never dropped
	}
}

// loop runs it on a slot, then the next ready items, until the ready queue
// is empty and the slot is released (an empty item starts with the next).
func (r *Runner) loop(it item) {
	defer r.loops.Done()
	r.serve(it)
}

// takeOver, deferred as a loop's goroutine exits by runtime.Goexit, hands its slot
// to a fresh loop that runs rest, then serves it (the exiting one stays in loops).
func (r *Runner) takeOver(rest func(), it item) {
	r.spawn(func() {
		defer r.loops.Done()
		rest()
		r.serve(it)
	})
}

func (r *Runner) serve(it item) {
	for {
		t := it.turn()
		if m := it.mailbox(); m != nil {
			t = m.drive(r.throughput)
		}
		if t != nil {
			r.runGranted(t)
		}
		var ok bool
		if it, ok = r.next(); !ok {
			return
		}
	}
}

// runGranted runs a granted multi-key or shared task and gives its holds
// back; on a Goexit the deferred call still ends it and hands the slot on.
func (r *Runner) runGranted(t *Turn) {
	if !t.start() {
		return // canceled while waiting for a slot; its canceler settles it
	}
	returned := false
	defer func() {
		t.Vacate()
		t.Finish()
		t.work.Settle()
		if !returned {
			r.takeOver(func() {}, item{})
		}
	}()
	t.work.Run()
	returned = true
}

// next returns a loop's next ready item, or false once it has released the slot.
func (r *Runner) next() (item, bool) {
	for {
		if r.nready.Load() > 0 {
			if it, ok := r.pop(); ok {
				if c := it.resume(); c != nil {
					close(c)
					return item{}, false
				}
				return it, true
			}
		}
		r.active.Add(-1)
		if r.nready.Load() == 0 || !r.TryAcquire() {
			r.released()
			return item{}, false
		}
	}
}

// readyQueue is the ready items in FIFO order: mailboxes, one a waiting key,
// as bare pointers (half an item); the rare others in a FIFO of their own,
// each going once the mailboxes pushed before it are popped.
type readyQueue struct {
	mbs    fifo[*Mailbox]
	others fifo[other]
	pushed uint32 // mailboxes ever pushed; wraps
}

type other struct {
	v      any    // a *Turn or a chan struct{}
	before uint32 // readyQueue.pushed when v was pushed
}

func (q *readyQueue) push(it item) {
	if m, ok := it.v.(*Mailbox); ok {
		q.mbs.push(m)
		q.pushed++
		return
	}
	q.others.push(other{v: it.v, before: q.pushed})
}

func (q *readyQueue) pop() (item, bool) {
	if o, ok := q.others.peek(); ok {
		popped := q.pushed - uint32(q.mbs.size)
		if int32(o.before-popped) <= 0 {
			q.others.pop()
			return item{o.v}, true
		}
	}
	if m, ok := q.mbs.pop(); ok {
		return item{m}, true
	}
	return item{}, false
}

// EachGranted calls f, under the runner's lock, for every granted turn waiting
// for a slot, for a Close that gives up (Cancel beats start; runGranted skips).
func (r *Runner) EachGranted(f func(t *Turn)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := &r.ready.others
	for i := range q.size {
		if t, ok := q.buf[(q.head+i)&(len(q.buf)-1)].v.(*Turn); ok {
			f(t)
		}
	}
}

// fifo is a growable ring of Ts.
type fifo[T any] struct {
	buf        []T
	head, size int
}

func (q *fifo[T]) push(v T) {
	if q.size == len(q.buf) {
		q.resize(max(2*len(q.buf), 16))
	}
	q.buf[(q.head+q.size)&(len(q.buf)-1)] = v
	q.size++
}

func (q *fifo[T]) peek() (T, bool) {
	if q.size == 0 {
		var zero T
		return zero, false
	}
	return q.buf[q.head], true
}

func (q *fifo[T]) pop() (T, bool) {
	var zero T
	if q.size == 0 {
		return zero, false
	}
	v := q.buf[q.head]
	q.buf[q.head] = zero
	q.head = (q.head + 1) & (len(q.buf) - 1)
	q.size--
	if len(q.buf) > 64 && q.size <= len(q.buf)/8 {
		q.resize(len(q.buf) / 4) // give back what a burst took
	}
	return v, true
}

func (q *fifo[T]) resize(n int) {
	buf := make([]T, n)
	for i := range q.size {
		buf[i] = q.buf[(q.head+i)&(len(q.buf)-1)]
	}
	q.buf, q.head = buf, 0
}
