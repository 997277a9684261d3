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
// that have not started end with ErrClosed (their Wait or Do returns it),
// running tasks see their ctx canceled, and Close returns ctx's error at
// once, without waiting for a task that ignores its ctx. Such a task keeps
// its goroutine until fn returns, and its key's mailbox until then; nothing
// else is left, and a later Close returns nil once nothing runs.
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
		case <-e.drained:
			// Drained as well (say, nothing was pending): nothing to give
			// up, so the result does not depend on select's coin toss.
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
	// Drained: every accepted task has settled. What is left are drive
	// loops and pond workers on their way out, which take microseconds.
	e.stopWatch()
	e.dispatching.Wait()
	e.runner.Wait()
	if e.ownPool {
		stopIdle(e.pool)
	}
	e.forceCancel()
	// Deferred: a logger or Detach that calls runtime.Goexit ends this
	// call's goroutine, but the executor is closed all the same.
	defer close(e.stopped)
	e.log.Debug("executor closed", zap.Uint64("completed", e.Stats().Completed),
		zap.Uint64("canceled", e.canceled.Load()))
	e.detach()
	return err
}

// giveUp, the one place where Close gives up, fails with ErrClosed every
// task that has not started, those a drive loop took into a batch behind a
// running task included (Mailbox.EachWaiting), and cancels the contexts
// of running ones.
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
	// Turns granted their keys but waiting for a slot (shared readers, a
	// multi-key task granted its last key) are in the runner's ready queue.
	e.runner.EachGranted(func(t *mailbox.Turn) { waiting = append(waiting, t) })
	// Each is ended even if a callback calls runtime.Goexit while an earlier
	// one ends: the rest, of both kinds, end as the goroutine exits (forEach).
	forEach(0, 2, func(kind int) {
		if kind == 0 {
			// Plain tasks taken out end as they would have when their
			// turn came (RunPlain): their mailbox first, then the drain.
			e.endTakenAll(plain, ErrClosed)
			return
		}
		// cancel also settles the task, so its Wait returns and Close's
		// drain counts it. It is a no-op for a multi-key task listed again
		// (queued in several mailboxes) and for one that has started.
		forEach(0, len(waiting), func(i int) { e.cancel(jobOf[K](waiting[i]), ErrClosed) })
	})
}

// stopIdle waits for the pond workers of a pool the executor owns to exit:
// every drive loop has returned, so pond's queue is empty. (pond's
// StopAndWait would submit its stop to pond's global default pool, which
// ties unrelated executors together and breaks testing/synctest bubbles.)
func stopIdle(p pond.Pool) {
	for p.RunningWorkers() > 0 {
		time.Sleep(10 * time.Microsecond)
	}
}
