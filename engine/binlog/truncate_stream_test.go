package binlog_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/flat"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/spec"
)

// TestTruncateStreamed: a TRUNCATE of a selected table reaches the stream
// as a DDL event naming the table, in its place between the rows before
// and after it, without changing the table's columns; one of a table the
// filter leaves out does not.
func TestTruncateStreamed(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t,
		"CREATE DATABASE shop",
		"CREATE TABLE shop.orders (id INT PRIMARY KEY, note VARCHAR(20))",
		"CREATE TABLE shop.audit (id INT PRIMARY KEY)",
		"INSERT INTO shop.orders VALUES (1, 'before')",
		"INSERT INTO shop.audit VALUES (1)",
		"USE shop",
		"TRUNCATE TABLE orders",
		"TRUNCATE shop.audit",
		"INSERT INTO shop.orders VALUES (2, 'after')",
	)
	filter, err := spec.CompileTableFilter([]string{`shop\.orders`})
	if err != nil {
		t.Fatal(err)
	}
	r := startReader(t, binlog.Config{Source: source(srv, earliest), Tables: filter}, nil)
	evs := r.waitFor(30*time.Second, "2 row changes", rowsAtLeast(2))
	var seen []string
	for _, ev := range evs {
		switch ev.Type {
		case change.EventRows:
			for i := range ev.Rows {
				seen = append(seen, "row "+named(&ev.Rows[i], ev.Rows[i].After())["note"].(string))
			}
		case change.EventDDL:
			if flat.DDLKind(ev.DDL.SQL) == "TRUNCATE" {
				if len(ev.DDL.Tables) != 1 || ev.DDL.Tables[0] != "shop.orders" {
					t.Errorf("TRUNCATE event of tables %v, want [shop.orders]", ev.DDL.Tables)
				}
				if ev.Schema != nil {
					t.Errorf("TRUNCATE event carries a schema snapshot: no schema changed")
				}
				seen = append(seen, "truncate "+ev.DDL.Tables[0])
			}
		}
	}
	want := []string{"row before", "truncate shop.orders", "row after"}
	if len(seen) != len(want) {
		t.Fatalf("stream %v, want %v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("stream %v, want %v", seen, want)
		}
	}
	rc := rows(evs)
	if got := columnNames(rc[len(rc)-1]); len(got) != 2 || got[0] != "id" || got[1] != "note" {
		t.Errorf("columns after TRUNCATE %v, want [id note]", got)
	}
}

// TestKeptDDLStreamed: a DDL of a selected table that changes nothing the
// schema model keeps (an index other than the key, a column's default, a
// table option) makes no version, yet reaches the stream as a DDL event
// naming the table, with no schema snapshot, and the rows after it keep
// the version they had; one of a table the filter leaves out does not.
// Before, the event came only once the merge had stamped the version's
// logical names on the model's own table (which then compared unequal):
// never from a reader alone.
func TestKeptDDLStreamed(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t,
		"CREATE DATABASE shop",
		"CREATE TABLE shop.orders (id INT PRIMARY KEY, note VARCHAR(20))",
		"CREATE TABLE shop.audit (id INT PRIMARY KEY, note VARCHAR(20))",
		"INSERT INTO shop.orders VALUES (1, 'before')",
		"ALTER TABLE shop.orders ADD FULLTEXT INDEX ft (note)",
		"ALTER TABLE shop.audit ADD INDEX by_note (note)",
		"ALTER TABLE shop.orders ALTER COLUMN note SET DEFAULT 'x', COMMENT 'c'",
		"INSERT INTO shop.orders VALUES (2, 'after')",
	)
	filter, err := spec.CompileTableFilter([]string{`shop\.orders`})
	if err != nil {
		t.Fatal(err)
	}
	r := startReader(t, binlog.Config{Source: source(srv, earliest), Tables: filter}, nil)
	evs := r.waitFor(30*time.Second, "2 row changes", rowsAtLeast(2))
	var seen []string
	var versions []*change.Table
	for _, ev := range evs {
		switch ev.Type {
		case change.EventRows:
			seen = append(seen, "row "+named(&ev.Rows[0], ev.Rows[0].After())["note"].(string))
			versions = append(versions, ev.Rows[0].Table)
		case change.EventDDL:
			if flat.DDLKind(ev.DDL.SQL) != "ALTER" {
				continue
			}
			if ev.Schema != nil {
				t.Errorf("%q carries a schema snapshot: no schema changed", ev.DDL.SQL)
			}
			seen = append(seen, "alter "+strings.Join(ev.DDL.Tables, ","))
		}
	}
	want := []string{"row before", "alter shop.orders", "alter shop.orders", "row after"}
	if !slices.Equal(seen, want) {
		t.Fatalf("stream %v, want %v", seen, want)
	}
	if versions[0] != versions[1] {
		t.Errorf("the rows after the ALTERs have a new version of the table; nothing it models changed")
	}
}
