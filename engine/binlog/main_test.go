package binlog_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// Reader.Run must stop its go-mysql reader when its context ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
