// Package mailbox documents perkey's per-key FIFO and the loop that drives
// it. It has no API of its own: the machinery lives in
// github.com/perkey/perkey/internal/mailbox, where only the executor can
// reach it, because its methods follow a lock protocol (a mailbox is
// guarded by the lock of its router shard) that only the executor and the
// router keep. Everything a user needs is in package executor.
//
// # What a mailbox is
//
// A mailbox is one key's serial executor: a FIFO queue of turns, and the
// holds granted on the key. Turns enter in submission order and leave when
// granted a hold: an exclusive hold (Do, Submit, Go, one key of a DoMany)
// admits one turn, a shared hold (DoShared) every consecutive shared turn
// at the head. A DoMany turn runs once all its mailboxes have granted it.
//
// Most asynchronous work needs less than a turn: nothing looks up a Go or
// a Submit while it waits, and its owner takes it out by its slot (its ctx
// ended, or Close gave up). Such a task is a plain slot, fn and an arg, in
// a ring the mailbox reuses, run by the runner's one Plain (which, for a
// Go with context.Background() and no stripes, makes fn's ctx on the
// worker). Slots and turns share one FIFO order: each turn records how
// many slots were queued before it. A plain task needs no per-task node,
// and a drive loop reads a batch's slots in a row instead of chasing a
// pointer per task. A wait on such a Submit from inside a task finds it by
// its ring position, to check the wait for a cycle.
//
// A Do on an idle key with a slot free (its own, or for a nested call its
// task's) is a plain task too: the caller holds the mailbox without a
// turn, runs fn itself, then gives the hold back, handing the key to
// whatever queued meanwhile. If nothing did, and the router allows it (one
// such fast hold per shard), the hold goes back in one compare-and-swap on
// the pending count, without the lock; whoever locks the mailbox next
// settles it, and whoever comes for the key while it is held first clears
// the bit that swap needs, so the holder gives it back under the lock
// ("Fast holds" in plain.go).
//
// A runner owns the execution slots (the WithWorkers bound) and a FIFO
// ready queue of work waiting for one, and starts drive loops on a pond
// pool with pool.Go. A drive loop takes up to WithThroughput of a
// mailbox's queued turns as one batch, under one lock round trip, runs
// them, then gives its slot to the next ready mailbox or, if none waits,
// takes the next batch: a hot key batches, and other keys still get a
// worker after at most WithThroughput of its tasks.
//
// A mailbox's size is most of what a waiting key costs, so it keeps only
// what plain work needs (64 bytes: its ring, counts, hold, and a pointer
// to its home, the router shard whose lock guards it); the turn queue,
// waiting room, shared holds and clocks are a second object made on first
// need.
//
// A mailbox exists only while its key has work. "This mailbox is idle" and
// "remove it from the table" are decided under the one lock every
// submitter of the key takes, so a submission racing with a retirement
// either finds the mailbox live or creates a fresh one: it is never lost,
// and never runs beside another task of its key.
//
// # What it must never do
//
// A mailbox never looks keys up, never decides whether a submission is
// admitted and never calls user code except through the executor's Work
// (whose Run contains fn's panics and Goexits). It never holds a lock while
// running work.
package mailbox
