package group_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/spec"
)

// The tables a source has at a start in the past are what its binlog
// says they were, not what the server holds when braid starts: a
// destination started from the same position before and after a RENAME,
// DROP or CREATE of a shard table emits the same stream, seq for seq.

// streamLines writes a collector's stream one line an event: seq, type,
// the logical table, the rows' ids and column counts, the DDL's text.
func streamLines(c *collector) (lines []string, rows int) {
	for _, ev := range c.snapshot() {
		switch ev.Type {
		case change.EventBegin:
			lines = append(lines, fmt.Sprintf("%d begin %s", ev.Seq, ev.Source))
		case change.EventCommit:
			lines = append(lines, fmt.Sprintf("%d commit", ev.Seq))
		case change.EventDDL:
			lines = append(lines, fmt.Sprintf("%d ddl %s %s", ev.Seq, ev.Source, ev.DDL.SQL))
		case change.EventRows:
			var b strings.Builder
			fmt.Fprintf(&b, "%d rows", ev.Seq)
			for i := range ev.Rows {
				rc := &ev.Rows[i]
				img := rc.After()
				if img == nil {
					img = rc.Before()
				}
				fmt.Fprintf(&b, " %v %s.%s/%s.%s:%v/%d", rc.Kind, rc.Table.Schema, rc.Table.Name, rc.Table.LogicalSchema, rc.Table.LogicalName, img[0], len(rc.Table.Columns))
				rows++
			}
			lines = append(lines, b.String())
		}
	}
	return lines, rows
}

// sameStream runs a fresh destination of ds over the binlogs run read and
// checks that it emits run's stream, line for line.
func sameStream(t *testing.T, ds *spec.Spec, run *collector, rows int) {
	t.Helper()
	retry.Until(t, 30*time.Second, func() error {
		if _, n := streamLines(run); n < rows {
			return fmt.Errorf("the first run has %d rows, want %d", n, rows)
		}
		return nil
	})
	want, _ := streamLines(run)
	run.stop(t) // one replica server_id per destination: the fresh run takes it
	fresh := collect(t, group.Config{Spec: ds})
	err := retry.Wait(t.Context(), 30*time.Second, func() error {
		if _, n := streamLines(fresh); n < rows {
			return fmt.Errorf("the fresh run has %d rows, want %d", n, rows)
		}
		return nil
	})
	got, _ := streamLines(fresh)
	if err != nil || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("a fresh start from the same position emits another stream (%v)\nfirst run:\n%s\nfresh run:\n%s", err, strings.Join(want, "\n"), strings.Join(got, "\n"))
	}
}

// oneServer starts a server holding shop_0 and shop_1, an orders table
// in each (orders only in shop_1 when only1), and one row in each.
func oneServer(t *testing.T, only1 bool, opts ...mysqltest.Option) *mysqltest.Server {
	srv := mysqltest.Start(t, opts...)
	srv.Exec(t, "CREATE DATABASE shop_0", "CREATE DATABASE shop_1",
		"CREATE TABLE shop_1.orders (id INT PRIMARY KEY, note VARCHAR(20))", "INSERT INTO shop_1.orders VALUES (1, 'a')")
	if !only1 {
		srv.Exec(t, "CREATE TABLE shop_0.orders (id INT PRIMARY KEY, note VARCHAR(20))", "INSERT INTO shop_0.orders VALUES (1, 'a')")
	}
	return srv
}

// atNow is a start at srv's current position.
func atNow(t *testing.T, srv *mysqltest.Server) spec.Start {
	file, pos := srv.MasterStatus(t)
	return spec.Start{Kind: spec.StartPosition, Pos: change.Position{File: file, Pos: pos}}
}

// TestStartSetRenameOut: shop_0.orders, the only shard table of
// shop.orders, renamed to shop_0.orders_archive (selected, the only one
// of shop.orders_archive): the RENAME goes out as the logical table's.
// A destination started after the rename from the same position (the
// binlog's beginning, or one where shop_0.orders already existed) must
// see shop_0.orders there, emit the RENAME and give every transaction
// the same seq; it saw shop_0.orders_archive, the live table, instead.
func TestStartSetRenameOut(t *testing.T) {
	for _, from := range []string{"earliest", "position"} {
		t.Run(from, func(t *testing.T) {
			srv := mysqltest.Start(t)
			srv.Exec(t, "CREATE DATABASE shop_0", "CREATE TABLE shop_0.orders (id INT PRIMARY KEY, note VARCHAR(20))",
				"INSERT INTO shop_0.orders VALUES (1, 'a')")
			start := earliest
			if from == "position" {
				start = atNow(t, srv)
			}
			ds := pessimistic(shopSpec([]*mysqltest.Server{srv}, start, "strict"))
			ds.Tables = []string{`shop_\d+\.\w+`}
			run := collect(t, group.Config{Spec: ds})
			connected(t, run.dest)
			srv.Exec(t, "INSERT INTO shop_0.orders VALUES (2, 'b')",
				"RENAME TABLE shop_0.orders TO shop_0.orders_archive",
				"INSERT INTO shop_0.orders_archive VALUES (3, 'c')")
			rows := 3
			if from == "position" {
				rows = 2
			}
			sameStream(t, ds, run, rows)
			lines, _ := streamLines(run)
			if !strings.Contains(strings.Join(lines, "\n"), "ddl s0 RENAME TABLE `shop`.`orders` TO `shop`.`orders_archive`") {
				t.Fatalf("the RENAME of shop.orders did not go out:\n%s", strings.Join(lines, "\n"))
			}
		})
	}
}

// TestStartSetRenameIn: shop_0.orders_new (not selected, no tool's copy)
// renamed to shop_0.orders joins shop.orders' shard set there, after
// shop_1.orders ran an ALTER that, alone in the set, went out at once. A
// fresh start that took the live shop_0.orders for a shard table from
// the start held that ALTER for it instead.
func TestStartSetRenameIn(t *testing.T) {
	for _, from := range []string{"earliest", "position"} {
		t.Run(from, func(t *testing.T) {
			srv := oneServer(t, true)
			start := earliest
			if from == "position" {
				start = atNow(t, srv)
			}
			ds := pessimistic(shopSpec([]*mysqltest.Server{srv}, start, "strict"))
			run := collect(t, group.Config{Spec: ds})
			connected(t, run.dest)
			srv.Exec(t, "ALTER TABLE shop_1.orders ADD COLUMN c INT NULL",
				"INSERT INTO shop_1.orders VALUES (2, 'b', 2)",
				"CREATE TABLE shop_0.orders_new (id INT PRIMARY KEY, note VARCHAR(20), c INT NULL)",
				"INSERT INTO shop_0.orders_new VALUES (1, 'x', 1)",
				"RENAME TABLE shop_0.orders_new TO shop_0.orders",
				"INSERT INTO shop_0.orders VALUES (2, 'y', 2)",
				"INSERT INTO shop_1.orders VALUES (3, 'c', 3)")
			rows := 4
			if from == "position" {
				rows = 3
			}
			sameStream(t, ds, run, rows)
		})
	}
}

// TestStartSetDropCreate: shop_0.orders dropped, then an ALTER of
// shop_1.orders (alone in the set by then: it goes out), then
// shop_2.orders created. A fresh start saw shop_2.orders from the start
// and not shop_0.orders. From a position after shop_0.orders' CREATE, its
// columns before the DROP are known only to the table maps of
// binlog_row_metadata=FULL.
func TestStartSetDropCreate(t *testing.T) {
	for _, from := range []string{"earliest", "position"} {
		t.Run(from, func(t *testing.T) {
			var opts []mysqltest.Option
			if from == "position" {
				opts = append(opts, mysqltest.WithArgs("--binlog-row-metadata=FULL"))
			}
			srv := oneServer(t, false, opts...)
			srv.Exec(t, "CREATE DATABASE shop_2")
			start := earliest
			if from == "position" {
				start = atNow(t, srv)
			}
			ds := pessimistic(shopSpec([]*mysqltest.Server{srv}, start, "strict"))
			run := collect(t, group.Config{Spec: ds})
			connected(t, run.dest)
			srv.Exec(t, "INSERT INTO shop_0.orders VALUES (2, 'b')",
				"INSERT INTO shop_1.orders VALUES (2, 'b')",
				"DROP TABLE shop_0.orders",
				"ALTER TABLE shop_1.orders ADD COLUMN c INT NULL",
				"INSERT INTO shop_1.orders VALUES (3, 'c', 3)",
				"CREATE TABLE shop_2.orders (id INT PRIMARY KEY, note VARCHAR(20), c INT NULL)",
				"INSERT INTO shop_2.orders VALUES (1, 'x', 1)",
				"INSERT INTO shop_1.orders VALUES (4, 'd', 4)")
			rows := 7
			if from == "position" {
				rows = 5
			}
			sameStream(t, ds, run, rows)
		})
	}
}
