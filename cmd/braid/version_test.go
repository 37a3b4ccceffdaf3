package main

import (
	"strings"
	"testing"
)

// TestVersion: braid version and braid --version print the same line,
// with the Go version of the build, and exit 0.
func TestVersion(t *testing.T) {
	a, _, codeA := cli("version")
	b, _, codeB := cli("--version")
	if codeA != 0 || codeB != 0 || a != b || !strings.HasPrefix(a, "braid ") || !strings.Contains(a, "go1.") {
		t.Errorf("version: %d %q; --version: %d %q", codeA, a, codeB, b)
	}
}
