package main

import (
	"context"
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

	"github.com/jackc/pgx/v5"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/internal/testutil/braidproc"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
)

// TestCaptureSinkSurvivesKillsPostgres: TestCaptureSinkSurvivesKills with
// the machine's PostgreSQL as the target. `braid capture --quiet` applies
// six shard tables, written to throughout, and is SIGKILLed three times
// while it applies; the target table, made beforehand with a trigger that
// records every application of a row, ends equal to the union of the
// shards, each row applied once per change (its INSERT, its UPDATE). Each
// kill comes once the audit shows the sink has begun applying the latest
// rounds, so it lands mid-apply (with mode: at-least-once, the same test
// finds rows applied more than twice every time).
func TestCaptureSinkSurvivesKillsPostgres(t *testing.T) {
	tg := newPGAuditedTarget(t, "(id bigint PRIMARY KEY, amount integer NOT NULL, note varchar(40))")
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
  - {name: copy, type: postgres, address: '127.0.0.1:5432', database: %s, workers: 4, batch: 20}
`, srvs[0].Addr(), srvs[1].Addr(), srvs[2].Addr(), tg.name))
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
	cmd := start()
	for round := range 8 {
		for n := range 6 {
			base := int64(n)*1_000_000 + int64(round)*1000
			var vals []string
			for k := range 100 {
				vals = append(vals, fmt.Sprintf("(%d, %d, 'r%d')", base+int64(k), k, round))
			}
			srvs[n%3].Exec(t, fmt.Sprintf("INSERT INTO shop_%d.orders VALUES %s", n, strings.Join(vals, ", ")),
				fmt.Sprintf("UPDATE shop_%d.orders SET amount = amount + 1 WHERE id >= %d AND id < %d", n, base, base+100))
		}
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
	got := tg.waitEqualOn(t, "id, amount, note", func(n int) *mysqltest.Server { return srvs[n%3] })
	t.Logf("%d rows equal after 3 SIGKILLs; every one applied once per change", got)
}

// TestClusterSinkSurvivesOwnerKillsPostgres: TestClusterSinkSurvivesOwnerKills
// with the machine's PostgreSQL as the target: the owner node runs the
// sink and is SIGKILLed twice while it applies; the new owner's sink goes
// on from the target's checkpoints, and the target ends equal to the
// shards with every row applied once per change. Each kill comes once the
// audit shows the sink has begun applying the round just written.
func TestClusterSinkSurvivesOwnerKillsPostgres(t *testing.T) {
	tg := newPGAuditedTarget(t, "(id bigint PRIMARY KEY, shard integer NOT NULL, note varchar(40))")
	srvs := shopShards(t)
	c := startCluster(t)
	specFile := writeSpec(t, shopSpecYAML(srvs, fmt.Sprintf("sinks:\n  - {name: copy, type: postgres, address: '127.0.0.1:5432', database: %s, workers: 4, batch: 20}\n", tg.name)))
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
			// Killed while its sink applies this round (1,200
			// applications: 600 inserts, 600 updates).
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
	c.waitFor(t, 20*time.Second, "the sink caught up in braid sink list", func() (bool, string) {
		out, errs, code := cli("sink", "list", "shop", "--json", "--server", c.nodes[0].URL())
		var sinks []wire.SinkState
		if code != 0 || json.Unmarshal([]byte(out), &sinks) != nil || len(sinks) != 1 {
			return false, fmt.Sprintf("exit %d: %s%s", code, out, errs)
		}
		s := sinks[0]
		return s.Name == "copy" && s.Running && s.LagSeq == 0 && s.AppliedSeq > 0 && s.Missing == 0 && s.Upserts == 0 && s.LastError == "", fmt.Sprintf("%+v", s)
	})
	t.Logf("%d rows equal after 2 owner SIGKILLs; every one applied once per change", got)
}

// pgAuditedTarget is a database of the machine's PostgreSQL (dropped
// after the test) with a table shop.orders whose trigger appends each
// application of a row (an INSERT, or an upsert that updates) to
// shop.applied.
type pgAuditedTarget struct {
	db   *pgx.Conn
	name string
}

func newPGAuditedTarget(t *testing.T, columns string) *pgAuditedTarget {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:5432/postgres")
	if err != nil {
		t.Skipf("no PostgreSQL on 127.0.0.1:5432 to apply to: %v", err)
	}
	name := fmt.Sprintf("braid_sink_%d_%d", os.Getpid(), rand.IntN(1e6))
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
	for _, q := range []string{
		"CREATE SCHEMA shop",
		"CREATE TABLE shop.orders " + columns,
		"CREATE TABLE shop.applied (id bigint NOT NULL, n integer NOT NULL)",
		"CREATE FUNCTION shop.count_applied() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO shop.applied VALUES (NEW.id, 1); RETURN NEW; END $$",
		"CREATE TRIGGER counted AFTER INSERT OR UPDATE ON shop.orders FOR EACH ROW EXECUTE FUNCTION shop.count_applied()",
	} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}
	return &pgAuditedTarget{db: db, name: name}
}

// waitApplied waits until the audit holds more than n applications.
func (a *pgAuditedTarget) waitApplied(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		var got int
		a.db.QueryRow(context.Background(), "SELECT count(*) FROM shop.applied").Scan(&got)
		if got > n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the audit holds %d applications, waited for more than %d", got, n)
		}
	}
}

// read returns the rows of q, their columns joined by spaces, sorted.
func (a *pgAuditedTarget) read(q string) []string {
	rows, err := a.db.Query(context.Background(), q)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		vals, _ := rows.Values()
		var parts []string
		for _, v := range vals {
			parts = append(parts, fmt.Sprint(v))
		}
		out = append(out, strings.Join(parts, " "))
	}
	slices.Sort(out)
	return out
}

// waitEqualOn waits until shop.orders equals the union of shop_0 …
// shop_5.orders (shop_n on server(n); cols are the columns compared) and
// checks that every row was applied exactly twice (its INSERT, its
// UPDATE); it returns how many rows there are.
func (a *pgAuditedTarget) waitEqualOn(t *testing.T, cols string, server func(n int) *mysqltest.Server) int {
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
		if got = a.read("SELECT " + cols + " FROM shop.orders"); slices.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("target has %d rows, the shards %d", len(got), len(want))
		}
	}
	if twice := a.read("SELECT id, sum(n) FROM shop.applied GROUP BY id HAVING sum(n) != 2"); len(twice) > 0 {
		t.Fatalf("%d rows were not applied exactly twice (insert, update), e.g. %v", len(twice), twice[:min(5, len(twice))])
	}
	return len(got)
}
