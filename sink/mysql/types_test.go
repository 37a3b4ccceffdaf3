package mysql_test

import (
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/spec"
)

// TestColumnTypes: rows of most column types, with the values that a
// text form can get wrong (tabs, newlines, backslashes, NULs, "\N", bytes
// that are not UTF-8, BIT, JSON, zero-padded BINARY, NULLs), inserted in
// runs the sink inserts in one statement, then updated and deleted: the
// target holds exactly the source's values, whether the sink replays the
// binlog's row events or writes SQL statements.
func TestColumnTypes(t *testing.T) {
	db, name := targetDB(t)
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop_0", `CREATE TABLE shop_0.kinds (
		id INT PRIMARY KEY, ti TINYINT, us SMALLINT UNSIGNED, bu BIGINT UNSIGNED, f FLOAT, d DOUBLE, dec_ DECIMAL(20,6),
		vc VARCHAR(100), ch CHAR(5), tx TEXT, lat VARCHAR(20) CHARACTER SET latin1, bn BINARY(4), vb VARBINARY(20), bl BLOB,
		dt DATETIME(6), ts TIMESTAMP(3) NULL, dd DATE, tm TIME(2), yr YEAR, en ENUM('a','b c'), st SET('x','y','z'),
		js JSON, bt BIT(10))`)
	values := []string{
		"(1, -128, 65535, 18446744073709551615, 1.5, -2.25e100, -12345678901234.123456, 'tab\there', 'a', 'line\nbreak\r\n', 'café', 'ab', X'00FF0A09', X'5C4E', '2026-01-02 03:04:05.123456', '2026-01-02 03:04:05.678', '2026-12-31', '-838:59:59.00', 2155, 'b c', 'x,z', '{\"k\": [1, \"two\\\\n\"]}', b'1010101010')",
		"(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
		`(3, 0, 0, 0, 0, 0, 0, '\\N', '', '\\\\ back\\\\slash', '', X'', X'', X'', '1000-01-01 00:00:00', NULL, '1000-01-01', '00:00:00', 1901, 'a', '', 'null', b'0')`,
		"(4, 127, 1, 1, 3.4e38, 5e-324, 0.000001, 'nul\\0in', 'zz', 'ünïcode 📦', 'x', X'01', X'00', X'000000', '9999-12-31 23:59:59.999999', '2038-01-19 03:14:07.999', '9999-12-31', '838:59:59.99', 0, NULL, 'x,y,z', '[]', b'1111111111')",
	}
	srv.Exec(t, "INSERT INTO shop_0.kinds VALUES "+strings.Join(values, ", "))
	srv.Exec(t, "INSERT INTO shop_0.kinds SELECT id + 10, ti, us, bu, f, d, dec_, vc, ch, tx, lat, bn, vb, bl, dt, ts, dd, tm, yr, en, st, js, bt FROM shop_0.kinds")
	srv.Exec(t, "UPDATE shop_0.kinds SET vc = CONCAT(IFNULL(vc, ''), '\\t!'), bl = X'09', bt = b'1' WHERE id IN (11, 12, 13)",
		"DELETE FROM shop_0.kinds WHERE id IN (2, 14)")
	// Once as the binlog's row events, once as SQL statements, into a
	// table each.
	for _, way := range []struct {
		table   string
		sqlOnly bool
	}{{"kinds", false}, {"kinds_sql", true}} {
		ds := spec.Spec{Name: "kinds", Tables: []string{`shop_\d+\.kinds`},
			Heartbeat: spec.Duration(100 * time.Millisecond),
			Sources:   []spec.Source{{Name: "a", Address: srv.Addr(), Start: spec.Start{Kind: spec.StartEarliest}}},
			Sinks: []spec.Sink{{Name: way.table, Type: "mysql", Address: targetAddr, MetaDatabase: name + "_meta",
				Tables: []spec.SinkTable{{From: "shop_0.kinds", To: name + "." + way.table}}}}}
		ds = ds.WithDefaults()
		r, target := applyWith(t, &ds, way.sqlOnly)
		checkKinds(t, srv, db, name+"."+way.table, r)
		if st := target.Stats(); way.sqlOnly && st.Replayed != 0 || !way.sqlOnly && st.Replayed != st.Applied {
			t.Fatalf("%s: %+v: want %d replayed", way.table, st, map[bool]uint64{true: 0, false: st.Applied}[way.sqlOnly])
		}
	}
}

// checkKinds waits for table to equal shop_0.kinds.
func checkKinds(t *testing.T, srv *mysqltest.Server, db *sql.DB, table string, r *sink.Runner) {
	t.Helper()
	cols := "id, ti, us, bu, CONCAT(f), CONCAT(d), dec_, HEX(vc), ch, HEX(tx), HEX(lat), HEX(bn), HEX(vb), HEX(bl), dt, ts, dd, tm, yr, en, st, js, bt + 0"
	render := func(rows [][]string) []string {
		var out []string
		for _, r := range rows {
			out = append(out, strings.Join(r, "|"))
		}
		slices.Sort(out)
		return out
	}
	want := render(srv.Query(t, "SELECT "+cols+" FROM shop_0.kinds"))
	var got []string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		q, err := db.Query("SELECT " + cols + " FROM " + table)
		if err == nil {
			var rows [][]string
			for q.Next() {
				vals := make([]*string, 23)
				ptrs := make([]any, len(vals))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				q.Scan(ptrs...)
				row := make([]string, len(vals))
				for i, v := range vals {
					row[i] = "NULL"
					if v != nil {
						row[i] = *v
					}
				}
				rows = append(rows, row)
			}
			q.Close()
			got = render(rows)
		}
		if slices.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			_, lastErr := r.Applied()
			t.Fatalf("target differs from the source (last error %q):\n got  %s\n want %s", lastErr, strings.Join(got, "\n      "), strings.Join(want, "\n      "))
		}
	}
	fmt.Fprintln(t.Output(), table, len(got), "rows equal")
}
