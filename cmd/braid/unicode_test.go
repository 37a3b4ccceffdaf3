package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/braid-cdc/braid/internal/testutil/braidproc"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/rabbittest"
	"github.com/braid-cdc/braid/internal/testutil/redistest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
	"github.com/braid-cdc/braid/sink/kafka/kafkatest"
	"github.com/braid-cdc/braid/spec"
)

// unicodeTable is a shard table of the Unicode tests: a key and one text
// column, both named in Unicode, ids from base on.
type unicodeTable struct {
	name, col, colType string
	base               int
}

// unicodeTables are the tables the Unicode tests read: a CJK name with a
// CJK and Latin-1 column, and a name and column in combining marks (e +
// U+0301, not the precomposed é), an ASCII name with a CJK column, and
// ASCII names only. Identifiers cannot hold 4-byte characters (MariaDB
// keeps them in utf8mb3); values can.
var unicodeTables = []unicodeTable{
	{name: "名前", col: "名前ü", colType: "VARCHAR(60)", base: 0},
	{name: "cafe\u0301", col: "e\u0301", colType: "TEXT", base: 1000},
	{name: "col", col: "名前ü", colType: "VARCHAR(60)", base: 2000},
	{name: "ascii", col: "note", colType: "TEXT", base: 3000},
}

// unicodeValues are the text values each table holds, once from the
// snapshot (ids base+1 …) and once from the binlog (ids base+101 …):
// CJK with Latin-1 and an emoji, a combining mark, a 4-byte character
// alone, all of them mixed with ASCII, and ASCII alone.
var unicodeValues = []string{"名前ü😀", "e\u0301", "𝄞", "ascii 名前 e\u0301 𝄞 😀 end", "plain"}

// startUnicodeShard starts a shard whose server default is latin1, as a
// MariaDB without configuration has it, with an empty schema u0: a session
// braid left in the server's default reads every name and value above as
// latin1.
func startUnicodeShard(t *testing.T) *mysqltest.Server {
	t.Helper()
	srv := mysqltest.Start(t, mysqltest.WithArgs("--character-set-server=latin1", "--collation-server=latin1_swedish_ci"))
	srv.Exec(t, "CREATE DATABASE u0 CHARACTER SET latin1")
	return srv
}

// createUnicodeTables creates tables in u0 with the snapshot's rows (ids
// base+1 …), checking that the rows are stored as the UTF-8 bytes of the
// Go strings.
func createUnicodeTables(t *testing.T, srv *mysqltest.Server, tables []unicodeTable) {
	t.Helper()
	for _, tb := range tables {
		srv.Exec(t, fmt.Sprintf("CREATE TABLE u0.`%s` (id INT PRIMARY KEY, `%s` %s) DEFAULT CHARSET=utf8mb4", tb.name, tb.col, tb.colType))
	}
	insertUnicodeRows(t, srv, tables, 1)
	for _, tb := range tables {
		got := srv.Query(t, fmt.Sprintf("SELECT HEX(`%s`) FROM u0.`%s` ORDER BY id", tb.col, tb.name))
		for i, v := range unicodeValues {
			if len(got) != len(unicodeValues) || got[i][0] != strings.ToUpper(hex.EncodeToString([]byte(v))) {
				t.Fatalf("the shard stored %s.%s as %v, not the UTF-8 of %q: the test's own session is not utf8mb4", tb.name, tb.col, got, unicodeValues)
			}
		}
	}
}

// insertUnicodeRows inserts unicodeValues into each table, ids base+first
// on.
func insertUnicodeRows(t *testing.T, srv *mysqltest.Server, tables []unicodeTable, first int) {
	t.Helper()
	for _, tb := range tables {
		var vals []string
		for i, v := range unicodeValues {
			vals = append(vals, fmt.Sprintf("(%d, '%s')", tb.base+first+i, v))
		}
		srv.Exec(t, fmt.Sprintf("INSERT INTO u0.`%s` (id, `%s`) VALUES %s", tb.name, tb.col, strings.Join(vals, ", ")))
	}
}

// want is the rows a table should arrive with, "id value", sorted: those
// insertUnicodeRows inserted from each of firsts (1: the snapshot's, 101:
// the binlog's).
func (tb unicodeTable) want(firsts ...int) []string {
	var out []string
	for _, first := range firsts {
		for i, v := range unicodeValues {
			out = append(out, fmt.Sprintf("%d %s", tb.base+first+i, v))
		}
	}
	slices.Sort(out)
	return out
}

// unicodeRow is a row as the Unicode tests compare it, from the column
// values of a message or a target (nil: NULL or missing, as "NULL"): the
// column must be found by its Unicode name.
func (tb unicodeTable) row(data map[string]*string) string {
	id, v := "NULL", "NULL"
	if p := data["id"]; p != nil {
		id = *p
	}
	if p := data[tb.col]; p != nil {
		v = *p
	}
	return id + " " + v
}

// TestCaptureUnicodeExact: on a shard whose server default is latin1,
// `braid capture` with `snapshot: initial` prints the rows of tables
// named 名前 (column 名前ü) and cafe + U+0301 (column e + U+0301), of a
// table with an ASCII name and a column 名前ü, and of one with ASCII names
// only, byte-exact: the names in each message and the values, 4-byte
// characters and combining marks included, from the snapshot and from the
// binlog. Before every session braid opened was utf8mb4, the capture
// exited at start on the first (SHOW CREATE TABLE u0.cafe?), the
// snapshot of the second retried for ever, and that of the third printed
// 名前ü😀 as ??\ufffd?.
func TestCaptureUnicodeExact(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tables []unicodeTable
	}{
		{"table names", unicodeTables[:2]},  // exited at start
		{"column name", unicodeTables[2:3]}, // the snapshot retried for ever
		{"values", unicodeTables[3:]},       // the snapshot's values corrupted
	} {
		t.Run(tc.name, func(t *testing.T) { testCaptureUnicodeExact(t, tc.tables, false) })
	}
	// Tables created once the capture runs: their names come from the
	// binlog's CREATE TABLE, their rows all from the binlog. That path
	// never read through a session's charset; this keeps it exact.
	t.Run("created later", func(t *testing.T) { testCaptureUnicodeExact(t, unicodeTables, true) })
}

// testCaptureUnicodeExact runs TestCaptureUnicodeExact on tables, created
// before the capture starts, or after it (late).
func testCaptureUnicodeExact(t *testing.T, tables []unicodeTable, late bool) {
	srv := startUnicodeShard(t)
	if !late {
		createUnicodeTables(t, srv, tables)
	}
	specFile := nodes.WriteSpec(t, fmt.Sprintf(`
name: uni
sources: [{name: a, address: '%s'}]
tables: ['u0\..*']
snapshot: initial
`, srv.Addr()))
	outPath := filepath.Join(t.TempDir(), "out.jsonl")
	out, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	errPath := filepath.Join(t.TempDir(), "stderr")
	errf, err := os.Create(errPath)
	if err != nil {
		t.Fatal(err)
	}
	defer errf.Close()
	stderr := func() string { b, _ := os.ReadFile(errPath); return string(b) }
	cmd := exec.Command(braidproc.Binary(t), "capture", "-f", specFile)
	cmd.Stdout, cmd.Stderr = out, errf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		<-exited
	}()

	// The rows printed so far, by table, and how many: read whole lines
	// only.
	created := map[string]bool{} // tables of the CREATE TABLEs printed
	printed := func() (map[string][]string, int) {
		b, _ := os.ReadFile(outPath)
		b = b[:strings.LastIndexByte(string(b), '\n')+1]
		got, n := map[string][]string{}, 0
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			var m struct {
				Database, Table, Type string
				IsDdl                 bool
				PkNames               []string
				Data                  []map[string]*string
			}
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("line is not JSON: %s", sc.Text())
			}
			if late && m.IsDdl && m.Database == "u0" && m.Type == "CREATE" {
				created[m.Table] = true
				continue
			}
			if m.Database != "u0" || m.Type != "INSERT" || !slices.Equal(m.PkNames, []string{"id"}) {
				t.Fatalf("unexpected message: %s", sc.Text())
			}
			for _, tb := range tables {
				if m.Table != tb.name {
					continue
				}
				for _, d := range m.Data {
					if len(d) != 2 {
						t.Errorf("row of %s has columns other than id and %s: %s", tb.name, tb.col, sc.Text())
					}
					got[tb.name] = append(got[tb.name], tb.row(d))
				}
			}
			n += len(m.Data)
		}
		return got, n
	}
	waitRows := func(what string, want int) map[string][]string {
		t.Helper()
		var got map[string][]string
		retry.Until(t, 60*time.Second, func() error {
			var n int
			if got, n = printed(); n >= want {
				return nil
			}
			select {
			case err := <-exited:
				exited <- err
				t.Fatalf("capture exited (%v) after %d rows; stderr:\n%s", err, n, stderr())
			default:
			}
			return fmt.Errorf("%s: capture printed %d rows, want %d; stderr:\n%s", what, n, want, stderr())
		})
		return got
	}
	rows := len(tables) * len(unicodeValues)
	if late {
		retry.Until(t, 60*time.Second, func() error {
			if !strings.Contains(stderr(), "source ready") {
				return fmt.Errorf("capture did not start; stderr:\n%s", stderr())
			}
			return nil
		})
		createUnicodeTables(t, srv, tables)
	}
	waitRows("the snapshot", rows)
	insertUnicodeRows(t, srv, tables, 101)
	got := waitRows("the binlog", 2*rows)
	for _, tb := range tables {
		slices.Sort(got[tb.name])
		if want := tb.want(1, 101); !slices.Equal(got[tb.name], want) {
			t.Errorf("table %q: capture printed\n%q\nwant\n%q", tb.name, got[tb.name], want)
		}
	}
	if len(got) != len(tables) {
		t.Errorf("capture printed tables %v, want %d", slices.Collect(maps.Keys(got)), len(tables))
	}
	for _, tb := range tables {
		if late && !created[tb.name] {
			t.Errorf("no CREATE TABLE of %q among %v", tb.name, slices.Collect(maps.Keys(created)))
		}
	}
}

// TestSinksUnicodeExact: the Unicode shard (startUnicodeShard), captured
// with `snapshot: initial` and applied to every kind of sink at once — a
// MySQL target (127.0.0.1:3306), a PostgreSQL database whose own
// client_encoding default is LATIN1, Redis, RabbitMQ (a queue per table)
// and Kafka (kfake) — arrives byte-exact in each, names and values, from
// the snapshot and the binlog, in tables the SQL sinks were given and in
// tables they create (create_tables, in a latin1-default database); so
// does a shard's ALTER adding a column 説明ü with a default e + U+0301 😀;
// and `braid sink verify` finds every comparable target equal to the
// source. Each target is read back here in a session of its own that is
// explicitly UTF-8.
func TestSinksUnicodeExact(t *testing.T) {
	ctx := t.Context()
	srv := startUnicodeShard(t)
	createUnicodeTables(t, srv, unicodeTables)
	name := fmt.Sprintf("braid_utf8_%d_%d", os.Getpid(), rand.IntN(1e6))

	// MySQL: the target tables, in a database of the test's own.
	my, err := sql.Open("mysql", "root@tcp(127.0.0.1:3306)/?charset=utf8mb4")
	if err != nil || my.Ping() != nil {
		t.Skipf("no MariaDB on 127.0.0.1:3306 to apply to: %v", err)
	}
	t.Cleanup(func() {
		my.Exec("DROP DATABASE IF EXISTS " + name)
		my.Exec("DROP DATABASE IF EXISTS " + name + "_meta")
		my.Close()
	})
	// The SQL sinks apply to tables made here and to tables they create
	// (create_tables), every other one, in a database whose default
	// charset is latin1.
	created := func(i int) bool { return i%2 == 0 }
	var myTables []string
	for _, q := range []string{"CREATE DATABASE " + name + " CHARACTER SET latin1"} {
		if _, err := my.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	for i, tb := range unicodeTables {
		if created(i) {
			q := fmt.Sprintf("CREATE TABLE %s.`%s` (id INT PRIMARY KEY, `%s` %s) DEFAULT CHARSET=utf8mb4", name, tb.name, tb.col, tb.colType)
			if _, err := my.Exec(q); err != nil {
				t.Fatal(q, err)
			}
		}
		myTables = append(myTables, fmt.Sprintf("{from: 'u0.%s', to: '%s.%s'}", tb.name, name, tb.name))
	}

	// PostgreSQL: a database whose sessions default to LATIN1.
	pgAdmin, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:5432/postgres")
	if err != nil {
		t.Skipf("no PostgreSQL on 127.0.0.1:5432 to apply to: %v", err)
	}
	if _, err := pgAdmin.Exec(ctx, "CREATE DATABASE "+name+" ENCODING 'UTF8' TEMPLATE template0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pgAdmin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		pgAdmin.Close(context.Background())
	})
	pg, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:5432/"+name+"?client_encoding=UTF8")
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(context.Background())
	pgSetup := []string{"ALTER DATABASE " + name + " SET client_encoding = 'LATIN1'", "CREATE SCHEMA u0"}
	for i, tb := range unicodeTables {
		if !created(i) {
			continue
		}
		pgSetup = append(pgSetup, fmt.Sprintf(`CREATE TABLE u0."%s" (id integer PRIMARY KEY, "%s" text)`, tb.name, tb.col))
	}
	for _, q := range pgSetup {
		if _, err := pg.Exec(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}

	rdb, prefix := redistest.Prefix(t)
	amqpURL := rabbittest.Vhost(t)
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "utf8"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	kafkaAddr := kc.ListenAddrs()[0]

	ds, err := spec.Parse(fmt.Appendf(nil, `
name: uni
sources: [{name: a, address: '%s'}]
tables: ['u0\..*']
snapshot: initial
heartbeat: 100ms
sinks:
  - {name: my, type: mysql, address: '127.0.0.1:3306', meta_database: %s_meta, create_tables: true, tables: [%s]}
  - {name: pg, type: postgres, address: '127.0.0.1:5432', database: %s, create_tables: true}
  - {name: cache, type: redis, address: '127.0.0.1:6379', key: '%s{database}.{table}:{pk}'}
  - {name: mq, type: rabbitmq, url: '%s', password: guest, queues: per-table}
  - {name: events, type: kafka, brokers: ['%s'], topic: utf8}
`, srv.Addr(), name, strings.Join(myTables, ", "), name, prefix, amqpURL, kafkaAddr))
	if err != nil {
		t.Fatal(err)
	}
	port := nodes.FreePorts(t, 1)[0]
	serveForTest(t, ds, serveOptions{listen: "127.0.0.1", httpPort: port}, slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})))
	url := fmt.Sprintf("http://127.0.0.1:%d", port)

	var queues []*rabbittest.Consumer
	for _, tb := range unicodeTables {
		queues = append(queues, rabbittest.Consume(t, amqpURL, "u0."+tb.name))
	}
	// flat reads the rows of table i from canal flat messages' data.
	flat := func(i int, data []map[string]*string) []string {
		tb := unicodeTables[i]
		var out []string
		for _, d := range data {
			if id := d["id"]; id != nil {
				if n, _ := strconv.Atoi(*id); n > tb.base && n < tb.base+1000 {
					out = append(out, tb.row(d))
				}
			}
		}
		return out
	}
	// Each sink's rows of table i, read back in a UTF-8 session, as
	// unicodeTable.want has them.
	sinks := []struct {
		name string
		read func(i int) []string
	}{
		{"my", func(i int) []string {
			tb := unicodeTables[i]
			return sinktest.Query(my, fmt.Sprintf("SELECT id, `%s` FROM %s.`%s`", tb.col, name, tb.name))
		}},
		{"pg", func(i int) []string {
			tb := unicodeTables[i]
			rows, err := pg.Query(ctx, fmt.Sprintf(`SELECT id::text, "%s" FROM u0."%s"`, tb.col, tb.name))
			if err != nil {
				return nil
			}
			var out []string
			for rows.Next() {
				var id, v *string
				if err := rows.Scan(&id, &v); err != nil {
					t.Fatal(err)
				}
				out = append(out, tb.row(map[string]*string{"id": id, tb.col: v}))
			}
			if rows.Err() != nil {
				return nil // the sink has not created it yet
			}
			return out
		}},
		{"cache", func(i int) []string {
			tb := unicodeTables[i]
			return redistest.Rows(t, rdb, prefix+"u0."+tb.name+":", "json", []string{"id", tb.col})
		}},
		{"mq", func(i int) []string {
			var out []string
			for _, m := range rabbittest.Dedup(t, queues[i].Deliveries(), "uni").Msgs {
				out = append(out, flat(i, m.Data)...)
			}
			return out
		}},
		{"events", func(i int) []string {
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			recs, _, err := kafkatest.Read(rctx, []string{kafkaAddr}, "utf8")
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, r := range recs {
				out = append(out, flat(i, r.Message.Data)...)
			}
			return out
		}},
	}
	// wait waits until every sink holds want(table) of every table;
	// then it fails the test with what each sink holds.
	wait := func(what string, want func(tb unicodeTable) []string) {
		t.Helper()
		retry.Until(t, 60*time.Second, func() error {
			var diffs []string
			for _, s := range sinks {
				for i, tb := range unicodeTables {
					got := s.read(i)
					slices.Sort(got)
					if w := want(tb); !slices.Equal(got, w) {
						diffs = append(diffs, fmt.Sprintf("sink %s, table %q: got\n%q\nwant\n%q", s.name, tb.name, got, w))
					}
				}
			}
			if len(diffs) > 0 {
				return fmt.Errorf("%s:\n%s", what, strings.Join(diffs, "\n"))
			}
			return nil
		})
	}
	wait("the snapshot", func(tb unicodeTable) []string { return tb.want(1) })
	// A shard DDL in Unicode: a column 説明ü, its default e + U+0301 😀,
	// added before the binlog's rows.
	const addedCol, addedVal = "説明ü", "e\u0301😀"
	srv.Exec(t, fmt.Sprintf("ALTER TABLE u0.`%s` ADD COLUMN `%s` VARCHAR(20) NOT NULL DEFAULT '%s'", unicodeTables[0].name, addedCol, addedVal))
	insertUnicodeRows(t, srv, unicodeTables, 101)
	wait("the binlog", func(tb unicodeTable) []string { return tb.want(1, 101) })

	// The added column in each sink: the SQL targets ran the ALTER (every
	// row has the default), the others carry it in the binlog's rows.
	withAdded := func(data []map[string]*string) (n int) {
		for _, d := range data {
			if v := d[addedCol]; v != nil && *v == addedVal {
				n++
			}
		}
		return n
	}
	for _, c := range []struct {
		sink  string
		want  int
		count func() int
	}{
		{"my", 2 * len(unicodeValues), func() int {
			rows := sinktest.Query(my, fmt.Sprintf("SELECT COUNT(*) FROM %s.`%s` WHERE `%s` = '%s'", name, unicodeTables[0].name, addedCol, addedVal))
			n, _ := strconv.Atoi(strings.Join(rows, ""))
			return n
		}},
		{"pg", 2 * len(unicodeValues), func() int {
			var n int
			if err := pg.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM u0."%s" WHERE "%s" = $1`, unicodeTables[0].name, addedCol), addedVal).Scan(&n); err != nil {
				t.Error(err)
			}
			return n
		}},
		{"cache", len(unicodeValues), func() int {
			var data []map[string]*string
			for i := range unicodeValues {
				row, err := redistest.Row(ctx, rdb, fmt.Sprintf("%su0.%s:%d", prefix, unicodeTables[0].name, 101+i), "json")
				if err != nil {
					t.Fatal(err)
				}
				data = append(data, row)
			}
			return withAdded(data)
		}},
		{"mq", len(unicodeValues), func() (n int) {
			for _, m := range rabbittest.Dedup(t, queues[0].Deliveries(), "uni").Msgs {
				n += withAdded(m.Data)
			}
			return n
		}},
		{"events", len(unicodeValues), func() (n int) {
			recs, _, err := kafkatest.Read(ctx, []string{kafkaAddr}, "utf8")
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				n += withAdded(r.Message.Data)
			}
			return n
		}},
	} {
		if n := c.count(); n != c.want {
			t.Errorf("sink %s: %d rows of %s with %s = %q, want %d", c.sink, n, unicodeTables[0].name, addedCol, addedVal, c.want)
		}
	}

	for _, s := range sinks {
		args := []string{"sink", "verify", "uni", s.name, "--server", url}
		if s.name == "cache" {
			// Redis keeps the rows written before the ALTER as they
			// were, without the added column: compare the other tables.
			for _, tb := range unicodeTables[1:] {
				args = append(args, "--table", "u0."+tb.name)
			}
		}
		if out, errs, code := cli(args...); code != 0 {
			t.Errorf("sink verify %s: exit %d: %s%s", s.name, code, out, errs)
		}
	}
}
