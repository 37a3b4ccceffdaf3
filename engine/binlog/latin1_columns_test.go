package binlog_test

import (
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/spec"
)

// TestLatin1Columns reads latin1 text columns (MySQL's latin1 is
// Windows-1252: é is one byte, € is 0x80) and requires UTF-8 text in the
// Values and in the flat messages, whichever way braid learnt the charset:
// from a CREATE TABLE in the binlog (its DEFAULT CHARSET, a column's
// CHARACTER SET or COLLATE, or, naming none, its database's default, as
// the server reported it at the start or as CREATE DATABASE set it), from
// SHOW CREATE TABLE of a table created before the start, and from the
// table map (binlog_row_metadata=FULL). A utf8mb4 column of the same table
// stays as it is.
func TestLatin1Columns(t *testing.T) {
	const text = "café € ‚ƒ„…†‡ˆ‰Š‹ŒŽ ÿ"
	eachRowMetadata(t, func(t *testing.T, srv *mysqltest.Server) {
		srv.Exec(t, "SET NAMES utf8mb4", "CREATE DATABASE shop CHARACTER SET latin1",
			"CREATE TABLE shop.legacy (id INT PRIMARY KEY, n VARCHAR(40), x TEXT)")
		file, pos := srv.MasterStatus(t)
		srv.Exec(t, "SET NAMES utf8mb4",
			"CREATE TABLE shop.t (id INT PRIMARY KEY, a VARCHAR(40), b TEXT, c CHAR(40) COLLATE latin1_bin, u VARCHAR(40) CHARACTER SET utf8mb4) DEFAULT CHARSET=latin1",
			"INSERT INTO shop.t VALUES (1, '"+text+"', '"+text+"', '"+text+"', 'ünïcode 📦')",
			"UPDATE shop.t SET a = 'Œuvre' WHERE id = 1",
			"INSERT INTO shop.legacy VALUES (1, '"+text+"', 'naïve')",
			"CREATE TABLE shop.fresh (id INT PRIMARY KEY, n VARCHAR(40))",
			"INSERT INTO shop.fresh VALUES (1, '"+text+"')",
			"CREATE DATABASE shop2 CHARACTER SET latin1",
			"CREATE TABLE shop2.t (id INT PRIMARY KEY, n VARCHAR(40))",
			"INSERT INTO shop2.t VALUES (1, '"+text+"')")
		r := startReader(t, binlog.Config{Source: source(srv, spec.Start{Kind: spec.StartPosition, Pos: change.Position{File: file, Pos: pos}})}, nil)
		evs := r.waitFor(30*time.Second, "5 transactions with rows", func(evs []*change.Event) bool {
			return countType(evs, change.EventCommit) >= 5 // the flat writer writes a run at its commit
		})
		rc := rows(evs)
		want := map[string]change.Value{"id": int64(1), "a": text, "b": text, "c": text, "u": "ünïcode 📦"}
		checkRow(t, "latin1 insert", rc[0], change.Insert, nil, want)
		after := clone(want)
		after["a"] = "Œuvre"
		checkRow(t, "latin1 update", rc[1], change.Update, want, after)
		checkRow(t, "table created before the start", rc[2], change.Insert, nil,
			map[string]change.Value{"id": int64(1), "n": text, "x": "naïve"})
		checkRow(t, "table created after the start, in a latin1 database", rc[3], change.Insert, nil,
			map[string]change.Value{"id": int64(1), "n": text})
		checkRow(t, "table of a latin1 database created after the start", rc[4], change.Insert, nil,
			map[string]change.Value{"id": int64(1), "n": text})

		data := flatData(t, evs)
		if len(data) != 5 {
			t.Fatalf("%d flat rows, want 5", len(data))
		}
		for col, w := range map[string]string{"a": text, "b": text, "c": text, "u": "ünïcode 📦"} {
			if g := flatText(data[0][col]); g != w {
				t.Errorf("flat insert %s = %q, want %q", col, g, w)
			}
		}
		for _, i := range []int{2, 3, 4} {
			if g := flatText(data[i]["n"]); g != text {
				t.Errorf("flat row %d: n = %q, want %q", i, g, text)
			}
		}
		var canal []byte
		canal, null := rc[0].AppendText(canal, true, 1)
		if null || string(canal) != text {
			t.Errorf("canal text of a = %q (null %v), want %q", canal, null, text)
		}
	})
}
