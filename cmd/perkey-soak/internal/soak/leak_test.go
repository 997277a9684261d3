package soak_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: the
// harness joins every goroutine it starts and closes every executor.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
