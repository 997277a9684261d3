package executor

import (
	"time"

	"go.uber.org/zap"

	"github.com/perkey/perkey/internal/mailbox"
)

// watchSlow is the slow-task watcher (WithSlowTaskWarning), the executor's
// only goroutine of its own: every d/4 it reports each hold older than d
// once, until stopWatch. If the Observer or the logger exits it with
// runtime.Goexit, a fresh one takes over, reporting and stoppable as before.
func (e *Executor[K]) watchSlow(d time.Duration) {
	stopped := false
	defer func() {
		if stopped {
			close(e.slowDone)
			return
		}
		go e.watchSlow(d)
	}()
	tick := time.NewTicker(min(max(d/4, time.Millisecond), time.Second))
	defer tick.Stop()
	type slowKey struct {
		key K
		age time.Duration
	}
	var found []slowKey
	for {
		select {
		case <-e.slowStop:
			stopped = true
			return
		case <-tick.C:
		}
		now := monotime()
		e.router.Each(func(k K, m *mailbox.Mailbox) {
			if at, ok := m.HeldSince(); ok && time.Duration(now-at) >= d && m.MarkSlow() {
				found = append(found, slowKey{e.nameOf(k, m), time.Duration(now - at)})
			}
		})
		// Unlocked: user code. Each hold is reported even if a callback
		// exits on an earlier one.
		forEach(0, len(found), func(i int) {
			s := found[i]
			e.slow.Add(1)
			if so, ok := e.obs.(SlowObserver); ok {
				so.TaskSlow(s.age)
			}
			e.log.Warn("task running long", zap.Any("key", s.key), zap.Duration("age", s.age),
				zap.Duration("threshold", d))
		})
		clear(found)
		found = found[:0]
	}
}

// stopWatch stops the slow-task watcher, if any, and waits until it has.
func (e *Executor[K]) stopWatch() {
	if e.slowStop == nil {
		return
	}
	e.slowOnce.Do(func() { close(e.slowStop) })
	<-e.slowDone
}
