package sinkrun_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/braid-cdc/braid/internal/testutil/logline"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/rabbittest"
	"github.com/braid-cdc/braid/internal/testutil/redistest"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
	"github.com/braid-cdc/braid/sink/conformance"
	"github.com/braid-cdc/braid/sink/rabbitmq"
	"github.com/braid-cdc/braid/sink/redis"
	"github.com/braid-cdc/braid/spec"
)

// The machine's servers the sinks apply to; each test has databases of
// its own, dropped after.
const (
	mysqlAddr = "127.0.0.1:3306"
	pgAddr    = "127.0.0.1:5432"
)

// TestSameSinkNameTwoDestinations: two destinations, east and west, each
// with a MariaDB sink named copy and a PostgreSQL sink named pg, whose
// checkpoints share one meta database (on MariaDB one meta_database both
// name, on PostgreSQL the default braid_meta schema of one database), as
// sinks of two destinations do when they keep the defaults. East runs
// first and applies 40 transactions; west has 12, so its seqs are all
// below east's checkpoints: when the rows were keyed by sink name alone,
// west read east's and skipped every one of its rows, silently. Each
// destination's targets end equal to its source, row by row, through
// updates and deletes written while both run. What the sinks log on their
// own (east's MariaDB table, wider than the source's, is applied as SQL
// statements rather than replayed) reaches the logger they were given,
// not slog's default.
func TestSameSinkNameTwoDestinations(t *testing.T) {
	my, name := mysqlTarget(t)
	pg, pgName := pgTarget(t)
	srv := mysqltest.Start(t)
	var given, dflt logline.Buffer
	log := slog.New(slog.NewTextHandler(io.MultiWriter(&given, t.Output()), nil))
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&dflt, nil)))
	rows := map[string]int{"east": 40, "west": 12}
	for _, d := range []string{"east", "west"} {
		srv.Exec(t, "CREATE DATABASE "+d+"_0", "CREATE TABLE "+d+"_0.orders (id INT PRIMARY KEY, note VARCHAR(40))")
		for k := range rows[d] {
			srv.Exec(t, fmt.Sprintf("INSERT INTO %s_0.orders VALUES (%d, '%s-%d')", d, k, d, k))
		}
	}
	start := func(d string) {
		ds := spec.Spec{Name: d, Tables: []string{d + `_\d+\.orders`}, Route: []spec.RouteRule{{Match: d + `_\d+\.(\w+)`, To: "shop.$1"}},
			Heartbeat: spec.Duration(100 * time.Millisecond),
			Sources:   []spec.Source{{Name: "s", Address: srv.Addr(), Start: spec.Start{Kind: spec.StartEarliest}}},
			Sinks: []spec.Sink{
				{Name: "copy", Type: spec.SinkMySQL, Address: mysqlAddr, Workers: 2, MetaDatabase: name + "_meta", Tables: []spec.SinkTable{{From: "shop.orders", To: name + "." + d}}},
				{Name: "pg", Type: spec.SinkPostgres, Address: pgAddr, Database: pgName, Workers: 2, CreateTables: true, Tables: []spec.SinkTable{{From: "shop.orders", To: d + ".orders"}}},
			}}
		ds = ds.WithDefaults()
		if err := ds.Validate(); err != nil {
			t.Fatal(err)
		}
		width := map[string]int{"east": 60, "west": 40}[d]
		if _, err := my.Exec(fmt.Sprintf("CREATE TABLE %s.%s (id INT PRIMARY KEY, note VARCHAR(%d))", name, d, width)); err != nil {
			t.Fatal(err)
		}
		conformance.Start(t, &ds, nil, log)
	}
	source := func(d string) []string {
		return sinktest.SourceRows(t, []*mysqltest.Server{srv}, func(int) string { return "SELECT id, note FROM " + d + "_0.orders" })
	}
	equal := func(d string) {
		t.Helper()
		sinktest.WaitFor(t, 60*time.Second, func() (bool, string) {
			want := source(d)
			gotMy := sinktest.Query(my, "SELECT id, note FROM "+name+"."+d)
			gotPG := sinktest.Values(pg.Query(context.Background(), "SELECT id, note FROM "+d+".orders"))
			if slices.Equal(gotMy, want) && slices.Equal(gotPG, want) {
				return true, ""
			}
			return false, fmt.Sprintf("destination %s: the source has %d rows, MariaDB's copy %d, PostgreSQL's %d: %s",
				d, len(want), len(gotMy), len(gotPG), firstDiff(want, gotMy, gotPG))
		})
	}
	start("east")
	equal("east")
	start("west")
	equal("west")
	for _, d := range []string{"east", "west"} {
		srv.Exec(t, "UPDATE "+d+"_0.orders SET note = CONCAT(note, '+') WHERE id % 3 = 0",
			"DELETE FROM "+d+"_0.orders WHERE id % 5 = 1",
			fmt.Sprintf("INSERT INTO %s_0.orders VALUES (1000, '%s-late')", d, d))
	}
	equal("east")
	equal("west")
	var n int
	if err := my.QueryRow("SELECT COUNT(DISTINCT dest) FROM " + name + "_meta.sink_checkpoint WHERE sink = 'copy'").Scan(&n); err != nil || n != 2 {
		t.Errorf("the checkpoint table holds copy's rows of %d destinations (%v), want 2", n, err)
	}
	const asSQL = "sink applies a table as SQL statements"
	if !strings.Contains(given.String(), asSQL) || strings.Contains(dflt.String(), "level=") {
		t.Errorf("the given logger heard %q: %v; slog's default heard: %q", asSQL, strings.Contains(given.String(), asSQL), dflt.String())
	}
}

// firstDiff names a row where want and one of the targets differ.
func firstDiff(want []string, got ...[]string) string {
	for _, g := range got {
		for _, w := range want {
			if !slices.Contains(g, w) {
				return "missing " + w
			}
		}
		for _, r := range g {
			if !slices.Contains(want, r) {
				return "not in the source " + r
			}
		}
	}
	return ""
}

// mysqlTarget is the machine's MariaDB and a database of the test's.
func mysqlTarget(t *testing.T) (*sql.DB, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test uses MariaDB on " + mysqlAddr)
	}
	db, err := sql.Open("mysql", "root@tcp("+mysqlAddr+")/")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Ping(); err != nil {
		t.Skipf("no MariaDB on %s to apply to: %v", mysqlAddr, err)
	}
	name := fmt.Sprintf("braid_iso_%d_%d", os.Getpid(), rand.IntN(1e6))
	if _, err := db.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Exec("DROP DATABASE IF EXISTS " + name)
		db.Exec("DROP DATABASE IF EXISTS " + name + "_meta")
		db.Close()
	})
	return db, name
}

// pgTarget is the machine's PostgreSQL and a database of the test's.
func pgTarget(t *testing.T) (*pgx.Conn, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test uses PostgreSQL on " + pgAddr)
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, "postgres://postgres@"+pgAddr+"/postgres")
	if err != nil {
		t.Skipf("no PostgreSQL on %s to apply to: %v", pgAddr, err)
	}
	name := fmt.Sprintf("braid_iso_%d_%d", os.Getpid(), rand.IntN(1e6))
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	db, err := pgx.Connect(ctx, "postgres://postgres@"+pgAddr+"/"+name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close(ctx)
		admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		admin.Close(ctx)
	})
	return db, name
}

// TestSchemaNamesWithDollarQuotes: PostgreSQL schemas named with dollar
// quotes ($$ and a tag, $x$) for the checkpoints (meta_database), for a
// table the sink creates (create_tables) and for one a CREATE TABLE in the
// stream makes: each is created and holds what the source holds. When a
// schema was made in a DO $$ block built from its name, the name ended
// the block, and the sink retried for ever.
func TestSchemaNamesWithDollarQuotes(t *testing.T) {
	pg, pgName := pgTarget(t)
	srv := mysqltest.Start(t)
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv.Exec(t, "CREATE DATABASE shop_0", "CREATE TABLE shop_0.orders (id INT PRIMARY KEY, note VARCHAR(40))",
		"INSERT INTO shop_0.orders VALUES (1, 'a'), (2, 'b')")
	const (
		meta   = "m$$;x"
		orders = "o$$ $x$"
		later  = "l$x$$$"
	)
	ds := spec.Spec{Name: "shop", Tables: []string{`shop_0\.\w+`}, Route: []spec.RouteRule{{Match: `shop_0\.(\w+)`, To: "shop.$1"}},
		Heartbeat: spec.Duration(100 * time.Millisecond),
		Sources:   []spec.Source{{Name: "s", Address: srv.Addr(), Start: spec.Start{Kind: spec.StartEarliest}}},
		Sinks: []spec.Sink{{Name: "pg", Type: spec.SinkPostgres, Address: pgAddr, Database: pgName, Workers: 2, CreateTables: true, MetaDatabase: meta,
			Tables: []spec.SinkTable{{From: "shop.orders", To: orders + ".orders"}, {From: "shop.items", To: later + ".items"}}}}}
	ds = ds.WithDefaults()
	if err := ds.Validate(); err != nil {
		t.Fatal(err)
	}
	_, sinks := conformance.Start(t, &ds, nil, log)
	srv.Exec(t, "CREATE TABLE shop_0.items (id INT PRIMARY KEY, qty INT)", "INSERT INTO shop_0.items VALUES (7, 70)",
		"UPDATE shop_0.orders SET note = 'A' WHERE id = 1")
	quote := func(s string) string { return `"` + s + `"` }
	sinktest.WaitFor(t, 60*time.Second, func() (bool, string) {
		o := sinktest.Values(pg.Query(context.Background(), "SELECT id, note FROM "+quote(orders)+".orders"))
		i := sinktest.Values(pg.Query(context.Background(), "SELECT id, qty FROM "+quote(later)+".items"))
		st := sinks.Stats()[0]
		return slices.Equal(o, []string{"1 A", "2 b"}) && slices.Equal(i, []string{"7 70"}),
			fmt.Sprintf("orders %q, items %q; the sink's last error: %s", o, i, st.LastError)
	})
	var n int
	if err := pg.QueryRow(context.Background(), "SELECT count(*) FROM "+quote(meta)+".sink_checkpoint WHERE dest = 'shop' AND sink = 'pg'").Scan(&n); err != nil || n == 0 {
		t.Errorf("the checkpoints in schema %s: %d rows (%v)", meta, n, err)
	}
}

// TestRowKeysNeverReachSinkKeys: a Redis sink (hash format, the default
// key template {table}:{pk}) of destination shop named cache keeps a
// table a shard user routed to the logical name braid, whose keys are
// sink:shop.cache:0 and the like: without escaping, its rows are the
// sink's own checkpoint, worker-count and column keys, whose hashes made
// every later transaction fail with WRONGTYPE, the cache stale for ever.
// The sink's keys stay intact, every row is where KeyFor says, the
// cache follows the sources through updates and deletes, and braid sink
// verify samples every row of it.
func TestRowKeysNeverReachSinkKeys(t *testing.T) {
	rc, prefix := redistest.Prefix(t)
	srv := mysqltest.Start(t)
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	own := []string{"sink:shop.cache:0", "sink:shop.cache:1", "sink:shop.cache:2", "sink:shop.cache:3", "sink:shop.cache:workers",
		"sink:shop.cache:columns:app.braid", "sink:shop.cache:columns:app.orders", "~x", "y:seq", "plain"}
	var vals []string
	for i, k := range own {
		vals = append(vals, fmt.Sprintf("('%s', %d)", k, i))
	}
	srv.Exec(t, "CREATE DATABASE app_0", "CREATE TABLE app_0.braid (k VARCHAR(64) PRIMARY KEY, v INT)",
		"CREATE TABLE app_0.orders (id INT PRIMARY KEY, note VARCHAR(40))",
		"INSERT INTO app_0.orders VALUES (1, 'a'), (2, 'b'), (3, 'c')",
		"INSERT INTO app_0.braid VALUES "+strings.Join(vals, ", "))
	ds := spec.Spec{Name: "shop", Tables: []string{`app_\d+\.\w+`}, Route: []spec.RouteRule{{Match: `app_\d+\.(\w+)`, To: "app.$1"}},
		Heartbeat: spec.Duration(100 * time.Millisecond),
		Sources:   []spec.Source{{Name: "s", Address: srv.Addr(), Start: spec.Start{Kind: spec.StartEarliest}}},
		Sinks:     []spec.Sink{{Name: "cache", Type: spec.SinkRedis, Address: redistest.Addr, Key: prefix + "{table}:{pk}", Format: "hash", Workers: 4}}}
	ds = ds.WithDefaults()
	if err := ds.Validate(); err != nil {
		t.Fatal(err)
	}
	_, sinks := conformance.Start(t, &ds, nil, log)
	// Both tables change once the sink has applied them: each of those
	// transactions reads and moves the checkpoints.
	cached := func(table, key string) string {
		row, err := redistest.Row(context.Background(), rc, redis.KeyFor(ds.Sinks[0].Key, "app", table, []string{key}), "hash")
		if err != nil || row == nil {
			return fmt.Sprint(err)
		}
		var cols []string
		for _, c := range []string{"k", "v", "id", "note"} {
			if v := row[c]; v != nil {
				cols = append(cols, *v)
			}
		}
		return strings.Join(cols, " ")
	}
	same := func() (bool, string) {
		for _, want := range sinktest.SourceRows(t, []*mysqltest.Server{srv}, func(int) string { return "SELECT k, v FROM app_0.braid" }) {
			k, _, _ := strings.Cut(want, " ")
			if got := cached("braid", k); got != want {
				return false, fmt.Sprintf("braid %s: cached %q, the source %q; the sink's last error: %s", k, got, want, sinks.Stats()[0].LastError)
			}
		}
		for _, want := range sinktest.SourceRows(t, []*mysqltest.Server{srv}, func(int) string { return "SELECT id, note FROM app_0.orders" }) {
			k, _, _ := strings.Cut(want, " ")
			if got := cached("orders", k); got != want {
				return false, fmt.Sprintf("orders %s: cached %q, the source %q; the sink's last error: %s", k, got, want, sinks.Stats()[0].LastError)
			}
		}
		return true, ""
	}
	sinktest.WaitFor(t, 30*time.Second, same)
	srv.Exec(t, "UPDATE app_0.braid SET v = v + 100", "DELETE FROM app_0.braid WHERE k = 'sink:shop.cache:2'",
		"UPDATE app_0.orders SET note = 'B' WHERE id = 2", "DELETE FROM app_0.orders WHERE id = 3")
	sinktest.WaitFor(t, 30*time.Second, func() (bool, string) {
		if ok, why := same(); !ok {
			return false, why
		}
		if n := rc.Exists(context.Background(), redis.KeyFor(ds.Sinks[0].Key, "app", "braid", []string{"sink:shop.cache:2"})).Val(); n != 0 {
			return false, "the deleted row is still cached"
		}
		return true, ""
	})
	// braid sink verify samples the table's keys, escaped or not, and
	// finds them equal to the sources.
	v, err := sinks.Verify(t.Context(), "cache", 100, []string{"app.braid"})
	if want := len(own) - 1; err != nil || len(v.Differences) != 0 || v.TargetRows != want || v.Compared < want {
		t.Errorf("verify: %+v (%v): want %d rows sampled from the cache, all equal", v, err, want)
	}
	// The sink's own keys are strings it reads: each worker's "seq:idx",
	// its worker count.
	for _, k := range []string{"0", "1", "2", "3", "workers"} {
		key := prefix + "braid:sink:shop.cache:" + k
		if typ := rc.Type(context.Background(), key).Val(); typ != "string" {
			t.Errorf("%s is a %s, want the sink's string", key, typ)
		}
	}
	if st := sinks.Stats()[0]; st.LastError != "" {
		t.Errorf("the sink's last error: %s", st.LastError)
	}
}

// TestWildcardTableNames: a rabbitmq sink with queues: per-table keeps
// shard tables named #, * and a.b, beside an ordinary one, each to its
// own queue. Their names in routing keys and binding keys are escaped, so
// the queue of # (which, bound as app.#, received every other table's
// messages) and of * get only their table's, a.b's stays apart from a
// database a's table b, and the ordinary table's queue keeps its name,
// app.orders, and gets only its own.
func TestWildcardTableNames(t *testing.T) {
	url := rabbittest.Vhost(t)
	srv := mysqltest.Start(t)
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	tables := []string{"orders", "#", "*", "a.b"}
	srv.Exec(t, "CREATE DATABASE app_0")
	for i, tb := range tables {
		srv.Exec(t, "CREATE TABLE app_0.`"+tb+"` (id INT PRIMARY KEY, note VARCHAR(20))",
			fmt.Sprintf("INSERT INTO app_0.`%s` VALUES (%d, 'a'), (%d, 'b')", tb, 100*i, 100*i+1))
	}
	ds := spec.Spec{Name: "shop", Tables: []string{`app_0\..+`}, Route: []spec.RouteRule{{Match: `app_0\.(.+)`, To: "app.$1"}},
		Heartbeat: spec.Duration(100 * time.Millisecond),
		Sources:   []spec.Source{{Name: "s", Address: srv.Addr(), Start: spec.Start{Kind: spec.StartEarliest}}},
		Sinks:     []spec.Sink{{Name: "mq", Type: spec.SinkRabbitMQ, URL: url, Password: "guest", Queues: "per-table"}}}
	ds = ds.WithDefaults()
	if err := ds.Validate(); err != nil {
		t.Fatal(err)
	}
	_, sinks := conformance.Start(t, &ds, nil, log)
	keys := map[string]string{}
	consumers := map[string]*rabbittest.Consumer{}
	for _, tb := range tables {
		keys[tb] = rabbitmq.RoutingKey(ds.Sinks[0].RoutingKey, "app", tb)
		consumers[tb] = rabbittest.Consume(t, url, rabbitmq.QueueName(keys[tb]))
	}
	if keys["orders"] != "app.orders" {
		t.Errorf("an ordinary table's routing key is %q, want app.orders", keys["orders"])
	}
	for i, tb := range tables {
		srv.Exec(t, fmt.Sprintf("UPDATE app_0.`%s` SET note = 'c' WHERE id = %d", tb, 100*i), fmt.Sprintf("INSERT INTO app_0.`%s` VALUES (%d, 'd')", tb, 100*i+2))
	}
	for _, tb := range tables {
		want := sinktest.SourceRows(t, []*mysqltest.Server{srv}, func(int) string { return "SELECT id, note FROM app_0.`" + tb + "`" })
		sinktest.WaitFor(t, 30*time.Second, func() (bool, string) {
			ds := consumers[tb].Deliveries()
			for _, d := range ds {
				if d.RoutingKey != keys[tb] {
					return false, fmt.Sprintf("the queue of table %s (%s) got a message routed %s", tb, keys[tb], d.RoutingKey)
				}
			}
			got := rabbittest.Dedup(t, ds, "shop").Rows("id", "id", "note")
			return slices.Equal(got, want), fmt.Sprintf("the queue of table %s holds rows %q, want %q; the sink's last error: %s", tb, got, want, sinks.Stats()[0].LastError)
		})
	}
	time.Sleep(time.Second) // and nothing else arrives late
	for _, tb := range tables {
		for _, d := range consumers[tb].Deliveries() {
			if d.RoutingKey != keys[tb] {
				t.Errorf("the queue of table %s (%s) got a message routed %s", tb, keys[tb], d.RoutingKey)
				break
			}
		}
	}
}
