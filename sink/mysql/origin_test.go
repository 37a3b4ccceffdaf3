package mysql_test

import (
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/sinktest"
	"github.com/braid-cdc/braid/spec"
)

// TestUniqueKeysAcrossShards: two shard tables hold rows of the same
// unique code (and shop_1 an id of shop_0's too). Without an origin
// column the sink stops on the first shared code, with an error that
// names that key (code=..., which the lookup at the sources goes by; it
// named the row's id before). With an origin column, a
// target table the sink made from the stream's CREATE TABLE gets the
// column in every unique key, and keeps all five rows; before, its
// unique key was the source's, and MariaDB's INSERT ... ON DUPLICATE KEY
// UPDATE let shop_1's rows overwrite shop_0's of the same code, silently.
// A target table made beforehand with a unique key that lacks the column
// stops the sink, with no row written, on an error that gives the ALTER
// TABLE to run; once it is run, the sink goes on and keeps all five.
func TestUniqueKeysAcrossShards(t *testing.T) {
	_, name := targetDB(t)
	db, _ := sql.Open("mysql", "root@tcp("+targetAddr+")/")
	defer db.Close()
	srv := sinktest.StartUniqueCollision(t)
	want := sinktest.UniqueCollisionRows("a")
	specOf := func(sinkName, origin, ddl string) *spec.Spec {
		ds := spec.Spec{Name: "shop", Tables: []string{`shop_\d+\.orders`}, Route: []spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}},
			Heartbeat: spec.Duration(100 * time.Millisecond),
			Sources:   []spec.Source{{Name: "a", Address: srv.Addr(), Start: spec.Start{Kind: spec.StartEarliest}}},
			Sinks: []spec.Sink{{Name: sinkName, Type: "mysql", Address: targetAddr, MetaDatabase: name + "_meta", OriginColumn: origin, DDL: ddl,
				Tables: []spec.SinkTable{{From: "shop.orders", To: name + "." + sinkName}}}}}
		ds = ds.WithDefaults()
		return &ds
	}
	rowsOf := func(table string) []string {
		return sinktest.Query(db, "SELECT _shard, id, code, note FROM "+name+"."+table)
	}
	waitRows := func(table string, lastErr func() string) {
		t.Helper()
		sinktest.WaitFor(t, 30*time.Second, func() (bool, string) {
			g := rowsOf(table)
			return slices.Equal(g, want), fmt.Sprintf("%s holds %q, want %q (last error %q)", table, g, want, lastErr())
		})
	}
	keysLacking := func(table string) []string {
		return sinktest.Query(db, "SELECT DISTINCT INDEX_NAME FROM information_schema.STATISTICS s WHERE TABLE_SCHEMA = '"+name+"' AND TABLE_NAME = '"+table+
			"' AND NON_UNIQUE = 0 AND NOT EXISTS (SELECT 1 FROM information_schema.STATISTICS o WHERE o.TABLE_SCHEMA = s.TABLE_SCHEMA AND o.TABLE_NAME = s.TABLE_NAME AND o.INDEX_NAME = s.INDEX_NAME AND o.COLUMN_NAME = '_shard')")
	}

	plain := applyOnce(t, specOf("plain", "", ""))
	sinktest.WaitFor(t, 20*time.Second, func() (bool, string) {
		_, lastErr := plain.Applied()
		return strings.Contains(lastErr, "a/shop_1.orders writes key code=c1 into"), fmt.Sprintf("no collision error naming code=c1; last error %q", lastErr)
	})
	// shop_0's row of c1 may have gone with the transaction the collision
	// rolled back; shop_1's must not be there.
	if g := sinktest.Query(db, "SELECT id FROM "+name+".plain WHERE code = 'c1' AND id <> 1"); len(g) > 0 {
		t.Fatalf("after the collision, shop_1's row of code c1 is there: ids %q", g)
	}

	created := applyOnce(t, specOf("created", "_shard", ""))
	waitRows("created", func() string { _, e := created.Applied(); return e })
	if k := keysLacking("created"); len(k) > 0 {
		t.Fatalf("the created table's unique keys %q lack the origin column", k)
	}

	// Made beforehand, its unique key on code alone; the stream's
	// CREATE TABLE is ignored (ddl: ignore), so the sink leaves it so.
	if _, err := db.Exec("CREATE TABLE " + name + ".premade (id INT NOT NULL, code VARCHAR(20) NOT NULL, note VARCHAR(20), _shard VARCHAR(255) NOT NULL DEFAULT '', PRIMARY KEY (_shard, id), UNIQUE KEY by_code (code))"); err != nil {
		t.Fatal(err)
	}
	premade := applyOnce(t, specOf("premade", "_shard", "ignore"))
	var lastErr string
	sinktest.WaitFor(t, 20*time.Second, func() (bool, string) {
		_, lastErr = premade.Applied()
		return strings.Contains(lastErr, "unique key by_code (code) does not hold the origin column _shard"), fmt.Sprintf("no error about the key; last error %q", lastErr)
	})
	if g := rowsOf("premade"); len(g) != 0 {
		t.Fatalf("the sink wrote %q to a table whose unique key lacks the origin column", g)
	}
	at := strings.Index(lastErr, "(ALTER TABLE ")
	if at < 0 {
		t.Fatalf("the error gives no ALTER TABLE: %q", lastErr)
	}
	alter := strings.TrimSuffix(lastErr[at+1:], ")")
	if _, err := db.Exec(alter); err != nil {
		t.Fatalf("the ALTER the error gives, %q: %v", alter, err)
	}
	waitRows("premade", func() string { _, e := premade.Applied(); return e })
}
