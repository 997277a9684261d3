// Package router maps keys to live mailboxes.
//
// It owns the key table and the create/retire race. A mailbox is created on
// the first submission for its key and retired when it drains, both under
// the lock of the table shard the key hashes to, which is also the lock that
// guards the mailbox itself (see mailbox.Mailbox). A retired mailbox stops
// counting as live at once; its table entry goes at the shard's next
// retirement, so a key used over and over by one caller is not deleted and
// re-inserted each time, and each shard keeps at most one idle entry. A
// retired mailbox is kept as a spare for the next key while the shard is
// busy (up to maxSpares, so that keys that come and go reuse mailboxes
// rather than make garbage), and one once it is quiet. Shard maps are
// rebuilt smaller after a burst. The table is
// sharded so that submissions on different keys rarely share a lock.
//
// In striped mode the table is a fixed array of mailboxes allocated once;
// keys hash onto them and nothing is ever created or retired.
//
// The router never queues tasks, decides admission or runs user code.
package router
