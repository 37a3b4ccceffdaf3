package binlog_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/flat"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
)

// TestWriteEventsParallel: flat.Writer.WriteEvents writes exactly the
// messages Write writes, in JSON and in the binary encoding, whether it
// formats them on one goroutine or several, and whether it is given the
// stream's events all at once or in batches that cut runs and
// transactions (as the native API's store batches do). The binlog holds
// transactions of thousands of rows over two tables, updates (old),
// deletes, a DDL between them, and renaming.
func TestWriteEventsParallel(t *testing.T) {
	srv := mysqltest.Start(t)
	stmts := []string{"SET NAMES utf8mb4", "CREATE DATABASE d",
		"CREATE TABLE d.a (id INT PRIMARY KEY, s VARCHAR(40), f DOUBLE, ts TIMESTAMP(3) NULL)",
		"CREATE TABLE d.b (id INT PRIMARY KEY, note TEXT CHARACTER SET latin1, bin VARBINARY(16))",
		"SET max_recursive_iterations = 100000",
		"INSERT INTO d.a WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM s WHERE n < 3000) SELECT n, CONCAT('row ', n, ' é\"'), n/7, FROM_UNIXTIME(1700000000 + n) FROM s",
		"BEGIN",
		"INSERT INTO d.b WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM s WHERE n < 1500) SELECT n, REPEAT('x', n % 50), UNHEX(MD5(n)) FROM s",
		"UPDATE d.a SET s = 'changed' WHERE id % 3 = 0",
		"DELETE FROM d.b WHERE id % 5 = 0",
		"COMMIT",
		"ALTER TABLE d.a ADD COLUMN extra INT DEFAULT 7",
		"UPDATE d.a SET f = f * 2 WHERE id <= 2500",
	}
	srv.Exec(t, stmts...)
	r := startReader(t, binlog.Config{Source: source(srv, earliest)}, nil)
	evs := r.waitFor(30*time.Second, "3 transactions with rows and 3 table DDLs", func(evs []*change.Event) bool {
		return countType(evs, change.EventCommit) >= 3 && countType(evs, change.EventDDL) >= 3
	})
	rows := 0
	for _, ev := range evs {
		rows += len(ev.Rows)
	}
	if rows < 3*flat.ParallelRows {
		t.Fatalf("%d rows: too few to format in parallel", rows)
	}
	// Logical names as package group stamps them: every message must carry
	// them, whichever goroutine formats it.
	for _, ev := range evs {
		if len(ev.Rows) > 0 {
			t := ev.Rows[0].Table
			t.LogicalSchema, t.LogicalName = "logical_"+t.Schema, strings.ToUpper(t.Name)
		}
	}
	writer := func(binary bool) flat.Writer {
		return flat.Writer{Binary: binary, MaxRows: 700, Now: func() time.Time { return time.UnixMilli(1_700_000_000_000) }}
	}
	for _, binary := range []bool{false, true} {
		var want bytes.Buffer
		w := writer(binary)
		for _, ev := range evs {
			if err := w.Write(ev, func(line []byte) error { fmt.Fprintf(&want, "%d:%s\n", len(line), line); return nil }); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Contains(want.Bytes(), []byte("logical_")) {
			t.Fatalf("binary=%v: no message carries the stamped logical names", binary)
		}
		for _, c := range []struct{ workers, batch int }{{1, len(evs)}, {4, len(evs)}, {3, 7}, {2, 64}} {
			var got bytes.Buffer
			w := writer(binary)
			for from := 0; from < len(evs); from += c.batch {
				err := w.WriteEvents(evs[from:min(from+c.batch, len(evs))], c.workers, func(line []byte) error {
					fmt.Fprintf(&got, "%d:%s\n", len(line), line)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Fatalf("binary=%v, %d workers, batches of %d events: %d bytes of messages, want Write's %d", binary, c.workers, c.batch, got.Len(), want.Len())
			}
		}
	}
}
