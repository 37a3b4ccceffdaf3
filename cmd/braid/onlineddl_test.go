package main

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/retry"
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
