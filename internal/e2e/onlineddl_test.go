package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/internal/testutil/shoptest"
)

// ghostCopy runs gh-ost's first steps on db.orders of srv: the changelog
// and its heartbeat, the copy created LIKE the table and altered, rows
// copied in chunks.
func ghostCopy(t *testing.T, srv *mysqltest.Server, db, alter string) {
	t.Helper()
	q := strings.NewReplacer("%db", "`"+db+"`")
	srv.Exec(t, q.Replace("create /* gh-ost */ table %db.`_orders_ghc` (id bigint auto_increment, last_update timestamp not null default current_timestamp on update current_timestamp, hint varchar(64) charset ascii not null, value varchar(4096) charset ascii not null, primary key(id), unique key hint_uidx(hint)) auto_increment=256"),
		q.Replace("create /* gh-ost */ table %db.`_orders_gho` like %db.`orders`"),
		q.Replace("alter /* gh-ost */ table %db.`_orders_gho` "+alter),
		q.Replace("insert /* gh-ost */ into %db.`_orders_ghc` (id, hint, value) values (1, 'heartbeat', NOW()) on duplicate key update last_update=NOW(), value=VALUES(value)"),
		q.Replace("insert /* gh-ost */ ignore into %db.`_orders_gho` (id, shard, note) (select id, shard, note from %db.`orders` force index (`PRIMARY`)) lock in share mode"))
}

// ghostCutOver runs gh-ost's last steps: the writes since the copy applied
// to it, the cut-over sentry, the atomic RENAME and the drops.
func ghostCutOver(t *testing.T, srv *mysqltest.Server, db string) {
	t.Helper()
	q := strings.NewReplacer("%db", "`"+db+"`")
	srv.Exec(t, q.Replace("replace /* gh-ost */ into %db.`_orders_gho` (id, shard, note) select id, shard, note from %db.`orders`"),
		q.Replace("create /* gh-ost */ table %db.`_orders_del` (id int auto_increment primary key) engine=InnoDB comment='ghost-cut-over-sentry'"),
		q.Replace("drop /* gh-ost */ table if exists %db.`_orders_del`"),
		q.Replace("rename /* gh-ost */ table %db.`orders` to %db.`_orders_del`, %db.`_orders_gho` to %db.`orders`"),
		q.Replace("drop /* gh-ost */ table if exists %db.`_orders_ghc`"),
		q.Replace("drop /* gh-ost */ table if exists %db.`_orders_del`"))
}

// TestClusterOnlineDDLSurvivesKill: gh-ost's steps on the six shard
// tables of shop.orders behind a three-node cluster, written to
// throughout. The owner is SIGKILLed while shop_0's migration is half
// done (its copy altered, not swapped in); the new owner, resuming from
// the cursor, still turns shop_0's swap into its ALTER. The consumer gets
// one ALTER of shop.orders, no helper table's message, every row.
func TestClusterOnlineDDLSurvivesKill(t *testing.T) {
	srvs, c := nodes.StartShop(t, cli)
	c.OwnerOf(t, "shop")
	cs := startConsumer(t, c, "shop", "osc")
	var writers []*writer
	for i, s := range srvs {
		writers = append(writers, startWriter(t, s, i, 20*time.Millisecond))
	}
	time.Sleep(1500 * time.Millisecond)
	const alter = "add column gift varchar(20) null"
	ghostCopy(t, srvs[0], "shop_0", alter)
	waitAckedPast(t, c, "shop", "osc", "a", srvs[0])
	owner, epoch := c.OwnerOf(t, "shop")
	owner.Kill()
	c.WaitFor(t, 60*time.Second, "a new owner", func() (bool, string) {
		_, e := c.OwnerOf(t, "shop")
		return e != epoch, "no takeover yet"
	})
	owner.MustStart(t, c.Bin, c.JoinOf(owner))
	ghostCutOver(t, srvs[0], "shop_0")
	for db := 1; db < 6; db++ {
		ghostCopy(t, srvs[db/2], fmt.Sprintf("shop_%d", db), alter)
		ghostCutOver(t, srvs[db/2], fmt.Sprintf("shop_%d", db))
	}
	time.Sleep(time.Second)
	var committed []int64
	for _, w := range writers {
		committed = append(committed, w.halt(t)...)
	}
	waitRows(t, c, cs, committed)
	alters := map[uint64]string{}
	for _, m := range cs.snapshot() {
		if m.table != "orders" {
			t.Fatalf("a message of table %q (seq %d) reached the consumer: a helper table's", m.table, m.seq)
		}
		if m.ddl != "" && !strings.HasPrefix(m.ddl, "CREATE") {
			alters[m.seq] = m.ddl
		}
	}
	if len(alters) != 1 {
		t.Fatalf("DDL besides the CREATE, by seq: %s; want one ALTER of shop.orders", fmt.Sprint(alters))
	}
	for _, sql := range alters {
		if sql != "alter /* gh-ost */ table `shop`.`orders` "+alter {
			t.Fatalf("the ALTER: %q", sql)
		}
	}
}

// waitAckedPast waits until client id clientID of dest has acked a
// transaction boundary at which source src (on srv) is at or past where
// srv's binlog ends now: the point a new owner resumes the client from
// moves past what srv ran so far as soon as the owner keeps that cursor
// (every lease/4).
func waitAckedPast(t *testing.T, c *nodes.Cluster, dest, clientID, src string, srv *mysqltest.Server) {
	t.Helper()
	file, pos := srv.MasterStatus(t)
	c.WaitFor(t, 30*time.Second, fmt.Sprintf("%s's cursor at %s past %s:%d", clientID, src, file, pos), func() (bool, string) {
		out, errs, code := cli("consumer", "list", dest, "--server", c.LiveNodes()[0].URL(), "--json")
		var cs []wire.ClientState
		if code != 0 || json.Unmarshal([]byte(out), &cs) != nil {
			return false, out + errs
		}
		for _, x := range cs {
			if x.ID != clientID || x.Cursor == nil {
				continue
			}
			for _, sp := range x.Cursor.Sources {
				f, p, _ := strings.Cut(sp.Pos, ":")
				n, err := strconv.ParseUint(p, 10, 32)
				if sp.Name == src && err == nil && (f > file || f == file && n >= uint64(pos)) {
					return true, ""
				}
			}
		}
		return false, out
	})
}

// ptOSCPaused starts Debian's pt-online-schema-change with --alter alter
// on db.orders of srv, stopped by its plugin before the swap for as long
// as the file pause exists: the copy is made, altered, filled and kept
// up by the tool's triggers, and not swapped in. It returns a wait for
// the tool's end; without the tool the test is skipped (failed under
// CI=true).
func ptOSCPaused(t *testing.T, srv *mysqltest.Server, db, alter, pause string) func() {
	t.Helper()
	bin := mysqltest.PtOSC(t)
	plugin := filepath.Join(t.TempDir(), "pause.pl")
	if err := os.WriteFile(plugin, []byte(fmt.Sprintf(`package pt_online_schema_change_plugin;
use strict;
use Time::HiRes qw(sleep);
sub new { my ($class, %%args) = @_; return bless {}, $class; }
sub before_swap_tables { sleep 0.05 while -f %q; }
1;
`, pause)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--alter", alter, "--execute", "--noversion-check", "--recursion-method=none", "--chunk-size=50",
		"--plugin", plugin, fmt.Sprintf("h=%s,P=%d,u=root,D=%s,t=orders", srv.Host, srv.Port, db))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return func() {
		t.Helper()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("pt-online-schema-change on %s: %v\n%s", db, err, out.String())
		}
	}
}

// TestCaptureSinkPtOSCKilled: `braid capture --quiet --cursor-dir`
// applies the six shard tables of shop.orders, written to throughout
// (every row inserted, then updated once), to a MySQL or PostgreSQL
// target, while pt-online-schema-change adds a column to each shard
// table. The capture is SIGKILLed while every migration is half done:
// the copies altered and filled, none swapped in, and every cursor the
// capture kept holding the six migrations with their ALTER. The capture
// restarted, the tools swap their copies in: every swap goes out as its
// migration's ALTER (none derived from the columns), the sink applies
// the logical table's, the target gets the column with its default (which the tool's ALTER has
// and an ALTER derived from the columns would not), ends equal to the
// shards, and no row was applied more often than the stream changed it.
func TestCaptureSinkPtOSCKilled(t *testing.T) {
	for _, tc := range crashTargets[:2] {
		t.Run(tc.name, func(t *testing.T) {
			testCaptureSinkPtOSCKilled(t, tc.open(t, "(id BIGINT PRIMARY KEY, shard INT NOT NULL, note VARCHAR(40))"))
		})
	}
}

func testCaptureSinkPtOSCKilled(t *testing.T, tg auditedDB) {
	srvs := shoptest.Shards(t)
	shards := make([]*mysqltest.Server, 6) // shoptest.Shards puts shop_n on server n/2
	for n := range shards {
		shards[n] = srvs[n/2]
	}
	specFile := nodes.WriteSpec(t, shoptest.SpecYAML(srvs, "sinks:\n  - "+tg.sinkYAML()+"\n"))
	cursorDir := t.TempDir()
	capture := newCaptureRun(t, specFile)
	start := func() *exec.Cmd { return capture.start("--quiet", "--cursor-dir", cursorDir) }
	cmd := start()

	w := shoptest.StartWriter(t, srvs)
	w.More(t, 20)

	pause := filepath.Join(t.TempDir(), "pause")
	if err := os.WriteFile(pause, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// A default: an ALTER derived at the swap from the table's columns
	// (what a capture that lost the migration's DDL emits) has none.
	const alter = "ADD COLUMN gift varchar(20) NULL DEFAULT 'none'"
	var waits []func()
	for shard, s := range shards {
		waits = append(waits, ptOSCPaused(t, s, fmt.Sprintf("shop_%d", shard), alter, pause))
	}
	// Every cursor kept holds the six migrations, their copies altered.
	retry.Until(t, 60*time.Second, func() error {
		// The clients' cursors (the start positions' file is not one).
		files, _ := filepath.Glob(filepath.Join(cursorDir, "shop.[^@]*.cursor.json"))
		if len(files) == 0 {
			return fmt.Errorf("no cursor in %s yet", cursorDir)
		}
		for _, f := range files {
			b, _ := os.ReadFile(f)
			if n := strings.Count(string(b), ".`_orders_new` "+alter); n != 6 {
				return fmt.Errorf("%s holds %d migrations with their ALTER, want 6", filepath.Base(f), n)
			}
		}
		return nil
	})
	w.More(t, 10)      // the tools' triggers write the copies
	cmd.Process.Kill() // SIGKILL
	cmd.Wait()
	for shard, s := range shards {
		if got := s.Query(t, fmt.Sprintf("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'shop_%d' AND table_name = '_orders_new'", shard)); got[0][0] != "1" {
			t.Fatalf("shop_%d's migration is not half done at the kill: no copy", shard)
		}
	}
	w.More(t, 5)
	cmd = start()
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	w.More(t, 5)
	os.Remove(pause)
	for _, wait := range waits {
		wait()
	}
	w.More(t, 10)
	w.Stop()
	for shard, s := range shards {
		id := w.ID(shard, w.Rounds())
		s.Exec(t, fmt.Sprintf("UPDATE shop_%d.orders SET note = 'u' WHERE id = %d", shard, id))
	}
	got := waitEqual(t, tg, "id, shard, note, gift", shards)
	log := capture.logText(t)
	if strings.Contains(log, "sink failed") || strings.Contains(log, "sink stopped") || strings.Contains(log, "without its DDL") {
		t.Fatalf("the sink failed, or a swap went out without the migration's DDL:\n%s", log)
	}
	if n := strings.Count(log, "online schema change swapped in: its DDL goes out"); n < 6 {
		t.Fatalf("%d swaps went out as their migration's DDL, want 6:\n%s", n, log)
	}
	t.Logf("%d rows equal after a SIGKILL mid-migration; one ALTER applied, every row once per change", got)
}
