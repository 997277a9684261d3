// Package router maps keys to live mailboxes. It owns the key table and the
// create/retire race: a mailbox is created on its key's first submission and
// retired when it drains, both under its table shard's lock, which also
// guards the mailbox; sharding keeps different keys off one lock. In striped
// mode the table is a fixed array of mailboxes: nothing is created or
// retired. It never queues tasks, decides admission or runs user code.
// Design notes: router/README.md.
package router
