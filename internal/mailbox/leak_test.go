package mailbox_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: every
// drive loop must have returned once its runner is waited for.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
