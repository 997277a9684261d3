// Package soak is perkey's soak and chaos harness: it runs mixed, faulty
// load against one executor at a time, restarts the executor under load, and
// checks, while it runs, the invariants an executor that replaces locks must
// keep. cmd/perkey-soak is its command line; Run is the whole of it.
//
// # Load
//
// Producers (goroutines) draw keys from a Zipf distribution (a few hot keys,
// a long tail) and call Do (sometimes through executor.Call), Submit in
// batches followed by Wait, DoMany on 2–3 keys, DoShared, and Go in batches
// they do not wait for (its failures reach the generation's error handler).
// Their contexts time out, are canceled before the call, while it is queued
// or while fn runs. Their tasks return at once, return an error, panic,
// call runtime.Goexit, sleep 0–2 ms (cut short if their ctx ends), or, one
// in a hundred, sleep 0–2 ms whatever their ctx does. Nothing watches a
// queued Go's, Submit's or Batcher message's ctx: its end is noticed at the
// head of its key's queue, by a Wait, at a cap or by a giving-up Close, so
// the harness never waits for such a task without a Wait (or a bound). A
// blocking call whose fn may call Goexit (its own fn, or a nested call that
// may run inline on fn's goroutine) is made from a goroutine of its own: if
// fn runs inline, on the caller's goroutine, that goroutine exits with it
// and the call never returns, and the producer must survive that. One fn in twenty (outside striped mode)
// first makes a nested call with its own ctx on keys above all of its keys
// (a Do, a Submit then a Wait, a DoShared or a DoMany on two keys), bounded
// by a 5 ms timeout, and so on down a chain; the harness checks its result
// like any other call's (ErrReentrant is right for a nested call behind a
// DoMany that waits for one of the fn's keys, ErrDeadlock for one that
// would close a longer cycle of waits), and the fn lends its slot
// while it waits (the workers bound is checked with that in mind).
//
// One step in a hundred is a deadlock ring: 2, 3 or 5 tasks (Submits) on
// distinct keys each hold their key, meet at a barrier, and then each makes
// a nested call on the next key of the ring (a Do, a Submit then a Wait on
// its Task, a DoShared, or a DoMany on that key and a free one) with its
// own ctx, which never ends (no timeout; only a Close that gives up ends
// it). Each waits for the next: a cycle the executor must break by
// refusing one of the calls with ErrDeadlock, after which the others run.
// Half the rings use keys of their own (a slot of keys beyond -keys that no
// other task uses), half the load's Zipf keys. At most WithWorkers - 2
// members are in flight, since each holds a worker at the barrier; a
// member that finds the others missing after ringPatience abandons the
// ring, as do the rest (the ring did not form, which is no violation).
// Under Block with a per-key cap a DoMany polls for room rather than
// waiting in line, which the executor's detection cannot see (its
// documented limit), so a ring makes a Do there instead.
//
// Every generation has a Batcher (WithMaxBatch(8)) whose messages are
// harness tasks: 3% of the steps Submit 2–10 messages over 1–2 keys (one
// time in three followed by a Batcher.Do or a Do on one of the keys, which
// must start after them, and a Do splits the key's messages into two
// batches) and Wait for each, 1% are one Batcher.Do. The BatchFunc is a
// task of its key: it checks, as every fn does, that nothing else of the
// key runs beside it and the worker bound, and for each message that it
// starts once, after its producer's earlier submissions on the key, and
// belongs to the batch's key. A message's behaviour says what its batch
// does: fail that message alone (executor.BatchErrors), fail the whole
// batch, panic, or sleep up to 1 ms; each message's Wait or Do must end
// with what its batch made of it. One generation in four has no Observer,
// so the executor's paths without one (the Batcher's among them) are
// checked against Stats too.
//
// A producer refused with ErrBusy pauses for up to 0.5 ms before its next
// step, as a client backing off would. Every executor generation gets its own
// policy (FailFast, Block, MaxQueueDelay in turn), caps (WithMaxQueuePerKey,
// WithMaxPending), throughput and, for one in four, striped mode, and an
// Observer that counts every event and panics on one in obsPanicEvery
// (1,000), which the executor must recover without losing the event or the
// task. Every RestartEvery the generation is closed under load, either with
// a deadline of at most 1 ms (forced: queued tasks fail with ErrClosed,
// running ones see their ctx end, and Close returns without waiting for
// them) or with a long one (drained), and a new executor replaces it.
// Before a forced Close the harness plants, on a key of its own, a task
// that ignores its ctx for 300 ms, running, with Submits, Gos, Batcher
// messages (one whose ctx has ended) and a Do queued behind it, in its
// drive loop's batch or in the queue (see plant). A
// generation whose Close gave up is closed again in the background, which
// must return nil once its fns have ended. Producers that meet ErrClosed
// wait for the replacement and go on.
//
// # Invariants
//
// Each has a counter that must be 0 at the end.
//
//   - overlap: an exclusive task (Do, Submit, Go, one key of DoMany)
//     started while another task of one of its keys was running, or a
//     shared task started while an exclusive one of its key was running.
//     Occupancy is kept per generation: once a Close gives up, its running
//     tasks may go on beside the next executor's, as Close documents. A
//     Close that returns nil while a fn of its generation still runs is
//     counted under counters.
//   - FIFO break: tasks that one producer submitted on one key, each call
//     returning before the next began (a Submit batch, then possibly a
//     blocking call on the same keys), started out of submission order. Only
//     tasks that started are compared; a canceled or rejected one drops out.
//     Across batches the order is implied: a producer waits for every task
//     of a batch before it starts the next.
//   - lost: an accepted task whose submitter never heard of its end. Per
//     generation, blocking calls started vs returned and accepted Submits vs
//     their Wait returning; the counts must meet within 10 s of the
//     generation's Close.
//   - ran twice: fn of one submission started more than once (each
//     submission carries its own started bit, so the check costs no memory
//     that grows with the run).
//   - ran after cancel: fn started after its submitter had been told that
//     it never ran, or a task whose ctx was canceled while its key was
//     provably held ran anyway. "Provably held": the producer submits a gate
//     task and then the victim on the same key, waits until the gate's fn is
//     running, cancels the victim's ctx, and sees the gate still running
//     after cancel returned. The victim is behind the gate in the key's FIFO,
//     so its ctx ended before it could start and it must never run.
//   - slow withdrawal: in that gate scenario, the victim's Wait did not
//     return within 5 s while the gate still held the key (behaviour 6: a
//     canceled task gives its place back at once).
//   - unstarted tasks a forced Close left: after a Close that gave up, a
//     task of its generation that had not started and had not ended
//     giveUpLimit (100 ms) after Close returned, even while the planted
//     task that ignores its ctx still runs: an accepted Submit, gate,
//     ring member or Batcher message whose Task's Done was not closed; a
//     call (Do, Call, DoShared, DoMany, Batcher.Do, nested, or a Submit or
//     Go still being made) that had not returned; per key, Go tasks that
//     never started beyond the never-ran failures the error handler had
//     heard for that key; or Stats.Queued not 0. Each violation names
//     the task (or key) and its kind, and says when it did end (watched
//     up to 5 s more). Calls made once the Close had begun are refused at
//     once and not counted; a task that starts in the meantime (its start
//     raced the give-up) is none of this check's concern.
//   - wrong outcome: a call's result disagrees with what happened to fn. fn
//     ran: the result must be exactly what fn returned (nil, this task's
//     error, a *PanicError carrying this task's panic value, Call's value),
//     or ErrGoexit if fn ended through runtime.Goexit (its own, or that of a
//     nested call that ran inline on its goroutine). fn did not run: the
//     result must be ErrBusy, ErrClosed or an error matching the caller's
//     ended ctx. A blocking call that never returns (its goroutine exited)
//     is right only if its fn ran and ended through Goexit.
//   - false delay rejection: an ErrBusy from MaxQueueDelay (ScopeDelay)
//     whose BusyError.Wait, the age it claims for the key's oldest queued
//     task, is longer than the executor has existed.
//   - Go failures not handled once: a Go task that failed (its error, a
//     *PanicError with its panic value, ErrGoexit) did not reach the error
//     handler exactly once, with its key, or one that succeeded reached it;
//     per key, the Go tasks that never ran differ in number from the
//     failures the handler was handed for them (a ctx error, or ErrClosed,
//     which only a Close that gave up may cause); or the handler was handed
//     anything else.
//   - counters: a Close meant to drain (a 30 s deadline) that gave up;
//     right after a Close returns nil (for a Close that gave up,
//     right after the later Close, which must return nil), Submitted ==
//     Completed + Canceled, Queued == Running == 0 and no fn of the
//     generation runs; then ActiveKeys reaches 0 within 2 s; once the
//     generation's calls have all returned, the fns the harness saw run
//     equal Completed, its panics equal Panicked and its ErrBusy results
//     equal Rejected, and the observer's counts agree: TaskAccepted with
//     Submitted, TaskStarted with Completed, TaskCanceled with Canceled,
//     TaskRejected (key, global, delay) with Rejected, and TaskFinished by
//     outcome with the fns that returned nil, failed (an error or Goexit)
//     and panicked. While load runs, every 5 ms: Submitted >= Completed +
//     Canceled (the later of two snapshots' Submitted against the earlier's
//     sum, so a Stats that reads its counters one at a time cannot fake a
//     violation), Queued and Running not negative, and HotKeys sorted with
//     positive Pending.
//   - over workers: more fns of one generation running at once than
//     WithWorkers allows, counted by the fns themselves (Stats.Running is
//     not compared: a snapshot that is not atomic may overstate it).
//   - ring not broken once: a deadlock ring formed and every nested call
//     of it ran, none refused (a cycle cannot resolve so); or, on keys of
//     its own outside striped mode, where the ring is the only cycle, more
//     than one call got ErrDeadlock, or one got ErrReentrant (no DoMany of
//     another task is queued there). A call refused otherwise (ErrBusy from
//     a cap or MaxQueueDelay, ErrReentrant behind a DoMany of the load on
//     two of the ring's keys, ErrClosed or the ctx's error from a Close
//     that gave up) may break a ring instead of ErrDeadlock. On the load's
//     keys, or sharing stripes with them, more than one ErrDeadlock is
//     right: a DoMany queued on two keys that are not neighbours in the
//     ring, or a DoMany member's second key on a member's stripe, splits
//     the ring into two cycles, each closed by its own refusal; such rings
//     are counted, not flagged.
//   - ring hung: a formed ring whose members had not all ended ringLimit
//     (10 s) after the barrier. The harness then ends the members' ctx, so
//     their calls give up and the run goes on.
//   - batch out of bounds: a BatchFunc call with no message or more than
//     WithMaxBatch, or with a message of another key. Its other checks
//     count as overlap, FIFO break, ran twice, ran after cancel and wrong
//     outcome, as for any task.
//   - leaked goroutines: after the last Close and the producers' exit,
//     runtime.NumGoroutine does not fall back to its value before the run
//     (plus a slack of 2) within 5 s.
//
// The heap in use after a forced GC is sampled before the load, halfway and
// after the last Close; the run fails if the end exceeds the start by more
// than 16 MiB.
package soak
