package executor

import (
	"context"
	"time"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/internal/mailbox"
	"go.uber.org/zap"
)

// DoMany runs fn holding every key in keys: no other task of those keys runs
// during fn, and on each key fn keeps its FIFO place. Duplicate keys (in
// striped mode, keys on one stripe) count once; no keys is ErrNoKeys. If any
// key is at its cap nothing is enqueued and the *backpressure.BusyError
// names that key. Concurrent DoMany and Do calls made from outside tasks
// never deadlock, whatever the keys: K needs no ordering. A nested call that
// would wait behind a DoMany waiting for its own task returns ErrReentrant.
// A DoMany is one task for WithMaxPending and one pending task on each of its
// keys. Everything else is as for Do.
func (e *Executor[K]) DoMany(ctx context.Context, keys []K, fn func(context.Context) error) error {
	if err := e.check(ctx, fn); err != nil {
		return err
	}
	if len(keys) == 0 {
		return ErrNoKeys
	}
	if err := e.validateAll(keys); err != nil {
		return err
	}
	keys = e.dedup(keys)
	outer := e.innermost(ctx)
	if outer != nil {
		held := 0
		for _, k := range keys {
			if e.held(ctx, k) {
				held++
			}
		}
		switch {
		case held == len(keys) && e.cfg.reentrant:
			return e.inline(ctx, fn, zap.Any("keys", keys))
		case held > 0:
			return ErrReentrant
		}
	}
	if len(keys) == 1 {
		return e.doValid(ctx, keys[0], fn, false)
	}
	var zero K // a multi-key task's keys are its job's
	j := e.syncJob(ctx, fn, zero, &keys)
	entries := j.turn.InitMany(j, len(keys))
	handed, err := e.reserveTurn(ctx, zero, true, nil) // synchronous: nothing of it is watched
	if err != nil {
		e.reuse(j)
		return err
	}
	swept := false
	for backoff := 50 * time.Microsecond; ; backoff = min(2*backoff, 10*time.Millisecond) {
		v, err := e.enqueueManyHanded(ctx, j, entries, outer, handed)
		handed = nil
		if v == backpressure.Admit {
			break
		}
		if !swept && err != errWaitsOnCaller {
			// Tasks whose ctx ended may hold a key's room: drop them and try
			// once more at once (see sweep), with a fresh job as below.
			swept = true
			if e.sweepReserved(func() bool { return e.sweepKeys(keys) }) {
				j = e.syncJob(ctx, fn, zero, &keys)
				entries = j.turn.InitMany(j, len(keys))
				continue
			}
		}
		if v == backpressure.Wait {
			// Poll: waiting in line on every key would hold room on the free
			// ones that a task nested there may need while it holds a key
			// this DoMany waits for (see backpressure.Block). Each try is a
			// fresh job: a giving-up Close, which cancels what it listed
			// unlocked, may still hold the withdrawn one and must find it
			// canceled.
			if err = e.pause(ctx, backoff, outer); err == nil {
				j = e.syncJob(ctx, fn, zero, &keys)
				entries = j.turn.InitMany(j, len(keys))
			}
		}
		if err != nil {
			e.unreserve()
			return e.reject(err) // j was withdrawn: the GC takes it
		}
	}
	e.observeAccepted()
	return e.wait(ctx, j, outer, false)
}

// enqueueManyHanded is enqueueMany for a call maybe let in from the global
// waiting room (handed): its transit ends once j is queued or refused on a
// key, even if a Policy exits the goroutine. A DoMany keeps no place in line,
// so its retries are not in transit.
func (e *Executor[K]) enqueueManyHanded(ctx context.Context, j *job[K], entries []mailbox.Entry, outer *taskCtx[K], handed *roomWaiter) (backpressure.Verdict, error) {
	if handed != nil {
		defer e.room.handOn(handed, e.takeRoom)
	}
	return e.enqueueMany(ctx, j, entries, outer)
}

// enqueueMany puts a multi-key job in all its mailboxes. If a key is at its
// cap, or a nested call (outer is its task) would wait behind a DoMany that
// waits for the task (see waitsOnCaller), the entries already queued are
// withdrawn and nothing is left behind.
//
// Deadlock freedom: multiMu serialises multi-key enqueues, so any two are in
// the same relative order in every mailbox they share. The oldest multi-key
// task T not yet run finds ahead of it, in each mailbox, only single-key
// tasks (which need nothing else and finish) and older multi-key tasks
// (which have run or will). So T eventually heads, and is granted, every
// mailbox: no cycle of waits forms, for any key type, with no key ordering.
func (e *Executor[K]) enqueueMany(ctx context.Context, j *job[K], entries []mailbox.Entry, outer *taskCtx[K]) (backpressure.Verdict, error) {
	var buf [8]*mailbox.Mailbox
	dispatch := buf[:0]
	// asking is m, locked, while its Policy is asked: if the Policy calls
	// runtime.Goexit, nothing is left held, queued or reserved.
	var asking *mailbox.Mailbox
	defer func() {
		if asking == nil {
			return
		}
		asking.Release()
		e.multiMu.Unlock()
		j.turn.Withdraw()
		for _, m := range dispatch {
			m.Dispatch()
			e.dispatching.Done()
		}
		e.unreserve()
	}()
	e.stamp(j) // before the first enqueue: queue age reads it under any of j's mailboxes
	e.multiMu.Lock()
	var err error
	v := backpressure.Admit
	for i, k := range *j.multi {
		m := e.router.Acquire(k)
		if outer != nil && e.waitsOnCaller(ctx, m) {
			m.Release()
			v, err = backpressure.Reject, errWaitsOnCaller
			break
		}
		asking = m
		v, err = e.askKey(m, k)
		asking = nil
		if v != backpressure.Admit {
			m.Release()
			break
		}
		last := i == len(entries)-1
		if last {
			e.countAccepted(j) // j can start once m is unlocked
		}
		if m.Enqueue(&entries[i]) {
			dispatch = append(dispatch, m)
			e.dispatching.Add(1) // under m's lock: before j can settle
		}
		if last {
			// Accepted: a giving-up Close that finds j queued may cancel it
			// from now on (Staged, it was left alone). Under m's lock: before m
			// can grant j, after every entry's mailbox (which it reads) is set.
			j.turn.Commit()
		}
		m.Release()
	}
	e.multiMu.Unlock()
	if v != backpressure.Admit {
		j.turn.Withdraw()
	}
	for _, m := range dispatch {
		m.Dispatch()
		e.dispatching.Done()
	}
	return v, err
}
