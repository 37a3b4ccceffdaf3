package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/sink"
	mysqlsink "github.com/braid-cdc/braid/sink/mysql"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// BenchmarkSinkApply measures a MySQL sink (package sink, sink/mysql)
// applying the merged stream of four shards, beside MariaDB's own
// replication applying the same four binlogs, in one run.
//
// # What BenchmarkSinkApply measures
//
// Four MariaDB servers (mysqltest, the package's defaults: binlog in ROW
// format, full row images) each get the benchmark workload (Generate:
// BRAID_BENCH_SINK_ROUNDS rounds, default 93, of inserts, updates and
// deletes over the shop schemas' orders and order_items, and as many row
// changes in the noise schema; server i writes shop_<2i> and
// shop_<2i+1>). The four hold 502,200 selected row changes (125,550 a
// server: 37,200 order inserts, 74,400 item inserts, 9,300 order updates,
// 4,650 item deletes, in multi-row transactions of up to 1,200 selected
// rows). The same binlogs, from their first byte to the end SHOW MASTER
// STATUS gave after generation, are then applied by each of these, one at
// a time, in a fresh target each time:
//
//   - braid → 3306: a destination over the four (from their first
//     position, route shop_\d+\.(\w+) to shop.$1, origin_column _shard,
//     since the shards' keys overlap) applied by a sink of 16 workers ×
//     batches of 100 (the spec's defaults) to a database of its own on the
//     machine's MariaDB, 127.0.0.1:3306. The time runs from starting the
//     destination's pipeline (connecting to the shards, loading schemas)
//     to the sink's last row change committed (polled every 10 ms); the
//     log gives how much of it went before the first rows committed
//     (the readers' start, the target tables' CREATE, the first
//     transactions).
//   - braid → fresh server: the same, into a fresh mariadbd launched with
//     the replica's settings (TargetArgs), so that braid and the replica
//     write to identical servers.
//   - braid → fresh server, shard tables: the same, but each shard table
//     to a table of its own name (no route, no origin column, the
//     sink's DDL ignored), made before the run as Generate makes them on
//     the shards, secondary key and all: the replica's tables, so that
//     the target's CPU a row change compares the sink with the replica,
//     and the difference from braid → fresh server is the aggregation's
//     (every shard's rows in one table, keyed by _shard too: on this
//     workload, whose shards hold the same ids, order_items' order_id
//     key gets the four servers' entries interleaved and ends half full,
//     three times the replica's pages).
//   - replica serial: a fresh mariadbd (TargetArgs) as a multi-source
//     replica of the four shards (Replicate: CHANGE MASTER 's0'…'s3' TO
//     the shard, MASTER_LOG_FILE its first binlog, MASTER_LOG_POS=4,
//     MASTER_USE_GTID=no; replicate_wild_do_table=shop\_%.% on every
//     connection, so it applies the same tables braid selects and skips
//     the noise schema), slave_parallel_threads=0: one SQL thread per
//     connection, four in all. The time runs from START ALL SLAVES to the
//     last connection's Exec_Master_Log_Pos reaching its shard's end
//     (SHOW ALL SLAVES STATUS, polled every 5 ms); it includes the IO
//     threads' download of the binlogs, as braid's includes its reading.
//   - replica 4 threads: the same with slave_parallel_threads=4 (a pool
//     the four connections share), once with slave_parallel_mode
//     conservative and once optimistic. The shards' binlogs come from one
//     session each, so conservative mode finds no group commits to run
//     together and applies each connection serially; optimistic runs
//     a connection's transactions at once and retries on conflict.
//   - one row a transaction: a sink of one worker and batches of one, the
//     shape of canal's RDB adapter, into 3306 as braid → 3306; it runs for
//     at most 30 s and its rate is what it applied by then. A reference.
//
// Servers. The machine's MariaDB (10.11) on 3306 runs with
// innodb_flush_log_at_trx_commit=1, innodb_buffer_pool_size=128M,
// innodb_log_file_size=96M, innodb_doublewrite=ON, O_DIRECT, no binary
// log. The fresh servers get exactly those (TargetArgs; their SHOW GLOBAL
// VARIABLES differ from 3306's only in paths, ids, the relay log,
// binlog_format and a smaller ibtmp1), log_slave_updates OFF; their data
// directories are on the same disk as 3306's. Neither target writes a
// binary log. The replica records its position in mysql.gtid_slave_pos in
// each transaction (its crash safety, as braid's checkpoint row is
// braid's), its relay log synced every 10,000 events (the default).
//
// Each rate is selected row changes (502,200) over the time. Every target
// must end equal to the shards by row counts and sums over changed columns
// (TableSums: orders' rows, SUM(total), SUM(updated_at); items' rows,
// SUM(qty)), and the replica must hold no noise schema (b.Fatal
// otherwise). The CPU each process used over each run (this process: the
// binlog readers, the merge and the sink; the target mariadbd; the four
// shards) is logged as seconds of CPU per second, and the target's and this
// process's as microseconds a row change, to show where a run's time goes
// on the machine's two cores. Each way on a fresh server logs the
// target's commits, fsyncs and InnoDB row lock waits over the run (SHOW
// GLOBAL STATUS); BRAID_BENCH_SINK_STATUS=path writes every counter that
// moved, and the pages of each shop index and how full they are, to
// path.<way>; BRAID_BENCH_SINK_PERF=path records a perf profile of the
// target mariadbd to path.<way>; BRAID_BENCH_SINK_LOG=1 logs the
// pipeline and the sink to stderr.
//
// Each braid way logs the share of its row changes it replayed as binlog
// row events (sink/mysql's replay.go; the rest went as SQL statements).
// BRAID_BENCH_SINK_ONLY=text runs only the ways whose name holds text
// (or one of texts split by |: "serial|fresh"), and records nothing
// (BRAID_BENCH_SINK_CONNECTIONS=n gives braid's ways n connections, and
// =1,2,4 adds a way of braid → fresh server for each;
// BRAID_BENCH_SINK_WORKERS=n n workers): for looking at one way. A
// text holding "origin" adds a way run only so, braid → fresh server,
// origin tables: the shard tables way with the origin column (utf8mb4_bin,
// as the sink makes it) added to each table and leading its primary key,
// to split the aggregation's cost into the column's and the sharing of
// one table's indexes.
//
// BRAID_BENCH_SINK_CPUPROFILE=path writes a CPU profile of this process
// over each braid way to path.<way> (the pipeline and the sink, not the
// shards' generation), to see where braid's microseconds a row go.
//
// BRAID_BENCH_SINK_RUNS (default 3) repeats every way that many times in
// one process, rotating which goes first; the rates and the CPU a row
// change are the medians (one row a transaction, a reference of 30 s,
// runs once). It measures once per process, whatever -benchtime says (a
// run of every way takes about a minute and a half); later calls report
// the same numbers again.
//
// Recorded (section sink): braid → 3306 against the serial replica (target
// ratio >= 1.0), against the faster 4-thread replica (stretch >= 1.0), and
// against one row a transaction (reference); braid → fresh server against
// the serial (target ratio >= 0.8) and the 4-thread replica, like for
// like; the target's CPU a row change of braid → fresh server and of
// braid → fresh server, shard tables against the serial replica's
// (target ratio <= 1.1 each), and the shard tables' rate against the
// serial replica's (target ratio >= 0.8).
func BenchmarkSinkApply(b *testing.B) {
	b.ReportMetric(0, "ns/op")
	if r := sinkResult; r != nil {
		r.report(b)
		return
	}
	db, err := sql.Open("mysql", "root@tcp(127.0.0.1:3306)/")
	if err != nil || db.Ping() != nil {
		b.Skipf("bench: no MariaDB on 127.0.0.1:3306 to apply to: %v", err)
	}
	defer db.Close()
	rounds := 93
	if v, err := strconv.Atoi(os.Getenv("BRAID_BENCH_SINK_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	runs := 3
	if v, err := strconv.Atoi(os.Getenv("BRAID_BENCH_SINK_RUNS")); err == nil && v > 0 {
		runs = v
	}
	srvs := mysqltest.StartN(b, 4)
	ws := make([]*Workload, len(srvs))
	errs := make([]error, len(srvs))
	var wg sync.WaitGroup
	genStart := time.Now()
	for i, s := range srvs {
		wg.Go(func() {
			c := s.Conn(b)
			defer c.Close()
			ws[i], errs[i] = Generate(c, WorkloadConfig{Batches: rounds, FirstShop: 2 * i})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	f := &sinkFixture{srvs: srvs, ws: ws, db: db}
	for _, w := range ws {
		f.selected += w.Selected
	}
	for i, s := range srvs {
		f.sources = append(f.sources, ReplicaSource{Name: fmt.Sprintf("s%d", i), Addr: s.Addr(), Start: ws[i].Start, End: ws[i].End})
		if pid, err := ServerPID(filepath.Dir(s.DataDir)); err == nil {
			f.shardPIDs = append(f.shardPIDs, pid)
		}
		sdb, err := sql.Open("mysql", "root@tcp("+s.Addr()+")/")
		if err != nil {
			b.Fatal(err)
		}
		sum, err := ShopSums(b.Context(), sdb, `shop\_%`)
		sdb.Close()
		if err != nil {
			b.Fatal(err)
		}
		f.want = f.want.add(sum)
	}
	b.Logf("workload: %d selected row changes over 4 shards (%d rounds each, generated in %v); shard 0: %v",
		f.selected, rounds, time.Since(genStart).Round(time.Millisecond), ws[0])
	time.Sleep(spec.DefaultMaxClockSkew + 2*MergeHeartbeat)

	ways := []sinkWay{
		{name: "replica serial", run: func(b *testing.B) wayResult { return f.replica(b, ReplicaConfig{}) }},
		{name: "braid → 3306", run: func(b *testing.B) wayResult { return f.braid(b, "", "braid", 16, 100, 0) }},
		{name: "replica 4 threads conservative", run: func(b *testing.B) wayResult {
			return f.replica(b, ReplicaConfig{Threads: 4, Mode: "conservative"})
		}},
		{name: "braid → fresh server", run: func(b *testing.B) wayResult { return f.braid(b, "fresh", "braid", 16, 100, 0) }},
		{name: "braid → fresh server, shard tables", run: func(b *testing.B) wayResult { return f.braid(b, "shards", "braid", 16, 100, 0) }},
		{name: "replica 4 threads optimistic", run: func(b *testing.B) wayResult {
			return f.replica(b, ReplicaConfig{Threads: 4, Mode: "optimistic"})
		}},
		{name: "one row a transaction → 3306", run: func(b *testing.B) wayResult { return f.braid(b, "", "peer", 1, 1, 30*time.Second) }},
	}
	// BRAID_BENCH_SINK_CONNECTIONS=1,2,4 makes a way of braid → fresh
	// server for each, to compare them in one run.
	if list := strings.Split(os.Getenv("BRAID_BENCH_SINK_CONNECTIONS"), ","); len(list) > 1 {
		for _, c := range list {
			n, err := strconv.Atoi(c)
			if err != nil || n <= 0 {
				b.Fatalf("BRAID_BENCH_SINK_CONNECTIONS=%s: want numbers", os.Getenv("BRAID_BENCH_SINK_CONNECTIONS"))
			}
			ways = append(ways, sinkWay{name: fmt.Sprintf("braid → fresh server, %d connections", n), run: func(b *testing.B) wayResult {
				return f.braidConns(b, "fresh", "braid", 16, 100, 0, n)
			}})
		}
	}
	only := os.Getenv("BRAID_BENCH_SINK_ONLY")
	// "origin tables", only when BRAID_BENCH_SINK_ONLY names it: the shard
	// tables way with the origin column leading each table's primary key,
	// so that the aggregation's cost splits into the column's and the
	// sharing's.
	if strings.Contains(only, "origin") {
		ways = append(ways, sinkWay{name: "braid → fresh server, origin tables", run: func(b *testing.B) wayResult {
			return f.braid(b, "origin", "braid", 16, 100, 0)
		}})
	}
	// go test keeps 10 lines of a benchmark's log: one a way for one run,
	// one a run for several.
	if only != "" {
		ways = slices.DeleteFunc(ways, func(w sinkWay) bool {
			return !slices.ContainsFunc(strings.Split(only, "|"), func(o string) bool { return strings.Contains(w.name, o) })
		})
	}
	rates, targetUS := make([][]float64, len(ways)), make([][]float64, len(ways))
	for run := range runs {
		var line []string
		for k := range ways {
			i := (k + run) % len(ways)
			if run > 0 && strings.HasPrefix(ways[i].name, "one row") {
				continue // a reference, and 30 s
			}
			res := ways[i].run(b)
			tgt, self := res.perRow()
			rates[i], targetUS[i] = append(rates[i], res.rate), append(targetUS[i], tgt)
			if runs == 1 {
				b.Logf("%-31s %7.0f rows/s (%v); CPU s/s: %s; CPU a row change: target %.1f µs, this process %.1f µs%s",
					ways[i].name, res.rate, res.took.Round(time.Millisecond), res.cpu, tgt, self, res.note)
			} else {
				line = append(line, fmt.Sprintf("%s %.0f rows/s (%v; CPU s/s %.2f, %.2f, %.2f; µs a row %.1f, %.1f%s)", ways[i].name, res.rate,
					res.took.Round(time.Millisecond), res.cpu.self, res.cpu.target, res.cpu.shards, tgt, self, res.note))
			}
		}
		if runs > 1 {
			b.Logf("run %d (CPU s/s: this process, target, shards; µs a row: target, this process): %s", run+1, strings.Join(line, "; "))
		}
	}
	r := &sinkMetrics{selected: f.selected}
	for i, w := range ways {
		r.rates = append(r.rates, namedRate{w.name, median(rates[i])})
		r.targetUS = append(r.targetUS, namedRate{w.name, median(targetUS[i])})
	}
	sinkResult = r
	r.report(b)
	if only == "" {
		r.record(b)
	} else if r.rate("replica serial") > 0 && (r.rate("braid → fresh server") > 0 || r.rate("braid → fresh server, shard tables") > 0) {
		r.logTargetCPU(b)
	}
}

// sinkResult is BenchmarkSinkApply's results, measured once per process.
var sinkResult *sinkMetrics

type namedRate struct {
	name string
	rate float64
}

type sinkMetrics struct {
	selected int
	// rates and the target's CPU a row change (µs), in the order of
	// BenchmarkSinkApply's ways
	rates, targetUS []namedRate
}

func (r *sinkMetrics) rate(name string) float64 { return named(r.rates, name) }

func named(rs []namedRate, name string) float64 {
	for _, n := range rs {
		if n.name == name {
			return n.rate
		}
	}
	return 0
}

func (r *sinkMetrics) report(b *testing.B) {
	b.ReportMetric(r.rate("braid → 3306"), "rows/s")
	b.ReportMetric(r.rate("braid → fresh server"), "fresh-rows/s")
	b.ReportMetric(r.rate("braid → fresh server, shard tables"), "shard-tables-rows/s")
	b.ReportMetric(r.rate("replica serial"), "replica-serial-rows/s")
	b.ReportMetric(r.rate("replica 4 threads conservative"), "replica-4c-rows/s")
	b.ReportMetric(r.rate("replica 4 threads optimistic"), "replica-4o-rows/s")
	b.ReportMetric(r.rate("one row a transaction → 3306"), "peer-rows/s")
}

// record logs the summary and adds the rows of the results table.
func (r *sinkMetrics) record(b *testing.B) {
	braid, fresh := r.rate("braid → 3306"), r.rate("braid → fresh server")
	serial, oneRow := r.rate("replica serial"), r.rate("one row a transaction → 3306")
	parName, par := "replica 4 threads conservative", r.rate("replica 4 threads conservative")
	if o := r.rate("replica 4 threads optimistic"); o > par {
		parName, par = "replica 4 threads optimistic", o
	}
	b.Logf("%d selected row changes over 4 shards: braid → 3306 %.0f rows/s, braid → fresh server %.0f; MariaDB replica serial %.0f, %s %.0f (conservative %.0f, optimistic %.0f); one row a transaction %.0f",
		r.selected, braid, fresh, serial, parName, par, r.rate("replica 4 threads conservative"), r.rate("replica 4 threads optimistic"), oneRow)
	b.Logf("ratios: braid → 3306 / replica serial %.2fx (target >= 1.0), / %s %.2fx (stretch >= 1.0), / one row a transaction %.1fx; braid → fresh / replica serial %.2fx, / %s %.2fx",
		braid/serial, parName, braid/par, braid/oneRow, fresh/serial, parName, fresh/par)
	const m3306 = "MySQL sink, 4 shards' merged stream into MariaDB (3306), row changes/s"
	const mFresh = "MySQL sink, 4 shards' merged stream into a fresh MariaDB (the replica's settings), row changes/s"
	Record(Row{Section: "sink", Measure: m3306, Value: braid, Unit: "rows/s",
		Peer: "MariaDB replication, serial (4 sources, slave_parallel_threads=0)", PeerValue: serial, Target: "ratio >= 1.0", Met: Met(braid >= serial)})
	Record(Row{Section: "sink", Measure: m3306, Value: braid, Unit: "rows/s",
		Peer: "MariaDB replication, slave_parallel_threads=4 (" + strings.TrimPrefix(parName, "replica 4 threads ") + ")", PeerValue: par, Target: "stretch: ratio >= 1.0", Met: Met(braid >= par)})
	Record(Row{Section: "sink", Measure: m3306, Value: braid, Unit: "rows/s",
		Peer: "one row change a transaction (canal adapter's shape)", PeerValue: oneRow})
	Record(Row{Section: "sink", Measure: mFresh, Value: fresh, Unit: "rows/s",
		Peer: "MariaDB replication, serial (4 sources, slave_parallel_threads=0)", PeerValue: serial, Target: "ratio >= 0.8", Met: Met(fresh >= 0.8*serial)})
	Record(Row{Section: "sink", Measure: mFresh, Value: fresh, Unit: "rows/s",
		Peer: "MariaDB replication, slave_parallel_threads=4 (" + strings.TrimPrefix(parName, "replica 4 threads ") + ")", PeerValue: par, Target: "stretch: ratio >= 1.0", Met: Met(fresh >= par)})
	// The target's own CPU a row change: what the sink costs the server
	// it writes to, whatever else the machine runs. Into one table of
	// every shard's rows (an origin column in each key) and into the
	// shard tables as they are, as the replica writes: the difference
	// is the cost of the aggregation itself.
	serialUS, freshUS, shardsUS, shards := r.logTargetCPU(b)
	const cpuPeer = "MariaDB replication, serial, the same binlogs"
	Record(Row{Section: "sink", Measure: "MySQL sink into a fresh MariaDB: the target's CPU a row change", Value: freshUS, Unit: "µs",
		Peer: cpuPeer, PeerValue: serialUS, Target: "ratio <= 1.1", Met: Met(freshUS <= 1.1*serialUS)})
	const mShards = "MySQL sink into a fresh MariaDB, each shard table to its own (no aggregation)"
	Record(Row{Section: "sink", Measure: mShards + ": the target's CPU a row change", Value: shardsUS, Unit: "µs",
		Peer: cpuPeer, PeerValue: serialUS, Target: "ratio <= 1.1", Met: Met(shardsUS <= 1.1*serialUS)})
	Record(Row{Section: "sink", Measure: mShards + ", row changes/s", Value: shards, Unit: "rows/s",
		Peer: "MariaDB replication, serial (4 sources, slave_parallel_threads=0)", PeerValue: serial, Target: "ratio >= 0.8", Met: Met(shards >= 0.8*serial)})
}

// logTargetCPU logs the target's CPU a row change of braid → fresh
// server and of its shard tables against the serial replica's, and the
// ways' rates against the serial replica's, and returns them.
func (r *sinkMetrics) logTargetCPU(b *testing.B) (serialUS, freshUS, shardsUS, shards float64) {
	serial, fresh := r.rate("replica serial"), r.rate("braid → fresh server")
	serialUS = named(r.targetUS, "replica serial")
	shards, freshUS, shardsUS = r.rate("braid → fresh server, shard tables"), named(r.targetUS, "braid → fresh server"), named(r.targetUS, "braid → fresh server, shard tables")
	b.Logf("target CPU a row change: braid → fresh server %.2f µs (%.2fx), shard tables %.2f µs (%.2fx), replica serial %.2f µs; rows/s: braid → fresh server %.0f (%.2fx replica serial), shard tables %.0f (%.2fx), replica serial %.0f",
		freshUS, freshUS/serialUS, shardsUS, shardsUS/serialUS, serialUS, fresh, fresh/serial, shards, shards/serial, serial)
	return serialUS, freshUS, shardsUS, shards
}

// sinkFixture is BenchmarkSinkApply's shards, their workloads and what
// every target must end with.
type sinkFixture struct {
	srvs      []*mysqltest.Server
	ws        []*Workload
	sources   []ReplicaSource
	shardPIDs []int
	db        *sql.DB // 3306
	selected  int
	want      TableSums
}

type sinkWay struct {
	name string
	run  func(b *testing.B) wayResult
}

// wayResult is one way's run: its rate, its time and the CPU it took.
type wayResult struct {
	rate float64
	took time.Duration
	cpu  cpuUse
	// note says more of a braid way: how much it replayed as binlog
	// row events.
	note string
}

// perRow is the CPU a row change took in the target server and in this
// process, in microseconds.
func (r wayResult) perRow() (target, self float64) {
	rows := r.rate * r.took.Seconds()
	us := r.took.Seconds() * 1e6 / rows
	return r.cpu.target * us, r.cpu.self * us
}

// cpuUse is the CPU seconds per second of wall time of this process, the
// target server and the shards over a run.
type cpuUse struct {
	self, target, shards float64
}

func (c cpuUse) String() string {
	return fmt.Sprintf("this process %.2f, target mariadbd %.2f, shards %.2f", c.self, c.target, c.shards)
}

// cpuMeter samples the CPU time of this process, a target and the shards.
type cpuMeter struct {
	targetPID int
	shardPIDs []int
	at        time.Time
	self, tgt time.Duration
	shards    time.Duration
}

func startCPU(targetPID int, shardPIDs []int) *cpuMeter {
	m := &cpuMeter{targetPID: targetPID, shardPIDs: shardPIDs}
	m.self, m.tgt, m.shards = m.sample()
	m.at = time.Now()
	return m
}

func (m *cpuMeter) sample() (self, tgt, shards time.Duration) {
	self = selfCPU()
	if m.targetPID > 0 {
		tgt, _ = ProcCPU(m.targetPID)
	}
	for _, p := range m.shardPIDs {
		d, _ := ProcCPU(p)
		shards += d
	}
	return self, tgt, shards
}

func (m *cpuMeter) stop() cpuUse {
	self, tgt, shards := m.sample()
	wall := time.Since(m.at).Seconds()
	return cpuUse{self: (self - m.self).Seconds() / wall, target: (tgt - m.tgt).Seconds() / wall, shards: (shards - m.shards).Seconds() / wall}
}

func (s TableSums) add(o TableSums) TableSums {
	return TableSums{Orders: s.Orders + o.Orders, Items: s.Items + o.Items, OrdersCents: s.OrdersCents + o.OrdersCents,
		OrdersUpdated: s.OrdersUpdated + o.OrdersUpdated, ItemsQty: s.ItemsQty + o.ItemsQty}
}

// replica applies the shards' binlogs with MariaDB's replication into a
// fresh server, checks it and removes it.
func (f *sinkFixture) replica(b *testing.B, cfg ReplicaConfig) wayResult {
	b.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Minute)
	defer cancel()
	cfg.WildDoTable = `shop\_%.%`
	srv, err := LaunchTarget(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Remove()
	pid, _ := ServerPID(srv.Dir)
	db, err := sql.Open("mysql", "root@tcp("+srv.Addr()+")/")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	st := startStatus(ctx, db)
	stopPerf := perfRecord(b, pid, "replica-"+cfg.String())
	m := startCPU(pid, f.shardPIDs)
	took, err := Replicate(ctx, srv, f.sources, cfg)
	cpu := m.stop()
	stopPerf()
	if err != nil {
		b.Fatalf("replica %s: %v\n%s", cfg, err, srv.LogTail(20))
	}
	note := st.stop(ctx, b, "replica-"+strings.ReplaceAll(cfg.String(), " ", "-"))
	got, err := ShopSums(ctx, db, `shop\_%`)
	if err != nil {
		b.Fatal(err)
	}
	if got != f.want {
		b.Fatalf("replica %s: the target holds %+v, the shards %+v", cfg, got, f.want)
	}
	var noise int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'noise'").Scan(&noise); err != nil || noise != 0 {
		b.Fatalf("replica %s: the noise schema was replicated despite the filter (%v)", cfg, err)
	}
	return wayResult{rate: float64(f.selected) / took.Seconds(), took: took, cpu: cpu, note: note}
}

// braid applies the four workloads' merged stream to a fresh database
// with one sink of workers × batch and returns its row changes per
// second; on "fresh" it goes to a fresh server launched with TargetArgs,
// on "shards" too but each shard table to a table of its own name
// (no route, no origin column: the replica's tables), on "origin" as
// "shards" but each table with the origin column leading its primary
// key, else to 3306. limit (0: none) stops it early, and then the target is
// not checked.
func (f *sinkFixture) braid(b *testing.B, on, name string, workers, batch int, limit time.Duration) wayResult {
	return f.braidConns(b, on, name, workers, batch, limit, 0)
}

// braidConns is braid with conns connections (0: the spec's default).
func (f *sinkFixture) braidConns(b *testing.B, on, name string, workers, batch int, limit time.Duration, conns int) wayResult {
	b.Helper()
	if v, err := strconv.Atoi(os.Getenv("BRAID_BENCH_SINK_WORKERS")); err == nil && v > 0 && name == "braid" {
		workers = v // to see how the rate goes with the workers
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, db, targetPID := "127.0.0.1:3306", f.db, 0
	target := fmt.Sprintf("braid_bench_sink_%s_%d", name, os.Getpid())
	shardTables := on == "shards" || on == "origin"
	if on == "fresh" || shardTables {
		srv, err := LaunchTarget(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer srv.Remove()
		addr = srv.Addr()
		targetPID, _ = ServerPID(srv.Dir)
		if db, err = sql.Open("mysql", "root@tcp("+addr+")/"); err != nil {
			b.Fatal(err)
		}
		defer db.Close()
	} else {
		var pidFile string
		if db.QueryRow("SELECT @@pid_file").Scan(&pidFile) == nil {
			if data, err := os.ReadFile(pidFile); err == nil {
				targetPID, _ = strconv.Atoi(strings.TrimSpace(string(data)))
			}
		}
		defer func() {
			db.Exec("DROP DATABASE IF EXISTS " + target)
			db.Exec("DROP DATABASE IF EXISTS " + target + "_meta")
		}()
	}
	ds := spec.Spec{Name: "bench", Tables: SelectedTables, Route: []spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}},
		Heartbeat: spec.Duration(MergeHeartbeat)}
	if shardTables {
		ds.Route = nil // each shard table to its own, as the replica
	}
	for i, s := range f.srvs {
		ds.Sources = append(ds.Sources, spec.Source{Name: fmt.Sprintf("s%d", i), Address: s.Addr(), Start: spec.Start{Kind: spec.StartPosition, Pos: f.ws[i].Start}})
	}
	ds.Sinks = []spec.Sink{{Name: name, Type: "mysql", Address: addr, Workers: workers, Batch: batch, OriginColumn: "_shard",
		MetaDatabase: target + "_meta", Tables: []spec.SinkTable{{From: "shop.orders", To: target + ".orders"}, {From: "shop.order_items", To: target + ".order_items"}}}}
	if shardTables {
		// The shards' own tables, made as on the shards (the replica
		// gets them from the binlog's DDL): their secondary keys too;
		// on "origin", the origin column as the sink makes it, first in
		// the primary key.
		ds.Sinks[0].Tables, ds.Sinks[0].DDL = nil, "ignore"
		if on == "shards" {
			ds.Sinks[0].OriginColumn = ""
		}
		for i := range f.srvs {
			qs := workloadSchema(2*i, false)
			if on == "origin" {
				for _, shop := range []int{2 * i, 2*i + 1} {
					for _, table := range []string{"orders", "order_items"} {
						qs = append(qs, fmt.Sprintf("ALTER TABLE shop_%d.%s ADD COLUMN _shard VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '', DROP PRIMARY KEY, ADD PRIMARY KEY (_shard, id)", shop, table))
					}
				}
			}
			for _, q := range qs {
				if _, err := db.ExecContext(ctx, q); err != nil {
					b.Fatalf("bench: %s: %v", q, err)
				}
			}
		}
	}
	if v, err := strconv.Atoi(os.Getenv("BRAID_BENCH_SINK_CONNECTIONS")); err == nil && v > 0 && name == "braid" {
		ds.Sinks[0].Connections = v
	}
	if conns > 0 {
		ds.Sinks[0].Connections = conns
	}
	ds = ds.WithDefaults()
	log := slog.New(slog.DiscardHandler)
	if os.Getenv("BRAID_BENCH_SINK_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	client := sink.ClientID(name)
	var st *statusMeter
	stopPerf := func() {}
	if on != "" { // 3306's counters hold whatever else runs on it
		st = startStatus(ctx, db)
		stopPerf = perfRecord(b, targetPID, name+"-"+on)
	}
	m := startCPU(targetPID, f.shardPIDs)
	if path := os.Getenv("BRAID_BENCH_SINK_CPUPROFILE"); path != "" {
		stop, err := profileCPU(path + "." + name + "-" + on)
		if err != nil {
			b.Fatal(err)
		}
		defer stop()
	}
	began := time.Now()
	log.Info("bench: pipeline starts")
	p, err := stream.StartPipeline(ctx, stream.PipelineConfig{Spec: &ds, Clients: map[string]*group.Cursor{client: nil}, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	log.Info("bench: pipeline started")
	t, err := mysqlsink.Open(ctx, ds.Sinks[0], "shop", log)
	if err != nil {
		b.Fatal(err)
	}
	defer t.Close()
	log.Info("bench: sink open")
	// As sink/sinkrun starts it: a worker's share of a store batch is one
	// transaction, the spec's batch the rows of a statement; the peer of
	// one row a transaction caps the transaction too.
	var applier sink.Target = t
	if batch == 1 {
		applier = oneChangeTxns{t}
	}
	r := &sink.Runner{Name: name, Dest: ds.Name, Client: client, Store: p.Store, Sink: sink.NewKeyed(ds.Sinks[0], applier), Logger: log}
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	want := uint64(f.selected)
	var last uint64
	var first time.Duration // till the first rows committed: the start
	lastAt := began
	for {
		time.Sleep(10 * time.Millisecond)
		applied := t.Stats().Applied
		if applied > 0 && first == 0 {
			first = time.Since(began)
			log.Info("bench: first rows committed", "applied", applied)
		}
		if applied >= want {
			break
		}
		if applied != last {
			last, lastAt = applied, time.Now()
		} else if time.Since(lastAt) > time.Minute {
			_, lastErr := r.Applied()
			b.Fatalf("bench: sink %s → %s applied %d of %d row changes and nothing more for a minute (last error %q)", name, addr, applied, want, lastErr)
		}
		if limit > 0 && time.Since(began) > limit {
			took := time.Since(began)
			return wayResult{rate: float64(applied) / took.Seconds(), took: took, cpu: m.stop()}
		}
		if time.Since(began) > 10*time.Minute {
			_, lastErr := r.Applied()
			b.Fatalf("bench: sink %s applied %d of %d row changes in 10 minutes (last error %q)", name, applied, want, lastErr)
		}
	}
	took := time.Since(began)
	cpu := m.stop()
	stopPerf()
	counts := st.stop(ctx, b, name+"-"+on)
	like := strings.ReplaceAll(target, "_", `\_`)
	if shardTables {
		like = `shop\_%`
	}
	got, err := ShopSums(ctx, db, like)
	if err != nil {
		b.Fatal(err)
	}
	if got != f.want {
		b.Fatalf("braid %s → %s: the target holds %+v, the shards %+v", name, addr, got, f.want)
	}
	stats := t.Stats()
	return wayResult{rate: float64(want) / took.Seconds(), took: took, cpu: cpu,
		note: fmt.Sprintf("; replayed %.0f%%; first rows committed after %v%s", 100*float64(stats.Replayed)/float64(max(stats.Applied, 1)), first.Round(time.Millisecond), counts)}
}

// perfRecord, with BRAID_BENCH_SINK_PERF=path, records a perf profile
// (call graphs) of the target server pid into path.<way> until stop is
// called, to see where a target's microseconds a row go.
func perfRecord(b *testing.B, pid int, way string) (stop func()) {
	path := os.Getenv("BRAID_BENCH_SINK_PERF")
	if path == "" || pid == 0 {
		return func() {}
	}
	cmd := exec.Command("perf", "record", "-g", "-q", "-p", strconv.Itoa(pid), "-o", path+"."+strings.ReplaceAll(way, " ", "-"))
	if err := cmd.Start(); err != nil {
		b.Log(err)
		return func() {}
	}
	return func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}
}

// statusMeter takes the differences of a target's SHOW GLOBAL STATUS
// over a run (a nil one takes none).
type statusMeter struct {
	db     *sql.DB
	before map[string]int64
}

func startStatus(ctx context.Context, db *sql.DB) *statusMeter {
	s, err := globalStatus(ctx, db)
	if err != nil {
		return nil
	}
	return &statusMeter{db: db, before: s}
}

// stop returns the commits, the redo log's syncs and InnoDB's row lock
// waits of the run, for a way's note, and with BRAID_BENCH_SINK_STATUS=
// path writes every counter that moved to path.<way>.
func (m *statusMeter) stop(ctx context.Context, b *testing.B, way string) string {
	if m == nil {
		return ""
	}
	after, err := globalStatus(ctx, m.db)
	if err != nil {
		return ""
	}
	d := func(k string) int64 { return after[k] - m.before[k] }
	if path := os.Getenv("BRAID_BENCH_SINK_STATUS"); path != "" {
		var lines []string
		for k, v := range after {
			if v != m.before[k] {
				lines = append(lines, fmt.Sprintf("%s %d", k, v-m.before[k]))
			}
		}
		slices.Sort(lines)
		// The pages of each index (all in the buffer pool of a fresh
		// server) and how full they are.
		if rows, err := m.db.QueryContext(ctx, "SELECT TABLE_NAME, INDEX_NAME, COUNT(*), SUM(NUMBER_RECORDS), SUM(DATA_SIZE) / COUNT(*) / 16384 FROM information_schema.INNODB_BUFFER_PAGE WHERE TABLE_NAME LIKE '%shop%' OR TABLE_NAME LIKE '%braid%' GROUP BY TABLE_NAME, INDEX_NAME ORDER BY TABLE_NAME, INDEX_NAME"); err == nil {
			for rows.Next() {
				var table, index string
				var pages, records int64
				var fill float64
				if rows.Scan(&table, &index, &pages, &records, &fill) == nil {
					lines = append(lines, fmt.Sprintf("pages %s %s: %d pages, %d records, %.2f full", table, index, pages, records, fill))
				}
			}
			rows.Close()
		}
		if err := os.WriteFile(path+"."+strings.ReplaceAll(way, " ", "-"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			b.Log(err)
		}
	}
	return fmt.Sprintf("; target: %d commits, %d fsyncs, %d row lock waits", d("Handler_commit"), d("Innodb_data_fsyncs"), d("Innodb_row_lock_waits"))
}

// globalStatus is SHOW GLOBAL STATUS's numeric counters.
func globalStatus(ctx context.Context, db *sql.DB) (map[string]int64, error) {
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, rows.Err()
}

// profileCPU starts a CPU profile of this process into path; stop ends it.
func profileCPU(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// oneChangeTxns applies each change in a transaction of its own: the
// peer of a replica applying one row a transaction.
type oneChangeTxns struct{ *mysqlsink.Target }

func (o oneChangeTxns) Apply(ctx context.Context, worker int, changes []sink.Change) error {
	for i := range changes {
		if err := o.Target.Apply(ctx, worker, changes[i:i+1]); err != nil {
			return err
		}
	}
	return nil
}
