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
// inserted again each time.
//
// Each shard keeps at most one idle entry and a few spare mailboxes, and
// its table (open addressing, probed with the hash that picked the shard,
// one tag byte and one pointer per slot) shrinks once a burst has drained:
// memory follows the keys that are busy now, never the keys ever seen. As
// a Go map does, a table grows and shrinks in bounded steps, each insert
// and remove moving a few entries, so no call pays for the whole shard.
//
// One mailbox per shard may hold a fast hold: an uncontended Do gives its
// hold back in one atomic step, without the lock, if nobody came for the
// key meanwhile, leaving the mailbox idle but neither settled nor retired.
// The next taker of the shard lock settles it: an Acquire of the same key
// takes it up as it is, without a table lookup; any other look at the
// shard retires it first. Whoever comes for the key while the hold is
// taken revokes it, so the holder gives it back under the lock. ActiveKeys
// stays exact: Live settles each shard's one candidate before it counts.
//
// Each shard (and stripe) is a mailbox.Home: the lock, runner and owner
// its mailboxes share, with a value and a count for the executor beside
// the lock. Close takes each lock once (Barrier) after it has closed the
// executor. A node is only a key and a mailbox: the shard finds a
// mailbox's node by stepping back from the mailbox.
//
// In striped mode (executor.WithStripes) the table is a fixed array of
// mailboxes allocated once; keys hash onto them and nothing is ever
// created or retired.
//
// # What it must never do
//
// The router never queues tasks, decides admission or runs user code. Keys
// reach it only after the executor has checked that they can be hashed and
// equal themselves (executor.ErrInvalidKey).
package router
