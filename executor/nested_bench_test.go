package executor_test

import (
	"context"
	"testing"

	"github.com/perkey/perkey/executor"
)

// BenchmarkNested measures nested calls made from inside one task: a Do on
// an idle key (it runs inline and never waits, so it is never checked for
// deadlock), and a Submit then Wait on another key (the Wait blocks, and
// pays the deadlock check and its filing).
func BenchmarkNested(b *testing.B) {
	bg := context.Background()
	b.Run("Do=inline", func(b *testing.B) {
		e, _ := executor.New[string]()
		defer e.Close(bg)
		b.ReportAllocs()
		e.Do(bg, "outer", func(ctx context.Context) error {
			for b.Loop() {
				e.Do(ctx, "inner", nop)
			}
			return nil
		})
	})
	b.Run("SubmitWait=waits", func(b *testing.B) {
		e, _ := executor.New[string]()
		defer e.Close(bg)
		b.ReportAllocs()
		e.Do(bg, "outer", func(ctx context.Context) error {
			for b.Loop() {
				task, _ := e.Submit(ctx, "inner", nop)
				task.Wait(ctx)
			}
			return nil
		})
	})
}
