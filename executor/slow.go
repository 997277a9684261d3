package executor

import (
	"time"

	"go.uber.org/zap"

	"github.com/perkey/perkey/internal/mailbox"
)

// watchSlow is the slow-task watcher (WithSlowTaskWarning): every d/4 it
// looks at every live mailbox and reports each hold older than d once. It
// is the executor's only goroutine of its own; Close stops it (stopWatch).
func (e *Executor[K]) watchSlow(d time.Duration) {
	defer close(e.slowDone)
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
			return
		case <-tick.C:
		}
		now := monotime()
		e.router.Each(func(k K, m *mailbox.Mailbox) {
			if at, ok := m.HeldSince(); ok && time.Duration(now-at) >= d && m.MarkSlow() {
				found = append(found, slowKey{e.nameOf(k, m), time.Duration(now - at)})
			}
		})
		for _, s := range found { // unlocked: the logger and Observer are user code
			e.slow.Add(1)
			if so, ok := e.obs.(SlowObserver); ok {
				so.TaskSlow(s.age)
			}
			e.log.Warn("task running long", zap.Any("key", s.key), zap.Duration("age", s.age),
				zap.Duration("threshold", d))
		}
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
