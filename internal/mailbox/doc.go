// Package mailbox owns one key's FIFO queue, the holds on it, and the loop
// that drives it on a bounded pool (Runner, which owns the execution slots);
// design notes are in mailbox/README.md.
//
// A Mailbox has no lock of its own: its router shard's lock guards it, so
// "this mailbox is idle" and "remove it from the table" are decided under
// the lock every submitter takes. Parked submissions enter the queue in
// order as soon as a task ends and makes room, even mid-batch, unless their
// owner refuses them (Work.Promote). The package never looks keys up,
// decides admission or calls user code except through Work.Run and
// Plain.RunPlain.
package mailbox
