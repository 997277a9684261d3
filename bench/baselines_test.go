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
	{"actor", func() keyed { return &actors{m: make(map[string]*actor)} }},
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

// actors runs each key's tasks on a goroutine of its own, fed by a buffered
// channel: the textbook actor per key. An actor starts on its key's first
// task and exits when its key drains.
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
