package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/internal/testutil/braidproc"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
)

// TestCaptureSinkSurvivesKills: `braid capture --quiet --cursor-dir`
// applies six shard tables, written to throughout, to one table of the
// machine's MariaDB, and is SIGKILLed three times while it applies. The
// target table, made beforehand with a trigger that records every
// application of a row, ends equal to the union of the shards, and no row
// was applied more often than the stream changed it: its INSERT once and
// its UPDATE once.
func TestCaptureSinkSurvivesKills(t *testing.T) {
	tg := newAuditedTarget(t, "(id BIGINT PRIMARY KEY, amount INT NOT NULL, note VARCHAR(40))")
	name := tg.name
	srvs := mysqltest.StartN(t, 3)
	for i, s := range srvs {
		for _, n := range []int{i, i + 3} {
			s.Exec(t, fmt.Sprintf("CREATE DATABASE shop_%d", n),
				fmt.Sprintf("CREATE TABLE shop_%d.orders (id BIGINT PRIMARY KEY, amount INT NOT NULL, note VARCHAR(40))", n))
		}
	}
	specFile := writeSpec(t, fmt.Sprintf(`
name: shop
sources:
  - {name: a, address: '%s', start: earliest}
  - {name: b, address: '%s', start: earliest}
  - {name: c, address: '%s', start: earliest}
tables: ['shop_\d+\.orders']
route: [{match: 'shop_\d+\.(\w+)', to: 'shop.$1'}]
heartbeat: 100ms
sinks:
  - {name: copy, type: mysql, address: '127.0.0.1:3306', workers: 4, batch: 20, meta_database: %s_meta,
     tables: [{from: shop.orders, to: %s.orders}]}
`, srvs[0].Addr(), srvs[1].Addr(), srvs[2].Addr(), name, name))
	bin := braidproc.Binary(t)
	cursorDir := t.TempDir()
	logPath := filepath.Join(t.TempDir(), "capture.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("capture's log:\n%s", b)
		}
	})
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "capture", "-f", specFile, "--quiet", "--cursor-dir", cursorDir)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}

	// Each shard: rows inserted in batches, each updated once; the
	// capture is killed in the middle, three times.
	cmd := start()
	write := func(round int) {
		for n := range 6 {
			base := int64(n)*1_000_000 + int64(round)*1000
			var vals []string
			for k := range 100 {
				vals = append(vals, fmt.Sprintf("(%d, %d, 'r%d')", base+int64(k), k, round))
			}
			srvs[n%3].Exec(t, fmt.Sprintf("INSERT INTO shop_%d.orders VALUES %s", n, strings.Join(vals, ", ")),
				fmt.Sprintf("UPDATE shop_%d.orders SET amount = amount + 1 WHERE id >= %d AND id < %d", n, base, base+100))
		}
	}
	for round := range 8 {
		write(round)
		if round%2 == 1 && round < 7 {
			// Killed while it applies the last two rounds: once the
			// audit shows it has begun them (each round is 1,200
			// applications: 600 inserts, 600 updates).
			tg.waitApplied(t, (round-1)*1200+rand.IntN(600))
			cmd.Process.Kill() // SIGKILL
			cmd.Wait()
			cmd = start()
		}
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()

	got := tg.waitEqual(t, srvs, "id, amount, note")
	t.Logf("%d rows equal after 3 SIGKILLs; every one applied once per change", got)
}

// auditedTarget is a database of the machine's MariaDB (dropped after the
// test) with an orders table whose trigger records each application of a
// row (an upsert fires it once) in applied.
type auditedTarget struct {
	db   *sql.DB
	name string
}

func newAuditedTarget(t *testing.T, columns string) *auditedTarget {
	t.Helper()
	db, err := sql.Open("mysql", "root@tcp(127.0.0.1:3306)/")
	if err != nil || db.Ping() != nil {
		t.Skipf("no MariaDB on 127.0.0.1:3306 to apply to: %v", err)
	}
	name := fmt.Sprintf("braid_sink_%d_%d", os.Getpid(), rand.IntN(1e6))
	t.Cleanup(func() {
		db.Exec("DROP DATABASE IF EXISTS " + name)
		db.Exec("DROP DATABASE IF EXISTS " + name + "_meta")
		db.Close()
	})
	for _, q := range []string{
		"CREATE DATABASE " + name,
		"CREATE TABLE " + name + ".orders " + columns,
		"CREATE TABLE " + name + ".applied (id BIGINT NOT NULL, n INT NOT NULL)",
		"CREATE TRIGGER " + name + ".counted BEFORE INSERT ON " + name + ".orders FOR EACH ROW INSERT INTO " + name + ".applied VALUES (NEW.id, 1)",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	return &auditedTarget{db: db, name: name}
}

// waitApplied waits until the audit holds more than n applications, so
// that a kill lands while the sink applies.
func (a *auditedTarget) waitApplied(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		var got int
		a.db.QueryRow("SELECT COUNT(*) FROM " + a.name + ".applied").Scan(&got)
		if got > n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the audit holds %d applications, waited for more than %d", got, n)
		}
	}
}

// read returns the rows of q, three columns each, sorted.
func (a *auditedTarget) read(q string) []string {
	rows, err := a.db.Query(q)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var x, y, z string
		rows.Scan(&x, &y, &z)
		out = append(out, x+" "+y+" "+z)
	}
	slices.Sort(out)
	return out
}

// waitEqual waits until the target's orders equal the union of
// shop_0 … shop_5.orders (server n%3 holds shop_n; cols are three) and
// checks every row was applied exactly twice (its INSERT, its UPDATE);
// it returns how many rows there are.
func (a *auditedTarget) waitEqual(t *testing.T, srvs []*mysqltest.Server, cols string) int {
	return a.waitEqualOn(t, cols, func(n int) *mysqltest.Server { return srvs[n%3] })
}

// waitEqualOn is waitEqual with shop_n on server(n).
func (a *auditedTarget) waitEqualOn(t *testing.T, cols string, server func(n int) *mysqltest.Server) int {
	t.Helper()
	var want []string
	for n := range 6 {
		for _, r := range server(n).Query(t, fmt.Sprintf("SELECT %s FROM shop_%d.orders", cols, n)) {
			want = append(want, strings.Join(r, " "))
		}
	}
	slices.Sort(want)
	var got []string
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		if got = a.read("SELECT " + cols + " FROM " + a.name + ".orders"); slices.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("target has %d rows, the shards %d", len(got), len(want))
		}
	}
	if twice := a.read("SELECT id, SUM(n), 'x' FROM " + a.name + ".applied GROUP BY id HAVING SUM(n) != 2"); len(twice) > 0 {
		t.Fatalf("%d rows were not applied exactly twice (insert, update), e.g. %v", len(twice), twice[:min(5, len(twice))])
	}
	return len(got)
}

// TestClusterSinkSurvivesOwnerKills: the same as a cluster destination:
// the owner node runs the sink and is SIGKILLed twice while it applies;
// the new owner's sink goes on from the target's checkpoints, and the
// target ends equal to the shards with every row applied once per change.
func TestClusterSinkSurvivesOwnerKills(t *testing.T) {
	tg := newAuditedTarget(t, "(id BIGINT PRIMARY KEY, shard INT NOT NULL, note VARCHAR(40))")
	srvs := shopShards(t)
	c := startCluster(t)
	specFile := writeSpec(t, shopSpecYAML(srvs, fmt.Sprintf("sinks:\n  - {name: copy, type: mysql, address: '127.0.0.1:3306', workers: 4, batch: 20, meta_database: %s_meta, tables: [{from: shop.orders, to: %s.orders}]}\n", tg.name, tg.name)))
	if out, errs, code := cli("destination", "create", "-f", specFile, "--server", c.nodes[0].URL()); code != 0 {
		t.Fatalf("create: exit %d: %s%s", code, out, errs)
	}
	for round := range 8 {
		for n := range 6 {
			base := int64(n)*1_000_000 + int64(round)*1000
			var vals []string
			for k := range 100 {
				vals = append(vals, fmt.Sprintf("(%d, %d, 'r%d')", base+int64(k), n, round))
			}
			srvs[n/2].Exec(t, fmt.Sprintf("INSERT INTO shop_%d.orders VALUES %s", n, strings.Join(vals, ", ")),
				fmt.Sprintf("UPDATE shop_%d.orders SET note = 'u%d' WHERE id >= %d AND id < %d", n, round, base, base+100))
		}
		if round == 2 || round == 5 {
			tg.waitApplied(t, round*1200+rand.IntN(600))
			owner, epoch := c.owner(t, "shop")
			owner.Kill()
			c.waitFor(t, 60*time.Second, "a new owner", func() (bool, string) {
				_, e := c.owner(t, "shop")
				return e != epoch, "no takeover yet"
			})
			owner.start(t, c.bin, c.joinFor(owner))
		}
	}
	got := tg.waitEqualOn(t, "id, shard, note", func(n int) *mysqltest.Server { return srvs[n/2] })
	// braid sink list, through any node, shows it caught up and clean.
	c.waitFor(t, 20*time.Second, "the sink caught up in braid sink list", func() (bool, string) {
		out, errs, code := cli("sink", "list", "shop", "--json", "--server", c.nodes[0].URL())
		var sinks []wire.SinkState
		if code != 0 || json.Unmarshal([]byte(out), &sinks) != nil || len(sinks) != 1 {
			return false, fmt.Sprintf("exit %d: %s%s", code, out, errs)
		}
		s := sinks[0]
		return s.Name == "copy" && s.Running && s.LagSeq == 0 && s.AppliedSeq > 0 && s.Missing == 0 && s.Upserts == 0 && s.LastError == "", fmt.Sprintf("%+v", s)
	})
	if out, _, code := cli("sink", "list", "shop", "--server", c.nodes[1].URL()); code != 0 || !strings.Contains(out, "applying") {
		t.Errorf("sink list: exit %d: %s", code, out)
	}
	t.Logf("%d rows equal after 2 owner SIGKILLs; every one applied once per change", got)
}
