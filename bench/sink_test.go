package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
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
// on the machine's two cores.
//
// Each braid way logs the share of its row changes it replayed as binlog
// row events (sink/mysql's replay.go; the rest went as SQL statements).
// BRAID_BENCH_SINK_ONLY=text runs only the ways whose name holds text,
// and records nothing (BRAID_BENCH_SINK_CONNECTIONS=n gives braid's ways
// n connections, BRAID_BENCH_SINK_WORKERS=n n
// workers): for looking at one way.
//
// BRAID_BENCH_SINK_CPUPROFILE=path writes a CPU profile of this process
// over each braid way to path.<way> (the pipeline and the sink, not the
// shards' generation), to see where braid's microseconds a row go.
//
// BRAID_BENCH_SINK_RUNS (default 1) repeats every way that many times in
// one process, rotating which goes first; the rates are the medians. It
// measures once per process, whatever -benchtime says (a run of every way
// takes about two minutes); later calls report the same numbers again.
//
// Recorded (section sink): braid → 3306 against the serial replica (target
// ratio >= 1.0), against the faster 4-thread replica (stretch >= 1.0), and
// against one row a transaction (reference); braid → fresh server against
// the serial and the 4-thread replica, like for like.
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
	runs := 1
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
		{name: "replica 4 threads optimistic", run: func(b *testing.B) wayResult {
			return f.replica(b, ReplicaConfig{Threads: 4, Mode: "optimistic"})
		}},
		{name: "one row a transaction → 3306", run: func(b *testing.B) wayResult { return f.braid(b, "", "peer", 1, 1, 30*time.Second) }},
	}
	// go test keeps 10 lines of a benchmark's log: one a way for one run,
	// one a run for several.
	only := os.Getenv("BRAID_BENCH_SINK_ONLY")
	if only != "" {
		ways = slices.DeleteFunc(ways, func(w sinkWay) bool { return !strings.Contains(w.name, only) })
	}
	rates := make([][]float64, len(ways))
	for run := range runs {
		var line []string
		for k := range ways {
			i := (k + run) % len(ways)
			res := ways[i].run(b)
			rates[i] = append(rates[i], res.rate)
			tgt, self := res.perRow()
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
	}
	sinkResult = r
	r.report(b)
	if only == "" {
		r.record(b)
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
	rates    []namedRate // in the order of BenchmarkSinkApply's ways
}

func (r *sinkMetrics) rate(name string) float64 {
	for _, n := range r.rates {
		if n.name == name {
			return n.rate
		}
	}
	return 0
}

func (r *sinkMetrics) report(b *testing.B) {
	b.ReportMetric(r.rate("braid → 3306"), "rows/s")
	b.ReportMetric(r.rate("braid → fresh server"), "fresh-rows/s")
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
		Peer: "MariaDB replication, serial (4 sources, slave_parallel_threads=0)", PeerValue: serial, Target: "ratio >= 1.0", Met: Met(fresh >= serial)})
	Record(Row{Section: "sink", Measure: mFresh, Value: fresh, Unit: "rows/s",
		Peer: "MariaDB replication, slave_parallel_threads=4 (" + strings.TrimPrefix(parName, "replica 4 threads ") + ")", PeerValue: par, Target: "stretch: ratio >= 1.0", Met: Met(fresh >= par)})
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
	m := startCPU(pid, f.shardPIDs)
	took, err := Replicate(ctx, srv, f.sources, cfg)
	cpu := m.stop()
	if err != nil {
		b.Fatalf("replica %s: %v\n%s", cfg, err, srv.LogTail(20))
	}
	db, err := sql.Open("mysql", "root@tcp("+srv.Addr()+")/")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
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
	return wayResult{rate: float64(f.selected) / took.Seconds(), took: took, cpu: cpu}
}

// braid applies the four workloads' merged stream to a fresh database
// with one sink of workers × batch and returns its row changes per
// second; on "fresh" it goes to a fresh server launched with TargetArgs,
// else to 3306. limit (0: none) stops it early, and then the target is
// not checked.
func (f *sinkFixture) braid(b *testing.B, on, name string, workers, batch int, limit time.Duration) wayResult {
	b.Helper()
	if v, err := strconv.Atoi(os.Getenv("BRAID_BENCH_SINK_WORKERS")); err == nil && v > 0 && name == "braid" {
		workers = v // to see how the rate goes with the workers
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, db, targetPID := "127.0.0.1:3306", f.db, 0
	target := fmt.Sprintf("braid_bench_sink_%s_%d", name, os.Getpid())
	if on == "fresh" {
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
	for i, s := range f.srvs {
		ds.Sources = append(ds.Sources, spec.Source{Name: fmt.Sprintf("s%d", i), Address: s.Addr(), Start: spec.Start{Kind: spec.StartPosition, Pos: f.ws[i].Start}})
	}
	ds.Sinks = []spec.Sink{{Name: name, Type: "mysql", Address: addr, Workers: workers, Batch: batch, OriginColumn: "_shard",
		MetaDatabase: target + "_meta", Tables: []spec.SinkTable{{From: "shop.orders", To: target + ".orders"}, {From: "shop.order_items", To: target + ".order_items"}}}}
	if v, err := strconv.Atoi(os.Getenv("BRAID_BENCH_SINK_CONNECTIONS")); err == nil && v > 0 && name == "braid" {
		ds.Sinks[0].Connections = v
	}
	ds = ds.WithDefaults()
	log := slog.New(slog.DiscardHandler)
	client := sink.ClientID(name)
	m := startCPU(targetPID, f.shardPIDs)
	if path := os.Getenv("BRAID_BENCH_SINK_CPUPROFILE"); path != "" {
		stop, err := profileCPU(path + "." + name + "-" + on)
		if err != nil {
			b.Fatal(err)
		}
		defer stop()
	}
	began := time.Now()
	p, err := stream.StartPipeline(ctx, stream.PipelineConfig{Spec: &ds, Clients: map[string]*group.Cursor{client: nil}, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	t, err := mysqlsink.Open(ctx, ds.Sinks[0], "shop", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer t.Close()
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
	got, err := ShopSums(ctx, db, strings.ReplaceAll(target, "_", `\_`))
	if err != nil {
		b.Fatal(err)
	}
	if got != f.want {
		b.Fatalf("braid %s → %s: the target holds %+v, the shards %+v", name, addr, got, f.want)
	}
	st := t.Stats()
	return wayResult{rate: float64(want) / took.Seconds(), took: took, cpu: cpu,
		note: fmt.Sprintf("; replayed %.0f%%; first rows committed after %v", 100*float64(st.Replayed)/float64(max(st.Applied, 1)), first.Round(time.Millisecond))}
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
