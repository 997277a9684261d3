package executor

import (
	"context"
	"slices"
	"sync"

	"github.com/perkey/perkey/internal/mailbox"
)

// Deadlock detection (see ErrDeadlock).
//
// Only a nested call (a task waiting with its own ctx) can be in a cycle: a
// call from outside any task holds no key. So the wait-for graph's one moving
// part is the nested waits in progress (blockers), searched as a nested call
// is about to wait, not after a timeout. The edges:
//
//   - a waiting turn (queued, or parked for room) waits for the tasks holding
//     one of its keys, and for every multi-key turn holding one of its
//     mailboxes or queued ahead of it there (a DoMany holds each key it
//     reaches the head of while it waits for the others);
//   - a turn parked for room (backpressure.Block) waits for the key's holder
//     if one task (or batch) holds the key exclusively, as room comes only
//     once it ends; behind shared holders, any of which may give room, no edge;
//   - a queued shared turn that will join a shared group waits for a worker;
//   - a running turn, or any holder, waits for what its task's nested wait
//     waits for if it is blocked in one, else for nothing (a later wait is
//     checked in turn). Its task is found by its context or, for an exclusive
//     turn, as whoever holds its keys (a Batcher's batch runs under a context
//     of its own); a running turn of the caller's own chain closes a cycle;
//   - a plain Submit (no Turn: see plain.go) waits as an exclusive turn does:
//     queued while in its key's ring, running once in a batch.
//
// Every blocked holder is a blocker, filed under the keys its chain holds.
// The search starts at the turn the new wait is on and fails, with
// ErrDeadlock, on reaching a key the caller's chain holds. One lock
// serialises checks and filing, so of two waits closing a cycle together the
// second sees the first. Edges between turns appear only at a queue's tail,
// behind every filed wait, so a wait found acyclic stays so until a later
// wait, itself checked, joins it.
//
// Not seen: waits outside the executor (a channel, a mutex, another
// executor), nested calls made with a detached ctx, a DoMany polling for
// room under Block (it holds nothing meanwhile), and a wait for room behind
// shared holders (room may come from any of them): such a cycle lasts until
// a ctx ends. A refusal is never false.

// waits is the set of nested waits in progress.
type waits[K comparable] struct {
	mu sync.Mutex
	// byKey files blockers under the keys (stripes) their chains hold; guarded by mu.
	byKey map[any][]*blocker[K]
	// of is each blocked task's blocker (it or an inline task in it waits);
	// guarded by mu. A map, not a taskCtx field: only nested calls pay for it.
	of map[*taskCtx[K]]*blocker[K]
}

// blocker is a nested wait: a task (and those it is nested in on the same
// goroutine) blocked until on ends or is admitted.
type blocker[K comparable] struct {
	on     waitee[K]
	keys   []any         // where it is filed
	marked []*taskCtx[K] // the task contexts whose blocked field is this blocker
}

// waitee is what a wait is on: a task with a Turn, or a plain Submit.
type waitee[K comparable] struct {
	t *mailbox.Turn
	p *plainSub[K]
}

// file is what a key is filed under: the key, or in striped mode its stripe.
func (e *Executor[K]) file(k K) any {
	if e.router.Striped() {
		return e.router.Index(k)
	}
	return k
}

// block files a nested call made with ctx, about to wait for on, as a
// blocker; if the wait would close a cycle it files nothing and returns
// ErrDeadlock. unblock ends the wait.
func (e *Executor[K]) block(ctx context.Context, on waitee[K]) (*blocker[K], error) {
	w := &e.waits
	w.mu.Lock()
	defer w.mu.Unlock()
	// Under multiMu no multi-key turn is half enqueued: their mailboxes are set.
	e.multiMu.Lock()
	cycle := e.closesCycle(ctx, on)
	e.multiMu.Unlock()
	if cycle {
		return nil, ErrDeadlock
	}
	b := &blocker[K]{on: on}
	if w.of == nil {
		w.of = make(map[*taskCtx[K]]*blocker[K])
	}
	for c := range e.chain(ctx) {
		if w.of[c] != nil {
			break // blocked in a wait of its own, filed already
		}
		w.of[c] = b
		b.marked = append(b.marked, c)
		if c.single() {
			b.keys = append(b.keys, e.file(c.key))
		}
		for _, k := range c.keys() {
			b.keys = append(b.keys, e.file(k))
		}
	}
	if w.byKey == nil {
		w.byKey = make(map[any][]*blocker[K])
	}
	for _, k := range b.keys {
		w.byKey[k] = append(w.byKey[k], b)
	}
	return b, nil
}

// unblock ends a wait filed by block; nil is a no-op.
func (e *Executor[K]) unblock(b *blocker[K]) {
	if b == nil {
		return
	}
	w := &e.waits
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range b.marked {
		delete(w.of, c)
	}
	for _, k := range b.keys {
		list := slices.DeleteFunc(w.byKey[k], func(o *blocker[K]) bool { return o == b }) // clears the tail
		if len(list) == 0 {
			delete(w.byKey, k)
		} else {
			w.byKey[k] = list
		}
	}
}

// closesCycle reports whether a wait made with ctx on start would wait, in
// the graph above, for a key the caller's chain holds (w.mu, multiMu held).
func (e *Executor[K]) closesCycle(ctx context.Context, start waitee[K]) bool {
	seen := make(map[waitee[K]]struct{})
	seenB := make(map[*blocker[K]]struct{})
	work := []waitee[K]{start}
	push := func(t *mailbox.Turn) { work = append(work, waitee[K]{t: t}) }
	follow := func(b *blocker[K]) {
		if _, ok := seenB[b]; !ok {
			seenB[b] = struct{}{}
			work = append(work, b.on)
		}
	}
	// holders follows keys' blocked holders; true if the caller's chain holds one.
	holders := func(keys []K) bool {
		for _, k := range keys {
			if e.held(ctx, k) {
				return true
			}
			for _, b := range e.waits.byKey[e.file(k)] {
				follow(b)
			}
		}
		return false
	}
	for len(work) > 0 {
		w := work[len(work)-1]
		work = work[:len(work)-1]
		if _, ok := seen[w]; ok {
			continue
		}
		seen[w] = struct{}{}
		if p := w.p; p != nil {
			live, queued := e.plainAhead(p, push)
			if !live {
				continue // ended: it waits for nothing
			}
			if !queued {
				if e.inChain(ctx, &p.ctx) {
					return true
				}
				if b := e.waits.of[&p.ctx]; b != nil {
					follow(b)
					continue
				}
			}
			if holders([]K{p.ctx.key}) {
				return true
			}
			continue
		}
		t := w.t
		j := jobOf[K](t)
		c := j.ctx
		if c == nil {
			continue // ended and recycled since it was met: it waits for nothing
		}
		keys := []K{c.key}
		if j.multi != nil {
			keys = *j.multi
		}
		switch t.State() {
		case mailbox.Queued, mailbox.Staged:
		case mailbox.Running:
			if e.inChain(ctx, c) {
				return true // the wait is on the caller's own task
			}
			if b := e.waits.of[c]; b != nil {
				follow(b)
				continue
			}
			if t.Shared() {
				continue // other holders of a shared key are not its task
			}
			if holders(keys) {
				return true
			}
			continue
		default:
			continue // granted (it runs as soon as a slot is free), or ended
		}
		if parked, exclusive, many := t.ParkedBehind(); parked {
			// Room is an exclusive holder's to give (the queued tasks wait for
			// it too); behind shared holders or a moving queue it may come
			// from a task that waits for nothing: no edge.
			if !exclusive {
				continue
			}
			if many != nil {
				push(many) // a DoMany holding the key, waiting for its others
			}
			if holders(keys) {
				return true
			}
			continue
		}
		if t.Shared() && t.JoinsShared() {
			continue // it joins a shared group: it waits for a worker, no task
		}
		if holders(keys) {
			return true
		}
		t.EachWaitedMany(push)
	}
	return false
}

// inChain reports whether c is one of the running tasks of e marked in ctx.
func (e *Executor[K]) inChain(ctx context.Context, c *taskCtx[K]) bool {
	for o := range e.chain(ctx) {
		if o == c {
			return true
		}
	}
	return false
}

// chain yields the running tasks of e marked in ctx, innermost first: the
// caller's task and those it is nested in.
func (e *Executor[K]) chain(ctx context.Context) func(yield func(*taskCtx[K]) bool) {
	return func(yield func(*taskCtx[K]) bool) {
		for c, rest := e.next(ctx); c != nil && yield(c); c, rest = e.next(rest) {
		}
	}
}
