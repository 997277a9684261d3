package mailbox

import (
	"math/rand/v2"
	"testing"
)

// TestReadyQueueOrder checks the ready queue against a FIFO of items
// through random pushes and pops: mailboxes and other items keep one order
// although they are kept apart, across the rings' growth and shrinking.
func TestReadyQueueOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var (
		q     readyQueue
		model []item
	)
	mbs := make([]Mailbox, 8)
	for step := range 200_000 {
		// Phases of filling and draining, so the rings grow and shrink.
		fill := step/5000%2 == 0
		if rng.IntN(3) > 0 == fill {
			var it item
			switch rng.IntN(4) {
			case 0:
				it = item{&Turn{}}
			case 1:
				it = item{make(chan struct{})}
			default:
				it = item{&mbs[rng.IntN(len(mbs))]}
			}
			q.push(it)
			model = append(model, it)
			continue
		}
		it, ok := q.pop()
		if ok != (len(model) > 0) {
			t.Fatalf("step %d: pop reported %v with %d queued", step, ok, len(model))
		}
		if !ok {
			continue
		}
		if it != model[0] {
			t.Fatalf("step %d: popped %v, want %v", step, it.v, model[0].v)
		}
		model = model[1:]
	}
}
