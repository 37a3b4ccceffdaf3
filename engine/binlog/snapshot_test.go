package binlog_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
)

// TestChunkReadsEveryLength: a chunk's reader takes the text protocol's
// values apart itself: NULL, the empty string, each length prefix (one
// byte, 0xfc, 0xfd, 0xfe), a row longer than its read buffer and one
// longer than a packet (it comes in two) all come back as stored, in key
// order and within the key range asked for; a missing table is
// ErrNoTable and the connection stays usable.
func TestChunkReadsEveryLength(t *testing.T) {
	srv := mysqltest.Start(t, mysqltest.WithArgs("--max-allowed-packet=64M"))
	srv.Exec(t, "CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY, v LONGTEXT NULL, w VARCHAR(10) NULL)")
	lengths := []int{0, 1, 250, 251, 65535, 65536, 300_000, 17 << 20}
	want := map[int64]string{}
	for i, n := range lengths {
		v := strings.Repeat(string(rune('a'+i)), n)
		srv.Exec(t, fmt.Sprintf("INSERT INTO d.t VALUES (%d, REPEAT('%c', %d), %s)", i+1, 'a'+i, n, map[bool]string{true: "NULL", false: "'x'"}[i%2 == 0]))
		want[int64(i+1)] = v
	}
	srv.Exec(t, "INSERT INTO d.t VALUES (100, NULL, '')")
	tbl := &change.Table{Schema: "d", Name: "t", Columns: []change.Column{{Name: "id", Type: "int"}, {Name: "v", Type: "longtext"}, {Name: "w", Type: "varchar"}}}
	ctx := context.Background()
	conn, err := binlog.OpenSnapshot(ctx, source(srv, earliest))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Chunk(ctx, tbl, []int{0}, nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rows.Len() != len(lengths)+1 {
		t.Fatalf("%d rows, want %d", rows.Len(), len(lengths)+1)
	}
	for k := range rows.Len() {
		r := rows.Row(k)
		id := r[0].(int64)
		if id == 100 {
			if r[1] != nil || r[2] != "" {
				t.Errorf("row 100: %v %q, want NULL and the empty string", r[1], r[2])
			}
			continue
		}
		if got, _ := r[1].(string); got != want[id] {
			t.Errorf("row %d: a value of %d bytes, want %d", id, len(got), len(want[id]))
		}
		if wantW := map[bool]any{true: nil, false: "x"}[(id-1)%2 == 0]; r[2] != wantW {
			t.Errorf("row %d: w = %v, want %v", id, r[2], wantW)
		}
	}
	// A range: after 2, through 6, at most 3.
	rows, err = conn.Chunk(ctx, tbl, []int{0}, []string{"2"}, []string{"6"}, 3)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for k := range rows.Len() {
		ids = append(ids, rows.Row(k)[0].(int64))
	}
	if fmt.Sprint(ids) != "[3 4 5]" {
		t.Errorf("after 2 through 6, 3 rows: %v", ids)
	}
	missing := &change.Table{Schema: "d", Name: "gone", Columns: tbl.Columns}
	if _, err := conn.Chunk(ctx, missing, []int{0}, nil, nil, 0); !errors.Is(err, binlog.ErrNoTable) {
		t.Errorf("a missing table: %v, want ErrNoTable", err)
	}
	if _, err := conn.Position(); err != nil {
		t.Errorf("after the server's error, the connection broke: %v", err)
	}
}

// TestBeginReadsAtItsPosition: Begin's transaction reads the rows as
// they were at the binlog position it returns (MariaDB's
// binlog_snapshot_position, exact): a row committed after it is not in
// its Chunk, though in the binlog; after End the next Chunk has it.
func TestBeginReadsAtItsPosition(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE d", "CREATE TABLE d.t (v VARCHAR(10) NOT NULL)", "INSERT INTO d.t VALUES ('a')")
	file, pos := srv.MasterStatus(t)
	tbl := &change.Table{Schema: "d", Name: "t", Columns: []change.Column{{Name: "v", Type: "varchar"}}}
	ctx := context.Background()
	conn, err := binlog.OpenSnapshot(ctx, source(srv, earliest))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	at, exact, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !exact || at != (change.Position{File: file, Pos: pos}) {
		t.Errorf("Begin = %s exact %v, want %s:%d exact", at, exact, file, pos)
	}
	srv.Exec(t, "INSERT INTO d.t VALUES ('b')")
	values := func() string {
		rows, err := conn.Chunk(ctx, tbl, nil, nil, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for k := range rows.Len() {
			out = append(out, rows.Row(k)[0].(string))
		}
		return strings.Join(out, " ")
	}
	if got := values(); got != "a" {
		t.Errorf("in the snapshot: rows %q, want those before its position: a", got)
	}
	if err := conn.End(); err != nil {
		t.Fatal(err)
	}
	if got := values(); got != "a b" {
		t.Errorf("after End: rows %q, want a b", got)
	}
}
