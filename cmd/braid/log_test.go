package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestDriverLinesGoThroughSlog checks that a line go-sql-driver logs
// reaches the command's logger, with a level, instead of the driver's own
// "[mysql] " stderr logger.
func TestDriverLinesGoThroughSlog(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger(&buf, "info")
	if err != nil {
		t.Fatal(err)
	}
	driverLog{log}.Print("packets.go:58 unexpected EOF\n")
	got := buf.String()
	if !strings.Contains(got, "level=WARN") || !strings.Contains(got, `msg="mysql driver: packets.go:58 unexpected EOF"`) {
		t.Fatalf("driver line logged as %q", got)
	}
}
