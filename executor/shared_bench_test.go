package executor_test

import (
	"context"
	"testing"

	"github.com/perkey/perkey/executor"
)

// BenchmarkDoShared is the cost of a read: DoShared on one key from one
// goroutine (the key idle between calls), and from 8 goroutines at once
// (b.SetParallelism on 2 Ps: readers that share the key).
func BenchmarkDoShared(b *testing.B) {
	bg := context.Background()
	b.Run("readers=1", func(b *testing.B) {
		e, _ := executor.New[string]()
		defer e.Close(bg)
		b.ReportAllocs()
		for b.Loop() {
			if err := e.DoShared(bg, "k", nop); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("readers=8", func(b *testing.B) {
		e, _ := executor.New[string]()
		defer e.Close(bg)
		b.ReportAllocs()
		b.SetParallelism(4)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := e.DoShared(bg, "k", nop); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
