package binlog_test

import (
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/spec"
)

// TestReaderStartsOnCheckedConnection: a reader whose source the
// start-up check held (CheckAndHold) starts on the checked connection,
// so the first row comes over two connections (the check's and the
// binlog's), not three; a source that was not held dials its own.
func TestReaderStartsOnCheckedConnection(t *testing.T) {
	_, proxy, src := countedSource(t)
	reports, held := binlog.CheckAndHold(t.Context(), "test", []spec.Source{src})
	defer held.Close()
	if err := reports[0].Problems(); err != nil {
		t.Fatal(err)
	}
	if got := proxy.Stats().Accepted; got != 1 {
		t.Fatalf("the check made %d connections, want 1", got)
	}
	r := startReader(t, binlog.Config{Source: src, Held: held}, nil)
	r.waitFor(30*time.Second, "the first row", rowsAtLeast(1))
	if got := proxy.Stats().Accepted; got != 2 {
		t.Fatalf("%d connections by the first row, check included, want 2: the check's, which the reader starts on, and the binlog's", got)
	}

	// Another source of the same check was not held: its reader dials.
	other := src
	other.Name = "b"
	r2 := startReader(t, binlog.Config{Source: other, Held: held}, nil)
	r2.waitFor(30*time.Second, "the first row of a source not held", rowsAtLeast(1))
	if got := proxy.Stats().Accepted; got != 4 {
		t.Fatalf("%d connections after a second reader, want 4: it dials its start's and its binlog's", got)
	}
}
