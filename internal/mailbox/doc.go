// Package mailbox owns one key's FIFO queue, the holds on it, and the loop
// that drives it on a bounded pool.
//
// A Mailbox is the per-key serial executor: tasks enter its queue in FIFO
// order and leave it when the mailbox grants them a hold. An exclusive hold
// (Do, Submit, one key of a DoMany) admits one task; a shared hold (DoShared)
// admits every consecutive shared task at the head together. A task that
// needs several mailboxes runs once every one of them has granted it.
//
// A Runner owns the execution slots (the WithWorkers bound) and a FIFO ready
// queue of work waiting for a slot, and starts drive loops on a pond pool
// with pool.Go. A drive loop takes up to its throughput of a mailbox's
// queued tasks as one batch (one lock round trip), runs them in a row, and
// then yields its slot to the next ready mailbox, if one waits (otherwise it
// takes the next batch). A single-key exclusive task that nobody
// needs to find through a Turn can be queued without one, as a slot in a
// ring the mailbox reuses (see Plain), in the same FIFO order; its owner
// can still take it out (TakePlain).
//
// A Mailbox has no lock of its own: it is guarded by the lock of the router
// shard that maps its key, so that "this mailbox is idle" and "remove it from
// the table" are decided under the lock every submitter takes. Submissions
// parked by a blocking policy wait in the mailbox's waiting room and enter
// the queue, in order, as soon as a task ends and makes room (even in the
// middle of a batch), unless their owner refuses them (Work.Promote). The package never looks keys up,
// never decides whether a new submission is admitted and never calls user
// code except through Work.Run and Plain.RunPlain.
package mailbox
