package kafka_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: every
// consumer, client, executor and kfake cluster must be fully stopped.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
