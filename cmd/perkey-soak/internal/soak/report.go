package soak

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/perkey/perkey/backpressure"
)

// Report is what a soak run measured and found.
type Report struct {
	Config  Config
	Elapsed time.Duration

	Ops                  [numOps]int64 // producer steps by kind
	Nested               int64         // nested calls made from inside fns
	NestRefused          int64         // of those, refused: behind a DoMany waiting for their task
	NestDeadlock         int64         // of those, refused: they would have closed a cycle of waits
	Runs                 int64         // fns that ran
	WaitP50, WaitP99     time.Duration // submission to fn start
	WaitMax              time.Duration
	WaitMaxTask          string        // which task waited WaitMax
	CloseP50, CloseMax   time.Duration // how long Close took
	Generations          int
	Forced, Drained      int64 // Closes that gave up at their deadline, and that drained
	ConcurrentCloses     int64 // generations closed from two goroutines at once
	Executor             totals
	OK, TaskErrors       int64    // results of fns that ran
	Panics, Slow, CutOff int64    // CutOff: slow fns cut short by their ctx
	CtxResults           int64    // calls that ended with their ctx's error, fn never ran
	ClosedResults        int64    // calls refused or abandoned with ErrClosed
	Rejected             [4]int64 // ErrBusy results by backpressure.Scope
	Gates, GatesVoid     int64    // cancel-while-held scenarios: provable, and not

	Goexits     int64 // fns that called runtime.Goexit
	GoexitRes   int64 // results that were ErrGoexit (Wait, or a Do whose fn ran on a worker)
	CallersGone int64 // blocking calls that never returned: fn ran inline and took the caller's goroutine
	Aside       int64 // blocking calls made from a goroutine of their own, since fn might end it
	GoCalls     int64 // Go calls, and of those
	GoAccepted  int64 // accepted
	Handled     [numHandled]int64
	ObsPanics   int64 // observer panics the executor recovered
	ClosedEarly int64 // giving-up Closes that returned while fns of theirs still ran
	Stubborn    int64 // fns that ignored their ctx

	GiveUps GiveUpCounts

	Rings   RingCounts
	Batches BatchCounts

	Violations [numInvariants]int64
	Details    []string  // the first violations, described
	Heap       [3]uint64 // heap in use after GC: start, middle, end
	Goroutines [2]int    // before the run, after it
	Stuck      bool      // producers still blocked at the end (their calls are counted lost)
}

// RingCounts is what the deadlock rings came to (see ring.go).
type RingCounts struct {
	Formed, Isolated   int64 // rings whose members all met at the barrier; of those, on keys of their own outside striped mode
	Aborted, Skipped   int64 // rings not formed (a member refused, or missing at the barrier); ring steps that found no slot free
	AbortedOwn         int64 // of the rings not formed, those on keys of their own
	RefusedMember      int64 // of the rings not formed, those a member's Submit was refused for
	Sizes              [6]int64
	Deadlocks          int64         // ErrDeadlock results
	Kinds, ByDeadlock  [numOps]int64 // the members' nested calls by kind, and those refused with ErrDeadlock
	Excused            int64         // rings in which a nested call was refused otherwise, and of those refusals:
	Busy, Ended, Reen  int64         // ErrBusy, ErrClosed or a ctx error (a Close gave up), ErrReentrant
	Multi              int64         // rings on the load's keys with more than one ErrDeadlock
	Leftovers, LeftRan int64         // Tasks of nested Submits whose Wait was refused, awaited by the producer; of those, that ran
	TimeP50, TimeMax   time.Duration // from the barrier to the members' end
}

// GiveUpCounts is what the checks after giving-up Closes saw (see giveup.go).
type GiveUpCounts struct {
	Checked        int64         // giving-up Closes checked
	Stubborn       int64         // of those, with plant's task, which ignores its ctx, still running at the check's end
	Planted        int64         // tasks plant queued behind its stubborn task (accepted)
	PlantFailed    int64         // forced Closes plant could not prepare
	EndP50, EndMax time.Duration // from Close's return until no unstarted task was left
}

// BatchCounts is what the Batcher's BatchFunc was handed and did.
type BatchCounts struct {
	Batches, Messages, Max int64
	Sizes                  [maxBatch + 1]int64
	FailedWhole            int64 // batches failed as a whole
	FailedSingle           int64 // messages failed alone (BatchErrors)
	Panicked               int64 // batches that panicked
}

// totals sums the executor's own Stats over every generation.
type totals struct {
	Submitted, Completed, Canceled, Rejected, Panicked uint64
}

// HeapGrowth is the heap in use at the end minus at the start.
func (r *Report) HeapGrowth() int64 { return int64(r.Heap[2]) - int64(r.Heap[0]) }

// Passed reports whether every invariant held and the heap stayed flat.
func (r *Report) Passed() bool {
	for _, n := range r.Violations {
		if n != 0 {
			return false
		}
	}
	return !r.Stuck && r.HeapGrowth() <= heapSlack
}

func (h *harness) fill(r *Report, prods []*producer) {
	var wait histogram
	for _, p := range prods {
		wait.merge(&p.wait)
	}
	r.Runs = int64(wait.total())
	r.WaitP50, r.WaitP99, r.WaitMax = wait.quantile(0.50), wait.quantile(0.99), time.Duration(wait.max.Load())
	h.slowMu.Lock()
	r.WaitMaxTask = h.slowestTask
	h.slowMu.Unlock()
	r.CloseP50, r.CloseMax = h.closeTime.quantile(0.50), time.Duration(h.closeTime.max.Load())
	r.Nested, r.NestRefused, r.NestDeadlock = h.nested.Load(), h.nestRefused.Load(), h.nestDeadlock.Load()
	for i := range r.Ops {
		r.Ops[i] = h.calls[i].Load()
	}
	h.genMu.Lock()
	r.Generations = int(h.generations.Load())
	for _, s := range h.gens {
		r.Executor.Submitted += s.Submitted
		r.Executor.Completed += s.Completed
		r.Executor.Canceled += s.Canceled
		r.Executor.Rejected += s.Rejected
		r.Executor.Panicked += s.Panicked
	}
	h.genMu.Unlock()
	r.Forced, r.Drained, r.ConcurrentCloses = h.forced.Load(), h.drained.Load(), h.concurrent.Load()
	r.OK, r.TaskErrors, r.Panics = h.ok.Load(), h.failed.Load(), h.panics.Load()
	r.Slow, r.CutOff = h.slow.Load(), h.cut.Load()
	r.CtxResults, r.ClosedResults = h.ctxRes.Load(), h.closedRes.Load()
	for i := range r.Rejected {
		r.Rejected[i] = h.rejected[i].Load()
	}
	r.Gates, r.GatesVoid = h.gates.Load(), h.gateVoid.Load()
	r.Goexits, r.GoexitRes, r.CallersGone, r.Aside = h.goexits.Load(), h.goexitRes.Load(), h.callersGone.Load(), h.aside.Load()
	r.GoCalls, r.GoAccepted = h.goCalls.Load(), h.goAccepted.Load()
	for i := range r.Handled {
		r.Handled[i] = h.handled[i].Load()
	}
	r.ObsPanics, r.ClosedEarly, r.Stubborn = h.obsPanics.Load(), h.closedEarly.Load(), h.stubborn.Load()
	gs := &h.giveUps
	r.GiveUps = GiveUpCounts{Checked: gs.checked.Load(), Stubborn: gs.stubborn.Load(), Planted: gs.planted.Load(),
		PlantFailed: gs.plantFailed.Load(), EndP50: gs.settled.quantile(0.50), EndMax: time.Duration(gs.settled.max.Load())}
	rs := &h.ringStat
	r.Rings = RingCounts{
		Formed: rs.formed.Load(), Isolated: rs.isolated.Load(), Aborted: rs.aborted.Load(), Skipped: rs.skipped.Load(),
		AbortedOwn: rs.abortedOwn.Load(), RefusedMember: rs.refusedMember.Load(),
		Deadlocks: rs.deadlocks.Load(), Excused: rs.excused.Load(),
		Busy: rs.busy.Load(), Ended: rs.ended.Load(), Reen: rs.reent.Load(), Multi: rs.multi.Load(),
		Leftovers: rs.leftovers.Load(), LeftRan: rs.leftRan.Load(), TimeP50: rs.time.quantile(0.50), TimeMax: time.Duration(rs.time.max.Load()),
	}
	for i := range r.Rings.Sizes {
		r.Rings.Sizes[i] = rs.sizes[i].Load()
	}
	for i := range r.Rings.Kinds {
		r.Rings.Kinds[i], r.Rings.ByDeadlock[i] = rs.kinds[i].Load(), rs.refusedKinds[i].Load()
	}
	bs := &h.batchSt
	r.Batches = BatchCounts{Batches: bs.batches.Load(), Messages: bs.messages.Load(), Max: bs.max.Load(),
		FailedWhole: bs.failedWhole.Load(), FailedSingle: bs.failedSingle.Load(), Panicked: bs.panicked.Load()}
	for i := range r.Batches.Sizes {
		r.Batches.Sizes[i] = bs.sizes[i].Load()
	}
	for i := range r.Violations {
		r.Violations[i] = h.v.n[i].Load()
	}
	h.v.mu.Lock()
	r.Details = append([]string(nil), h.v.details...)
	h.v.mu.Unlock()
}

// Print writes the report as an aligned plain-text table.
func (r *Report) Print(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "perkey-soak: seed %d, %v, %d producers, %d keys (Zipf s=1.1), %d workers, restart every %v, policies %s\n\n",
		c.Seed, c.Duration, c.Producers, c.Keys, c.Workers, c.RestartEvery, strings.Join(c.Policies, ","))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	// row writes a label, a right-aligned figure and a note.
	row := func(label string, figure any, note string) {
		fmt.Fprintf(tw, "%s\t%16v\t%s\n", label, figure, note)
	}
	secs := r.Elapsed.Seconds()
	perSec := func(n int64) string { return count(int64(float64(n) / secs)) }
	var ops int64
	for _, n := range r.Ops {
		ops += n
	}

	row("LOAD HELD", "", "")
	row("  elapsed", r.Elapsed.Round(time.Millisecond), "")
	row("  tasks run (fn started)", count(r.Runs), perSec(r.Runs)+"/s")
	row("  submissions accepted", count(int64(r.Executor.Submitted)), perSec(int64(r.Executor.Submitted))+"/s")
	row("  producer steps", count(ops), perSec(ops)+"/s")
	var mix []string
	for o, n := range r.Ops {
		mix = append(mix, fmt.Sprintf("%s %.0f%%", op(o), 100*float64(n)/float64(max(ops, 1))))
	}
	row("  mix", "", strings.Join(mix, ", "))
	row("  nested calls (from fns)", count(r.Nested), perSec(r.Nested)+"/s, "+count(r.NestRefused)+" refused behind a DoMany, "+
		count(r.NestDeadlock)+" as deadlocks")
	rc := r.Rings
	row("  deadlock rings formed", count(rc.Formed), fmt.Sprintf("of 2/3/5 tasks: %s/%s/%s; %s on keys of their own outside striped mode",
		count(rc.Sizes[2]), count(rc.Sizes[3]), count(rc.Sizes[5]), count(rc.Isolated)))
	row("  rings not formed", count(rc.Aborted), fmt.Sprintf("%s on keys of their own, %s as a member's Submit was refused; %s ring steps skipped (no slot free)",
		count(rc.AbortedOwn), count(rc.RefusedMember), count(rc.Skipped)))
	row("  ErrDeadlock in rings", count(rc.Deadlocks), fmt.Sprintf("to Do %s/%s, Submit+Wait %s/%s, DoShared %s/%s, DoMany %s/%s nested calls",
		count(rc.ByDeadlock[opDo]), count(rc.Kinds[opDo]), count(rc.ByDeadlock[opSubmit]), count(rc.Kinds[opSubmit]),
		count(rc.ByDeadlock[opDoShared]), count(rc.Kinds[opDoShared]), count(rc.ByDeadlock[opDoMany]), count(rc.Kinds[opDoMany])))
	row("  rings broken otherwise", count(rc.Excused), fmt.Sprintf("a nested call refused by ErrBusy %s, a giving-up Close %s, ErrReentrant %s; %s on load keys with 2+ ErrDeadlock",
		count(rc.Busy), count(rc.Ended), count(rc.Reen), count(rc.Multi)))
	row("  ring time p50 / max", dur(rc.TimeP50)+" / "+dur(rc.TimeMax), fmt.Sprintf("from the barrier to the members' end; %s nested Submits left by a refused Wait, awaited from outside (%s ran)",
		count(rc.Leftovers), count(rc.LeftRan)))
	bc := r.Batches
	mean := 0.0
	if bc.Batches > 0 {
		mean = float64(bc.Messages) / float64(bc.Batches)
	}
	row("  Batcher batches run", count(bc.Batches), fmt.Sprintf("%s messages, mean %.2f, max %d (WithMaxBatch(%d)), %s of one",
		count(bc.Messages), mean, bc.Max, maxBatch, count(bc.Sizes[1])))
	row("  Batcher failures", count(bc.FailedWhole+bc.Panicked), fmt.Sprintf("batches: %s failed whole, %s panicked; %s messages failed alone (BatchErrors)",
		count(bc.FailedWhole), count(bc.Panicked), count(bc.FailedSingle)))
	row("  Go calls (fire and forget)", count(r.GoCalls), count(r.GoAccepted)+" accepted")
	var handled int64
	for _, n := range r.Handled {
		handled += n
	}
	row("  Go failures handled", count(handled), fmt.Sprintf("error %s, panic %s, Goexit %s, never ran %s",
		count(r.Handled[handledError]), count(r.Handled[handledPanic]), count(r.Handled[handledGoexit]), count(r.Handled[handledNeverRan])))
	row("  queue wait p50", dur(r.WaitP50), "")
	row("  queue wait p99", dur(r.WaitP99), "")
	row("  queue wait max", dur(r.WaitMax), r.WaitMaxTask)
	row("", "", "")
	row("FAULTS SURVIVED", "", "")
	row("  generations (executors)", count(int64(r.Generations)), "")
	row("  forced Closes (deadline <= 1ms)", count(r.Forced), "")
	row("  drained Closes", count(r.Drained), "")
	row("  Closes from two goroutines", count(r.ConcurrentCloses), "")
	row("  Close time p50 / max", dur(r.CloseP50)+" / "+dur(r.CloseMax), "")
	row("  forced Closes back before their fns", count(r.ClosedEarly), "")
	gu := r.GiveUps
	row("  giving-up Closes checked", count(gu.Checked), fmt.Sprintf("%s with a task that ignores its ctx still running %v after; %s tasks planted behind it (%s plants failed)",
		count(gu.Stubborn), giveUpLimit, count(gu.Planted), count(gu.PlantFailed)))
	row("  unstarted tasks all ended p50 / max", dur(gu.EndP50)+" / "+dur(gu.EndMax), fmt.Sprintf("after a giving-up Close returned (limit %v)", giveUpLimit))
	row("  tasks that ignored their ctx", count(r.Stubborn), "")
	row("  panics recovered", count(r.Panics), "")
	row("  Goexits (fn called runtime.Goexit)", count(r.Goexits), fmt.Sprintf("%s results ErrGoexit, %s callers' goroutines ended (%s calls made aside)",
		count(r.GoexitRes), count(r.CallersGone), count(r.Aside)))
	row("  observer panics recovered", count(r.ObsPanics), fmt.Sprintf("1 event in %d", obsPanicEvery))
	row("  task errors returned", count(r.TaskErrors), "")
	row("  slow tasks (0-2ms)", count(r.Slow), fmt.Sprintf("%s cut short by ctx", count(r.CutOff)))
	row("  calls ended by their ctx", count(r.CtxResults), "")
	row("  accepted, never ran (Canceled)", count(int64(r.Executor.Canceled)), "")
	row("  cancels behind a held key", count(r.Gates), fmt.Sprintf("%s not provable", count(r.GatesVoid)))
	row("  rejections (ErrBusy)", count(r.Rejected[backpressure.ScopeKey]+r.Rejected[backpressure.ScopeGlobal]+r.Rejected[backpressure.ScopeDelay]),
		fmt.Sprintf("key %s, global %s, delay %s", count(r.Rejected[backpressure.ScopeKey]),
			count(r.Rejected[backpressure.ScopeGlobal]), count(r.Rejected[backpressure.ScopeDelay])))
	row("  ErrClosed during restarts", count(r.ClosedResults), "")
	row("", "", "")
	row("INVARIANTS (all must be 0)", "", "")
	for i, n := range r.Violations {
		row("  "+Invariant(i).String(), count(n), "")
	}
	row("", "", "")
	row("MEMORY", "", "")
	row("  heap in use, start", mib(r.Heap[0]), "")
	row("  heap in use, middle", mib(r.Heap[1]), "")
	row("  heap in use, end", mib(r.Heap[2]), fmt.Sprintf("%+.1f MiB (limit +16)", float64(r.HeapGrowth())/(1<<20)))
	row("  goroutines before / after", fmt.Sprintf("%d / %d", r.Goroutines[0], r.Goroutines[1]), "")
	tw.Flush()
	if r.Stuck {
		fmt.Fprintln(w, "\nproducers were still blocked in calls at the end")
	}
	if len(r.Details) > 0 {
		fmt.Fprintln(w, "\nfirst violations:")
		for _, d := range r.Details {
			fmt.Fprintln(w, "  "+d)
		}
	}
	verdict := "PASS"
	if !r.Passed() {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "\n%s\n", verdict)
}

// count formats n with thousands separators.
func count(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, d := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func dur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	case d >= time.Microsecond:
		return d.Round(100 * time.Nanosecond).String()
	}
	return d.String()
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
