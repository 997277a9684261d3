// Package kafka is a key-ordered parallel Kafka consumer: a consumer group
// member (franz-go) that hands each record to a Handler on a perkey
// executor, so that records with the same key are handled one at a time in
// offset order while records with different keys run in parallel.
//
// # How partitions, the group and perkey fit
//
// Kafka sends every record with a given key to one partition, and the
// consumer group gives every partition to one member. Within a member, a
// classic consumer handles a partition's records one after another, so a
// member can never use more threads than it has partitions, and one slow
// record holds up every key behind it. This consumer instead submits each
// record to an executor under its key scoped to its partition
// (topic, partition, key): a key's records queue behind each other, every
// other key goes ahead, and Config.Workers bounds the handlers running at
// once. Records with a nil key share one queue per partition, so they stay
// in partition order. When more keys are ready than there are workers,
// they take turns in the order their records were fetched: a key with a
// backlog gives its worker back after at most 4 records in a row, so a busy
// key does not hold back other keys or partitions (nor their commits) for
// long. To scale out, run more members in the same group;
// to scale up, raise Workers: concurrency is no longer capped by the
// partition count.
//
//	c, err := kafka.NewConsumer(kafka.Config{
//		Brokers: []string{"localhost:9092"},
//		Group:   "billing",
//		Topics:  []string{"payments"},
//		Workers: 100,
//		Handler: func(ctx context.Context, r *kgo.Record) error {
//			return apply(ctx, r.Key, r.Value) // one at a time per key
//		},
//	})
//	if err != nil { ... }
//	err = c.Run(ctx) // until ctx ends: drains, commits, leaves the group
//
// # Ordering
//
// For one key (same topic, partition and key bytes) handler calls never
// overlap, and a record's handler starts only after the handlers of all
// earlier records of the key have returned for the last time (retries run
// inside the record's turn). This holds across rebalances and members: a
// partition is handed over only once none of its handlers runs on this
// member (see Rebalances), and a redelivery (see Delivery) starts again
// from the committed offset, so the key's records are handled again in
// offset order. Different keys have no order between them.
//
// # Batches
//
// Config.BatchHandler, instead of Handler, hands a key's ready records to
// one call, for sinks that are cheaper in bulk (a multi-row INSERT, a bulk
// request):
//
//	c, err := kafka.NewConsumer(kafka.Config{
//		Brokers: []string{"localhost:9092"},
//		Group:   "billing",
//		Topics:  []string{"payments"},
//		Workers: 100,
//		BatchHandler: func(ctx context.Context, recs []*kgo.Record) error {
//			return insertAll(ctx, recs) // one key, offset order, at most MaxBatch
//		},
//		MaxBatch: 100, // the default
//	})
//
// A batch is the consecutive records of one key (topic, partition, key)
// that are fetched and waiting when the key's turn comes, in offset order,
// at most Config.MaxBatch (default 100); it is never held back to fill, so
// batches grow with the key's backlog and a key with none gets batches of
// one. The backlog is bounded by flow control (see Flow control): a
// partition of many keys holds about MaxHeld / keys records of each, so
// raise Config.MaxHeld for larger batches over many keys. The executor's
// per-key batches (executor.Batcher) run them: a batch is one task of its
// key, so everything said here of a record's handler holds for a batch:
// calls of one key never overlap, on this member or any other; a batch
// starts only once every earlier record of its key is done; a key with a
// backlog gives its worker back after each batch.
//
// A batch succeeds or fails as a whole, because the consumer commits by
// offset and in key order: its records are done, for commits, when the
// call returns nil, all at once; any error fails every record of it. A
// failed batch is retried whole, with the same records, in the key's turn
// (MaxRetries, Backoff, Decide), and then decided as one: Skip skips all of
// its records, DeadLetter hands each of them to the DeadLetter hook in
// offset order, Stop leaves all of it not done and stops the consumer (see
// Handler errors). A revoke, a loss or a shutdown treats a running batch as
// a running handler: it is waited for, and its ctx is canceled once the
// grace period is over; if it then returns an error, all of its records go
// to the next owner. Records queued and not yet in a batch are left to the
// next owner like records not started.
//
// # Commits
//
// Auto-commit is off. Each partition tracks its records from fetch to done;
// the offset committed is the lowest offset not yet done (everything below
// it is done), every Config.CommitInterval, when a partition is revoked,
// and at the end of Run. Commits go through the client's group session
// (CommitOffsetsSync: current generation and member id, leader epoch of
// the record below the offset). A commit also carries, in its metadata,
// the ranges of offsets done above the committed one (an "offset map",
// like parallel-consumer's; at most 4000 bytes, the ranges that do not fit
// are dropped): when a member is assigned the partition, it reads the map
// and skips those records (Stats.AlreadyDone).
//
// # Delivery: at least once, and exactly what repeats
//
// Every record is handled to completion (or decided, see Handler errors)
// at least once; nothing is skipped silently. A record is handled again
// only in these cases:
//
//   - The member dies or is cut off (process crash, client closed, session
//     timeout, a fatal group error such as UNKNOWN_MEMBER_ID, which the
//     client reports as lost partitions): the records done since the last
//     successful commit (at most about CommitInterval) are handled again
//     by the next owner, except those in that commit's offset map.
//   - A revoked partition's running handlers outlive Config.RevokeTimeout,
//     or a shutdown outlives Config.DrainTimeout: their ctx is canceled;
//     a handler that then returns an error leaves its record to the next
//     owner, which handles it again (a handler that returns nil completes
//     it). Records done above it are in the offset map and are not
//     repeated.
//   - A commit fails (when revoking or at the end of Run): the partition's
//     records since the previous commit repeat, as after a crash. Run
//     reports a failed final commit in its error.
//   - The offset map overflowed its 4000 bytes: the done records whose
//     ranges were dropped repeat.
//   - Decision Stop: the failing record, not done, is delivered again
//     after a restart, and so is everything behind it in its key.
//
// With a BatchHandler, what repeats is counted in whole batches: a batch
// running when the member dies, whose grace period ran out and that then
// failed, or that was decided Stop is delivered again whole (every record
// of it, at least once more; after a DeadLetter hook error, from the
// record the hook refused on); a batch that returned nil is done, and its
// records repeat after a crash only as done records do (done since the
// last commit and not in its offset map). Redelivered records may come
// grouped into other batches than the first time, so a batch handler must
// be idempotent per record, not per batch.
//
// In particular, nothing repeats after a Run that returned nil with every
// handler done within DrainTimeout, nor after a revoke whose handlers were
// done within RevokeTimeout and whose commit succeeded with its offset map
// whole. A handler
// retried with Decision Retry sees the same record again on each attempt,
// within the record's turn.
//
// # Rebalances
//
// The member uses BlockRebalanceOnPoll, so the group callbacks never run
// while a poll's records are being dispatched; every poll is followed at
// once by AllowRebalance, so rebalances are never held up by processing.
// Every assignment of a partition gets fresh state (its generation); work
// left from an earlier assignment can never touch it.
//
//   - Assigned: fresh state; the partition is resumed in case an earlier
//     assignment left it paused (a paused partition stays paused in the
//     client across assignments, which stalls consumption).
//   - Revoked: no more of its records start; its running handlers get up
//     to RevokeTimeout, then their ctx is canceled and the member waits
//     for them to return, however long; then it commits and drops the
//     state. The records not started go to the next owner. Only then does
//     the callback return and the partition move, so a key never runs on
//     two members, even when the partition is revoked and assigned straight
//     back. Keep RevokeTimeout well below the group's rebalance timeout
//     (kgo default 60 s), and handlers quick to return once ctx ends: a
//     member whose handler ignores ctx past the rebalance timeout is
//     evicted by the broker, and then the next owner may start while that
//     handler still runs.
//   - Lost: handlers' ctx is canceled at once, the member waits for them,
//     and drops the state without committing (another member may own the
//     partition already).
//
// # Flow control
//
// A partition holding Config.MaxHeld records (fetched, not done), or
// spanning more than 16 × MaxHeld offsets from its oldest unfinished
// record, is paused (PauseFetchPartitions) and resumed when it is back to
// half; so a hot key or a slow handler holds at most MaxHeld +
// MaxPollRecords records of its partition in memory while other partitions
// keep flowing. FetchMaxWait defaults to 200 ms so that a resumed
// partition is fetched again promptly.
//
// # Handler errors
//
// A failed record is retried in its turn (its key's later records wait)
// with exponential backoff from Config.Backoff up to Config.MaxBackoff,
// Config.MaxRetries times; then Config.OnFailure decides: Skip (logged at
// warn level and counted), DeadLetter (Config.DeadLetter receives it, still
// in its key's turn), or Stop (Run drains, commits below it, and returns a
// *HandlerError). Config.Decide can decide per error. A panic is an error,
// and so is a call to runtime.Goexit (executor.ErrGoexit). A failed batch
// goes through the same steps as one (see Batches and Config.OnFailure).
//
// # Running against a real cluster
//
// Config.Brokers names the seed brokers; pass TLS, SASL and other client
// settings as kgo options to NewConsumer. The tests and the example run on
// an in-process kfake cluster unless told otherwise:
//
//	KAFKA_BROKERS=host:9092 go test -race ./kafka/   # unique topics and groups, deleted after
//	go run ./examples/kafka -brokers host:9092
//
// The fault-injection test needs kfake and is skipped on a real cluster.
package kafka
