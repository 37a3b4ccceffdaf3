package binlog_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/flat"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/spec"
)

// run is a Reader running in the background of a test, collecting events.
type run struct {
	t      testing.TB
	cancel context.CancelFunc
	done   chan error
	reader *binlog.Reader

	mu     sync.Mutex
	events []*change.Event
}

// source returns a spec for srv reading from start.
func source(srv *mysqltest.Server, start spec.Start) spec.Source {
	return spec.Source{Name: "a", Address: srv.Addr(), User: "root", Start: start}
}

var earliest = spec.Start{Kind: spec.StartEarliest}

// startReader runs a reader on cfg until the test ends. slow, when set, is
// called for every event before it is recorded (to simulate a slow consumer).
func startReader(t testing.TB, cfg binlog.Config, slow func(*change.Event)) *run {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	if cfg.Destination == "" {
		cfg.Destination = "test"
	}
	p, err := binlog.NewReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &run{t: t, cancel: cancel, done: make(chan error, 1), reader: p}
	go func() {
		r.done <- p.Run(ctx, func(ev *change.Event) error {
			if slow != nil {
				slow(ev)
			}
			r.mu.Lock()
			r.events = append(r.events, ev)
			r.mu.Unlock()
			return nil
		})
	}()
	t.Cleanup(func() { r.stop() })
	return r
}

// stop ends the reader and returns Run's error.
func (r *run) stop() error {
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			close(r.done)
			return err
		}
		return nil
	case <-time.After(20 * time.Second):
		r.t.Errorf("reader did not stop within 20s")
		return nil
	}
}

// snapshot copies the events seen so far.
func (r *run) snapshot() []*change.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*change.Event(nil), r.events...)
}

// waitFor waits until cond holds for the events seen, failing after d
// or as soon as the reader stops.
func (r *run) waitFor(d time.Duration, what string, cond func([]*change.Event) bool) []*change.Event {
	r.t.Helper()
	var evs []*change.Event
	retry.Until(r.t, d, func() error {
		evs = r.snapshot()
		if cond(evs) {
			return nil
		}
		select {
		case err := <-r.done:
			close(r.done) // stop has nothing left to wait for
			r.t.Fatalf("waiting for %s: reader stopped: %v", what, err)
		default:
		}
		return fmt.Errorf("waiting for %s: not seen (%d events)", what, len(evs))
	})
	return evs
}

// runErr waits for the reader to fail and returns its error.
func (r *run) runErr(d time.Duration) error {
	r.t.Helper()
	select {
	case err := <-r.done:
		close(r.done)
		if err == nil {
			return errors.New("reader stopped without error")
		}
		return err
	case <-time.After(d):
		r.t.Fatalf("reader did not fail within %v", d)
		return nil
	}
}

// rows returns the EventRows events' changes.
func rows(evs []*change.Event) []*change.RowChange {
	var out []*change.RowChange
	for _, e := range evs {
		if e.Type == change.EventRows {
			for i := range e.Rows {
				out = append(out, &e.Rows[i])
			}
		}
	}
	return out
}

func countType(evs []*change.Event, t change.EventType) int {
	n := 0
	for _, e := range evs {
		if e.Type == t {
			n++
		}
	}
	return n
}

// rowsAtLeast is a waitFor condition.
func rowsAtLeast(n int) func([]*change.Event) bool {
	return func(evs []*change.Event) bool { return len(rows(evs)) >= n }
}

// named maps a row image to column name → value.
func named(rc *change.RowChange, img []change.Value) map[string]change.Value {
	m := make(map[string]change.Value, len(img))
	for i, v := range img {
		m[rc.Table.Columns[i].Name] = v
	}
	return m
}

// flatData renders events with a flat.Writer and returns the rows of every
// message's data, in order (nil for SQL NULL).
func flatData(t *testing.T, evs []*change.Event) []map[string]*string {
	t.Helper()
	w := &flat.Writer{}
	var data []map[string]*string
	for _, ev := range evs {
		if err := w.Write(ev, func(b []byte) error {
			var m struct{ Data []map[string]*string }
			if err := json.Unmarshal(b, &m); err != nil {
				return err
			}
			data = append(data, m.Data...)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return data
}

// flatText is a flat value's text, "<null>" for NULL.
func flatText(p *string) string {
	if p == nil {
		return "<null>"
	}
	return *p
}

// eachRowMetadata runs f, as a subtest, on a server of its own for each
// binlog_row_metadata braid reads differently (MINIMAL, FULL), started
// with args too.
func eachRowMetadata(t *testing.T, f func(t *testing.T, srv *mysqltest.Server), args ...string) {
	for _, meta := range []string{"MINIMAL", "FULL"} {
		t.Run("binlog_row_metadata="+meta, func(t *testing.T) {
			f(t, mysqltest.Start(t, mysqltest.WithArgs(append(args, "--binlog-row-metadata="+meta)...)))
		})
	}
}

// waitLoss waits until the reader waits on a loss (a promoted server
// lacks transactions it emitted) and returns it.
func (r *run) waitLoss(timeout time.Duration) change.Loss {
	r.t.Helper()
	var l change.Loss
	retry.Until(r.t, timeout, func() error {
		var ok bool
		if l, ok = r.reader.Loss(); !ok {
			return fmt.Errorf("no loss waited on yet")
		}
		return nil
	})
	return l
}
