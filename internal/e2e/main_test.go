package e2e

import (
	"testing"

	"github.com/braid-cdc/braid/internal/testutil/braidproc"
)

// TestMain builds the braid binary once, before any test runs (not at the
// first test's first node, whose timeouts would count the build).
func TestMain(m *testing.M) { braidproc.Main(m) }
