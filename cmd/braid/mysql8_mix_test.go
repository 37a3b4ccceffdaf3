package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/mysqlsource"
	"github.com/braid-cdc/braid/internal/testutil/mysqlsource/mysqlbinlog"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/retry"
)

// TestCaptureMixesMySQLAndMariaDB runs `braid capture` on a destination of
// three sources: a real MariaDB, whose binlog stamps commits to the
// second, and two MySQL test sources (8.4 and 8.0), whose transactions
// carry their original commit time to the µs, half of them compressed. The
// merged stream interleaves them by those times (a MySQL transaction half
// a second after a MariaDB one comes after it, one in the second before
// comes before), and a MySQL sink applies all three shards' rows to one
// table.
func TestCaptureMixesMySQLAndMariaDB(t *testing.T) {
	maria := mysqltest.Start(t)
	target := mysqltest.Start(t)
	maria.Exec(t, "CREATE DATABASE shop_0", "CREATE TABLE shop_0.orders (id INT PRIMARY KEY, name VARCHAR(32), doc JSON)")
	// Three MariaDB commits in three different seconds.
	var seconds []time.Time
	for i := 1; i <= 3; i++ {
		before := time.Now()
		maria.Exec(t, fmt.Sprintf(`INSERT INTO shop_0.orders VALUES (%d, 'maria %d', '{"n": %d}')`, i, i, i))
		seconds = append(seconds, before.Truncate(time.Second))
		time.Sleep(time.Until(before.Truncate(time.Second).Add(1100 * time.Millisecond)))
	}
	target.Exec(t, "CREATE DATABASE copy", "CREATE TABLE copy.orders (id INT PRIMARY KEY, name VARCHAR(32), doc JSON)")

	table := func(schema string) *mysqlbinlog.TableDef {
		return &mysqlbinlog.TableDef{Schema: schema, Name: "orders", PrimaryKey: []string{"id"}, Columns: []mysqlbinlog.ColumnDef{
			{Name: "id", Type: "int", NotNull: true}, {Name: "name", Type: "varchar(32)"}, {Name: "doc", Type: "json"}}}
	}
	// Each MySQL source commits at the given offsets after a MariaDB second.
	mysqlSource := func(version, schema string, uuid string, firstID int, at []time.Time) *mysqlsource.Server {
		txns := []mysqlbinlog.Txn{
			{DDL: &mysqlbinlog.DDL{Schema: schema, CreatesDatabase: true, SQL: "CREATE DATABASE " + schema}, CommitTime: seconds[0].Add(-time.Minute)},
			{DDL: &mysqlbinlog.DDL{Schema: schema, Table: table(schema)}, CommitTime: seconds[0].Add(-time.Minute + time.Millisecond)},
		}
		for i, ts := range at {
			id := firstID + i
			txns = append(txns, mysqlbinlog.Txn{CommitTime: ts, Compressed: i%2 == 0, Statements: []mysqlbinlog.Statement{{
				Kind: mysqlbinlog.Insert, Table: schema + ".orders",
				Rows: []mysqlbinlog.Row{{After: []any{id, fmt.Sprintf("%s %d", schema, id), fmt.Sprintf(`{"n": %d}`, id)}}},
			}}})
		}
		s := mysqlsource.Start(t, mysqlsource.Config{Version: version})
		if _, err := s.Serve(mysqlbinlog.Workload{Server: mysqlbinlog.Server{Version: version, UUID: mysqlbinlog.MustUUID(uuid),
			Start: seconds[0].Add(-2 * time.Minute)}, Txns: txns}); err != nil {
			t.Fatal(err)
		}
		return s
	}
	ms := func(d int) time.Duration { return time.Duration(d) * time.Millisecond }
	a := mysqlSource(mysqlsource.Version84, "shop_1", "11111111-1111-1111-1111-111111111111", 11,
		[]time.Time{seconds[0].Add(ms(300) + 7*time.Microsecond), seconds[1].Add(ms(300))})
	b := mysqlSource(mysqlsource.Version80, "shop_2", "22222222-2222-2222-2222-222222222222", 21,
		[]time.Time{seconds[0].Add(ms(600)), seconds[2].Add(ms(200))})

	spec := nodes.WriteSpec(t, fmt.Sprintf(`
name: shop
ordering: strict
shard_ddl: pessimistic   # MariaDB's JSON (LONGTEXT) and MySQL's compare as one column type
heartbeat: 100ms
tables: ['shop_\d+\.orders']
route: [{match: 'shop_\d+\.(\w+)', to: 'shop.$1'}]
sources:
  - {name: maria, address: '%s', start: earliest}
  - {name: my84, address: '%s', start: earliest}
  - {name: my80, address: '%s', start: earliest}
sinks: [{name: copy, type: mysql, address: '%s', ddl: ignore, tables: [{from: shop.orders, to: copy.orders}]}]
`, maria.Addr(), a.Addr(), b.Addr(), target.Addr()))
	var out, errb bytes.Buffer
	if code := run([]string{"capture", "-f", spec, "--max", "13", "--cursor-dir", t.TempDir(), "--timeout", "60s"}, &out, &errb); code != 0 {
		t.Fatalf("capture exited %d: %s", code, errb.String())
	}
	printed := out.String()
	var got []string
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var m struct {
			IsDdl  bool
			Source string
			Es     int64
			Data   []map[string]*string
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%v: %s", err, sc.Text())
		}
		if m.IsDdl {
			continue
		}
		got = append(got, fmt.Sprintf("%s:%s", m.Source, *m.Data[0]["id"]))
	}
	// seconds[0]: maria 1 (stamped .000), my84 11 (.300007), my80 21 (.600);
	// seconds[1]: maria 2, my84 12 (.300); seconds[2]: maria 3, my80 22 (.200).
	want := "maria:1 my84:11 my80:21 maria:2 my84:12 maria:3 my80:22"
	if strings.Join(got, " ") != want {
		t.Fatalf("merged order %q, want %q; stdout:\n%s\nstderr:\n%s", strings.Join(got, " "), want, printed, errb.String())
	}

	// The sink, fed the same way, holds every shard's rows.
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"capture", "-f", spec, "--quiet", "--cursor-dir", t.TempDir(), "--timeout", "20s"}, io.Discard, &errb)
	}()
	retry.Until(t, 60*time.Second, func() error {
		rows := target.Query(t, "SELECT GROUP_CONCAT(CONCAT(id, '=', name, ' ', doc) ORDER BY id SEPARATOR '; ') FROM copy.orders")
		want := `1=maria 1 {"n": 1}; 2=maria 2 {"n": 2}; 3=maria 3 {"n": 3}; 11=shop_1 11 {"n": 11}; 12=shop_1 12 {"n": 12}; 21=shop_2 21 {"n": 21}; 22=shop_2 22 {"n": 22}`
		if rows[0][0] != want {
			return fmt.Errorf("target holds %q, want %q", rows[0][0], want)
		}
		return nil
	})
	<-code // at its --timeout
}
