package mysql_test

import (
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
	"github.com/braid-cdc/braid/spec"
)

// TestPartialImage: a shard writes an UPDATE with binlog_row_image
// MINIMAL, whose after image holds the changed column only. Applied as
// SQL (a target that cannot replay), the sink stops on it with an error
// that says so and what to set, and no column is written NULL: before,
// the upsert of the after image wrote the others NULL (with NOBLOB,
// silently; here the NULL key failed). (Replayed as a rows event it
// changes that column, as on a replica: the conformance suite's case
// partial.)
func TestPartialImage(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop_0", "CREATE TABLE shop_0.orders (id INT PRIMARY KEY, code VARCHAR(20) NOT NULL, note VARCHAR(20))",
		"INSERT INTO shop_0.orders VALUES (1, 'c1', 'one')")
	srv.Exec(t, "SET SESSION binlog_row_image = 'MINIMAL'", "UPDATE shop_0.orders SET note = 'two' WHERE id = 1")
	_, name := targetDB(t)
	db, _ := sql.Open("mysql", "root@tcp("+targetAddr+")/")
	defer db.Close()
	ds := spec.Spec{Name: "shop", Tables: []string{`shop_\d+\.orders`}, Route: []spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}},
		Heartbeat: spec.Duration(100 * time.Millisecond),
		Sources:   []spec.Source{{Name: "a", Address: srv.Addr(), Start: spec.Start{Kind: spec.StartEarliest}}},
		Sinks: []spec.Sink{{Name: "p", Type: "mysql", Address: targetAddr, MetaDatabase: name + "_meta",
			Tables: []spec.SinkTable{{From: "shop.orders", To: name + ".orders"}}}}}
	ds = ds.WithDefaults()
	r, _ := applyWith(t, &ds, true)
	rows := func() []string {
		return sinktest.Query(db, "SELECT id, code, IFNULL(note, 'NULL') FROM "+name+".orders")
	}
	sinktest.WaitFor(t, 20*time.Second, func() (bool, string) {
		_, lastErr := r.Applied()
		return strings.Contains(lastErr, "binlog_row_image is MINIMAL or NOBLOB on source a") && strings.Contains(lastErr, "set binlog_row_image=FULL"),
			fmt.Sprintf("no error about the partial image; last error %q", lastErr)
	})
	// The INSERT may have gone with the UPDATE's transaction.
	if got := rows(); len(got) > 0 && !slices.Equal(got, []string{"1 c1 one"}) {
		t.Fatalf("the target holds %q, want nothing or the row as the INSERT wrote it", got)
	}
}
