// Package router maps keys to live mailboxes; the design notes are in the
// repository's router/README.md.
//
// It owns the key table and the create/retire race: a mailbox is created
// on the first submission for its key and retired when it drains, both
// under the lock of the key's table shard, which also guards the mailbox
// (see mailbox.Mailbox); sharding keeps different keys off one lock. A
// retired mailbox stops counting as live at once; its entry goes at the
// shard's next retirement, so a shard keeps at most one idle entry.
// Retired mailboxes are reused as spares, and tables shrink after a burst.
// In striped mode the table is a fixed array of mailboxes allocated once;
// nothing is ever created or retired.
//
// The router never queues tasks, decides admission or runs user code.
package router
