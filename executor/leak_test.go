package executor_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: every
// executor a test builds is closed by then, and a closed executor owns none.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
