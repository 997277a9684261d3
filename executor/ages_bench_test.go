package executor_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/perkey/perkey/executor"
)

// BenchmarkAges is the cost of age tracking (KeyLoad.Held and OldestWait,
// OldestKeys, slow-task warnings): an uncontended Do, a Submit and a Go with it
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
		submit := func(e *executor.Executor[string], key string, fn func(context.Context) error) {
			e.Submit(bg, key, fn)
		}
		b.Run("Submit/"+name, func(b *testing.B) { spread(b, submit, opts...) })
		goFn := func(e *executor.Executor[string], key string, fn func(context.Context) error) {
			e.Go(bg, key, fn)
		}
		b.Run("Go/"+name, func(b *testing.B) { spread(b, goFn, opts...) })
	}
}

// spread queues one task per iteration with queue, round-robin over 16
// keys, and waits for them all.
func spread(b *testing.B, queue func(*executor.Executor[string], string, func(context.Context) error), opts ...executor.Option) {
	bg := context.Background()
	e, _ := executor.New[string](opts...)
	defer e.Close(bg)
	var wg sync.WaitGroup
	fn := func(context.Context) error { wg.Done(); return nil }
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p"}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		wg.Add(1)
		queue(e, keys[i%len(keys)], fn)
		i++
	}
	wg.Wait()
}
