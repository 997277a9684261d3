package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/perkey/perkey/backpressure"
)

// Every user callback (fn, an Observer, a Policy, the error handler, the
// logger's core) runs where a panic is recovered on the spot and reported,
// never unwinding through a drive loop, a held lock or a reservation. This
// file wraps all but fn (invoke contains its panics and Goexits).
//
// A runtime.Goexit cannot be contained; three rules make it leave nothing
// behind: a task is accounted for before any callback hears of it
// (finished, abandoned, Batcher.end); what the goroutine holds (a key, a
// slot, a reservation, an unsettled task) is given back in a deferred call
// (runHeld, cancel, withdraw, tellAccepted), kept out of frames callers
// block in (see withdraw); a loop over tasks that calls back goes on as the
// goroutine exits (forEach).

// defaultLogger is the logger without WithLogger: errors (recovered panics,
// unread failures), and warnings if warn, as JSON lines on stderr. A
// recovered panic is never silent; zap.NewNop() silences it on purpose.
func defaultLogger(warn bool) *zap.Logger {
	level := zapcore.ErrorLevel
	if warn {
		level = zapcore.WarnLevel
	}
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.Lock(os.Stderr), level))
}

// safeCore contains a zap core's panics, told on stderr at most once a second.
type safeCore struct {
	zapcore.Core
	last *atomic.Int64 // unix ns of the last report to stderr
}

func containCore(c zapcore.Core) zapcore.Core { return safeCore{Core: c, last: new(atomic.Int64)} }

func (c safeCore) report(op string, v any) {
	now := time.Now().UnixNano()
	if last := c.last.Load(); now-last < int64(time.Second) || !c.last.CompareAndSwap(last, now) {
		return
	}
	fmt.Fprintf(os.Stderr, "perkey: the logger's core panicked in %s: %v\n", op, v)
}

// contain runs f, or on a panic in it reports the panic and returns or.
func contain[T any](c safeCore, op string, or T, f func() T) (out T) {
	defer func() {
		if v := recover(); v != nil {
			c.report(op, v)
			out = or
		}
	}()
	return f()
}

func (c safeCore) Enabled(l zapcore.Level) bool {
	return contain(c, "Enabled", false, func() bool { return c.Core.Enabled(l) })
}

func (c safeCore) With(fs []zapcore.Field) zapcore.Core {
	return contain[zapcore.Core](c, "With", c, func() zapcore.Core { return safeCore{Core: c.Core.With(fs), last: c.last} })
}

func (c safeCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return contain(c, "Check", ce, func() *zapcore.CheckedEntry {
		if !c.Core.Enabled(ent.Level) {
			return ce
		}
		return ce.AddCore(ent, c) // c, not the inner core: its Write is contained too
	})
}

// Write goes through the inner core's Check, so that cores filtering there
// (samplers, hooks) still do; a panic, reported, is not zap's to print again.
func (c safeCore) Write(ent zapcore.Entry, fs []zapcore.Field) error {
	return contain(c, "Write", nil, func() error {
		if inner := c.Core.Check(ent, nil); inner != nil {
			inner.Write(fs...)
		}
		return nil
	})
}

func (c safeCore) Sync() (err error) {
	defer func() {
		if v := recover(); v != nil {
			c.report("Sync", v)
			err = fmt.Errorf("perkey: logger panicked: %v", v)
		}
	}()
	return c.Core.Sync()
}

// callbackPanicked reports a panic recovered from a user callback other
// than fn, at error level, rate-limited: one may panic on every event.
func (e *Executor[K]) callbackPanicked(what string, v any) {
	if ce := e.limited.Check(zap.ErrorLevel, what+" panicked"); ce != nil {
		ce.Write(zap.Any("panic", v), zap.ByteString("stack", debug.Stack()))
	}
}

// safeObserver calls an Observer, containing its panics.
type safeObserver struct {
	o       Observer
	onPanic func(what string, v any)
}

func (s *safeObserver) contain() {
	if v := recover(); v != nil {
		s.onPanic("observer", v)
	}
}

func (s *safeObserver) TaskAccepted() {
	defer s.contain()
	s.o.TaskAccepted()
}

func (s *safeObserver) TaskRejected(r Reason) {
	defer s.contain()
	s.o.TaskRejected(r)
}

func (s *safeObserver) TaskStarted(wait time.Duration) {
	defer s.contain()
	s.o.TaskStarted(wait)
}

func (s *safeObserver) TaskFinished(run time.Duration, out Outcome) {
	defer s.contain()
	s.o.TaskFinished(run, out)
}

func (s *safeObserver) TaskSlow(age time.Duration) {
	if so, ok := s.o.(SlowObserver); ok {
		defer s.contain()
		so.TaskSlow(age)
	}
}

func (s *safeObserver) TaskCanceled() {
	defer s.contain()
	s.o.TaskCanceled()
}

// attach and detach tell an Observer that reads gauges (Attacher, Detacher) of e.
func (e *Executor[K]) attach() {
	if a, ok := e.cfg.observer.(Attacher); ok {
		defer e.containCallback("observer's Attach")
		a.Attach(e)
	}
}

func (e *Executor[K]) detach() {
	if d, ok := e.cfg.observer.(Detacher); ok {
		defer e.containCallback("observer's Detach")
		d.Detach(e)
	}
}

func (e *Executor[K]) containCallback(what string) {
	if v := recover(); v != nil {
		e.callbackPanicked(what, v)
	}
}

// decide asks the policy about a submission at scope's cap; a Policy that
// panics refuses that one submission (a *policyError wrapping a *PanicError).
func (e *Executor[K]) decide(load backpressure.Load, scope backpressure.Scope) (v backpressure.Verdict, err error) {
	defer func() {
		if p := recover(); p != nil {
			e.callbackPanicked("policy", p)
			v, err = backpressure.Reject, &policyError{scope: scope, pe: &PanicError{Value: p, Stack: debug.Stack()}}
		}
	}()
	return e.cfg.policy.Decide(load), nil
}

// askNeedsAge asks a policy whether it reads queue age; one that panics is
// taken to say yes (it then gets the age, and its Decide is contained).
func (e *Executor[K]) askNeedsAge(a backpressure.NeedsQueueAge) (yes bool) {
	defer func() {
		if p := recover(); p != nil {
			e.callbackPanicked("policy's NeedsQueueAge", p)
			yes = true
		}
	}()
	return a.NeedsQueueAge()
}

// policyName names a policy for Settings: its String(), contained, or its type.
func policyName(p backpressure.Policy) (name string) {
	defer func() {
		if recover() != nil {
			name = fmt.Sprintf("%T", p)
		}
	}()
	if s, ok := p.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T", p)
}

// policyError is the refusal of a submission whose Policy panicked.
type policyError struct {
	scope backpressure.Scope
	pe    *PanicError
}

func (p *policyError) Error() string {
	return fmt.Sprintf("perkey: the backpressure policy panicked: %v", p.pe.Value)
}

// Unwrap returns the policy's *PanicError.
func (p *policyError) Unwrap() error { return p.pe }

// unread hands the failure of a task whose result no caller will read (Go)
// to the error handler; by default it is logged at error level.
func (e *Executor[K]) unread(key zap.Field, keyVal any, err error, ran bool) {
	if e.cfg.onError == nil {
		if ran {
			e.log.Error("task failed", key, zap.Error(err))
		} else {
			e.log.Error("task never ran", key, zap.String("why", whyNotRun(err)), zap.Error(err))
		}
		return
	}
	defer e.containCallback("error handler")
	e.cfg.onError(keyVal, err)
}

// forEach calls f(i) for i from from up to n, in order, even if one calls
// runtime.Goexit: the rest are then called as the goroutine exits. Each f
// accounts for its item before it calls user code, so none is left out.
func forEach(from, n int, f func(i int)) {
	i := from
	defer func() {
		if i < n {
			forEach(i+1, n, f)
		}
	}()
	for ; i < n; i++ {
		f(i)
	}
}

// whyNotRun says, for the log, why an accepted task never started.
func whyNotRun(err error) string {
	switch {
	case errors.Is(err, ErrClosed):
		return "Close gave up before it started"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "its ctx ended before it started"
	case errors.Is(err, ErrGoexit):
		return "its submitter's goroutine exited before it started"
	}
	return "withdrawn before it started"
}

// ctxErr is ctx.Err(), or a *PanicError if Err panics. A queued task's ctx
// is user code, asked (Err, Done) in sweeps and watches under a mailbox's or
// the watch lock, on other callers' goroutines: one whose method panics must
// leave no lock held and fail no other call. ctxErr and ctxDone contain it:
// such a ctx counts as ended, its task ends with a *PanicError naming the
// panic (the error handler or its Wait hears of it), and it is never watched.
func ctxErr(ctx context.Context) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: fmt.Errorf("perkey: the task's ctx panicked in Err: %v", v), Stack: debug.Stack()}
		}
	}()
	return ctx.Err()
}

// sweptErr is the error of a task a sweep took out as its ctx had ended
// (ctxErr under the lock): the ctx's error asked again unlocked, or
// context.Canceled if it now answers nil (one that lies).
func sweptErr(ctx context.Context) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	return context.Canceled
}

// ctxDone is ctx.Done(), or nil (never ends) if Done panics.
func ctxDone(ctx context.Context) (d <-chan struct{}) {
	defer func() {
		if recover() != nil {
			d = nil
		}
	}()
	return ctx.Done()
}

// ctxAfterFunc is context.AfterFunc(ctx, f), or nil if ctx panics as it
// registers. (A non-standard ctx is watched from package context's own
// goroutine, which asks its Err as it ends: a panic there is out of reach.)
func ctxAfterFunc(ctx context.Context, f func()) (stop func() bool) {
	defer func() {
		if recover() != nil {
			stop = nil
		}
	}()
	return context.AfterFunc(ctx, f)
}
