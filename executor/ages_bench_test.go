package executor_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/perkey/perkey/executor"
)

// BenchmarkAges is the cost of age tracking (KeyLoad.Held and OldestWait,
// OldestKeys, slow-task warnings): an uncontended Do and a Submit with it
// off (the default) and on (WithSlowTaskWarning, which reads a clock as
// each task is queued and as it starts).
func BenchmarkAges(b *testing.B) {
	bg := context.Background()
	for _, on := range []bool{false, true} {
		var opts []executor.Option
		name := "ages=off"
		if on {
			opts = append(opts, executor.WithSlowTaskWarning(time.Hour))
			name = "ages=on"
		}
		b.Run("Do/"+name, func(b *testing.B) {
			e, _ := executor.New[string](opts...)
			defer e.Close(bg)
			b.ReportAllocs()
			for b.Loop() {
				e.Do(bg, "k", nop)
			}
		})
		b.Run("Submit/"+name, func(b *testing.B) {
			e, _ := executor.New[string](opts...)
			defer e.Close(bg)
			var wg sync.WaitGroup
			fn := func(context.Context) error { wg.Done(); return nil }
			keys := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p"}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				wg.Add(1)
				e.Submit(bg, keys[i%len(keys)], fn)
				i++
			}
			wg.Wait()
		})
		b.Run("Go/"+name, func(b *testing.B) {
			e, _ := executor.New[string](opts...)
			defer e.Close(bg)
			var wg sync.WaitGroup
			fn := func(context.Context) error { wg.Done(); return nil }
			keys := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p"}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				wg.Add(1)
				e.Go(bg, keys[i%len(keys)], fn)
				i++
			}
			wg.Wait()
		})
	}
}
