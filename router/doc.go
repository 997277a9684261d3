// Package router documents how perkey maps keys to live mailboxes. It has
// no API of its own: the machinery lives in
// github.com/perkey/perkey/internal/router, where only the executor can
// reach it, because the router hands out mailboxes with their shard's lock
// held, a protocol only the executor and the mailbox keep. Everything a
// user needs is in package executor.
//
// # What the router owns
//
// The key table and the create/retire race. A mailbox is created on the
// first submission for its key and retired when it drains, both under the
// lock of the table shard the key hashes to, which also guards the mailbox
// itself. A table entry is deleted only if the table still points at that
// very mailbox (the pattern of x/sync's singleflight). A retired mailbox
// stops counting as live at once; its entry goes at the shard's next
// retirement, so a key used over and over by one caller is not deleted and
// inserted again each time. Each shard keeps at most one idle entry and a
// few spare mailboxes, and its table (an open-addressing table of its own,
// probed with the hash that picked the shard, one tag byte and one pointer
// per slot) shrinks once a burst has drained: memory follows the keys that
// are busy now, never the keys ever seen. A table grows and shrinks, as a
// Go map grows, in bounded steps: each insert and remove moves a few
// entries to the new slots, so no call pays for the whole shard.
//
// One mailbox per shard may hold a fast hold: an uncontended Do that gives
// its hold back in one atomic step, without the shard lock, when nobody came
// for the key meanwhile. That mailbox is left idle but neither settled nor
// retired; whoever takes the shard lock next settles it (Acquire of the
// same key takes it up again as it is, with no retirement undone and
// without a table lookup: it compares the key with the fast mailbox's
// first; any other look at the shard retires it first), and whoever comes
// for the key while the hold is taken revokes it, so the holder gives it
// back under the lock as any hold. ActiveKeys stays exact: Live settles
// each shard's one candidate before it counts.
//
// Each shard (and each stripe) is a mailbox.Home: the lock, the runner and
// the owner its mailboxes share, and one value for the executor, guarded
// by the lock (Mailbox.Local): a shard's is the block of task contexts
// that its uncontended Do calls are carved from, and its plain tasks'
// counts; a stripe's stays unused, since on stripes no Do runs at once.
// Beside the lock the home also keeps a count for the executor, which it
// adds to under the lock (Mailbox.Count: the shard's plain tasks
// submitted); a shard is 256 bytes, so that its lock and that count start
// a cache line of their own. Close takes each lock once (Barrier) after it
// has closed the executor. A node is only a key and a mailbox
// (80 bytes with a string key): the shard finds the node of a mailbox it
// is told to retire by stepping back from the mailbox to the node holding
// it.
//
// In striped mode (executor.WithStripes) the table is a fixed array of
// mailboxes allocated once; keys hash onto them and nothing is ever created
// or retired.
//
// # What it must never do
//
// The router never queues tasks, decides admission or runs user code. Keys
// reach it only after the executor has checked that they can be hashed and
// equal themselves (executor.ErrInvalidKey).
package router
