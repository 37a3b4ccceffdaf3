package canal_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: Serve
// must stop every connection goroutine when its context ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
