package mysql_test

import (
	"database/sql"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/logline"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
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

// TestOriginByBytes: two shard tables whose names differ only in case
// (shop_0.orders and Shop_0.orders, two tables on a case-sensitive
// source) hold the same id. The origin column tells them apart byte for
// byte: both rows are kept, and a TRUNCATE of one deletes its row only.
// Before, the column the sink made had the target's default collation
// (utf8mb4_general_ci), which takes a/shop_0.orders and a/Shop_0.orders
// for one value: the second row collided with the first. Checked both
// where the table comes from the stream's CREATE TABLE (the column added
// after it) and where the sink creates it at its first row.
func TestOriginByBytes(t *testing.T) {
	_, name := targetDB(t)
	db, _ := sql.Open("mysql", "root@tcp("+targetAddr+")/")
	defer db.Close()
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop_0", "CREATE DATABASE Shop_0",
		"CREATE TABLE shop_0.orders (id INT PRIMARY KEY, note VARCHAR(20))",
		"CREATE TABLE Shop_0.orders (id INT PRIMARY KEY, note VARCHAR(20))",
		"INSERT INTO shop_0.orders VALUES (1, 'lower')",
		"INSERT INTO Shop_0.orders VALUES (1, 'upper')")
	for _, tc := range []struct{ table, ddl string }{{"from_ddl", ""}, {"at_first_row", "ignore"}} {
		ds := spec.Spec{Name: "shop", Tables: []string{`[sS]hop_\d+\.orders`}, Route: []spec.RouteRule{{Match: `[sS]hop_\d+\.(\w+)`, To: "shop.$1"}},
			Heartbeat: spec.Duration(100 * time.Millisecond),
			Sources:   []spec.Source{{Name: "a", Address: srv.Addr(), Start: spec.Start{Kind: spec.StartEarliest}}},
			Sinks: []spec.Sink{{Name: tc.table, Type: "mysql", Address: targetAddr, MetaDatabase: name + "_meta", OriginColumn: "_shard", DDL: tc.ddl, CreateTables: true,
				Tables: []spec.SinkTable{{From: "shop.orders", To: name + "." + tc.table}}}}}
		ds = ds.WithDefaults()
		r := applyOnce(t, &ds)
		want := []string{"a/Shop_0.orders 1 upper", "a/shop_0.orders 1 lower"}
		sinktest.WaitFor(t, 30*time.Second, func() (bool, string) {
			g := sinktest.Query(db, "SELECT _shard, id, note FROM "+name+"."+tc.table+" ORDER BY note")
			_, lastErr := r.Applied()
			return slices.Equal(g, want), fmt.Sprintf("%s holds %q, want %q (last error %q)", tc.table, g, want, lastErr)
		})
		if g := sinktest.Query(db, "SELECT CHARACTER_SET_NAME, COLLATION_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '"+name+"' AND TABLE_NAME = '"+tc.table+"' AND COLUMN_NAME = '_shard'"); !slices.Equal(g, []string{"utf8mb4 utf8mb4_bin"}) {
			t.Fatalf("%s's origin column is %q, want utf8mb4 utf8mb4_bin", tc.table, g)
		}
	}
	srv.Exec(t, "TRUNCATE TABLE Shop_0.orders")
	for _, table := range []string{"from_ddl", "at_first_row"} {
		sinktest.WaitFor(t, 30*time.Second, func() (bool, string) {
			g := sinktest.Query(db, "SELECT _shard, id, note FROM "+name+"."+table)
			return slices.Equal(g, []string{"a/shop_0.orders 1 lower"}), fmt.Sprintf("after Shop_0's TRUNCATE, %s holds %q", table, g)
		})
	}
}

// TestOriginCollationWarned: target tables made beforehand whose origin
// column has the database's case-insensitive collation (as a braid
// before the column was utf8mb4_bin made it) get one warning each, with
// the ALTER TABLE that fixes the column, its length kept, and their rows
// all the same; not again after a DDL, when the sink looks at its tables
// anew. One whose column is utf8mb4_bin gets none. Before, the sink
// said nothing, and rows of shard tables whose names differ only in case
// overwrote each other there.
func TestOriginCollationWarned(t *testing.T) {
	_, name := targetDB(t)
	db, _ := sql.Open("mysql", "root@tcp("+targetAddr+")/")
	defer db.Close()
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop_0",
		"CREATE TABLE shop_0.orders (id INT PRIMARY KEY, note VARCHAR(20))",
		"CREATE TABLE shop_0.items (id INT PRIMARY KEY, note VARCHAR(20))",
		"CREATE TABLE shop_0.notes (id INT PRIMARY KEY, note VARCHAR(20))",
		"INSERT INTO shop_0.orders VALUES (1, 'o')", "INSERT INTO shop_0.items VALUES (1, 'i')", "INSERT INTO shop_0.notes VALUES (1, 'n')")
	tables := map[string]string{ // target table: its origin column
		"general": "_shard VARCHAR(255) NOT NULL DEFAULT ''",
		"short":   "_shard VARCHAR(100) NOT NULL DEFAULT ''",
		"bin":     "_shard VARCHAR(255) COLLATE utf8mb4_bin NOT NULL DEFAULT ''",
	}
	for _, q := range []string{"CREATE DATABASE " + name + " CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci",
		"CREATE TABLE " + name + ".general (id INT NOT NULL, note VARCHAR(20), " + tables["general"] + ", PRIMARY KEY (_shard, id))",
		"CREATE TABLE " + name + ".short (id INT NOT NULL, note VARCHAR(20), " + tables["short"] + ", PRIMARY KEY (_shard, id))",
		"CREATE TABLE " + name + ".bin (id INT NOT NULL, note VARCHAR(20), " + tables["bin"] + ", PRIMARY KEY (_shard, id))",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	ds := spec.Spec{Name: "shop", Tables: []string{`shop_\d+\.\w+`}, Route: []spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}},
		Heartbeat: spec.Duration(100 * time.Millisecond),
		Sources:   []spec.Source{{Name: "a", Address: srv.Addr(), Start: spec.Start{Kind: spec.StartEarliest}}},
		Sinks: []spec.Sink{{Name: "copy", Type: "mysql", Address: targetAddr, MetaDatabase: name + "_meta", OriginColumn: "_shard", DDL: "ignore",
			Tables: []spec.SinkTable{{From: "shop.orders", To: name + ".general"}, {From: "shop.items", To: name + ".short"}, {From: "shop.notes", To: name + ".bin"}}}}}
	ds = ds.WithDefaults()
	var out logline.Buffer
	r, _ := applyLogged(t, &ds, false, slog.New(slog.NewTextHandler(&out, nil)))
	rows := func(want ...string) {
		t.Helper()
		sinktest.WaitFor(t, 30*time.Second, func() (bool, string) {
			var g []string
			for _, table := range []string{"general", "short", "bin"} {
				g = append(g, sinktest.Query(db, "SELECT '"+table+"', _shard, id, note FROM "+name+"."+table+" ORDER BY id")...)
			}
			_, lastErr := r.Applied()
			return slices.Equal(g, want), fmt.Sprintf("the tables hold %q, want %q (last error %q)", g, want, lastErr)
		})
	}
	rows("general a/shop_0.orders 1 o", "short a/shop_0.items 1 i", "bin a/shop_0.notes 1 n")
	// A DDL has the sink look at its tables again; more rows after it.
	srv.Exec(t, "ALTER TABLE shop_0.orders COMMENT 'again'",
		"INSERT INTO shop_0.orders VALUES (2, 'o')", "INSERT INTO shop_0.items VALUES (2, 'i')", "INSERT INTO shop_0.notes VALUES (2, 'n')")
	rows("general a/shop_0.orders 1 o", "general a/shop_0.orders 2 o", "short a/shop_0.items 1 i", "short a/shop_0.items 2 i",
		"bin a/shop_0.notes 1 n", "bin a/shop_0.notes 2 n")

	var warned []string
	for line := range strings.Lines(out.String()) {
		if strings.Contains(line, "origin column compares case-insensitively") {
			warned = append(warned, line)
		}
	}
	alters := map[string]string{}
	for _, line := range warned {
		for _, table := range []string{"general", "short", "bin"} {
			if strings.Contains(line, "table="+name+"."+table+" ") {
				if _, ok := alters[table]; ok {
					t.Fatalf("%s warned of twice:\n%s", table, strings.Join(warned, ""))
				}
				at := strings.Index(line, `alter="`)
				if at < 0 {
					t.Fatalf("the warning gives no ALTER TABLE: %s", line)
				}
				alters[table], _ = strconv.Unquote(strings.TrimSpace(line[at+len("alter="):]))
			}
		}
	}
	wantAlters := map[string]string{
		"general": "ALTER TABLE `" + name + "`.`general` MODIFY `_shard` VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT ''",
		"short":   "ALTER TABLE `" + name + "`.`short` MODIFY `_shard` VARCHAR(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT ''",
	}
	if len(warned) != 2 || !maps.Equal(alters, wantAlters) {
		t.Fatalf("warnings give %q, want %q; the warnings:\n%s", alters, wantAlters, strings.Join(warned, ""))
	}
	for table, alter := range alters {
		if _, err := db.Exec(alter); err != nil {
			t.Fatalf("the ALTER the warning gives, %q: %v", alter, err)
		}
		if g := sinktest.Query(db, "SELECT COLUMN_TYPE, COLLATION_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '"+name+"' AND TABLE_NAME = '"+table+"' AND COLUMN_NAME = '_shard'"); len(g) != 1 || !strings.HasSuffix(g[0], " utf8mb4_bin") {
			t.Fatalf("after the ALTER, %s's origin column is %q", table, g)
		}
	}
}
