package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/internal/testutil/shoptest"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
)

// snapshotRows is the rows the snapshot tests' shards hold before the
// destination starts: 200,000 in six shard tables.
const snapshotRows = 200_000

// snapshotShop starts three servers holding shop_0 … shop_5.orders
// (shop_n on servers[n%3]), each with snapshotRows/6 rows whose ids are
// n*1,000,000 + 1 …, and the general query log on (to a table) so that a
// test can see what braid asked.
func snapshotShop(t *testing.T) []*mysqltest.Server {
	t.Helper()
	srvs := mysqltest.StartN(t, 3)
	shards := make([]*mysqltest.Server, 6)
	for n := range shards {
		s := srvs[n%3]
		shards[n] = s
		s.Exec(t, "CREATE DATABASE IF NOT EXISTS seq", fmt.Sprintf("CREATE DATABASE shop_%d", n),
			fmt.Sprintf("CREATE TABLE shop_%d.orders (id BIGINT PRIMARY KEY, shard INT NOT NULL, note VARCHAR(60))", n),
			fmt.Sprintf("INSERT INTO shop_%d.orders SELECT %d + seq, %d, CONCAT('r', seq) FROM seq.seq_1_to_%d", n, n*1_000_000, n, snapshotRows/6))
	}
	for _, s := range shards[:3] {
		s.Exec(t, "SET GLOBAL log_output = 'TABLE'", "SET GLOBAL general_log = 1")
	}
	return shards
}

// snapshotSpecYAML is the shop destination over the shards' three
// servers, from their current positions, with an initial snapshot in
// chunks of 2,000 rows.
func snapshotSpecYAML(shards []*mysqltest.Server, extra string) string {
	return strings.ReplaceAll(shoptest.SpecYAML(shards[:3], "snapshot: initial\nsnapshot_chunk_rows: 2000\n"+extra), ", start: earliest", "")
}

// shopWriter updates, deletes and inserts rows of every shard table, and
// moves rows to new keys, until stopped.
type shopWriter struct {
	stop   chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
	writes atomic.Int64
}

func startShopWriter(t *testing.T, shards []*mysqltest.Server) *shopWriter {
	w := &shopWriter{stop: make(chan struct{})}
	per := snapshotRows / 6
	for n, s := range shards {
		w.wg.Go(func() {
			c := s.Conn(t)
			r := rand.New(rand.NewPCG(uint64(n), 11))
			base, next := n*1_000_000, per+1
			for k := 0; ; k++ {
				select {
				case <-w.stop:
					return
				default:
				}
				id := base + 1 + r.IntN(per)
				var q string
				switch k % 5 {
				case 0, 1:
					q = fmt.Sprintf("UPDATE shop_%d.orders SET note = CONCAT(note, 'u') WHERE id = %d", n, id)
				case 2:
					q = fmt.Sprintf("DELETE FROM shop_%d.orders WHERE id = %d", n, id)
				case 3:
					q = fmt.Sprintf("INSERT INTO shop_%d.orders (id, shard, note) VALUES (%d, %d, 'new')", n, base+next, n)
					next++
				case 4:
					q = fmt.Sprintf("UPDATE shop_%d.orders SET id = id + 500000 WHERE id = %d", n, id)
				}
				if _, err := c.Execute(q); err != nil && !strings.Contains(err.Error(), "Duplicate") {
					t.Errorf("writer: %s: %v", q, err)
					return
				}
				w.writes.Add(1)
				time.Sleep(time.Millisecond)
			}
		})
	}
	return w
}

func (w *shopWriter) halt() {
	w.once.Do(func() { close(w.stop) })
	w.wg.Wait()
}

// flatMessage is the part of a canal flat message the tests read.
type flatMessage struct {
	Seq      uint64               `json:"seq"`
	Type     string               `json:"type"`
	Database string               `json:"originDatabase"`
	Data     []map[string]*string `json:"data"`
	Old      []map[string]*string `json:"old"`
	Snapshot bool                 `json:"snapshot"`
}

// readMessages reads the flat messages `braid capture` printed to path;
// a last line cut short by a kill is left out.
func readMessages(t *testing.T, path string) []flatMessage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []flatMessage
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var m flatMessage
		if json.Unmarshal(sc.Bytes(), &m) == nil && m.Seq > 0 {
			out = append(out, m)
		}
	}
	return out
}

// applyMessages applies runs of a consumer's messages in seq order, each
// run superseding what the runs before it delivered from its first seq
// on (a restart sends the stream again from its cursor, with the same
// seqs): the rows a consumer holds, by origin database and id, as
// "id shard note".
func applyMessages(runs [][]flatMessage) (map[string]string, int) {
	var all []flatMessage
	for _, run := range runs {
		if len(run) == 0 {
			continue
		}
		from := run[0].Seq
		all = slices.DeleteFunc(all, func(m flatMessage) bool { return m.Seq >= from })
		all = append(all, run...)
	}
	rows := map[string]string{}
	snap := 0
	val := func(p *string) string {
		if p == nil {
			return "NULL"
		}
		return *p
	}
	for _, m := range all {
		for i, d := range m.Data {
			key := m.Database + ":" + val(d["id"])
			switch m.Type {
			case "INSERT":
				if m.Snapshot {
					snap++
				}
				rows[key] = val(d["id"]) + " " + val(d["shard"]) + " " + val(d["note"])
			case "UPDATE":
				old := key
				if i < len(m.Old) && m.Old[i]["id"] != nil {
					old = m.Database + ":" + *m.Old[i]["id"]
				}
				delete(rows, old)
				rows[key] = val(d["id"]) + " " + val(d["shard"]) + " " + val(d["note"])
			case "DELETE":
				delete(rows, key)
			}
		}
	}
	return rows, snap
}

// traceRows logs, for each row the consumer got wrong, every message of
// every run that touched its id or the id an `id = id + 500000` moved it
// from or to, and the chunk log: what a failure needs to be understood.
func traceRows(t *testing.T, runs [][]flatMessage, got, want map[string]string, chunkLog string) {
	t.Helper()
	ids := map[string]bool{}
	for k, w := range want {
		if got[k] != w {
			ids[k] = true
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			ids[k] = true
		}
	}
	n := 0
	for k := range ids {
		if n++; n > 5 {
			break
		}
		db, id, _ := strings.Cut(k, ":")
		v, _ := strconv.ParseInt(id, 10, 64)
		related := map[string]bool{id: true, strconv.FormatInt(v+500_000, 10): true, strconv.FormatInt(v-500_000, 10): true}
		t.Logf("trace of %s (got %q, the source %q):", k, got[k], want[k])
		for r, run := range runs {
			if len(run) > 0 {
				t.Logf("  run %d: seqs %d..%d", r, run[0].Seq, run[len(run)-1].Seq)
			}
			for _, m := range run {
				if m.Database != db {
					continue
				}
				for i, d := range m.Data {
					hit := d["id"] != nil && related[*d["id"]]
					old := ""
					if i < len(m.Old) && m.Old[i]["id"] != nil {
						old = *m.Old[i]["id"]
						hit = hit || related[old]
					}
					if hit {
						t.Logf("  run %d seq %d %s snapshot=%v id=%s old id=%q", r, m.Seq, m.Type, m.Snapshot, *d["id"], old)
					}
				}
			}
		}
	}
	if b, err := os.ReadFile(chunkLog); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if strings.Contains(line, "shop_") {
				t.Logf("  chunk log: %s", line)
			}
		}
	}
}

// shopRows is the shards' rows as applyMessages keys them.
func shopRows(t *testing.T, shards []*mysqltest.Server) map[string]string {
	out := map[string]string{}
	for n, s := range shards {
		for _, r := range s.Query(t, fmt.Sprintf("SELECT id, shard, note FROM shop_%d.orders", n)) {
			out[fmt.Sprintf("shop_%d:%s", n, r[0])] = strings.Join(r, " ")
		}
	}
	return out
}

// chunkQuery matches braid's chunk SELECTs in the general log: the table
// and the key the chunk starts after.
var chunkQuery = regexp.MustCompile("^SELECT `id`, `shard`, `note`(?:, `extra`)? FROM `(shop_\\d+)`\\.`orders`(?: WHERE \\(*`id` > (\\d+))?")

// chunkReads lists the chunk SELECTs server s logged since when, as
// "shop_n after".
func chunkReads(t *testing.T, s *mysqltest.Server, since string) []string {
	var out []string
	for _, r := range s.Query(t, "SELECT argument FROM mysql.general_log WHERE event_time >= '"+since+"' AND argument LIKE 'SELECT `id`, `shard`, `note`% FROM%'") {
		if m := chunkQuery.FindStringSubmatch(r[0]); m != nil {
			out = append(out, m[1]+" "+m[2])
		}
	}
	return out
}

// TestCaptureSnapshotResumesAfterKills: `braid capture --cursor-dir` with
// snapshot: initial over 200,000 rows, SIGKILLed twice in the middle of
// the snapshot while a writer changes rows: each restart goes on at the
// next chunk (the general log shows no chunk it had finished read again),
// an ALTER TABLE … ALGORITHM=INPLACE, LOCK=NONE of every shard table run
// while braid is down completes with the writes going on and is read by
// the restart, and a consumer applying what the three runs printed,
// de-duplicated by seq, holds the shards' rows.
func TestCaptureSnapshotResumesAfterKills(t *testing.T) {
	shards := snapshotShop(t)
	specFile := nodes.WriteSpec(t, snapshotSpecYAML(shards, ""))
	cursorDir, outDir := t.TempDir(), t.TempDir()
	capture := newCaptureRun(t, specFile)
	var outs []string
	start := func() *exec.Cmd {
		path := filepath.Join(outDir, fmt.Sprintf("run%d.jsonl", len(outs)))
		outs = append(outs, path)
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		cmd := exec.Command(capture.bin, "capture", "-f", specFile, "--cursor-dir", cursorDir)
		cmd.Stdout, cmd.Stderr = f, capture.log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	readCursor := func() *group.Cursor {
		c, err := (&group.FileStore{Dir: cursorDir}).Load("shop", "capture")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// snapshotRowsOut counts the snapshot rows the cursor has passed.
	snapshotRowsOut := func() int64 {
		c := readCursor()
		if c == nil {
			return 0
		}
		var n int64
		for _, s := range c.Sources {
			if s.Snapshot != nil {
				for _, tb := range s.Snapshot.Tables {
					n += tb.Rows
				}
			}
		}
		return n
	}
	waitRows := func(n int64) {
		t.Helper()
		retry.Until(t, 60*time.Second, func() error {
			if got := snapshotRowsOut(); got < n {
				return fmt.Errorf("the cursor passed %d snapshot rows, waited for %d", got, n)
			}
			return nil
		})
	}
	w := startShopWriter(t, shards)
	defer w.halt()
	cmd := start()
	defer func() { cmd.Process.Kill(); cmd.Wait() }()

	var checks []func() // of what each restart read, once the test is done
	for kill, at := range []int64{40_000, 110_000} {
		waitRows(at)
		cmd.Process.Kill() // SIGKILL
		cmd.Wait()
		saved := readCursor()
		for i, s := range saved.Sources {
			if s.Snapshot != nil {
				t.Logf("kill %d: cursor seq %d, source %d at %s: %+v", kill+1, saved.Seq, i, s.Pos, *s.Snapshot)
			}
		}
		// What the restart must not read again: per shard table, a table
		// done, or the key its next chunk starts after.
		done, after := map[string]bool{}, map[string]int64{}
		allDone := true
		for _, s := range saved.Sources {
			allDone = allDone && s.Snapshot != nil && s.Snapshot.Done
			if s.Snapshot == nil {
				continue
			}
			for _, tb := range s.Snapshot.Tables {
				db, _, _ := strings.Cut(tb.Name, ".")
				done[db] = tb.Done
				if len(tb.After) == 1 {
					after[db], _ = strconv.ParseInt(tb.After[0], 10, 64)
				}
			}
		}
		if kill == 1 {
			// While braid is down and the snapshot half done: an online
			// ALTER of every shard table, with the writes going on. The
			// restart knows the schema at its cursor (the cursor keeps it
			// from the start), reads the ALTERs from the binlog and goes
			// on; pessimistic shard DDL then releases its lock.
			began, writes := time.Now(), w.writes.Load()
			for n, s := range shards {
				s.Exec(t, fmt.Sprintf("ALTER TABLE shop_%d.orders ADD COLUMN extra INT NULL, ALGORITHM=INPLACE, LOCK=NONE", n))
			}
			if more := w.writes.Load() - writes; more == 0 {
				t.Errorf("no write went through during the ALTERs (%v)", time.Since(began))
			}
		}
		var since []string
		for _, s := range shards[:3] {
			since = append(since, s.Query(t, "SELECT NOW(6)")[0][0])
		}
		cmd = start()
		checks = append(checks, func() {
			reads := 0
			for i, s := range shards[:3] {
				for _, r := range chunkReads(t, s, since[i]) {
					reads++
					db, key, _ := strings.Cut(r, " ")
					k, _ := strconv.ParseInt(key, 10, 64)
					if done[db] || (after[db] > 0 && (key == "" || k < after[db])) {
						t.Errorf("restart %d read a chunk of %s after %q again; its cursor had it done %v, after %d", kill+1, db, key, done[db], after[db])
					}
				}
			}
			switch {
			case allDone && reads == 0:
				// The cursor passed the snapshot's end before the kill (a
				// fast run): the restart reads nothing again, as checked.
				t.Logf("kill %d came after the snapshot ended; the restart read no chunk", kill+1)
			case reads == 0:
				t.Errorf("restart %d read no chunk: the general log is not on?", kill+1)
			}
		})
	}
	// Let the snapshot end and the writer run on a little, then wait for
	// the cursor to pass the shards' ends.
	retry.Until(t, 90*time.Second, func() error {
		c := readCursor()
		ok := c != nil
		for _, s := range c.Sources {
			ok = ok && s.Snapshot != nil && s.Snapshot.Done
		}
		if !ok {
			return fmt.Errorf("snapshot not done: %+v", c)
		}
		return nil
	})
	w.halt()
	// A last write on every shard table; once the last run has printed
	// all six, it has printed everything before them.
	for n, s := range shards {
		s.Exec(t, fmt.Sprintf("INSERT INTO shop_%d.orders (id, shard, note) VALUES (%d, %d, 'the-end-%d')", n, n*1_000_000+999_999, n, n))
	}
	last := outs[len(outs)-1]
	retry.Until(t, 90*time.Second, func() error {
		b, err := os.ReadFile(last)
		if err != nil {
			t.Fatal(err)
		}
		seen := 0
		for n := range shards {
			if strings.Contains(string(b), fmt.Sprintf("the-end-%d", n)) {
				seen++
			}
		}
		if seen < len(shards) {
			return fmt.Errorf("the capture printed %d of the %d last writes", seen, len(shards))
		}
		return nil
	})
	cmd.Process.Signal(os.Interrupt)
	cmd.Wait()
	end := readCursor()
	for i, s := range shards[:3] {
		if file, pos := s.MasterStatus(t); end.Sources[i].Pos.Compare(change.Position{File: file, Pos: pos}) < 0 {
			t.Errorf("source %d: the cursor is at %s, the server at %s:%d", i, end.Sources[i].Pos, file, pos)
		}
	}
	var runs [][]flatMessage
	for _, p := range outs {
		runs = append(runs, readMessages(t, p))
	}
	got, snap := applyMessages(runs)
	want := shopRows(t, shards)
	if !maps.Equal(got, want) {
		traceRows(t, runs, got, want, filepath.Join(cursorDir, "shop.chunks.jsonl"))
	}
	sinktest.SameRows(t, got, want)
	for _, s := range shards[:3] {
		if locks := s.Query(t, "SELECT COUNT(*) FROM mysql.general_log WHERE argument LIKE 'LOCK TABLE%' OR argument LIKE 'FLUSH TABLES%'"); locks[0][0] != "0" {
			t.Errorf("%s: %s table locks or flushes in the general log", s.Addr(), locks[0][0])
		}
	}
	for _, check := range checks {
		check()
	}
	t.Logf("%d rows equal after 2 SIGKILLs mid-snapshot (%d snapshot rows delivered, %d writes)", len(got), snap, w.writes.Load())
}

// TestClusterSnapshotSurvivesOwnerKills: a cluster destination with
// snapshot: initial over 200,000 rows and a MySQL sink into an empty
// table (the aggregated table built from nothing), its owner SIGKILLed
// twice during the snapshot while a writer changes rows: the new owners
// go on from the chunks kept in Raft and the sink's checkpoints, and the
// target ends equal to the union of the shards.
func TestClusterSnapshotSurvivesOwnerKills(t *testing.T) {
	shards := snapshotShop(t)
	tg := newAuditedTarget(t, "(id BIGINT PRIMARY KEY, shard INT NOT NULL, note VARCHAR(60))")
	db, name := tg.db, tg.name
	count := func() int {
		var n int
		db.QueryRow("SELECT COUNT(*) FROM " + name + ".orders").Scan(&n)
		return n
	}
	c := nodes.Start(t, cli)
	specFile := nodes.WriteSpec(t, snapshotSpecYAML(shards, fmt.Sprintf(
		"sinks:\n  - {name: copy, type: mysql, address: '127.0.0.1:3306', workers: 8, batch: 200, meta_database: %s_meta, tables: [{from: shop.orders, to: %s.orders}]}\n", name, name)))
	w := startShopWriter(t, shards)
	defer w.halt()
	if out, errs, code := cli("destination", "create", "-f", specFile, "--server", c.Nodes[0].URL()); code != 0 {
		t.Fatalf("create: exit %d: %s%s", code, out, errs)
	}
	for _, at := range []int{30_000, 100_000} {
		retry.Until(t, 90*time.Second, func() error {
			if n := count(); n < at {
				return fmt.Errorf("the target holds %d rows, waited for %d", n, at)
			}
			return nil
		})
		owner, epoch := c.OwnerOf(t, "shop")
		owner.Kill()
		c.WaitFor(t, 60*time.Second, "a new owner", func() (bool, string) {
			_, e := c.OwnerOf(t, "shop")
			return e != epoch, "no takeover yet"
		})
		owner.MustStart(t, c.Bin, c.JoinOf(owner))
	}
	time.Sleep(2 * time.Second) // the writer on a little after the kills
	w.halt()
	want := sinktest.SourceRows(t, shards, func(n int) string { return fmt.Sprintf("SELECT id, shard, note FROM shop_%d.orders", n) })
	var got []string
	// The sink catches up at the machine's pace: wait while the rows that
	// differ keep changing, and not a fixed time.
	retry.WhileProgress(t, 60*time.Second, time.Second, func() (int, error) {
		got = sinktest.Query(db, "SELECT id, shard, note FROM "+name+".orders")
		slices.Sort(got)
		if n := diffCount(got, want); n > 0 {
			return n, fmt.Errorf("target has %d rows, the shards %d (%d rows differ)", len(got), len(want), n)
		}
		return 0, nil
	})
	t.Logf("%d rows equal after 2 owner SIGKILLs mid-snapshot (%d writes)", len(got), w.writes.Load())
}

// diffCount counts the rows of two sorted lists that are in one only.
func diffCount(a, b []string) int {
	n, i, j := 0, 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			n, i = n+1, i+1
		case i == len(a) || b[j] < a[i]:
			n, j = n+1, j+1
		default:
			i, j = i+1, j+1
		}
	}
	return n
}
