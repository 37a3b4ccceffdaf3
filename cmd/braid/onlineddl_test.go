package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/internal/testutil/logline"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/internal/testutil/shoptest"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
	"github.com/braid-cdc/braid/spec"
)

// TestDDLListShowsMigrations: shop_0 ran the ALTER; shop_1 is in the
// middle of an online schema change of the same (pt-online-schema-change's
// copy made and altered, not swapped in). `braid ddl list` shows the lock
// waiting for shop_1 as migrating, and the migration with its copy and
// DDL; the API's JSON carries it.
func TestDDLListShowsMigrations(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop_0", "CREATE DATABASE shop_1",
		"CREATE TABLE shop_0.orders (id INT PRIMARY KEY)", "CREATE TABLE shop_1.orders (id INT PRIMARY KEY)",
		"ALTER TABLE shop_0.orders ADD COLUMN c INT NULL",
		"INSERT INTO shop_0.orders VALUES (2, 20)",
		"CREATE TABLE shop_1._orders_new (id INT PRIMARY KEY)",
		"ALTER TABLE shop_1._orders_new ADD COLUMN c INT NULL",
		"INSERT INTO shop_1._orders_new VALUES (3, NULL)")
	ds, err := spec.Parse([]byte(fmt.Sprintf("name: shop\nsources: [{name: a, address: '%s', start: earliest}]\ntables: ['shop_\\d+\\.orders']\nroute: [{match: 'shop_\\d+\\.(\\w+)', to: 'shop.$1'}]\nheartbeat: 100ms\n", srv.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	port := nodes.FreePorts(t, 1)[0]
	serveForTest(t, ds, serveOptions{listen: "127.0.0.1", httpPort: port}, slog.New(slog.NewTextHandler(t.Output(), nil)))
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	retry.Until(t, 20*time.Second, func() error {
		st, err := nodes.DDLList(cli, "shop", url)
		if err == nil && len(st.Locks) == 1 && len(st.Migrations) == 1 && st.Migrations[0].Shard == "a/shop_1.orders" &&
			st.Migrations[0].Shadow == "_orders_new" && len(st.Migrations[0].DDL) == 1 {
			return nil
		}
		return fmt.Errorf("no lock with shop_1 mid-migration: %+v %v", st, err)
	})
	out, errs, code := cli("ddl", "list", "shop", "--server", url)
	if code != 0 || !strings.Contains(out, "a/shop_1.orders (migrating)") || !strings.Contains(out, "online schema changes under way") ||
		!strings.Contains(out, "ALTER TABLE shop_1._orders_new ADD COLUMN c INT NULL") {
		t.Fatalf("ddl list: exit %d:\n%s%s", code, out, errs)
	}
}

// TestCaptureSinkPtOSC: braid capture with a MySQL and a PostgreSQL sink
// over the shop fleet (three servers, six shard tables routed to
// shop.orders) while a writer inserts and updates throughout, and Debian's
// pt-online-schema-change runs ADD COLUMN, MODIFY COLUMN and ADD INDEX on
// every shard table, one change after the other, after an abandoned run
// (--dry-run: its copy created, altered and dropped) on shop_0. The
// stream has no message of a helper table and one ALTER of shop.orders
// per change, none of the abandoned one; each sink applies them: the
// targets have the new column, the new type and the index and no helper
// table, the sinks no error; braid sink verify finds the MySQL target equal to the shards,
// and the PostgreSQL target holds the shards' rows.
func TestCaptureSinkPtOSC(t *testing.T) {
	bin := mysqltest.PtOSC(t)
	tg := newTarget(t, "(id BIGINT PRIMARY KEY, shard INT NOT NULL, note VARCHAR(40))")
	pg := newPGDatabase(t, tg.name, "CREATE SCHEMA shop", "CREATE TABLE shop.orders (id bigint PRIMARY KEY, shard integer NOT NULL, note varchar(40))")
	srvs := shoptest.Shards(t)
	ds, err := spec.Parse([]byte(shoptest.SpecYAML(srvs, fmt.Sprintf("sinks:\n"+
		"  - {name: copy, type: mysql, address: '127.0.0.1:3306', workers: 2, meta_database: %s_meta, tables: [{from: shop.orders, to: %s.orders}]}\n"+
		"  - {name: pg, type: postgres, address: '127.0.0.1:5432', database: %s, workers: 2}\n", tg.name, tg.name, tg.name))))
	if err != nil {
		t.Fatal(err)
	}
	port := nodes.FreePorts(t, 1)[0]
	serveForTest(t, ds, serveOptions{listen: "127.0.0.1", httpPort: port}, slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})))
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	ptOSC := func(shard int, args ...string) {
		srv := srvs[shard/2]
		args = append([]string{"--noversion-check", "--recursion-method=none", "--chunk-size=50",
			fmt.Sprintf("h=%s,P=%d,u=root,D=shop_%d,t=orders", srv.Host, srv.Port, shard)}, args...)
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Errorf("pt-online-schema-change %v on shop_%d: %v\n%s", args, shard, err, out)
		}
	}

	w := shoptest.StartWriter(t, srvs)
	w.More(t, 20)
	ptOSC(0, "--alter", "ADD COLUMN abandoned int NULL", "--dry-run")
	alters := []string{"ADD COLUMN gift varchar(20) NULL", "MODIFY COLUMN note varchar(60)", "ADD INDEX note_idx (note)"}
	for _, alter := range alters {
		w.More(t, 10)
		var wg sync.WaitGroup
		for shard := range 6 {
			wg.Go(func() { ptOSC(shard, "--alter", alter, "--execute") })
		}
		wg.Wait()
	}
	w.More(t, 10)
	w.Stop()
	if t.Failed() {
		t.FailNow()
	}
	retry.Until(t, 60*time.Second, func() error {
		if out, errs, code := cli("sink", "verify", "shop", "copy", "--server", url); code != 0 {
			return fmt.Errorf("verify: exit %d: %s%s", code, out, errs)
		}
		return nil
	})

	// The stream: one ALTER of shop.orders per change, no helper table.
	out, errs, code := cli("tail", "shop", "--from", "earliest", "--timeout", "3s", "--server", url)
	if code != 0 {
		t.Fatalf("tail: exit %d: %s", code, errs)
	}
	var ddl []string
	for line := range strings.Lines(out) {
		var m struct {
			Database, Table, SQL string
			IsDDL                bool `json:"isDdl"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("tail: %v: %s", err, line)
		}
		if m.Table != "" && m.Table != "orders" || m.Database != "shop" {
			t.Fatalf("a message of %s.%s in the stream: %s", m.Database, m.Table, line)
		}
		if m.IsDDL {
			ddl = append(ddl, m.SQL)
		}
	}
	want := []string{"CREATE TABLE `shop`.`orders` (id BIGINT PRIMARY KEY, shard INT NOT NULL, note VARCHAR(40))"}
	for _, a := range alters {
		want = append(want, "ALTER TABLE `shop`.`orders` "+a)
	}
	if !slices.Equal(ddl, want) {
		t.Fatalf("DDL in the stream:\n%s\nwant the CREATE and one ALTER of shop.orders per change:\n%s", strings.Join(ddl, "\n"), strings.Join(want, "\n"))
	}

	// The MySQL target.
	cols := sinktest.Query(tg.db, fmt.Sprintf("SELECT CONCAT(column_name, ' ', column_type) FROM information_schema.columns WHERE table_schema = '%s' AND table_name = 'orders'", tg.name))
	tables := sinktest.Query(tg.db, fmt.Sprintf("SELECT table_name FROM information_schema.tables WHERE table_schema = '%s'", tg.name))
	indexes := sinktest.Query(tg.db, fmt.Sprintf("SELECT CONCAT(index_name, ' ', column_name) FROM information_schema.statistics WHERE table_schema = '%s' AND table_name = 'orders'", tg.name))
	if !slices.Equal(cols, []string{"gift varchar(20)", "id bigint(20)", "note varchar(60)", "shard int(11)"}) ||
		!slices.Equal(tables, []string{"orders"}) || !slices.Equal(indexes, []string{"PRIMARY id", "note_idx note"}) {
		t.Fatalf("MySQL target: tables %v, orders columns %v, indexes %v; want only orders, with gift, note varchar(60) and note_idx", tables, cols, indexes)
	}

	// The PostgreSQL target.
	ctx := context.Background()
	pgCols := sinktest.Values(pg.Query(ctx, "SELECT column_name || ' ' || data_type || coalesce('(' || character_maximum_length || ')', '') FROM information_schema.columns WHERE table_schema = 'shop' AND table_name = 'orders'"))
	pgTables := sinktest.Values(pg.Query(ctx, "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'shop'"))
	pgIndexes := sinktest.Values(pg.Query(ctx, "SELECT indexdef FROM pg_indexes WHERE schemaname = 'shop' AND tablename = 'orders' AND indexdef LIKE '%(note)'"))
	slices.Sort(pgCols)
	if !slices.Equal(pgCols, []string{"gift character varying(20)", "id bigint", "note character varying(60)", "shard integer"}) ||
		!slices.Equal(pgTables, []string{"orders"}) || len(pgIndexes) != 1 {
		t.Fatalf("PostgreSQL target: tables %v, orders columns %v, indexes on note %v; want only orders, with gift, note varchar(60) and an index on note", pgTables, pgCols, pgIndexes)
	}
	var shards []string
	for shard := range 6 {
		for _, r := range srvs[shard/2].Query(t, fmt.Sprintf("SELECT id, note, gift FROM shop_%d.orders", shard)) {
			shards = append(shards, strings.Join(r, " "))
		}
	}
	slices.Sort(shards)
	retry.Until(t, 60*time.Second, func() error {
		got := sinktest.Values(pg.Query(ctx, "SELECT id::text, note, coalesce(gift, 'NULL') FROM shop.orders"))
		slices.Sort(got)
		if !slices.Equal(got, shards) {
			return fmt.Errorf("PostgreSQL target: %d rows, shards %d, or they differ", len(got), len(shards))
		}
		return nil
	})
	out, _, _ = cli("sink", "list", "shop", "--json", "--server", url)
	var sinks []wire.SinkState
	if json.Unmarshal([]byte(out), &sinks) != nil || len(sinks) != 2 || sinks[0].LastError != "" || sinks[1].LastError != "" {
		t.Fatalf("sink list: %s", out)
	}
}

// newPGDatabase makes a database of the machine's PostgreSQL, set up
// with setup and dropped when the test ends; without PostgreSQL it skips.
func newPGDatabase(t *testing.T, name string, setup ...string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:5432/postgres")
	if err != nil {
		t.Skipf("no PostgreSQL on 127.0.0.1:5432 to apply to: %v", err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	db, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:5432/"+name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close(ctx)
		admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		admin.Close(ctx)
	})
	for _, q := range setup {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}
	return db
}

// TestCaptureSinkRename: hand-run RENAMEs that are no tool's swap, with
// braid capture --cursor-dir applying to a MySQL and a PostgreSQL sink.
// RENAME TABLE shop_0.orders TO shop_0.orders_archive (a name the spec
// does not select) takes shop_0 out of shop.orders: its later rows reach
// no target, and the ALTER the five others run then goes out once and is
// applied. RENAME TABLE shop_0.items TO shop_0.items_archive, the only
// shard table of shop.items, goes out as the RENAME of the logical table:
// neither sink renames its target; each stops with one line naming the
// DDL and the way past it (not retried), and the target tables stay as
// they were. Mapped as the line says (both names to the one target
// table), the sinks, restarted from their cursors, go past it and apply
// items_archive's rows.
func TestCaptureSinkRename(t *testing.T) {
	tg := newTarget(t, "(id BIGINT PRIMARY KEY, shard INT NOT NULL, note VARCHAR(40))")
	if _, err := tg.db.Exec("CREATE TABLE " + tg.name + ".items (id BIGINT PRIMARY KEY, note VARCHAR(40))"); err != nil {
		t.Fatal(err)
	}
	pg := newPGDatabase(t, tg.name, "CREATE SCHEMA shop", "CREATE TABLE shop.orders (id bigint PRIMARY KEY, shard integer NOT NULL, note varchar(40))",
		"CREATE TABLE shop.items (id bigint PRIMARY KEY, note varchar(40))")
	srvs := shoptest.Shards(t)
	srvs[0].Exec(t, "CREATE TABLE shop_0.items (id BIGINT PRIMARY KEY, note VARCHAR(40))")
	specFor := func(mapped bool) *spec.Spec {
		t.Helper()
		pgTables, mysqlExtra := "", ""
		if mapped {
			pgTables = ", tables: [{from: shop.items_archive, to: shop.items}]"
			mysqlExtra = fmt.Sprintf(", {from: shop.items_archive, to: %s.items}", tg.name)
		}
		y := strings.Replace(shoptest.SpecYAML(srvs, fmt.Sprintf("sinks:\n"+
			"  - {name: copy, type: mysql, address: '127.0.0.1:3306', workers: 2, meta_database: %s_meta, tables: [{from: shop.orders, to: %s.orders}, {from: shop.items, to: %s.items}%s]}\n"+
			"  - {name: pg, type: postgres, address: '127.0.0.1:5432', database: %s, workers: 2%s}\n", tg.name, tg.name, tg.name, mysqlExtra, tg.name, pgTables)),
			`tables: ['shop_\d+\.orders']`, `tables: ['shop_\d+\.orders', 'shop_\d+\.items.*']`, 1)
		ds, err := spec.Parse([]byte(y))
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	var logs logline.Buffer
	log := slog.New(slog.NewTextHandler(io.MultiWriter(t.Output(), &logs), &slog.HandlerOptions{Level: slog.LevelWarn}))
	cursors := t.TempDir()
	// Each run resumes from the cursors the one before kept.
	runCapture := func(ds *spec.Spec) func() {
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- capture(ctx, ds, io.Discard, captureOptions{cursorDir: cursors, quiet: true}, log) }()
		var once sync.Once
		stop := func() {
			once.Do(func() {
				cancel()
				if err := <-ran; err != nil {
					t.Errorf("capture: %v", err)
				}
			})
		}
		t.Cleanup(stop)
		return stop
	}
	stop := runCapture(specFor(false))
	ctx := context.Background()
	mysqlRows := func(table string) []string {
		return sinktest.Query(tg.db, "SELECT id, note FROM "+tg.name+"."+table)
	}
	pgRows := func(table string) []string {
		return sinktest.Values(pg.Query(ctx, "SELECT id::text, note FROM shop."+table))
	}
	waitRows := func(what string, got func() []string, want []string) {
		t.Helper()
		slices.Sort(want)
		retry.Until(t, 60*time.Second, func() error {
			if g := got(); !slices.Equal(g, want) {
				return fmt.Errorf("%s holds %v, want %v", what, g, want)
			}
			return nil
		})
	}

	var orders []string
	for shard := range 6 {
		srvs[shard/2].Exec(t, fmt.Sprintf("INSERT INTO shop_%d.orders (id, shard, note) VALUES (%d, %d, 'a')", shard, shard*10+1, shard))
		orders = append(orders, fmt.Sprintf("%d a", shard*10+1))
	}
	srvs[0].Exec(t, "INSERT INTO shop_0.items VALUES (1, 'i')")
	srvs[0].Exec(t, "RENAME TABLE shop_0.orders TO shop_0.orders_archive",
		"INSERT INTO shop_0.orders_archive (id, shard, note) VALUES (2, 0, 'gone')")
	for shard := 1; shard < 6; shard++ {
		srvs[shard/2].Exec(t, fmt.Sprintf("ALTER TABLE shop_%d.orders ADD COLUMN c INT NULL", shard),
			fmt.Sprintf("INSERT INTO shop_%d.orders (id, shard, note, c) VALUES (%d, %d, 'b', 7)", shard, shard*10+2, shard))
		orders = append(orders, fmt.Sprintf("%d b", shard*10+2))
	}
	waitRows("the MySQL target's orders", func() []string { return mysqlRows("orders") }, orders)
	waitRows("the PostgreSQL target's orders", func() []string { return pgRows("orders") }, orders)
	if c := sinktest.Query(tg.db, "SELECT COUNT(*) FROM "+tg.name+".orders WHERE c = 7"); !slices.Equal(c, []string{"5"}) {
		t.Fatalf("the MySQL target's orders: %v rows with c = 7, want 5", c)
	}
	if c := sinktest.Values(pg.Query(ctx, "SELECT COUNT(*) FROM shop.orders WHERE c = 7")); !slices.Equal(c, []string{"5"}) {
		t.Fatalf("the PostgreSQL target's orders: %v rows with c = 7, want 5", c)
	}

	// The only shard table of shop.items renamed: the logical table's
	// RENAME goes out, and the sinks stop on it.
	srvs[0].Exec(t, "RENAME TABLE shop_0.items TO shop_0.items_archive",
		"INSERT INTO shop_0.items_archive VALUES (2, 'after')")
	stopped := map[string]string{} // sink → its error
	retry.Until(t, 60*time.Second, func() error {
		for line := range strings.Lines(logs.String()) {
			if !strings.Contains(line, `msg="sink stopped"`) {
				continue
			}
			_, quoted, _ := strings.Cut(line, "err=")
			msg, err := strconv.Unquote(strings.TrimSpace(quoted))
			if err != nil {
				return fmt.Errorf("a sink stopped, its error unreadable: %s", line)
			}
			name, _, _ := strings.Cut(strings.TrimPrefix(msg, "sink "), ":")
			if _, seen := stopped[name]; seen {
				t.Fatalf("sink %s stopped twice: %s", name, line)
			}
			stopped[name] = msg
		}
		if len(stopped) != 2 {
			clear(stopped)
			return fmt.Errorf("sinks stopped: %v", stopped)
		}
		return nil
	})
	for name, msg := range stopped {
		for _, want := range []string{"DDL refused at seq", "RENAME TABLE `shop`.`items` TO `shop`.`items_archive`", "renames shop.items to shop.items_archive",
			"never renames its target table", "map shop.items and shop.items_archive to one target table", "ddl: ignore"} {
			if !strings.Contains(msg, want) {
				t.Errorf("sink %s's error lacks %q: %s", name, want, msg)
			}
		}
		if strings.Contains(msg, "\n") {
			t.Errorf("sink %s's error is not one line: %q", name, msg)
		}
	}
	stop()
	if l := logs.String(); strings.Contains(l, "retrying from its checkpoints") {
		t.Fatalf("a sink retried:\n%s", l)
	}
	if got := mysqlRows("items"); !slices.Equal(got, []string{"1 i"}) {
		t.Fatalf("the MySQL target's items holds %v, want the row before the RENAME", got)
	}
	if got := pgRows("items"); !slices.Equal(got, []string{"1 i"}) {
		t.Fatalf("the PostgreSQL target's items holds %v, want the row before the RENAME", got)
	}
	if got := sinktest.Query(tg.db, "SELECT table_name FROM information_schema.tables WHERE table_schema = '"+tg.name+"'"); !slices.Equal(got, []string{"items", "orders"}) {
		t.Fatalf("the MySQL target's tables: %v, want items and orders", got)
	}
	if got := sinktest.Values(pg.Query(ctx, "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'shop'")); !slices.Equal(got, []string{"items", "orders"}) {
		t.Fatalf("the PostgreSQL target's tables: %v, want items and orders", got)
	}

	// Mapped as the line says, the sinks, resumed from their cursors
	// (before the RENAME), go past it.
	before := strings.Count(logs.String(), `msg="sink stopped"`)
	runCapture(specFor(true))
	srvs[0].Exec(t, "INSERT INTO shop_0.items_archive VALUES (3, 'mapped')")
	waitRows("the MySQL target's items", func() []string { return mysqlRows("items") }, []string{"1 i", "2 after", "3 mapped"})
	waitRows("the PostgreSQL target's items", func() []string { return pgRows("items") }, []string{"1 i", "2 after", "3 mapped"})
	if l := logs.String(); strings.Count(l, `msg="sink stopped"`) != before || strings.Contains(l, "retrying from its checkpoints") {
		t.Fatalf("a sink failed after the mapping:\n%s", l)
	}
}
