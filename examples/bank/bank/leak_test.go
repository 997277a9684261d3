package bank_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: every test
// closes its httptest server, its client's idle connections and its Server.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
