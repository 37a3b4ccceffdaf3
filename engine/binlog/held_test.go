package binlog_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/spec"
)

// TestReaderStartsOnCheckedConnection: a reader whose source the
// start-up check held (CheckAndHold) starts on the checked connection,
// so the first row comes over two connections (the check's and the
// binlog's), not three; a source that was not held dials its own.
func TestReaderStartsOnCheckedConnection(t *testing.T) {
	_, proxy, src := countedSource(t)
	reports, release := binlog.CheckAndHold(t.Context(), "test", []spec.Source{src})
	defer release()
	if err := reports[0].Problems(); err != nil {
		t.Fatal(err)
	}
	if got := proxy.Stats().Accepted; got != 1 {
		t.Fatalf("the check made %d connections, want 1", got)
	}
	r := startReader(t, binlog.Config{Destination: "test", Source: src}, nil)
	r.waitFor(30*time.Second, "the first row", rowsAtLeast(1))
	if got := proxy.Stats().Accepted; got != 2 {
		t.Fatalf("%d connections by the first row, check included, want 2: the check's, which the reader starts on, and the binlog's", got)
	}

	// Another source of the same check was not held: its reader dials.
	other := src
	other.Name = "b"
	r2 := startReader(t, binlog.Config{Destination: "test", Source: other}, nil)
	r2.waitFor(30*time.Second, "the first row of a source not held", rowsAtLeast(1))
	if got := proxy.Stats().Accepted; got != 4 {
		t.Fatalf("%d connections after a second reader, want 4: it dials its start's and its binlog's", got)
	}
}

// TestHeldConnectionClosedUntaken: a checked connection no reader takes
// is closed by the check's release, or by itself once it has been held
// heldFor; a reader after that dials its own.
func TestHeldConnectionClosedUntaken(t *testing.T) {
	_, proxy, src := countedSource(t)
	closed := func(what string) {
		t.Helper()
		if err := retry.Wait(t.Context(), 30*time.Second, func() error {
			if st := proxy.Stats(); st.Open != 0 {
				return fmt.Errorf("%d connections open %s", st.Open, what)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	check := func() func() {
		t.Helper()
		reports, release := binlog.CheckAndHold(t.Context(), "test", []spec.Source{src})
		if err := reports[0].Problems(); err != nil {
			t.Fatal(err)
		}
		return release
	}
	release := check()
	if st := proxy.Stats(); st.Open != 1 {
		t.Fatalf("%d connections open after the check, want 1: the one held", st.Open)
	}
	release()
	closed("after the release")

	binlog.SetHeldFor(t, 50*time.Millisecond)
	release = check()
	defer release() // a no-op once heldFor has closed it
	closed("heldFor after the check, none released")
	before := proxy.Stats().Accepted
	r := startReader(t, binlog.Config{Destination: "test", Source: src}, nil)
	r.waitFor(30*time.Second, "the first row", rowsAtLeast(1))
	if got := proxy.Stats().Accepted - before; got != 2 {
		t.Fatalf("the reader made %d connections by its first row, want 2: its start's and its binlog's, the held one being closed", got)
	}
}
