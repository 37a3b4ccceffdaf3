package client

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/flat"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/spec"
)

// TestMinimalImage reads the binlogs of mariadbds with binlog_row_image
// MINIMAL and NOBLOB, whose images leave columns out (MINIMAL: an UPDATE's
// before image holds the key, its after image the columns set, a DELETE's
// the key; NOBLOB: the unchanged BLOB and TEXT columns are left out), and
// requires that flat.Writer's JSON lines hold exactly the columns the
// images hold, a real NULL as null, and that the same messages in braid's
// binary encoding decode through the client to the same rows, an absent
// column absent from the view and not NULL.
func TestMinimalImage(t *testing.T) {
	s := func(v string) *string { return &v }
	type row = map[string]*string
	type message = partialMessage
	for _, tc := range []struct {
		image string
		sqls  []string
		want  []message // the UPDATE and DELETE lines
	}{{
		image: "MINIMAL",
		sqls: []string{"CREATE DATABASE t",
			"CREATE TABLE t.m (id INT PRIMARY KEY, a VARCHAR(10), n INT NULL, c INT)",
			"INSERT INTO t.m VALUES (1, 'x', NULL, 5), (2, 'y', 7, 6)",
			"UPDATE t.m SET a = 'q' WHERE id = 1",
			"UPDATE t.m SET n = NULL, c = 8 WHERE id = 2",
			"UPDATE t.m SET id = 3 WHERE id = 2",
			"DELETE FROM t.m WHERE id = 1"},
		want: []message{
			{"UPDATE", []row{{"a": s("q")}}, []row{{}}},
			{"UPDATE", []row{{"n": nil, "c": s("8")}}, []row{{}}},
			{"UPDATE", []row{{"id": s("3")}}, []row{{"id": s("2")}}},
			{"DELETE", []row{{"id": s("1")}}, nil},
		},
	}, {
		image: "NOBLOB",
		sqls: []string{"CREATE DATABASE t",
			"CREATE TABLE t.b (id INT PRIMARY KEY, n INT NULL, tx TEXT, bl BLOB)",
			"INSERT INTO t.b VALUES (1, NULL, 'hello', 'b')",
			"UPDATE t.b SET n = 5 WHERE id = 1",
			"UPDATE t.b SET tx = 'bye' WHERE id = 1",
			"DELETE FROM t.b WHERE id = 1"},
		want: []message{
			{"UPDATE", []row{{"id": s("1"), "n": s("5")}}, []row{{"n": nil}}},
			{"UPDATE", []row{{"id": s("1"), "n": s("5"), "tx": s("bye")}}, []row{{}}},
			{"DELETE", []row{{"id": s("1"), "n": s("5")}}, nil},
		},
	}} {
		t.Run(tc.image, func(t *testing.T) {
			srv := mysqltest.Start(t, mysqltest.WithArgs("--binlog-row-image="+tc.image))
			srv.Exec(t, tc.sqls...)
			_, end := srv.MasterStatus(t)
			checkPartialLines(t, readMinimal(t, srv, end), tc.want)
		})
	}
}

// partialMessage is what an UPDATE's or DELETE's message holds.
type partialMessage struct {
	typ       string
	data, old []map[string]*string
}

// checkPartialLines writes evs as JSON lines and as binary messages and
// requires their UPDATE and DELETE messages to be want.
func checkPartialLines(t *testing.T, evs []*change.Event, want []partialMessage) {
	t.Helper()
	now := func() time.Time { return time.UnixMilli(1_700_000_000_123) }
	w, bw := flat.Writer{Now: now}, flat.Writer{Now: now, Binary: true}
	var lines, frames [][]byte
	for _, ev := range evs {
		if err := w.Write(ev, func(line []byte) error { lines = append(lines, slices.Clone(line)); return nil }); err != nil {
			t.Fatal(err)
		}
		if err := bw.Write(ev, func(frame []byte) error { frames = append(frames, slices.Clone(frame)); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if len(lines) != len(frames) {
		t.Fatalf("%d JSON lines, %d binary messages", len(lines), len(frames))
	}
	var d lineDecoder
	got := 0
	for i, line := range lines {
		var m Message
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("line %s: %v", line, err)
		}
		if m.IsDdl || m.Type == "INSERT" {
			continue
		}
		if got == len(want) {
			t.Fatalf("a line more than the statements wrote: %s", line)
		}
		typ, data, old := want[got].typ, want[got].data, want[got].old
		got++
		if m.Type != typ || !reflect.DeepEqual(m.Data, data) || !reflect.DeepEqual(m.Old, old) {
			t.Errorf("line %s\nwant type %s data %s old %s", line, typ, dump(envelope{Message: Message{Data: data}}), dump(envelope{Message: Message{Data: old}}))
		}
		var v MessageView
		if err := d.decodeBinary(frames[i], &v); err != nil {
			t.Fatalf("the binary message of line %s: %v", line, err)
		}
		if bm := v.Message(); !reflect.DeepEqual(bm.Data, m.Data) || !reflect.DeepEqual(bm.Old, m.Old) {
			t.Errorf("the binary message of line %s decoded as data %s old %s", line, dump(envelope{Message: Message{Data: bm.Data}}), dump(envelope{Message: Message{Data: bm.Old}}))
		}
		for c := range v.Columns() {
			val, held := data[0][v.Column(c)]
			if v.Holds(0, c) != held {
				t.Errorf("line %s: the binary view holds column %s: %v", line, v.Column(c), v.Holds(0, c))
			}
			if b, ok := v.Value(0, c); ok != (val != nil) || ok && string(b) != *val {
				t.Errorf("line %s: the binary view's column %s is %q, %v", line, v.Column(c), b, ok)
			}
		}
	}
	if got != len(want) {
		t.Fatalf("%d UPDATE and DELETE lines, want %d", got, len(want))
	}
}

// readMinimal reads srv's binlog from its start to the transaction
// ending at end.
func readMinimal(t *testing.T, srv *mysqltest.Server, end uint32) []*change.Event {
	t.Helper()
	r, err := binlog.NewReader(binlog.Config{Destination: "test",
		Source: spec.Source{Name: "a", Address: srv.Addr(), User: "root", Start: spec.Start{Kind: spec.StartEarliest}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var evs []*change.Event
	reached := false
	err = r.Run(ctx, func(ev *change.Event) error {
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
