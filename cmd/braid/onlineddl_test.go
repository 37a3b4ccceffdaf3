package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/braid-cdc/braid/api/wire"
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

// TestCaptureSinkPtOSC: braid capture with a MySQL and a PostgreSQL sink over the shop
// fleet (three servers, six shard tables routed to shop.orders) while a
// writer inserts and updates and pt-online-schema-change adds a column to
// every shard table. The sink gets one ALTER of the logical table and
// applies it once: the targets have the new column and no helper table,
// the sinks no error; braid sink verify finds the MySQL target equal to
// the shards, and the PostgreSQL target holds the shards' rows.
func TestCaptureSinkPtOSC(t *testing.T) {
	bin, err := exec.LookPath("pt-online-schema-change")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("pt-online-schema-change not installed: apt-get install percona-toolkit")
		}
		t.Skip("pt-online-schema-change not installed (apt-get install percona-toolkit)")
	}
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

	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for n := 1; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			for shard := range 6 {
				id := shard*1_000_000 + n
				srvs[shard/2].Exec(t, fmt.Sprintf("INSERT INTO shop_%d.orders (id, shard, note) VALUES (%d, %d, 'w')", shard, id, shard))
				if n > 1 {
					srvs[shard/2].Exec(t, fmt.Sprintf("UPDATE shop_%d.orders SET note = 'u' WHERE id = %d", shard, id-1))
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	time.Sleep(500 * time.Millisecond)
	var wg sync.WaitGroup
	for shard := range 6 {
		srv := srvs[shard/2]
		wg.Go(func() {
			out, err := exec.Command(bin, "--alter", "ADD COLUMN gift varchar(20) NULL", "--execute", "--noversion-check", "--recursion-method=none",
				"--chunk-size=50", fmt.Sprintf("h=%s,P=%d,u=root,D=shop_%d,t=orders", srv.Host, srv.Port, shard)).CombinedOutput()
			if err != nil {
				t.Errorf("pt-online-schema-change on shop_%d: %v\n%s", shard, err, out)
			}
		})
	}
	wg.Wait()
	time.Sleep(500 * time.Millisecond)
	close(stop)
	<-done
	if t.Failed() {
		t.FailNow()
	}
	retry.Until(t, 60*time.Second, func() error {
		if out, errs, code := cli("sink", "verify", "shop", "copy", "--server", url); code != 0 {
			return fmt.Errorf("verify: exit %d: %s%s", code, out, errs)
		}
		return nil
	})
	var cols, tables []string
	rows, err := tg.db.Query("SELECT column_name FROM information_schema.columns WHERE table_schema = ? AND table_name = 'orders' ORDER BY ordinal_position", tg.name)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c string
		rows.Scan(&c)
		cols = append(cols, c)
	}
	rows.Close()
	rows, err = tg.db.Query("SELECT table_name FROM information_schema.tables WHERE table_schema = ?", tg.name)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c string
		rows.Scan(&c)
		tables = append(tables, c)
	}
	rows.Close()
	if strings.Join(cols, ",") != "id,shard,note,gift" || strings.Join(tables, ",") != "orders" {
		t.Fatalf("target: tables %v, orders columns %v; want only orders, with gift", tables, cols)
	}
	var shards []string
	for shard := range 6 {
		for _, r := range srvs[shard/2].Query(t, fmt.Sprintf("SELECT id, note, gift FROM shop_%d.orders", shard)) {
			shards = append(shards, strings.Join(r, " "))
		}
	}
	slices.Sort(shards)
	retry.Until(t, 60*time.Second, func() error {
		got := sinktest.Values(pg.Query(context.Background(), "SELECT id::text, note, coalesce(gift, 'NULL') FROM shop.orders"))
		slices.Sort(got)
		if !slices.Equal(got, shards) {
			return fmt.Errorf("PostgreSQL target: %d rows, shards %d, or they differ", len(got), len(shards))
		}
		return nil
	})
	out, _, _ := cli("sink", "list", "shop", "--json", "--server", url)
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
