package main

import (
	"errors"
	"fmt"
	"testing"
)

// TestErrorsWithoutPackagePrefixes: what the CLI prints of an error has
// none of the "stream: " prefixes braid's packages put before theirs, and
// keeps the rest, "source a: " included.
func TestErrorsWithoutPackagePrefixes(t *testing.T) {
	err := fmt.Errorf("client: %w", fmt.Errorf("stream: history gone: binlog: source a: start position x is gone"))
	if got, want := oneLine(err), "history gone: source a: start position x is gone"; got != want {
		t.Errorf("oneLine: %q, want %q", got, want)
	}
	joined := errors.Join(errors.New("spec: line 3: name missing"), errors.New("group: cursor has 2 sources"))
	if got := errorLines(joined); len(got) != 2 || got[0] != "line 3: name missing" || got[1] != "cursor has 2 sources" {
		t.Errorf("errorLines: %q", got)
	}
}
