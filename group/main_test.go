package group_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them:
// Destination.Run must stop every source's reader and its merge loop
// before it returns.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
