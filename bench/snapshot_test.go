package bench

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// BenchmarkSnapshot measures the initial snapshot (spec snapshot:
// initial): how fast a new destination delivers the rows four shards
// already hold, beside mariadb-dump and go-mysql canal's dump path
// copying the same tables in the same run, and that braid's memory stays
// at its bound, not at the tables' size.
//
// # What BenchmarkSnapshot measures
//
// Once per run of the parent benchmark it starts four MariaDB servers
// (256 MiB buffer pool, so that every way reads the tables from memory)
// and fills one shard table on each, shop_<i>.orders (id BIGINT PRIMARY
// KEY, code VARCHAR(20), amount DECIMAL(10,2), note VARCHAR(60), qty
// INT, at DATETIME; about 100 bytes a row), with BRAID_BENCH_SNAPSHOT_ROWS
// rows in all (default 2,000,000: 500,000 a shard), INSERT … SELECT from
// MariaDB's sequence engine in statements of 100,000 rows, and
// shop_<i>.orders_half with the first half of them. Nothing writes the
// servers while the ways run. Each iteration of BenchmarkSnapshot/4-shards
// then copies the four orders tables five ways, rotating which goes
// first:
//
//   - braid: SnapshotBraid, a destination over the four servers (start
//     `latest`, table `shop_\d+\.orders` routed to shop.orders,
//     snapshot: initial, the rest at the spec's defaults: strict order,
//     heartbeat 200ms, max_clock_skew 1s, chunks of 8,192 rows, the four
//     sources read at once) run as a node serves it, stream.StartPipeline
//     into a store at stream's default bounds (64 MiB), read by one
//     consumer that gets batches of up to 1,024 events and acks each,
//     counting the rows marked snapshot until all of them have arrived
//     (every source's Stats().Sources[i].Snapshot.Done is then checked).
//     Any row change not of the snapshot, or a count off by one, fails
//     it. The time runs from StartPipeline (connecting, schema loads
//     included) to the last row.
//   - per-source: the same with ordering: per-source, where the merge
//     does not hold one source's chunks for another's.
//   - per-source-flat: per-source, the consumer also rendering every batch
//     as canal flat JSON messages (flat.Writer.WriteEvents on GOMAXPROCS
//     goroutines, as `braid capture` prints them; a message holds up to
//     1,000 rows), what a consumer of the canal JSON gets.
//   - mariadb-dump: SnapshotDump, `mariadb-dump --single-transaction
//     --skip-lock-tables --quick shop_<i> orders > /dev/null`, one process
//     per shard, the four at once: a consistent dump without locks, as a
//     user copies a live shard (multi-row INSERTs, the --opt default).
//     The time runs from starting the four to the last one's exit.
//   - canal-dump: SnapshotCanal, one go-mysql canal (v1.14.0) per shard,
//     the four at once, with Dump.ExecutionPath mariadb-dump and the
//     shard's table, canal.Dump(): canal runs mariadb-dump with its own
//     options (--master-data, which takes FLUSH TABLES WITH READ LOCK for
//     a moment, --single-transaction --skip-opt --quick
//     --skip-extended-insert …: one INSERT a row), parses the output with
//     regular expressions and calls OnRow with each row; each canal must
//     count its shard's rows. It runs against MariaDB 10.11 as it is.
//
// After the five, braid runs once more over the orders_half tables
// (per-source-half: per-source order, so that the store, not the merge,
// is what fills). Each braid run samples the process's heap (heap.go:
// the heap in use every 10 ms, and the live heap the last GC kept),
// after a GC before it starts. Last, braid-slow-consumer runs braid in
// strict order with a consumer slower than the snapshot (snapshotSlow):
// only its peak live heap is reported, against the same bound, with the
// store full.
//
// Reported: braid-rows/s, per-source-rows/s, per-source-flat-rows/s,
// mariadb-dump-rows/s and canal-dump-rows/s (the tables' rows over each
// way's wall time, the median of the iterations), braid/mariadb-dump
// (the target: at least 1.0), braid/canal-dump and
// per-source/mariadb-dump; the peak heap in use of the per-source runs
// over the full and the half tables (the largest of the iterations: a
// bounded reader shows the same peak for both, one that accumulates
// about twice), and the peak live heap of every braid run against the
// destination's memory bound (group.MemoryBound: the store's 64 MiB
// and, per source, a 4 MiB queue, the reader's read-ahead and 4 MiB of
// chunks read ahead, 144 MiB for four; a snapshot also holds the chunk
// each source is reading, 8,192 rows, about 3 MiB here). The CPU a row takes in this process
// (braid, canal) or in the dump processes, and in the four servers, is
// logged. Targets are printed, met or MISSED, never asserted. At the
// default size an iteration takes about 12 s; `make bench` runs six.
//
// # Numbers
//
// On the 2-CPU VM (MariaDB 10.11.19; 2026-12-03 19:22 UTC, -benchtime
// 5x, medians of 5), 2,000,000 rows: mariadb-dump ×4 1,880,064 rows/s;
// braid in strict order 1,992,929 rows/s: 1.06×, met (two 3x runs
// before it: 0.95× and 1.13×); per-source 2,183,809 rows/s, 1.16×;
// per-source with flat JSON 1,747,509 rows/s, 0.93×; go-mysql canal's
// dump path 346,782 rows/s, against which braid is 5.75×.
//
// History: the first version keyed a chunk into the merge's commit-time
// order at its source's watermark, which tied to the second with the
// idle lower-index sources', so strict order delivered two chunks a
// second a source (65,343 rows/s, 0.03×); chunks now go out as soon as
// they head their source's queue. Its row callback boxed every value
// into a change.Value (2.9 s of 5.6 s in a profile); chunks are now kept
// as the server's text (change.TextRows). go-mysql's result reader
// (two copies of each row packet, a FieldValue per column printed back
// to text) then took most of braid's 0.70 µs a row (0.68×): chunks are
// read off the socket by braid (binlog.SnapshotConn), 0.57 µs (0.96×).
// Growing the chunk's buffers row by row took more than reading the
// rows: they are sized once from the table's last chunk, 0.37 µs.
//
// Now braid and mariadb-dump both use the two CPUs fully and cost about
// the same: braid 0.37 µs a row in this process and 0.54 in the servers
// (its range queries, ORDER BY id LIMIT 8,192, and SHOW MASTER STATUS
// after each), mariadb-dump 0.64 and 0.40; the ratio follows the peer's
// swing between iterations (1.75–2.37M rows/s). With 65,536-row chunks
// the servers' share drops to 0.36 µs and braid's rises to 0.49 (larger
// buffers): about 1 ms of server CPU a chunk goes to the query, not the
// rows. The flat JSON adds about 0.25 µs. canal spends 4–5 µs a row,
// most of it in regexp.
//
// Memory: the per-source run's peak heap in use was 56.7 MiB at
// 2,000,000 rows and 43.3 MiB at 1,000,000 (1.31×; a 1x run before:
// 38.9 and 59.8, 0.65×: sampled peaks vary by ±15 MiB with the GC), the
// store's peak 8–10 MiB, and the peak live heap of every braid run
// 39.1 MiB against the bound of 128 MiB (0.31×; met).
func BenchmarkSnapshot(b *testing.B) {
	f := snapshotFixture(b)
	b.Run("4-shards", func(b *testing.B) { f.bench(b) })
}

// snapshotBench is BenchmarkSnapshot's shards and what they hold.
type snapshotBench struct {
	shards []SnapshotShard
	pids   []int // the servers', for their CPU time
	rows   int   // in the four orders tables
	half   int   // in the four orders_half tables
	tool   string
}

// snapshotWays are the ways an iteration runs, in the order of the
// first iteration; snapshotHalf runs after them.
var snapshotWays = []string{"braid", "per-source", "per-source-flat", "mariadb-dump", "canal-dump"}

const snapshotHalf = "per-source-half"

// snapshotSlow is braid (strict) with a consumer that pauses
// snapshotSlowPause after each batch of up to 1,024 events: slower than
// the snapshot reads, so the store stays full and every queue behind it
// too. Only its memory is reported.
const (
	snapshotSlow      = "braid-slow-consumer"
	snapshotSlowPause = 20 * time.Millisecond
)

// snapshotRun is one way's run and the servers' CPU over it.
type snapshotRun struct {
	SnapshotResult
	server time.Duration
}

func snapshotFixture(b *testing.B) *snapshotBench {
	rows := 2_000_000
	if v, err := strconv.Atoi(os.Getenv("BRAID_BENCH_SNAPSHOT_ROWS")); err == nil && v > 0 {
		rows = v
	}
	tool := dumpTool()
	if tool == "" {
		b.Skip("bench: no mariadb-dump or mysqldump on PATH")
	}
	const n = 4
	per := rows / n
	began := time.Now()
	srvs := mysqltest.StartN(b, n, mysqltest.WithArgs("--innodb-buffer-pool-size=256M", "--innodb-log-file-size=256M",
		"--innodb-flush-log-at-trx-commit=2", "--max-binlog-size=256M"))
	f := &snapshotBench{rows: per * n, half: per / 2 * n, tool: tool}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, s := range srvs {
		f.shards = append(f.shards, SnapshotShard{Addr: s.Addr(), User: "root", Flavor: s.Flavor, DB: fmt.Sprintf("shop_%d", i)})
		pidFile := s.Query(b, "SELECT @@pid_file")[0][0]
		data, err := os.ReadFile(pidFile)
		if err != nil {
			b.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			b.Fatalf("%s: %v", pidFile, err)
		}
		f.pids = append(f.pids, pid)
		c := s.Conn(b)
		wg.Go(func() {
			db := fmt.Sprintf("shop_%d", i)
			stmts := []string{"CREATE DATABASE IF NOT EXISTS seq", "CREATE DATABASE " + db,
				"CREATE TABLE " + db + ".orders (id BIGINT PRIMARY KEY, code VARCHAR(20) NOT NULL, amount DECIMAL(10,2), note VARCHAR(60), qty INT, at DATETIME)"}
			for lo := 1; lo <= per; lo += 100_000 {
				stmts = append(stmts, fmt.Sprintf("INSERT INTO %s.orders SELECT %d + seq, CONCAT('c', LPAD(seq, 8, '0')), (seq %% 100000) / 100, "+
					"CONCAT('a note of some forty characters, r', LPAD(seq, 7, '0')), seq %% 1000, '2026-01-02 03:04:05' + INTERVAL seq SECOND "+
					"FROM seq.seq_%d_to_%d", db, i*per, lo, min(lo+100_000-1, per)))
			}
			stmts = append(stmts, "CREATE TABLE "+db+".orders_half LIKE "+db+".orders",
				fmt.Sprintf("INSERT INTO %s.orders_half SELECT * FROM %s.orders WHERE id <= %d", db, db, i*per+per/2))
			for _, q := range stmts {
				if _, err := c.Execute(q); err != nil {
					errs[i] = fmt.Errorf("server %d: %.80s: %w", i, q, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("snapshot fixture: 4 servers, %d rows in shop_<i>.orders (%d a shard), %d in orders_half, filled in %v",
		f.rows, per, f.half, time.Since(began).Round(time.Millisecond))
	return f
}

// serverCPU is the four servers' CPU time so far.
func (f *snapshotBench) serverCPU() time.Duration {
	var sum time.Duration
	for _, pid := range f.pids {
		d, _ := ProcCPU(pid)
		sum += d
	}
	return sum
}

// run runs one way and measures the servers' CPU over it.
func (f *snapshotBench) run(b *testing.B, way string) snapshotRun {
	ctx := b.Context()
	srv0 := f.serverCPU()
	var res SnapshotResult
	var err error
	switch way {
	case "braid":
		res, err = SnapshotBraid(ctx, f.shards, SnapshotConfig{Table: "orders", Want: f.rows})
	case "per-source", "per-source-flat":
		res, err = SnapshotBraid(ctx, f.shards, SnapshotConfig{Table: "orders", Want: f.rows, Ordering: "per-source", Format: way == "per-source-flat"})
	case snapshotSlow:
		res, err = SnapshotBraid(ctx, f.shards, SnapshotConfig{Table: "orders", Want: f.rows, Pause: snapshotSlowPause})
	case snapshotHalf:
		res, err = SnapshotBraid(ctx, f.shards, SnapshotConfig{Table: "orders_half", Want: f.half, Ordering: "per-source"})
	case "mariadb-dump":
		res, err = SnapshotDump(ctx, f.tool, f.shards, "orders", f.rows)
	case "canal-dump":
		res, err = SnapshotCanal(ctx, f.tool, f.shards, "orders", f.rows/len(f.shards))
	}
	if err != nil {
		b.Fatalf("%s: %v", way, err)
	}
	return snapshotRun{SnapshotResult: res, server: f.serverCPU() - srv0}
}

func (f *snapshotBench) bench(b *testing.B) {
	b.ReportMetric(0, "ns/op")
	runs := map[string][]snapshotRun{}
	var lines []string
	for i := range b.N {
		k := i % len(snapshotWays)
		order := append(slices.Clone(snapshotWays[k:]), snapshotWays[:k]...)
		line := fmt.Sprintf("iteration %d:", i+1)
		for _, way := range append(order, snapshotHalf, snapshotSlow) {
			r := f.run(b, way)
			runs[way] = append(runs[way], r)
			line += fmt.Sprintf(" %s %.0f rows/s in %v (first row %v);", way, r.RowsPerSec(),
				r.Elapsed.Round(time.Millisecond), r.FirstRow.Round(time.Millisecond))
		}
		lines = append(lines, line)
	}
	med := map[string]snapshotRun{}
	for way, rs := range runs {
		med[way] = medianRun(rs)
	}
	rate := func(way string) float64 { return med[way].RowsPerSec() }
	br, ps, fl, dump, cd := rate("braid"), rate("per-source"), rate("per-source-flat"), rate("mariadb-dump"), rate("canal-dump")
	// peak is the largest peak heap in use (live: the live heap) of a
	// way's runs.
	peak := func(way string, live bool) uint64 {
		var m uint64
		for _, r := range runs[way] {
			if live {
				m = max(m, r.PeakLive)
			} else {
				m = max(m, r.PeakHeap)
			}
		}
		return m
	}
	fullPeak, halfPeak := peak("per-source", false), peak(snapshotHalf, false)
	var live uint64
	for _, way := range []string{"braid", "per-source", "per-source-flat", snapshotHalf, snapshotSlow} {
		live = max(live, peak(way, true))
	}
	bound := float64(group.MemoryBound(len(f.shards), group.Config{Spec: &spec.Spec{Snapshot: spec.SnapshotInitial}}, stream.DefaultBytes))
	b.ReportMetric(br, "braid-rows/s")
	b.ReportMetric(ps, "per-source-rows/s")
	b.ReportMetric(fl, "per-source-flat-rows/s")
	b.ReportMetric(dump, "mariadb-dump-rows/s")
	b.ReportMetric(cd, "canal-dump-rows/s")
	b.ReportMetric(br/dump, "braid/mariadb-dump")
	b.ReportMetric(br/cd, "braid/canal-dump")
	b.ReportMetric(ps/dump, "per-source/mariadb-dump")
	b.ReportMetric(mib(peak("braid", false)), "braid-peak-heap-MiB")
	b.ReportMetric(mib(fullPeak), "per-source-peak-heap-MiB")
	b.ReportMetric(mib(halfPeak), "per-source-half-peak-heap-MiB")
	b.ReportMetric(mib(live), "live-heap-MiB")

	perRow := func(d time.Duration, rows int) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(rows) }
	b.Logf("snapshot of %d rows over 4 shards, %d runs (medians): braid (strict) %.0f rows/s, per-source %.0f, per-source with flat JSON %.0f, mariadb-dump x4 %.0f, go-mysql canal dump x4 %.0f: braid/mariadb-dump %.2f (target >= 1.0), braid/canal-dump %.2f, per-source/mariadb-dump %.2f, per-source-flat/mariadb-dump %.2f",
		f.rows, b.N, br, ps, fl, dump, cd, br/dump, br/cd, ps/dump, fl/dump)
	b.Logf("peak heap in use (per-source, the largest of the runs) %.1f MiB at %d rows, %.1f MiB at %d (ratio %.2f; an accumulating reader shows about 2), strict %.1f MiB; peak live heap of all braid runs %.1f MiB against the bound %.0f MiB (store %d MiB + 4 x (queue %d MiB + read-ahead))",
		mib(fullPeak), f.rows, mib(halfPeak), f.half, float64(fullPeak)/float64(halfPeak), mib(peak("braid", false)), mib(live), bound/(1<<20),
		stream.DefaultBytes>>20, group.DefaultQueueBytes>>20)
	cpuLine := "CPU a row (the median runs), client side / the four servers:"
	for _, way := range append(slices.Clone(snapshotWays), snapshotHalf) {
		r := med[way]
		cpuLine += fmt.Sprintf(" %s %.2f / %.2f µs;", way, perRow(r.CPU, r.Rows), perRow(r.server, r.Rows))
	}
	b.Logf("%s store peak: strict %.1f MiB, per-source %.1f MiB; flat JSON %.0f bytes a row in %d messages", cpuLine,
		mib(uint64(med["braid"].StorePeak)), mib(uint64(med["per-source"].StorePeak)),
		float64(med["per-source-flat"].Bytes)/float64(med["per-source-flat"].Rows), med["per-source-flat"].Messages)
	for _, l := range lines {
		b.Log(l)
	}

	const dumpPeer = "mariadb-dump ×4 --single-transaction → /dev/null"
	Record(Row{Section: "snapshot", Measure: "initial snapshot of 4 shards → store → Go consumer (strict), rows/s", Value: br, Unit: "rows/s",
		Peer: dumpPeer, PeerValue: dump, Target: "ratio >= 1.0", Met: Met(br >= dump)})
	Record(Row{Section: "snapshot", Measure: "initial snapshot of 4 shards → store → Go consumer (strict), rows/s", Value: br, Unit: "rows/s",
		Peer: "go-mysql canal dump path ×4 (mariadb-dump + parse, OnRow)", PeerValue: cd})
	Record(Row{Section: "snapshot", Measure: "initial snapshot of 4 shards (per-source order), rows/s", Value: ps, Unit: "rows/s",
		Peer: dumpPeer, PeerValue: dump, Target: "ratio >= 1.0", Met: Met(ps >= dump)})
	Record(Row{Section: "snapshot", Measure: "initial snapshot of 4 shards (per-source) → flat JSON, rows/s", Value: fl, Unit: "rows/s",
		Peer: dumpPeer, PeerValue: dump})
	Record(Row{Section: "snapshot", Measure: "initial snapshot: peak live heap", Value: mib(live), Unit: "MiB",
		Peer: "memory bound", PeerValue: bound / (1 << 20), Target: "ratio <= 1", Met: Met(float64(live) <= bound)})
	slow := peak(snapshotSlow, true)
	b.Logf("with a consumer slower than the snapshot (%v after each 16 events): store peak %.1f MiB, peak live heap %.1f MiB against the bound %.0f MiB: %.2fx (target <= 1: %s)",
		snapshotSlowPause, mib(uint64(med[snapshotSlow].StorePeak)), mib(slow), bound/(1<<20), float64(slow)/bound, met(bound/float64(slow), 1))
	Record(Row{Section: "snapshot", Measure: "initial snapshot, a consumer slower than it (the store full): peak live heap", Value: mib(slow), Unit: "MiB",
		Peer: "memory bound", PeerValue: bound / (1 << 20), Target: "ratio <= 1", Met: Met(float64(slow) <= bound)})
	Record(Row{Section: "snapshot", Measure: fmt.Sprintf("initial snapshot: peak heap in use, %d rows", f.rows), Value: mib(fullPeak), Unit: "MiB",
		Peer: fmt.Sprintf("the same at %d rows", f.half), PeerValue: mib(halfPeak), Target: "ratio <= 1.25 (not growing with the tables)",
		Met: Met(float64(fullPeak) <= 1.25*float64(halfPeak))})
}

// medianRun is the run of the median rate.
func medianRun(rs []snapshotRun) snapshotRun {
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b snapshotRun) int { return cmp.Compare(a.RowsPerSec(), b.RowsPerSec()) })
	return s[len(s)/2]
}
