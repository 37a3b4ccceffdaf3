package metrics_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: a
// scrape starts none, and the tests' pipelines stop theirs.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
