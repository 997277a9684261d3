package executor

import (
	"context"
	"time"

	"github.com/perkey/perkey/backpressure"
	"github.com/perkey/perkey/internal/mailbox"
	"go.uber.org/zap"
)

// DoMany runs fn holding every key in keys: no other task of any of those
// keys runs during fn, and on each key fn keeps its FIFO place. Duplicate
// keys (in striped mode, keys on one stripe) count once; no keys is
// ErrNoKeys. If any key is at its cap nothing is enqueued and the
// *backpressure.BusyError names that key. Concurrent DoMany and Do calls
// made from outside tasks never deadlock, whatever the keys and whatever
// their type: K needs no ordering (a nested call that would wait behind a
// DoMany waiting for its own task returns ErrReentrant: see "Nested calls"
// in the package doc). A DoMany is one task for WithMaxPending
// and one pending task on each of its keys. Everything else is as for Do.
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
			// Waiting in line on every key would hold room on the free ones,
			// which a task nested on them may need while it holds a key this
			// DoMany waits for (see backpressure.Block), so a DoMany polls
			// instead. Each try is a fresh job: a giving-up Close may still
			// hold the withdrawn one (it lists the queued tasks, then cancels
			// them unlocked) and must find it canceled, not queued again. The
			// GC takes it, like a rejected one.
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

// enqueueManyHanded is enqueueMany for a call that may have been let in
// from the global waiting room (handed): its transit ends once j is queued
// or refused on a key, even if a Policy exits the goroutine. A DoMany
// keeps no place in line, so its retries are not in transit.
func (e *Executor[K]) enqueueManyHanded(ctx context.Context, j *job[K], entries []mailbox.Entry, outer *taskCtx[K], handed *roomWaiter) (backpressure.Verdict, error) {
	if handed != nil {
		defer e.room.handOn(handed, e.takeRoom)
	}
	return e.enqueueMany(ctx, j, entries, outer)
}

// enqueueMany puts a multi-key job in all its mailboxes. If a key is at
// its cap, or a nested call (outer is its task) would wait on a mailbox
// behind a DoMany that waits for the task (see waitsOnCaller), the entries
// already queued are withdrawn and nothing is left behind.
//
// Deadlock freedom: multiMu serialises the enqueues of multi-key tasks, so
// any two, A and B, are queued in the same relative order (say A before
// B) in every mailbox they share. Order all multi-key tasks that way. The
// oldest multi-key task T that has not run finds ahead of it, in each of
// its mailboxes, only single-key tasks (which need nothing else and
// finish) and older multi-key tasks (which have run or will run). So T is
// eventually at the head of, and granted, every mailbox: no cycle of waits
// can form, for any key type and with no key ordering.
func (e *Executor[K]) enqueueMany(ctx context.Context, j *job[K], entries []mailbox.Entry, outer *taskCtx[K]) (backpressure.Verdict, error) {
	var buf [8]*mailbox.Mailbox
	dispatch := buf[:0]
	// asking is m, locked, while its Policy is asked. If the Policy calls
	// runtime.Goexit, what this call holds and the job's reservation are given
	// back as the goroutine exits: nothing is left held or queued.
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
			// Accepted. Until now a giving-up Close that saw j queued left it
			// alone (Staged); from now on it may cancel it. Under m's lock, so
			// before m can grant j, and after every entry's mailbox is set,
			// which that cancel reads.
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
