package e2e

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/internal/testutil/braidproc"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/internal/testutil/shoptest"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
)

// auditedDB is a target database the crash tests apply to, audited: each
// application of a row to its orders table is recorded. auditedTarget
// (MariaDB) and pgAuditedTarget (PostgreSQL) record them with a trigger,
// in an audit table, one row (id, 1) per application, which makes the
// MariaDB sink write SQL statements; binlogAuditedTarget (a MariaDB of
// its own, no trigger, so the sink replays the binlog's row events)
// reads them from the target's binary log. The tests below run against
// each.
type auditedDB interface {
	// sinkYAML is the spec's sink entry, named copy, that applies
	// shop.orders to the audited table.
	sinkYAML() string
	// orders is the audited table, as a query names it.
	orders() string
	// read returns the rows of q, their columns joined by spaces, sorted
	// (nil on an error: the table is not there yet).
	read(q string) []string
	// audit returns how many applications of rows were recorded, and
	// "id count" of each row not applied exactly twice.
	audit() (applications int, notTwice []string)
}

// tableAudit is auditedDB.audit of the audit table applied that read
// reads.
func tableAudit(read func(q string) []string, applied string) (int, []string) {
	var n int
	if rows := read("SELECT COUNT(*) FROM " + applied); len(rows) == 1 {
		n, _ = strconv.Atoi(rows[0])
	}
	return n, read("SELECT id, SUM(n) FROM " + applied + " GROUP BY id HAVING SUM(n) != 2")
}

// crashTargets are the targets the crash tests run against, each made
// with an orders table of columns; one without its server skips.
var crashTargets = []struct {
	name string
	open func(t *testing.T, columns string) auditedDB
}{
	{"mysql", func(t *testing.T, columns string) auditedDB { return newAuditedTarget(t, columns) }},
	{"postgres", func(t *testing.T, columns string) auditedDB { return newPGAuditedTarget(t, columns) }},
	{"mysql-replay", func(t *testing.T, columns string) auditedDB { return newBinlogAuditedTarget(t, columns) }},
}

// TestCaptureSinkSurvivesKills: `braid capture --quiet --cursor-dir`
// applies six shard tables, written to throughout, to one table of the
// machine's MariaDB, or PostgreSQL, and is SIGKILLed three times while it
// applies. The target table, made beforehand and audited (auditedDB: a
// trigger that records every application of a row, or, for the sink that
// replays binlog row events, the target's binary log), ends equal to the
// union of the shards, and no row was applied more often than the stream
// changed it: its INSERT once and its UPDATE once. Each kill comes once the audit shows the sink
// has begun applying the latest rounds, so it lands mid-apply (with mode:
// at-least-once, the same test finds rows applied more than twice every
// time).
func TestCaptureSinkSurvivesKills(t *testing.T) {
	for _, tc := range crashTargets {
		t.Run(tc.name, func(t *testing.T) {
			testCaptureSinkSurvivesKills(t, tc.open(t, "(id BIGINT PRIMARY KEY, amount INT NOT NULL, note VARCHAR(40))"))
		})
	}
}

func testCaptureSinkSurvivesKills(t *testing.T, tg auditedDB) {
	shards := sinktest.StartShards(t, "(id BIGINT PRIMARY KEY, amount INT NOT NULL, note VARCHAR(40))")
	specFile := nodes.WriteSpec(t, shoptest.SpecYAML(shards[:3], "sinks:\n  - "+tg.sinkYAML()+"\n"))
	cursorDir := t.TempDir()
	capture := newCaptureRun(t, specFile)
	start := func() *exec.Cmd { return capture.start("--quiet", "--cursor-dir", cursorDir) }

	// Each shard: rows inserted in batches, each updated once; the
	// capture is killed in the middle, three times.
	cmd := start()
	for round := range 8 {
		for n, s := range shards {
			base := int64(n)*1_000_000 + int64(round)*1000
			var vals []string
			for k := range 100 {
				vals = append(vals, fmt.Sprintf("(%d, %d, 'r%d')", base+int64(k), k, round))
			}
			s.Exec(t, fmt.Sprintf("INSERT INTO shop_%d.orders VALUES %s", n, strings.Join(vals, ", ")),
				fmt.Sprintf("UPDATE shop_%d.orders SET amount = amount + 1 WHERE id >= %d AND id < %d", n, base, base+100))
		}
		if round%2 == 1 && round < 7 {
			// Killed while it applies the last two rounds: once the
			// audit shows it has begun them (each round is 1,200
			// applications: 600 inserts, 600 updates).
			waitApplied(t, tg, (round-1)*1200+rand.IntN(600))
			cmd.Process.Kill() // SIGKILL
			cmd.Wait()
			cmd = start()
		}
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()

	got := waitEqual(t, tg, "id, amount, note", shards)
	t.Logf("%d rows equal after 3 SIGKILLs; every one applied once per change", got)
}

// TestClusterSinkSurvivesOwnerKills: the same as a cluster destination:
// the owner node runs the sink and is SIGKILLed twice while it applies
// (each kill once the audit shows the sink has begun applying the round
// just written); the new owner's sink goes on from the target's
// checkpoints, and the target ends equal to the shards with every row
// applied once per change, and braid sink list shows the sink caught up
// and clean.
func TestClusterSinkSurvivesOwnerKills(t *testing.T) {
	for _, tc := range crashTargets {
		t.Run(tc.name, func(t *testing.T) {
			testClusterSinkSurvivesOwnerKills(t, tc.open(t, "(id BIGINT PRIMARY KEY, shard INT NOT NULL, note VARCHAR(40))"))
		})
	}
}

func testClusterSinkSurvivesOwnerKills(t *testing.T, tg auditedDB) {
	srvs := shoptest.Shards(t)
	c := nodes.Start(t, cli)
	specFile := nodes.WriteSpec(t, shoptest.SpecYAML(srvs, "sinks:\n  - "+tg.sinkYAML()+"\n"))
	if out, errs, code := cli("destination", "create", "-f", specFile, "--server", c.Nodes[0].URL()); code != 0 {
		t.Fatalf("create: exit %d: %s%s", code, out, errs)
	}
	shards := make([]*mysqltest.Server, 6) // shoptest.Shards puts shop_n on server n/2
	for n := range shards {
		shards[n] = srvs[n/2]
	}
	for round := range 8 {
		for n, s := range shards {
			base := int64(n)*1_000_000 + int64(round)*1000
			var vals []string
			for k := range 100 {
				vals = append(vals, fmt.Sprintf("(%d, %d, 'r%d')", base+int64(k), n, round))
			}
			s.Exec(t, fmt.Sprintf("INSERT INTO shop_%d.orders VALUES %s", n, strings.Join(vals, ", ")),
				fmt.Sprintf("UPDATE shop_%d.orders SET note = 'u%d' WHERE id >= %d AND id < %d", n, round, base, base+100))
		}
		if round == 2 || round == 5 {
			// Killed while its sink applies this round (1,200
			// applications: 600 inserts, 600 updates).
			waitApplied(t, tg, round*1200+rand.IntN(600))
			owner, epoch := c.OwnerOf(t, "shop")
			owner.Kill()
			c.WaitFor(t, 60*time.Second, "a new owner", func() (bool, string) {
				_, e := c.OwnerOf(t, "shop")
				return e != epoch, "no takeover yet"
			})
			owner.MustStart(t, c.Bin, c.JoinOf(owner))
		}
	}
	got := waitEqual(t, tg, "id, shard, note", shards)
	// braid sink list, through any node, shows it caught up and clean.
	c.WaitFor(t, 20*time.Second, "the sink caught up in braid sink list", func() (bool, string) {
		out, errs, code := cli("sink", "list", "shop", "--json", "--server", c.Nodes[0].URL())
		var sinks []wire.SinkState
		if code != 0 || json.Unmarshal([]byte(out), &sinks) != nil || len(sinks) != 1 {
			return false, fmt.Sprintf("exit %d: %s%s", code, out, errs)
		}
		s := sinks[0]
		return s.Name == "copy" && s.Running && s.LagSeq == 0 && s.AppliedSeq > 0 && s.Missing == 0 && s.Upserts == 0 && s.LastError == "", fmt.Sprintf("%+v", s)
	})
	if out, _, code := cli("sink", "list", "shop", "--server", c.Nodes[1].URL()); code != 0 || !strings.Contains(out, "applying") {
		t.Errorf("sink list: exit %d: %s", code, out)
	}
	t.Logf("%d rows equal after 2 owner SIGKILLs; every one applied once per change", got)
}

// waitApplied waits until tg's audit holds more than n applications, so
// that a kill lands while the sink applies.
func waitApplied(t *testing.T, tg auditedDB, n int) {
	t.Helper()
	retry.Until(t, 30*time.Second, func() error {
		if got, _ := tg.audit(); got <= n {
			return fmt.Errorf("the audit holds %d applications, waited for more than %d", got, n)
		}
		return nil
	})
}

// waitEqual waits until tg's orders equal the union of shop_0 …
// shop_5.orders (shop_n on shards[n]; cols are the columns compared) and
// checks every row was applied exactly twice (its INSERT, its UPDATE);
// it returns how many rows there are.
func waitEqual(t *testing.T, tg auditedDB, cols string, shards []*mysqltest.Server) int {
	t.Helper()
	orders := tg.orders()
	want := sinktest.SourceRows(t, shards, func(n int) string { return fmt.Sprintf("SELECT %s FROM shop_%d.orders", cols, n) })
	var got []string
	retry.Until(t, 90*time.Second, func() error {
		if got = tg.read("SELECT " + cols + " FROM " + orders); !slices.Equal(got, want) {
			return fmt.Errorf("target has %d rows, the shards %d", len(got), len(want))
		}
		return nil
	})
	if _, twice := tg.audit(); len(twice) > 0 {
		t.Fatalf("%d rows were not applied exactly twice (insert, update), e.g. %v", len(twice), twice[:min(5, len(twice))])
	}
	return len(got)
}

// auditedTarget is a database of the machine's MariaDB (dropped after the
// test) with an orders table whose trigger records each application of a
// row (an upsert fires it once) in applied.
type auditedTarget struct {
	db   *sql.DB
	name string
}

var _ auditedDB = (*auditedTarget)(nil)

func newAuditedTarget(t *testing.T, columns string) *auditedTarget {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test uses MariaDB on 127.0.0.1:3306")
	}
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

func (a *auditedTarget) sinkYAML() string {
	return fmt.Sprintf("{name: copy, type: mysql, address: '127.0.0.1:3306', workers: 4, batch: 20, meta_database: %s_meta, tables: [{from: shop.orders, to: %s.orders}]}", a.name, a.name)
}

func (a *auditedTarget) orders() string { return a.name + ".orders" }

func (a *auditedTarget) audit() (int, []string) { return tableAudit(a.read, a.name+".applied") }

func (a *auditedTarget) read(q string) []string { return sinktest.Query(a.db, q) }

// captureRun starts `braid capture` processes of one spec for a test,
// all writing to one log that the test prints if it fails.
type captureRun struct {
	t         *testing.T
	bin, spec string
	log       *os.File
}

// newCaptureRun is a captureRun of specFile, with braid built.
func newCaptureRun(t *testing.T, specFile string) *captureRun {
	t.Helper()
	bin := braidproc.Binary(t)
	logPath := filepath.Join(t.TempDir(), "capture.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("capture's log:\n%s", b)
		}
	})
	return &captureRun{t: t, bin: bin, spec: specFile, log: logf}
}

// start starts `braid capture -f SPEC args...`. It may be called from
// any goroutine: a failure to start is reported with t.Error, and start
// returns nil then.
func (c *captureRun) start(args ...string) *exec.Cmd {
	cmd := exec.Command(c.bin, append([]string{"capture", "-f", c.spec}, args...)...)
	cmd.Stdout, cmd.Stderr = c.log, c.log
	if err := cmd.Start(); err != nil {
		c.t.Error(err)
		return nil
	}
	return cmd
}

// logText returns what the run's captures have logged so far.
func (c *captureRun) logText(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(c.log.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
