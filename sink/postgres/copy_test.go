package postgres_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
	"github.com/braid-cdc/braid/sink/conformance"
	"github.com/braid-cdc/braid/sink/postgres"
	"github.com/braid-cdc/braid/spec"
)

// TestCopyValues: rows sent through COPY read back as the same rows sent
// as statements, byte for byte, in target tables made by hand whose types
// are not the ones braid would make: VARBINARY into text (its bytes as
// they are, a backslash included, not bytea's hex), FLOAT into double
// precision (the float32's value exactly), BLOB into bytea, TEXT with
// the bytes COPY's text format escapes, JSON into jsonb. Sinks apply the
// same stream of an INSERT of three rows and an UPDATE of all of them:
// exactly once through COPY (the INSERTs straight into the target, the
// UPDATEs merged from the staging table) in its binary format, the same
// in its text format, and into a table whose TEXT column is of a type
// the binary format is not written for here (name), which goes in the
// text format; exactly once as statements; and at least once through
// the staging table, in the binary format.
func TestCopyValues(t *testing.T) {
	db, name := targetDB(t)
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop_0",
		"CREATE TABLE shop_0.orders (id INT PRIMARY KEY, vb VARBINARY(16), fl FLOAT, bl BLOB, tx TEXT, js JSON) DEFAULT CHARSET=utf8mb4",
		`INSERT INTO shop_0.orders VALUES
			(1, 'a\\b\tc', 0.1, x'5c0009ff0a0d', 'tab\there\\back\rcr\nnl ✓ 😀', '{"a": "x\\ty", "b": [1.50, null]}'),
			(2, '', -8.507059173023462e37, x'', '', '[]'),
			(3, NULL, 1e-45, NULL, '\\N', NULL)`,
		"UPDATE shop_0.orders SET tx = CONCAT(IFNULL(tx, ''), '!'), fl = fl * 2")
	ways := []struct {
		name    string
		mode    spec.SinkMode
		copyMin int
		text    bool   // COPY in the text format only
		txType  string // the target's type of tx
		direct  uint64 // rows through COPY into the target
		staged  uint64 // rows through the staging table
		binary  uint64 // of them, in the binary format
	}{
		{"copied", spec.SinkExactlyOnce, 1, false, "text", 3, 3, 6},
		{"copytext", spec.SinkExactlyOnce, 1, true, "text", 3, 3, 0},
		{"fallback", spec.SinkExactlyOnce, 1, false, "name", 3, 3, 0},
		{"stmts", spec.SinkExactlyOnce, 1 << 20, false, "text", 0, 0, 0},
		{"staged", spec.SinkAtLeastOnce, 1, false, "text", 0, 6, 6},
	}
	read := func(schema string) []string {
		return query(db, "SELECT id, coalesce(vb, 'NULL'), fl, coalesce(encode(bl, 'hex'), 'NULL'), coalesce(tx, 'NULL'), coalesce(js::text, 'NULL') FROM "+schema+".orders")
	}
	for _, w := range ways {
		if _, err := db.Exec(t.Context(), "CREATE SCHEMA "+w.name+"; CREATE TABLE "+w.name+
			".orders (id integer PRIMARY KEY, vb text, fl double precision, bl bytea, tx "+w.txType+", js jsonb)"); err != nil {
			t.Fatal(err)
		}
		ds := conformance.ShopSpec(t, []*mysqltest.Server{srv}, spec.Sink{Name: w.name, Type: "postgres", Address: targetAddr, Database: name,
			Workers: 1, Mode: w.mode, DDL: "ignore", Tables: []spec.SinkTable{{From: "shop.orders", To: w.name + ".orders"}}})
		r, s := applyOnce(t, ds, func(pt *postgres.Target) {
			postgres.SetCopyMin(pt, w.copyMin)
			if w.text {
				postgres.SetCopyText(pt)
			}
		})
		target := pgTarget(s)
		sinktest.WaitFor(t, 20*time.Second, func() (bool, string) {
			direct, staged := postgres.CopiedRows(target)
			binary := postgres.CopiedBinary(target)
			st := target.Stats()
			_, lastErr := r.Applied()
			return st.Applied == 6 && direct == w.direct && staged == w.staged && binary == w.binary,
				fmt.Sprintf("%s: %+v, rows through COPY into the target %d, into the staging table %d, in the binary format %d; want 6 applied, %d, %d, %d (last error %q)",
					w.name, st, direct, staged, binary, w.direct, w.staged, w.binary, lastErr)
		})
		if st := target.Stats(); st.Missing != 0 || st.Upserts != 0 {
			t.Errorf("%s: %+v, want no row missing or found", w.name, st)
		}
	}
	// The FLOATs doubled at the source, as float32s, read back as the
	// float64s they widen to (pgx reads float8 in binary).
	fl := []float32{0.1, -8.507059173023462e37, 1e-45}
	doubled := func(i int) string { return fmt.Sprint(float64(fl[i] * 2)) }
	want := []string{
		"1 a\\b\tc " + doubled(0) + " 5c0009ff0a0d tab\there\\back\rcr\nnl ✓ 😀! {\"a\": \"x\\ty\", \"b\": [1.50, null]}",
		"2  " + doubled(1) + "  ! []",
		"3 NULL " + doubled(2) + " NULL \\N! NULL",
	}
	for _, w := range ways {
		if got := read(w.name); !slices.Equal(got, want) {
			t.Errorf("%s reads\n%q\nwant\n%q", w.name, got, want)
		}
	}
}

// TestCopyFindsKey: exactly once with an origin column, a run of INSERTs
// goes through COPY straight into the target on the checkpoint's word
// that its keys are new; a row that was there before the sink (one of
// their keys, made by hand) fails the COPY, and the transaction is sent
// again with its INSERTs upserted through the staging table: the row is
// overwritten and counted as found, nothing is lost or doubled.
func TestCopyFindsKey(t *testing.T) {
	db, name := targetDB(t)
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop_0", "CREATE TABLE shop_0.orders (id INT PRIMARY KEY, v VARCHAR(10))",
		"INSERT INTO shop_0.orders VALUES (1, 'a'), (2, 'b'), (3, 'c')")
	if _, err := db.Exec(t.Context(), `CREATE SCHEMA shop; CREATE TABLE shop.orders (_shard text NOT NULL, id integer NOT NULL, v varchar(10), PRIMARY KEY (_shard, id));
		INSERT INTO shop.orders VALUES ('s0/shop_0.orders', 2, 'before')`); err != nil {
		t.Fatal(err)
	}
	ds := conformance.ShopSpec(t, []*mysqltest.Server{srv}, spec.Sink{Name: "found", Type: "postgres", Address: targetAddr, Database: name,
		Workers: 1, DDL: "ignore", OriginColumn: "_shard"})
	r, s := applyOnce(t, ds, func(pt *postgres.Target) { postgres.SetCopyMin(pt, 1) })
	target := pgTarget(s)
	want := []string{"s0/shop_0.orders 1 a", "s0/shop_0.orders 2 b", "s0/shop_0.orders 3 c"}
	waitRows(t, 20*time.Second, r, want, func() []string { return query(db, "SELECT _shard, id, v FROM shop.orders") })
	sinktest.WaitFor(t, 5*time.Second, func() (bool, string) {
		direct, staged := postgres.CopiedRows(target)
		st := target.Stats()
		return st.Applied == 3 && st.Upserts == 1 && direct == 0 && staged == 3,
			fmt.Sprintf("%+v, rows through COPY into the target %d, into the staging table %d; want 3 applied, 1 upsert, 0, 3", st, direct, staged)
	})
}
