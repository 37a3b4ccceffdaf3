package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/sink/conformance"
	"github.com/braid-cdc/braid/sink/postgres"
	"github.com/braid-cdc/braid/sink/sinkrun"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// typesTable has a column of most MySQL types; typeCases says what each
// becomes in PostgreSQL and what the row of extremes reads there.
const typesTable = `CREATE TABLE shop_0.orders (id INT PRIMARY KEY,
	ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED, mi MEDIUMINT, miu MEDIUMINT UNSIGNED,
	i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED, de DECIMAL(12,3), fl FLOAT, db DOUBLE, bt BIT(10), yr YEAR,
	d DATE, dzn DATE NULL, dz DATE NOT NULL DEFAULT '2000-01-01', dt DATETIME, dt6 DATETIME(6), ts TIMESTAMP(3) NULL, tm TIME, tm2 TIME(2),
	ch CHAR(5), vc VARCHAR(30), tx TEXT, lt LONGTEXT, lat VARCHAR(10) CHARACTER SET latin1,
	bn BINARY(4), vb VARBINARY(8), bl BLOB, en ENUM('a','b','c'), st SET('x','y','z'), js JSON,
	u VARCHAR(10), UNIQUE KEY by_u (u))`

var typeCases = []struct{ col, pgType, value string }{
	{"id", "integer", "1"},
	{"ti", "smallint", "-128"},
	{"tiu", "smallint", "255"},
	{"si", "smallint", "-32768"},
	{"siu", "integer", "65535"},
	{"mi", "integer", "-8388608"},
	{"miu", "integer", "16777215"},
	{"i", "integer", "-2147483648"},
	{"iu", "bigint", "4294967295"},
	{"bi", "bigint", "-9223372036854775808"},
	{"biu", "numeric(20,0)", "18446744073709551615"},
	{"de", "numeric(12,3)", "-123456789.123"},
	{"fl", "real", "1.5"},
	{"db", "double precision", "-2.25e+100"},
	{"bt", "bit(10)", "1010101010"},
	{"yr", "smallint", "2024"},
	{"d", "date", "2024-02-29"},
	{"dzn", "date", "NULL"},
	{"dz", "date", "-infinity"},
	{"dt", "timestamp(0) without time zone", "2024-02-29 23:59:59"},
	{"dt6", "timestamp(6) without time zone", "2024-02-29 23:59:59.123456"},
	{"ts", "timestamp(3) without time zone", "2024-03-01 01:02:03.456"},
	{"tm", "interval", "-838:59:59"},
	{"tm2", "interval", "12:34:56.78"},
	{"ch", "character varying(5)", "ab"},
	{"vc", "character varying(30)", "héllo wörld ✓"},
	{"tx", "text", "two\nlines"},
	{"lt", "text", "tab\there\\back\rcr"},
	{"lat", "character varying(10)", "café"},
	{"bn", "bytea", `\x01020000`},
	{"vb", "bytea", `\x00ff10`},
	{"bl", "bytea", `\xdeadbeef`},
	{"en", "text", "b"},
	{"st", "text", "x,z"},
	{"js", "jsonb", `{"a": [1, 2.5, "x"], "b": null}`},
	{"u", "character varying(10)", "u1"},
}

// TestTypes: a table of most column types, applied by three sinks: one
// that creates its target table at the first row (create_tables, the
// stream's DDL ignored) and sends every row through COPY into it; one
// that runs the stream's CREATE TABLE, translated, and sends its rows as
// statements; one at least once that creates its table and upserts every
// row through COPY into its staging table. The tables get the documented
// PostgreSQL types, the primary and unique keys, and the row of extremes
// reads back as written whichever way it went, COPY's binary format
// included (a zero date NULL where the
// column is nullable, -infinity where not; text with a tab, a newline, a
// carriage return and a backslash); the row of NULLs is NULLs. A third sink, with neither create_tables
// nor the stream's DDL, stops at the missing table and says so; a DDL
// with no PostgreSQL translation stops the sink that applies DDL, and
// says to set ddl: ignore.
func TestTypes(t *testing.T) {
	db, name := targetDB(t)
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop_0", typesTable, "SET SESSION sql_mode = ''", "SET SESSION time_zone = '+00:00'",
		`INSERT INTO shop_0.orders VALUES (1, -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295,
			-9223372036854775808, 18446744073709551615, -123456789.123, 1.5, -2.25e100, b'1010101010', 2024,
			'2024-02-29', '0000-00-00', '0000-00-00', '2024-02-29 23:59:59', '2024-02-29 23:59:59.123456', '2024-03-01 01:02:03.456',
			'-838:59:59', '12:34:56.78', 'ab', 'héllo wörld ✓', 'two\nlines', 'tab\there\\back\rcr', 'café',
			x'0102', x'00ff10', x'deadbeef', 'b', 'z,x', '{"b": null, "a": [1, 2.5, "x"]}', 'u1')`,
		"INSERT INTO shop_0.orders (id, dz) VALUES (2, '2020-01-01')")
	sinks := []spec.Sink{
		{Name: "made", Type: "postgres", Address: targetAddr, Database: name, Workers: 2, CreateTables: true, DDL: "ignore",
			Tables: []spec.SinkTable{{From: "shop.orders", To: "made.orders"}}},
		{Name: "ddl", Type: "postgres", Address: targetAddr, Database: name, Workers: 2,
			Tables: []spec.SinkTable{{From: "shop.orders", To: "ddl.orders"}}},
		{Name: "staged", Type: "postgres", Address: targetAddr, Database: name, Workers: 2, CreateTables: true, DDL: "ignore", Mode: spec.SinkAtLeastOnce,
			Tables: []spec.SinkTable{{From: "shop.orders", To: "staged.orders"}}},
		{Name: "missing", Type: "postgres", Address: targetAddr, Database: name, Workers: 2, DDL: "ignore",
			Tables: []spec.SinkTable{{From: "shop.orders", To: "missing.orders"}}},
	}
	ds := conformance.ShopSpec(t, []*mysqltest.Server{srv}, sinks[0])
	for _, sk := range sinks[1:] {
		ds.Sinks = append(ds.Sinks, conformance.ShopSpec(t, []*mysqltest.Server{srv}, sk).Sinks...)
	}
	log := testLogger(t, slog.LevelWarn)
	ctx := t.Context()
	clients := map[string]*group.Cursor{}
	for _, sk := range ds.Sinks {
		clients[sink.ClientID(sk.Name)] = nil
	}
	p, err := stream.StartPipeline(ctx, stream.PipelineConfig{Spec: ds, Clients: clients, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var cols, wantTypes, wantRow1 []string
	for _, c := range typeCases {
		cols = append(cols, "coalesce("+c.col+"::text, 'NULL')")
		wantTypes = append(wantTypes, c.col+" "+c.pgType)
		wantRow1 = append(wantRow1, c.value)
	}
	wantRow2 := slices.Repeat([]string{"NULL"}, len(typeCases))
	wantRow2[0], wantRow2[18] = "2", "2020-01-01"
	runners := map[string]*runner{}
	targets := map[string]*postgres.Target{}
	copyMin := map[string]int{"made": 1, "ddl": 1 << 20, "staged": 1, "missing": 1}
	for _, sk := range ds.Sinks {
		target, err := sinkrun.Open(ctx, sk, "shop", nil)
		if err != nil {
			t.Fatal(err)
		}
		postgres.SetCopyMin(pgTarget(target), copyMin[sk.Name])
		r := startRunner(ctx, p, target, ds, sk, nil, log)
		defer func() { r.stop(); target.Close() }()
		runners[sk.Name] = r
		targets[sk.Name] = pgTarget(target)
	}
	for _, sk := range ds.Sinks[:3] {
		schema, _, _ := strings.Cut(sk.Tables[0].To, ".")
		r := runners[sk.Name]
		t.Run(sk.Name, func(t *testing.T) {
			readRow := func(id string) []string {
				var out []string
				rows, err := db.Query(context.Background(), "SELECT "+strings.Join(cols, ", ")+" FROM "+schema+".orders WHERE id = "+id)
				if err != nil {
					return nil
				}
				defer rows.Close()
				for rows.Next() {
					vals, _ := rows.Values()
					for _, v := range vals {
						out = append(out, v.(string))
					}
				}
				return out
			}
			for deadline := time.Now().Add(20 * time.Second); len(readRow("2")) == 0; time.Sleep(100 * time.Millisecond) {
				if time.Now().After(deadline) {
					_, lastErr := r.r.Applied()
					t.Fatalf("no rows in %s.orders (last error %q)", schema, lastErr)
				}
			}
			got := query(db, "SELECT attnum, attname, format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = '"+schema+".orders'::regclass AND attnum > 0 AND NOT attisdropped")
			slices.SortFunc(got, func(a, b string) int { return len(a) - len(b) }) // attnum order, 1..9 before 10..
			var gotTypes []string
			for i := range len(typeCases) {
				for _, g := range got {
					if n, rest, _ := strings.Cut(g, " "); n == itoa(i+1) {
						gotTypes = append(gotTypes, rest)
					}
				}
			}
			if !slices.Equal(gotTypes, wantTypes) {
				t.Errorf("column types:\n got %q\nwant %q", gotTypes, wantTypes)
			}
			for i, v := range readRow("1") {
				if v != wantRow1[i] {
					t.Errorf("column %s reads %q, want %q", typeCases[i].col, v, wantRow1[i])
				}
			}
			if got := readRow("2"); !slices.Equal(got, wantRow2) {
				t.Errorf("the row of NULLs reads %q, want %q", got, wantRow2)
			}
			// Each row went the way its sink sends it (counted once its
			// transaction has returned, a moment after its rows show),
			// COPY in its binary format: every type here has one.
			want := map[string][2]uint64{"made": {2, 0}, "ddl": {0, 0}, "staged": {0, 2}}[sk.Name]
			sinktest.WaitFor(t, 5*time.Second, func() (bool, string) {
				direct, staged := postgres.CopiedRows(targets[sk.Name])
				binary := postgres.CopiedBinary(targets[sk.Name])
				return [2]uint64{direct, staged} == want && binary == direct+staged,
					fmt.Sprintf("rows through COPY into the target %d, into the staging table %d, in the binary format %d; want %d, %d, all", direct, staged, binary, want[0], want[1])
			})
			// The stream's CREATE TABLE names the unique key; a table made
			// from the schema model names it after its first column (the
			// model keeps no index names), as MySQL names an unnamed key.
			uname := map[string]string{"made": "orders_u", "ddl": "orders_by_u", "staged": "orders_u"}[sk.Name]
			keys := query(db, "SELECT indexrelid::regclass::text || ' ' || pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = '"+schema+".orders'::regclass")
			if len(keys) != 2 || !strings.Contains(keys[0]+keys[1], "UNIQUE INDEX orders_pkey ON "+schema+".orders USING btree (id)") ||
				!strings.Contains(keys[0]+keys[1], "UNIQUE INDEX "+uname+" ON "+schema+".orders USING btree (u)") {
				t.Errorf("keys %q, want the primary key and %s", keys, uname)
			}
		})
	}
	waitErr(t, runners["missing"].r, `target table missing.orders (of shop.orders) does not exist in database `+name+`: create it, or set create_tables: true`)
	srv.Exec(t, "ALTER TABLE shop_0.orders ADD FULLTEXT INDEX ft (tx)")
	waitErr(t, runners["ddl"].r, "(ALTER TABLE `ddl`.`orders` ADD FULLTEXT `ft`(`tx`))", "set ddl: ignore and change the target by hand")
	for _, n := range []string{"missing", "ddl"} {
		_, lastErr := runners[n].r.Applied()
		t.Logf("sink %s stops: %s", n, lastErr)
	}
}

func itoa(n int) string {
	var b []byte
	for n > 0 || len(b) == 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}
