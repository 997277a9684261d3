package executor

import (
	"context"
	"time"

	"github.com/alitto/pond/v2"
	"github.com/perkey/perkey/internal/mailbox"
	"go.uber.org/zap"
)

// Close stops the executor: new submissions fail with ErrClosed, every
// accepted task runs, the workers of the pool the executor owns exit (a
// pool given with WithPool is left running), and Close returns nil.
//
// If ctx ends first, Close gives up, as http.Server.Shutdown does: tasks
// that have not started, those a worker took into a batch included, end
// with ErrClosed (their Wait or Do returns it, a Go's error handler hears
// it), running tasks see their ctx canceled, and Close returns ctx's error
// at once, without waiting for a task that ignores its ctx. Such a task
// keeps its goroutine and its key's mailbox until fn returns; nothing else
// is left, and a later Close returns nil once nothing runs.
//
// Close is idempotent and safe to call concurrently. Once a Close has
// returned nil, no goroutine of the executor is left. Called from inside a
// task, it returns ErrReentrant and closes nothing.
func (e *Executor[K]) Close(ctx context.Context) error {
	switch {
	case e.unmade():
		return ErrNilExecutor
	case ctx == nil:
		return ErrNilContext
	}
	if e.innermost(ctx) != nil {
		return ErrReentrant
	}
	if !e.closed.Swap(true) {
		close(e.closing) // parked submitters leave with ErrClosed
		e.seal()
	}
	e.drainIfDone()
	var err error
	select {
	case <-e.drained:
	case <-ctx.Done():
		select {
		case <-e.drained: // also drained: nothing to give up, whatever select picked
		default:
			err = ctx.Err()
			e.stopWatch()
			e.giveUp()
			select {
			case <-e.drained: // nothing was running: stop now
			default:
				return err // running tasks ignore their ctx: do not wait
			}
		}
	}
	if e.stopping.Swap(true) {
		<-e.stopped // drained: no user code is left to run, so this is quick
		return err
	}
	// Drained: only drive loops and pond workers on their way out are left.
	e.stopWatch()
	e.dispatching.Wait()
	e.runner.Wait()
	if e.ownPool {
		stopIdle(e.pool)
	}
	e.forceCancel()
	defer close(e.stopped) // even if a logger or Detach calls runtime.Goexit
	e.log.Debug("executor closed", zap.Uint64("completed", e.Stats().Completed),
		zap.Uint64("canceled", e.canceled.Load()))
	e.detach()
	return err
}

// giveUp, the one place where Close gives up, fails with ErrClosed every
// unstarted task, those in a running batch included (Mailbox.EachWaiting),
// and cancels running ones' contexts (ARCHITECTURE.md, "Close").
func (e *Executor[K]) giveUp() {
	e.forceCancel()
	var (
		waiting []*mailbox.Turn
		plain   []takenPlain
	)
	e.router.Each(func(_ K, m *mailbox.Mailbox) {
		m.EachWaiting(func(t *mailbox.Turn) { waiting = append(waiting, t) })
		plain = e.takePlain(m, takeAll, plain)
	})
	// Turns granted their keys, waiting for a slot (shared readers, a
	// multi-key task granted its last key), are in the runner's ready queue.
	e.runner.EachGranted(func(t *mailbox.Turn) { waiting = append(waiting, t) })
	forEach(0, 2, func(kind int) { // both kinds end even if a callback calls Goexit
		if kind == 0 {
			e.endTakenAll(plain, ErrClosed) // as in RunPlain: mailbox, then drain
			return
		}
		// cancel settles the task too (its Wait returns, the drain counts
		// it); no-op for a started task or a multi-key one listed again.
		forEach(0, len(waiting), func(i int) { e.cancel(jobOf[K](waiting[i]), ErrClosed) })
	})
}

// stopIdle waits for the workers of an owned pool to exit, its queue empty
// as every drive loop returned. (StopAndWait would submit its stop to pond's
// default pool: that ties executors together and breaks synctest bubbles.)
func stopIdle(p pond.Pool) {
	for p.RunningWorkers() > 0 {
		time.Sleep(10 * time.Microsecond)
	}
}
