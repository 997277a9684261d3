package bench

import (
	"context"
	"sync"

	"github.com/moby/locker"
	"k8s.io/utils/keymutex"

	"github.com/perkey/perkey/executor"
)

// keyed is what every implementation under test offers: run fn holding key.
type keyed interface {
	// Do runs fn holding key and returns fn's error once fn has returned.
	Do(ctx context.Context, key string, fn func(context.Context) error) error
	// Submit arranges for fn to run holding key; it may return before fn
	// runs. Lock-based implementations run fn inline.
	Submit(ctx context.Context, key string, fn func(context.Context) error) error
	// Left is the number of entries the implementation's key table holds
	// now, or -1 if it has no table (or does not say).
	Left() int
	// Drained reports whether everything that retires on drain has retired;
	// true for implementations that retire nothing.
	Drained() bool
	// Close releases the implementation's goroutines.
	Close()
}

// impl names an implementation and makes a fresh instance of it.
type impl struct {
	name string
	make func() keyed
}

// perkeyImpl returns perkey with opts as an impl.
func perkeyImpl(name string, opts ...executor.Option) impl {
	return impl{name, func() keyed {
		e, err := executor.New[string](opts...)
		if err != nil {
			panic(err)
		}
		return perkey{e}
	}}
}

// peers are the baselines every comparison runs, in table order after perkey.
var peers = []impl{
	{"mutex", func() keyed { return new(globalMutex) }},
	{"mutexmap", func() keyed { return &mutexMap{m: make(map[string]*sync.Mutex)} }},
	{"locker", func() keyed { return &mobyLocker{l: locker.New()} }},
	{"keymutex", func() keyed { return &hashedMutex{km: keymutex.NewHashed(1024)} }},
	{"actor", func() keyed { return newPlainActors() }},
	{"actor-retiring", func() keyed { return &actors{m: make(map[string]*actor)} }},
}

// withPeers returns perkey (first, so benchstat -col /impl compares every
// peer against it) followed by the baselines.
func withPeers(p impl) []impl { return append([]impl{p}, peers...) }

// renamed returns im under another name.
func renamed(im impl, name string) impl { im.name = name; return im }

// peer returns the baseline called name.
func peer(name string) impl {
	for _, p := range peers {
		if p.name == name {
			return p
		}
	}
	panic("bench: no peer " + name)
}

// perkey adapts the executor.
type perkey struct{ e *executor.Executor[string] }

func (p perkey) Do(ctx context.Context, key string, fn func(context.Context) error) error {
	return p.e.Do(ctx, key, fn)
}

func (p perkey) Submit(ctx context.Context, key string, fn func(context.Context) error) error {
	_, err := p.e.Submit(ctx, key, fn)
	return err
}

func (p perkey) Left() int     { return p.e.ActiveKeys() }
func (p perkey) Drained() bool { return p.e.ActiveKeys() == 0 }

func (p perkey) Close() {
	if err := p.e.Close(context.Background()); err != nil {
		panic(err)
	}
}

// globalMutex serialises every task, whatever its key.
type globalMutex struct{ mu sync.Mutex }

func (g *globalMutex) Do(ctx context.Context, _ string, fn func(context.Context) error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return fn(ctx)
}

func (g *globalMutex) Submit(ctx context.Context, key string, fn func(context.Context) error) error {
	return g.Do(ctx, key, fn)
}

func (g *globalMutex) Left() int     { return -1 }
func (g *globalMutex) Drained() bool { return true }
func (g *globalMutex) Close()        {}

// mutexMap is the hand-rolled per-key lock: a mutex per key, created on
// first use and never deleted (deleting safely needs a reference count).
type mutexMap struct {
	mu sync.Mutex // guards m
	m  map[string]*sync.Mutex
}

func (mm *mutexMap) Do(ctx context.Context, key string, fn func(context.Context) error) error {
	mm.mu.Lock()
	l, ok := mm.m[key]
	if !ok {
		l = new(sync.Mutex)
		mm.m[key] = l
	}
	mm.mu.Unlock()
	l.Lock()
	defer l.Unlock()
	return fn(ctx)
}

func (mm *mutexMap) Submit(ctx context.Context, key string, fn func(context.Context) error) error {
	return mm.Do(ctx, key, fn)
}

func (mm *mutexMap) Left() int {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	return len(mm.m)
}

func (mm *mutexMap) Drained() bool { return true }
func (mm *mutexMap) Close()        {}

// mobyLocker is github.com/moby/locker.
type mobyLocker struct{ l *locker.Locker }

func (m *mobyLocker) Do(ctx context.Context, key string, fn func(context.Context) error) error {
	m.l.Lock(key)
	defer m.l.Unlock(key) // fails only for a key that is not locked
	return fn(ctx)
}

func (m *mobyLocker) Submit(ctx context.Context, key string, fn func(context.Context) error) error {
	return m.Do(ctx, key, fn)
}

func (m *mobyLocker) Left() int     { return -1 } // not exported; it deletes unused keys
func (m *mobyLocker) Drained() bool { return true }
func (m *mobyLocker) Close()        {}

// hashedMutex is k8s.io/utils/keymutex's fixed table of hashed mutexes.
type hashedMutex struct{ km keymutex.KeyMutex }

func (h *hashedMutex) Do(ctx context.Context, key string, fn func(context.Context) error) error {
	h.km.LockKey(key)
	defer h.km.UnlockKey(key) // never fails
	return fn(ctx)
}

func (h *hashedMutex) Submit(ctx context.Context, key string, fn func(context.Context) error) error {
	return h.Do(ctx, key, fn)
}

func (h *hashedMutex) Left() int     { return -1 }
func (h *hashedMutex) Drained() bool { return true }
func (h *hashedMutex) Close()        {}

// plainActors is the actor most code bases have, for the benchmarks that
// call Do: one goroutine per key, started before the work begins, reading a
// buffered channel of tasks; the senders find it in a map that nothing
// writes once the work has begun, so no lock is taken per task. It never
// retires: every key keeps its goroutine and channel until Close. Every key
// must be prestarted (the benchmarks do it outside the timed region); a key
// that was not panics rather than fall back on a lock. The Throughput
// benchmark has its own, leaner actor (see throughputActor).
type plainActors struct {
	inboxes map[string]chan actorMsg // written only by prestart
	wg      sync.WaitGroup
}

// plainInbox is each plain actor's channel capacity.
const plainInbox = 64

func newPlainActors() *plainActors {
	return &plainActors{inboxes: make(map[string]chan actorMsg)}
}

// prestart starts an actor for each of keys; call it before any task.
func (a *plainActors) prestart(keys []string) {
	for _, k := range keys {
		if a.inboxes[k] == nil {
			ch := make(chan actorMsg, plainInbox)
			a.wg.Go(func() {
				for msg := range ch {
					err := msg.fn(msg.ctx)
					if msg.reply != nil {
						msg.reply <- err
					}
				}
			})
			a.inboxes[k] = ch
		}
	}
}

// inbox returns key's channel, which prestart made.
func (a *plainActors) inbox(key string) chan actorMsg {
	ch := a.inboxes[key]
	if ch == nil {
		panic("bench: plain actor for key " + key + " not prestarted")
	}
	return ch
}

func (a *plainActors) Do(ctx context.Context, key string, fn func(context.Context) error) error {
	reply := make(chan error, 1)
	a.inbox(key) <- actorMsg{ctx: ctx, fn: fn, reply: reply}
	return <-reply
}

func (a *plainActors) Submit(ctx context.Context, key string, fn func(context.Context) error) error {
	a.inbox(key) <- actorMsg{ctx: ctx, fn: fn}
	return nil
}

func (a *plainActors) Left() int     { return len(a.inboxes) }
func (a *plainActors) Drained() bool { return true }

// Close stops every actor once its inbox is empty.
func (a *plainActors) Close() {
	for _, ch := range a.inboxes {
		close(ch)
	}
	a.wg.Wait()
}

// prestarter is an implementation that starts per-key state before the work.
type prestarter interface{ prestart(keys []string) }

// prepared makes a fresh instance of im and, if it keeps per-key state
// started ahead (the plain actor), starts it for ks, outside any timing.
func prepared(im impl, ks []string) keyed {
	k := im.make()
	if ps, ok := k.(prestarter); ok {
		ps.prestart(ks)
	}
	return k
}

// perkeyGo is perkey whose Submit is Go: fire and forget, no Task.
type perkeyGo struct{ perkey }

func (p perkeyGo) Submit(ctx context.Context, key string, fn func(context.Context) error) error {
	return p.e.Go(ctx, key, fn)
}

// perkeyGoImpl returns perkey fed by Go, with opts, as an impl.
func perkeyGoImpl(name string, opts ...executor.Option) impl {
	return impl{name, func() keyed {
		e, err := executor.New[string](opts...)
		if err != nil {
			panic(err)
		}
		return perkeyGo{perkey{e}}
	}}
}

// actors runs each key's tasks on a goroutine of its own, fed by a buffered
// channel, and retires it when its key drains (impl=actor-retiring): an actor
// starts on its key's first task and exits when its key drains. Its registry
// is one map under one mutex, taken on every send and every completion.
type actors struct {
	mu sync.Mutex        // guards m and every actor's pending
	m  map[string]*actor // live actors
	wg sync.WaitGroup    // actor goroutines
}

type actor struct {
	key     string
	inbox   chan actorMsg
	pending int // tasks sent or about to be sent and not finished; guarded by actors.mu
}

type actorMsg struct {
	ctx   context.Context
	fn    func(context.Context) error
	reply chan error // nil for Submit
}

// actorInbox is each actor's channel capacity: a full inbox blocks senders.
const actorInbox = 16

func (a *actors) send(msg actorMsg, key string) {
	a.mu.Lock()
	ac := a.m[key]
	if ac == nil {
		ac = &actor{key: key, inbox: make(chan actorMsg, actorInbox)}
		a.m[key] = ac
		a.wg.Add(1)
		go a.run(ac)
	}
	// Counted under the lock before sending, so the actor cannot decide it
	// is idle and exit while this message is on its way.
	ac.pending++
	a.mu.Unlock()
	ac.inbox <- msg
}

// run is an actor's goroutine: it runs tasks until a finished task leaves
// nothing pending, then removes itself from the table and exits.
func (a *actors) run(ac *actor) {
	defer a.wg.Done()
	for msg := range ac.inbox {
		err := msg.fn(msg.ctx)
		if msg.reply != nil {
			msg.reply <- err
		}
		a.mu.Lock()
		ac.pending--
		if ac.pending == 0 {
			delete(a.m, ac.key)
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
	}
}

func (a *actors) Do(ctx context.Context, key string, fn func(context.Context) error) error {
	reply := make(chan error, 1)
	a.send(actorMsg{ctx: ctx, fn: fn, reply: reply}, key)
	return <-reply
}

func (a *actors) Submit(ctx context.Context, key string, fn func(context.Context) error) error {
	a.send(actorMsg{ctx: ctx, fn: fn}, key)
	return nil
}

func (a *actors) Left() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.m)
}

func (a *actors) Drained() bool { return a.Left() == 0 }

// Close waits for every actor to drain and exit.
func (a *actors) Close() { a.wg.Wait() }
