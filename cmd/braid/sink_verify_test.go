package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/spec"
)

// TestClusterSinkVerify: a cluster's owner applies two shard tables to
// the machine's MariaDB; `braid sink verify`, asked of a node that is not
// the owner, finds nothing different once the sink has caught up (exit
// 0). Then the target is changed by hand: a column updated, a row
// deleted, a row inserted that no shard has. verify names each of the
// three (the column with both values, the missing row's shard table,
// the extra row) and exits 1; `braid sink show` shows the sink's spec
// and its workers' checkpoints.
func TestClusterSinkVerify(t *testing.T) {
	tg := newTarget(t, "(id BIGINT PRIMARY KEY, shard INT NOT NULL, note VARCHAR(40), amount DECIMAL(10,2), at DATETIME)")
	srv := mysqltest.Start(t)
	for n := range 2 {
		var vals []string
		for k := range 30 {
			vals = append(vals, fmt.Sprintf("(%d, %d, 'r%d', %d.50, '2026-01-02 03:04:%02d')", n*1000+k, n, k, k, k))
		}
		srv.Exec(t, fmt.Sprintf("CREATE DATABASE shop_%d", n),
			fmt.Sprintf("CREATE TABLE shop_%d.orders (id BIGINT PRIMARY KEY, shard INT NOT NULL, note VARCHAR(40), amount DECIMAL(10,2), at DATETIME)", n),
			fmt.Sprintf("INSERT INTO shop_%d.orders VALUES %s", n, strings.Join(vals, ", ")))
	}
	srv.Exec(t, "UPDATE shop_0.orders SET note = NULL WHERE id = 3")
	c := nodes.Start(t, cli)
	specFile := nodes.WriteSpec(t, fmt.Sprintf(`
name: shop
sources:
  - {name: a, address: '%s', start: earliest}
tables: ['shop_\d+\.orders']
route: [{match: 'shop_\d+\.(\w+)', to: 'shop.$1'}]
heartbeat: 100ms
sinks:
  - {name: copy, type: mysql, address: '127.0.0.1:3306', workers: 2, meta_database: %s_meta,
     tables: [{from: shop.orders, to: %s.orders}]}
`, srv.Addr(), tg.name, tg.name))
	if out, errs, code := cli("destination", "create", "-f", specFile, "--server", c.Nodes[0].URL()); code != 0 {
		t.Fatalf("create: exit %d: %s%s", code, out, errs)
	}
	owner, _ := c.OwnerOf(t, "shop")
	var other *nodes.Node
	for _, n := range c.Nodes {
		if n != owner {
			other = n
			break
		}
	}
	c.WaitFor(t, 60*time.Second, "the sink caught up", func() (bool, string) {
		out, errs, code := cli("sink", "list", "shop", "--json", "--server", other.URL())
		var sinks []wire.SinkState
		if code != 0 || json.Unmarshal([]byte(out), &sinks) != nil || len(sinks) != 1 {
			return false, fmt.Sprintf("exit %d: %s%s", code, out, errs)
		}
		s := sinks[0]
		return s.Running && s.LagSeq == 0 && s.Rows >= 60 && s.LastError == "", fmt.Sprintf("%+v", s)
	})

	verify := func(args ...string) (wire.SinkVerify, int) {
		t.Helper()
		out, errs, code := cli(append([]string{"sink", "verify", "shop", "copy", "--json", "--server", other.URL()}, args...)...)
		var rep wire.SinkVerify
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("verify: exit %d: %v: %s%s", code, err, out, errs)
		}
		return rep, code
	}
	rep, code := verify("--sample", "100")
	if code != 0 || len(rep.Differences) != 0 || rep.Compared != 60 || !rep.Settled || !slices.Equal(rep.Tables, []string{"shop.orders"}) {
		t.Fatalf("verify of a copy in step: exit %d, %+v", code, rep)
	}

	for _, q := range []string{
		"UPDATE " + tg.name + ".orders SET note = 'planted', amount = NULL WHERE id = 5",
		"DELETE FROM " + tg.name + ".orders WHERE id = 1007",
		"INSERT INTO " + tg.name + ".orders VALUES (999999, 9, 'extra', 1.00, NULL)",
	} {
		if _, err := tg.db.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	rep, code = verify("--sample", "100", "--table", "shop.orders")
	if code != 1 || len(rep.Differences) != 3 {
		t.Fatalf("verify after three changes by hand: exit %d, %d differences: %+v", code, len(rep.Differences), rep.Differences)
	}
	got := map[string]wire.SinkDifference{}
	for _, d := range rep.Differences {
		got[d.Kind] = d
	}
	key := func(d wire.SinkDifference) string {
		if len(d.Key) != 1 || d.Key[0].Column != "id" || d.Key[0].Value == nil {
			return fmt.Sprintf("%+v", d.Key)
		}
		return *d.Key[0].Value
	}
	str := func(s *string) string {
		if s == nil {
			return "NULL"
		}
		return *s
	}
	if d := got[wire.DiffValues]; key(d) != "5" || d.Origin != "a/shop_0.orders" || len(d.Columns) != 2 ||
		d.Columns[0].Column != "note" || str(d.Columns[0].Source) != "r5" || str(d.Columns[0].Target) != "planted" ||
		d.Columns[1].Column != "amount" || str(d.Columns[1].Source) != "5.50" || d.Columns[1].Target != nil {
		t.Errorf("updated row: %+v", d)
	}
	if d := got[wire.DiffMissing]; key(d) != "1007" || d.Origin != "a/shop_1.orders" || d.Target != tg.name+".orders" {
		t.Errorf("deleted row: %+v", d)
	}
	if d := got[wire.DiffExtra]; key(d) != "999999" || d.Origin != "" {
		t.Errorf("extra row: %+v", d)
	}

	// The table as an operator reads it.
	out, errs, code := cli("sink", "verify", "shop", "copy", "--server", other.URL())
	for _, want := range []string{"'planted'", "'r5'", "missing", "in the source, not in " + tg.name + ".orders", "extra", "3 differ"} {
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("verify: exit %d, no %q in:\n%s%s", code, want, out, errs)
		}
	}

	out, errs, code = cli("sink", "show", "shop", "copy", "--json", "--server", other.URL())
	var d wire.SinkDetail
	if code != 0 || json.Unmarshal([]byte(out), &d) != nil {
		t.Fatalf("show: exit %d: %s%s", code, out, errs)
	}
	if d.State.Name != "copy" || !d.State.Running || len(d.Checkpoints) != 2 || d.HeadSeq == 0 || !strings.Contains(string(d.Spec), tg.name+"_meta") {
		t.Errorf("show: %+v (spec %s)", d, d.Spec)
	}
	if out, _, _ := cli("sink", "show", "shop", "copy", "--server", other.URL()); !strings.Contains(out, "checkpoints in the target") {
		t.Errorf("show:\n%s", out)
	}

	// Usage and an unknown sink.
	if _, errs, code := cli("sink", "verify", "shop"); code != 2 || !strings.Contains(errs, "name the destination and the sink") {
		t.Errorf("verify without a sink: exit %d: %s", code, errs)
	}
	if _, errs, code := cli("sink", "verify", "shop", "nope", "--server", other.URL()); code != 1 || !strings.Contains(errs, `no sink "nope"`) {
		t.Errorf("verify of an unknown sink: exit %d: %s", code, errs)
	}
}

// TestCaptureServesSinks: `braid capture --http-port` runs the spec's
// sinks too, and answers `braid sink list|show|verify` for them: the
// copy is caught up and verify finds nothing different; a row deleted
// from the target by hand is named.
func TestCaptureServesSinks(t *testing.T) {
	tg := newTarget(t, "(id BIGINT PRIMARY KEY, note VARCHAR(40))")
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop_0", "CREATE TABLE shop_0.orders (id BIGINT PRIMARY KEY, note VARCHAR(40))",
		"INSERT INTO shop_0.orders VALUES (1, 'one'), (2, 'two'), (3, 'three')", "UPDATE shop_0.orders SET note = 'TWO' WHERE id = 2")
	ds, err := spec.Parse([]byte(fmt.Sprintf(`
name: shop
sources: [{name: a, address: '%s', start: earliest}]
tables: ['shop_\d+\.orders']
route: [{match: 'shop_\d+\.(\w+)', to: 'shop.$1'}]
heartbeat: 100ms
sinks: [{name: copy, type: mysql, address: '127.0.0.1:3306', workers: 2, meta_database: %s_meta, tables: [{from: shop.orders, to: %s.orders}]}]
`, srv.Addr(), tg.name, tg.name)))
	if err != nil {
		t.Fatal(err)
	}
	port := nodes.FreePorts(t, 1)[0]
	serveForTest(t, ds, serveOptions{listen: "127.0.0.1", httpPort: port}, slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})))
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	retry.Until(t, 30*time.Second, func() error {
		out, _, code := cli("sink", "list", "shop", "--json", "--server", url)
		var sinks []wire.SinkState
		if code == 0 && json.Unmarshal([]byte(out), &sinks) == nil && len(sinks) == 1 && sinks[0].Running && sinks[0].Rows == 4 && sinks[0].LagSeq == 0 {
			return nil
		}
		return fmt.Errorf("the sink did not catch up: %s", out)
	})
	if out, errs, code := cli("sink", "verify", "shop", "copy", "--server", url); code != 0 {
		t.Fatalf("verify of a copy in step: exit %d: %s%s", code, out, errs)
	}
	// Caught up: no lag in seconds either, in the API and the metrics.
	out, _, _ := cli("sink", "list", "shop", "--json", "--server", url)
	var sinks []wire.SinkState
	if json.Unmarshal([]byte(out), &sinks) != nil || len(sinks) != 1 || sinks[0].LagSeconds != 0 || sinks[0].Conflicts != 0 || sinks[0].LagSeq != 0 {
		t.Errorf("sink list of a caught-up sink: %s", out)
	}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`braid_sink_lag_seconds{dest="shop",sink="copy"} 0`, `braid_sink_conflicts_total{dest="shop",sink="copy"} 0`, `braid_sink_rows_total{dest="shop",sink="copy"} 4`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("no %q in /metrics", want)
		}
	}
	if _, err := tg.db.Exec("DELETE FROM " + tg.name + ".orders WHERE id = 3"); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := cli("sink", "verify", "shop", "copy", "--server", url); code != 1 || !strings.Contains(out, "missing") {
		t.Fatalf("verify after a row deleted by hand: exit %d: %s%s", code, out, errs)
	}
	if out, errs, code := cli("sink", "show", "shop", "copy", "--server", url); code != 0 || !strings.Contains(out, "checkpoints in the target") {
		t.Fatalf("show: exit %d: %s%s", code, out, errs)
	}
}

// targetDB is a database of the test's own in the machine's MariaDB, the
// target braid sink verify compares: an orders table, and the sink's
// meta database beside it (name_meta); both dropped when the test ends.
type targetDB struct {
	db   *sql.DB
	name string
}

// newTarget makes a targetDB whose orders table has columns; under
// -short, or with no MariaDB on 3306, it skips the test.
func newTarget(t *testing.T, columns string) *targetDB {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test uses MariaDB on 127.0.0.1:3306")
	}
	db, err := sql.Open("mysql", "root@tcp(127.0.0.1:3306)/")
	if err != nil || db.Ping() != nil {
		t.Skipf("no MariaDB on 127.0.0.1:3306 to compare: %v", err)
	}
	name := fmt.Sprintf("braid_verify_%d_%d", os.Getpid(), rand.IntN(1e6))
	t.Cleanup(func() {
		db.Exec("DROP DATABASE IF EXISTS " + name)
		db.Exec("DROP DATABASE IF EXISTS " + name + "_meta")
		db.Close()
	})
	for _, q := range []string{"CREATE DATABASE " + name, "CREATE TABLE " + name + ".orders " + columns} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	return &targetDB{db: db, name: name}
}
