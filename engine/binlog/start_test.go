package binlog_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/spec"
)

func ids(evs []*change.Event) []int64 {
	var out []int64
	for _, rc := range rows(evs) {
		img := rc.After()
		if img == nil {
			img = rc.Before()
		}
		out = append(out, img[0].(int64))
	}
	return out
}

// TestStartPositions starts a reader at each kind of start position over the
// same binlog and checks the first row it emits.
func TestStartPositions(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id INT PRIMARY KEY)")
	// Transactions at known header times, one second apart, after the
	// DDL above (which has the real time).
	base := time.Now().Add(time.Hour).Truncate(time.Second)
	for i := 1; i <= 3; i++ {
		srv.Exec(t, fmt.Sprintf("SET timestamp = %d", base.Add(time.Duration(i)*time.Second).Unix()),
			fmt.Sprintf("INSERT INTO shop.orders VALUES (%d)", i))
	}
	file, pos := srv.MasterStatus(t)
	gtid := srv.Query(t, "SELECT @@gtid_binlog_pos")[0][0]
	srv.Exec(t, fmt.Sprintf("SET timestamp = %d", base.Add(4*time.Second).Unix()), "INSERT INTO shop.orders VALUES (4)")

	cases := []struct {
		name  string
		start spec.Start
		first int64
		n     int
	}{
		{"earliest", earliest, 1, 4},
		{"position", spec.Start{Kind: spec.StartPosition, Pos: change.Position{File: file, Pos: pos}}, 4, 1},
		{"gtid", spec.Start{Kind: spec.StartGTID, GTID: gtid}, 4, 1},
		{"timestamp", spec.Start{Kind: spec.StartTimestamp, Time: base.Add(2 * time.Second)}, 2, 3},
		{"timestamp between", spec.Start{Kind: spec.StartTimestamp, Time: base.Add(2500 * time.Millisecond)}, 3, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := startReader(t, binlog.Config{Source: source(srv, c.start)}, nil)
			evs := r.waitFor(30*time.Second, "rows", rowsAtLeast(c.n))
			time.Sleep(300 * time.Millisecond)
			got := ids(r.snapshot())
			if len(got) != c.n || got[0] != c.first {
				t.Errorf("ids %v, want %d rows from %d", got, c.n, c.first)
			}
			_ = evs
		})
	}

	t.Run("latest", func(t *testing.T) {
		r := startReader(t, binlog.Config{Source: source(srv, spec.Start{Kind: spec.StartLatest})}, nil)
		time.Sleep(500 * time.Millisecond)
		srv.Exec(t, "INSERT INTO shop.orders VALUES (5)")
		r.waitFor(30*time.Second, "row 5", rowsAtLeast(1))
		if got := ids(r.snapshot()); len(got) != 1 || got[0] != 5 {
			t.Errorf("ids %v, want [5]", got)
		}
	})
}

// TestTableFilter: rows of tables outside the filter are not emitted (and not
// decoded), while the transactions still move the position on.
func TestTableFilter(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop_0", "CREATE DATABASE other",
		"CREATE TABLE shop_0.orders (id INT PRIMARY KEY)",
		"CREATE TABLE shop_0.audit (id INT PRIMARY KEY)",
		"CREATE TABLE other.orders (id INT PRIMARY KEY)",
		"BEGIN", "INSERT INTO shop_0.orders VALUES (1)", "INSERT INTO shop_0.audit VALUES (2)", "INSERT INTO other.orders VALUES (3)", "COMMIT",
		"INSERT INTO other.orders VALUES (4)",
		"INSERT INTO shop_0.orders VALUES (5)")
	filter, err := spec.CompileTableFilter([]string{`shop_\d+\.orders`})
	if err != nil {
		t.Fatal(err)
	}
	r := startReader(t, binlog.Config{Source: source(srv, earliest), Tables: filter}, nil)
	r.waitFor(30*time.Second, "rows", rowsAtLeast(2))
	time.Sleep(300 * time.Millisecond)
	evs := r.snapshot()
	for _, rc := range rows(evs) {
		if rc.Table.FullName() != "shop_0.orders" {
			t.Errorf("row of %s emitted", rc.Table.FullName())
		}
	}
	if got := ids(evs); len(got) != 2 || got[0] != 1 || got[1] != 5 {
		t.Errorf("ids %v, want [1 5]", got)
	}
	if n := countType(evs, change.EventProgress); n == 0 {
		t.Errorf("the transaction with only other.orders was not reported as progress")
	}
	for _, e := range evs {
		if e.Type == change.EventDDL && !strings.Contains(e.DDL.SQL, "shop_0.orders") {
			t.Errorf("DDL of an unselected table emitted: %s", e.DDL.SQL)
		}
	}
}
