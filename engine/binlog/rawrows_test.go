package binlog

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/flat"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/spec"
)

// TestRawRowsMatchGoMySQLRows reads one binlog twice, once with the row
// images left raw and once with every rows event decoded by go-mysql, and
// requires the same stream from both: the same flat messages and, for
// every row change, the same Before and After values, the same canal text
// of each column of each image, and the same changed columns. It runs with
// full and minimal row images (a minimal image leaves columns out).
func TestRawRowsMatchGoMySQLRows(t *testing.T) {
	for _, image := range []string{"FULL", "MINIMAL"} {
		t.Run("binlog_row_image="+image, func(t *testing.T) {
			srv := mysqltest.Start(t, mysqltest.WithArgs("--default-time-zone=-05:30", "--binlog-row-image="+image))
			srv.Exec(t, mysqltest.EveryFastType(t)...)
			_, end := srv.MasterStatus(t)
			raw, decoded := readToEnd(t, srv, end, false), readToEnd(t, srv, end, true)
			if len(raw) != len(decoded) {
				t.Fatalf("%d events read raw, %d decoded by go-mysql", len(raw), len(decoded))
			}
			if got, want := flatLines(t, raw), flatLines(t, decoded); !reflect.DeepEqual(got, want) {
				for i := range min(len(got), len(want)) {
					if got[i] != want[i] {
						at := 0
						for at < min(len(got[i]), len(want[i])) && got[i][at] == want[i][at] {
							at++
						}
						from := max(at-80, 0)
						t.Fatalf("flat message %d differs at byte %d:\nraw      …%.160s\ngo-mysql …%.160s", i, at, got[i][from:], want[i][from:])
					}
				}
				t.Fatalf("%d flat messages from raw rows, %d from go-mysql's", len(got), len(want))
			}
			changes, values := 0, 0
			for e := range raw {
				if raw[e].Type != change.EventRows {
					continue
				}
				for r := range raw[e].Rows {
					a, b := &raw[e].Rows[r], &decoded[e].Rows[r]
					if !a.Raw() || b.Raw() {
						t.Fatalf("event %d: the raw read decoded its rows, or the go-mysql read did not", e)
					}
					changes++
					values += compareRowChanges(t, a, b)
				}
			}
			if changes < 150 || values < 5000 {
				t.Fatalf("only %d row changes, %d column texts compared", changes, values)
			}
			t.Logf("%d events, %d row changes, %d column texts identical", len(raw), changes, values)
		})
	}
}

// compareRowChanges checks that raw (read raw) and decoded (by go-mysql)
// are the same change, and returns how many column texts it compared.
func compareRowChanges(t *testing.T, raw, decoded *change.RowChange) int {
	t.Helper()
	if !reflect.DeepEqual(raw.Before(), decoded.Before()) || !reflect.DeepEqual(raw.After(), decoded.After()) {
		t.Errorf("row %d: raw before %v after %v; go-mysql before %v after %v",
			raw.Index, raw.Before(), raw.After(), decoded.Before(), decoded.After())
	}
	if raw.HasBefore() != decoded.HasBefore() || raw.HasAfter() != decoded.HasAfter() {
		t.Fatalf("row %d: the raw read has images %v/%v, go-mysql's %v/%v",
			raw.Index, raw.HasBefore(), raw.HasAfter(), decoded.HasBefore(), decoded.HasAfter())
	}
	n := 0
	for i := range raw.Table.Columns {
		if raw.Changed(i) != decoded.Changed(i) {
			t.Errorf("row %d column %s: changed %v raw, %v by go-mysql", raw.Index, raw.Table.Columns[i].Name, raw.Changed(i), decoded.Changed(i))
		}
		for _, after := range []bool{false, true} {
			if (after && !raw.HasAfter()) || (!after && !raw.HasBefore()) {
				continue
			}
			for _, quoted := range []bool{false, true} {
				got, gotNull := appendText(raw, after, i, quoted)
				want, wantNull := appendText(decoded, after, i, quoted)
				if string(got) != string(want) || gotNull != wantNull {
					t.Errorf("row %d column %s (after %v, quoted %v): raw %q (null %v), go-mysql %q (null %v)",
						raw.Index, raw.Table.Columns[i].Name, after, quoted, got, gotNull, want, wantNull)
				}
				n++
			}
		}
	}
	return n
}

// appendText is rc's column text as AppendJSON (quoted) or AppendText
// writes it.
func appendText(rc *change.RowChange, after bool, i int, quoted bool) ([]byte, bool) {
	if quoted {
		return rc.AppendJSON(nil, after, i)
	}
	return rc.AppendText(nil, after, i)
}

// readToEnd runs a reader on srv's binlog from its start until the
// transaction ending at end, raw or with go-mysql decoding every row.
func readToEnd(t *testing.T, srv *mysqltest.Server, end uint32, goMySQLRows bool) []*change.Event {
	t.Helper()
	p, err := NewReader(Config{Destination: "test", goMySQLRows: goMySQLRows,
		Source: spec.Source{Name: "a", Address: srv.Addr(), User: "root", Start: spec.Start{Kind: spec.StartEarliest}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var evs []*change.Event
	reached := false
	err = p.Run(ctx, func(ev *change.Event) error {
		if reached {
			return ctx.Err()
		}
		evs = append(evs, ev)
		if ev.Type == change.EventCommit && ev.Pos.Pos >= end {
			reached = true
			cancel()
		}
		return nil
	})
	if !reached {
		t.Fatalf("the reader stopped before %d: %v", end, err)
	}
	return evs
}

// flatLines renders events as flat messages, their ts fixed.
func flatLines(t *testing.T, evs []*change.Event) []string {
	t.Helper()
	w := &flat.Writer{Now: func() time.Time { return time.Unix(0, 0) }}
	var lines []string
	for _, ev := range evs {
		if err := w.Write(ev, func(b []byte) error { lines = append(lines, string(b)); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	return lines
}
