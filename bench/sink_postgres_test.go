package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/sink/sinkrun"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// pgAddr is the machine's PostgreSQL, the target of BenchmarkPostgresSink.
const pgAddr = "127.0.0.1:5432"

// BenchmarkPostgresSink measures the postgres sink (sink/postgres)
// applying the merged stream of four shards, beside PostgreSQL's own bulk
// path loading the same rows (a plain pgx CopyFrom) and beside the MySQL
// sink applying the same stream, in one run.
//
// # What BenchmarkPostgresSink measures
//
// Four MariaDB servers get BenchmarkSinkApply's workload (Generate,
// BRAID_BENCH_SINK_ROUNDS rounds, default 93: 502,200 selected row
// changes of inserts, updates and deletes over the shop schemas' orders
// and order_items). Each run, in a fresh database of the machine's
// PostgreSQL:
//
//   - braid → PostgreSQL: a destination over the four (from their first
//     position, route shop_\d+\.(\w+) to shop.$1, origin_column _shard)
//     applied by a postgres sink of 16 workers × batches of 100 (the
//     spec's defaults), exactly once, as braid runs it (sinkrun.Open); the
//     stream's CREATE TABLEs make the tables. The time runs from starting
//     the destination's pipeline (connecting to the shards, loading
//     schemas) to the sink's last row change committed (polled every
//     10 ms); the rate is row changes over it. The target must end equal
//     to the shards (row counts and sums, as TableSums).
//   - plain COPY: the rows the stream inserts (the INSERTs' after-images,
//     with their _shard, read from the stream once per process and
//     converted beforehand to the Go values pgx encodes for each column's
//     type), loaded by pgx CopyFrom (binary COPY), one call a table, into
//     empty tables made LIKE braid's (INCLUDING ALL: the same keys), on
//     one connection. The time runs from the first call to the last one's
//     end; the rate is rows over it. It runs after braid's way in each
//     run (its tables are made from braid's).
//   - MySQL sink: BenchmarkSinkApply's braid → 3306 (the MySQL sink into
//     the machine's MariaDB) over the same shards, for the ratio the issue
//     that built the postgres sink compared against; skipped without
//     MariaDB on 3306.
//
// BRAID_BENCH_PG_RUNS (default 1) repeats the three that many times in one
// process; the rates are the medians. BRAID_BENCH_PG_MYSQL=off leaves the
// MySQL sink out. Each run logs the CPU a row change braid's process and
// the server's backends spent, and the CPU a row the COPY's backend did. It measures once per process,
// whatever -benchtime says. Recorded (section sink): braid → PostgreSQL
// against plain COPY (target ratio >= 0.5, issue 44) and against the
// MySQL sink (a reference).
func BenchmarkPostgresSink(b *testing.B) {
	b.ReportMetric(0, "ns/op")
	if r := pgSinkResult; r != nil {
		r.report(b)
		return
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, "postgres://postgres@"+pgAddr+"/postgres")
	if err != nil {
		b.Skipf("bench: no PostgreSQL on %s to apply to: %v", pgAddr, err)
	}
	defer admin.Close(ctx)
	rounds := 93
	if v, err := strconv.Atoi(os.Getenv("BRAID_BENCH_SINK_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	runs := 1
	if v, err := strconv.Atoi(os.Getenv("BRAID_BENCH_PG_RUNS")); err == nil && v > 0 {
		runs = v
	}
	f := newPgFixture(b, rounds)
	f.admin = admin
	var braid, peer, mysql []float64
	for run := range runs {
		br, pr := f.braidAndCopy(b, run)
		braid, peer = append(braid, br), append(peer, pr)
		line := fmt.Sprintf("run %d: braid → PostgreSQL %.0f rows/s, plain COPY %.0f rows/s (%.2fx)", run+1, br, pr, br/pr)
		if f.db != nil && os.Getenv("BRAID_BENCH_PG_MYSQL") != "off" {
			my := f.braid(b, "", "braid", 16, 100, 0).rate
			mysql = append(mysql, my)
			line += fmt.Sprintf(", MySQL sink → 3306 %.0f rows/s (%.2fx)", my, br/my)
		}
		b.Log(line)
	}
	r := &pgSinkMetrics{selected: f.selected, copied: len(f.inserts.rows), braid: median(braid), peer: median(peer)}
	if len(mysql) > 0 {
		r.mysql = median(mysql)
	}
	pgSinkResult = r
	r.report(b)
	r.record(b)
}

// pgSinkResult is BenchmarkPostgresSink's results, measured once per process.
var pgSinkResult *pgSinkMetrics

type pgSinkMetrics struct {
	selected, copied   int
	braid, peer, mysql float64 // rows/s; mysql 0: not measured
}

func (r *pgSinkMetrics) report(b *testing.B) {
	b.ReportMetric(r.braid, "rows/s")
	b.ReportMetric(r.peer, "copy-rows/s")
	b.ReportMetric(r.braid/r.peer, "x-copy")
	if r.mysql > 0 {
		b.ReportMetric(r.braid/r.mysql, "x-mysql-sink")
	}
}

func (r *pgSinkMetrics) record(b *testing.B) {
	b.Logf("%d selected row changes over 4 shards: braid → PostgreSQL %.0f rows/s; plain COPY of the %d rows inserted %.0f rows/s: %.2fx (target >= 0.5)",
		r.selected, r.braid, r.copied, r.peer, r.braid/r.peer)
	const m = "PostgreSQL sink, 4 shards' merged stream into PostgreSQL, row changes/s"
	Record(Row{Section: "sink", Measure: m, Value: r.braid, Unit: "rows/s",
		Peer: "plain pgx CopyFrom of the stream's inserted rows (PostgreSQL's bulk path), rows/s", PeerValue: r.peer, Target: "ratio >= 0.5", Met: Met(r.braid >= 0.5*r.peer)})
	if r.mysql > 0 {
		b.Logf("braid → PostgreSQL / MySQL sink → 3306: %.2fx", r.braid/r.mysql)
		Record(Row{Section: "sink", Measure: m, Value: r.braid, Unit: "rows/s",
			Peer: "MySQL sink, the same stream into MariaDB (3306)", PeerValue: r.mysql})
	}
}

// pgFixture is BenchmarkSinkApply's fixture with what the PostgreSQL
// ways add: the stream's inserted rows for the COPY peer.
type pgFixture struct {
	*sinkFixture
	admin   *pgx.Conn
	inserts pgRows
}

// pgRows are the rows the stream inserts, by logical table ("shop.orders"),
// each with its origin ("s0/shop_0.orders") first, as braid's sink writes
// the _shard column; names are the columns, lower case, _shard first.
type pgRows struct {
	names  map[string][]string
	rows   []pgRow
	values map[string][][]any // converted for CopyFrom (pgFixture.convert)
}

type pgRow struct {
	table  string
	values []change.Value
}

// newPgFixture generates the workload on four shards (as
// BenchmarkSinkApply) and reads the rows its stream inserts.
func newPgFixture(b *testing.B, rounds int) *pgFixture {
	srvs := mysqltest.StartN(b, 4)
	ws := make([]*Workload, len(srvs))
	errs := make([]error, len(srvs))
	var wg sync.WaitGroup
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
	f := &pgFixture{sinkFixture: &sinkFixture{srvs: srvs, ws: ws}}
	for i, s := range srvs {
		f.selected += ws[i].Selected
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
	if db, err := sql.Open("mysql", "root@tcp(127.0.0.1:3306)/"); err == nil && db.Ping() == nil {
		f.db = db
		b.Cleanup(func() { db.Close() })
	} else {
		b.Logf("bench: no MariaDB on 127.0.0.1:3306: the MySQL sink is not measured beside")
	}
	time.Sleep(spec.DefaultMaxClockSkew + 2*MergeHeartbeat)
	f.inserts = f.readInserts(b)
	b.Logf("workload: %d selected row changes over 4 shards (%d rounds each), %d of them INSERTs", f.selected, rounds, len(f.inserts.rows))
	return f
}

// spec is the destination over the four shards with sink sk.
func (f *pgFixture) spec(sk spec.Sink) *spec.Spec {
	ds := spec.Spec{Name: "bench", Tables: SelectedTables, Route: []spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}},
		Heartbeat: spec.Duration(MergeHeartbeat)}
	for i, s := range f.srvs {
		ds.Sources = append(ds.Sources, spec.Source{Name: fmt.Sprintf("s%d", i), Address: s.Addr(), Start: spec.Start{Kind: spec.StartPosition, Pos: f.ws[i].Start}})
	}
	if sk.Name != "" {
		ds.Sinks = []spec.Sink{sk}
	}
	ds = ds.WithDefaults()
	return &ds
}

// readInserts reads the merged stream once and keeps its INSERTs' rows.
func (f *pgFixture) readInserts(b *testing.B) pgRows {
	ds := f.spec(spec.Sink{})
	p, err := stream.StartPipeline(b.Context(), stream.PipelineConfig{Spec: ds, Clients: map[string]*group.Cursor{"bench": nil}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	out := pgRows{names: map[string][]string{}}
	deadline := time.Now().Add(5 * time.Minute)
	for seen := 0; seen < f.selected; {
		if time.Now().After(deadline) {
			b.Fatalf("bench: the pipeline gave %d row changes of %d", seen, f.selected)
		}
		batch, err := p.Store.Get(b.Context(), "bench", 1024, time.Second)
		if err != nil {
			b.Fatal(err)
		}
		if len(batch.Events) == 0 {
			continue // none within the timeout: no batch to ack
		}
		for _, ev := range batch.Events {
			if ev.Type != change.EventRows {
				continue
			}
			for i := range ev.Rows {
				rc := &ev.Rows[i]
				seen++
				if rc.Kind != change.Insert {
					continue
				}
				ls, lt := rc.Table.Logical()
				table := ls + "." + lt
				if _, ok := out.names[table]; !ok {
					names := []string{"_shard"}
					for _, c := range rc.Table.Columns {
						names = append(names, strings.ToLower(c.Name))
					}
					out.names[table] = names
				}
				out.rows = append(out.rows, pgRow{table: table, values: append([]change.Value{ev.Source + "/" + rc.Table.Schema + "." + rc.Table.Name}, rc.After()...)})
			}
		}
		if err := p.Store.Ack("bench", batch.ID); err != nil {
			b.Fatal(err)
		}
	}
	return out
}

// braidAndCopy runs braid's postgres sink and then the COPY peer into a
// fresh database, and returns their rates (rows/s).
func (f *pgFixture) braidAndCopy(b *testing.B, run int) (braid, peer float64) {
	ctx := context.Background()
	name := fmt.Sprintf("braid_bench_pg_%d_%d_%d", os.Getpid(), run, rand.IntN(1e6))
	if _, err := f.admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		b.Fatal(err)
	}
	defer f.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	braid = f.braidPostgres(b, name)
	conn, err := pgx.Connect(ctx, "postgres://postgres@"+pgAddr+"/"+name)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	return braid, f.copyPeer(b, conn)
}

// braidPostgres applies the stream with a postgres sink into database
// name and returns its rate.
func (f *pgFixture) braidPostgres(b *testing.B, name string) float64 {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sk := spec.Sink{Name: "pg", Type: "postgres", Address: pgAddr, User: "postgres", Database: name, OriginColumn: "_shard"}
	ds := f.spec(sk)
	sk = ds.Sinks[0]
	log := slog.New(slog.DiscardHandler)
	began := time.Now()
	p, err := stream.StartPipeline(ctx, stream.PipelineConfig{Spec: ds, Clients: map[string]*group.Cursor{sink.ClientID(sk.Name): nil}, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	s, err := sinkrun.Open(ctx, sk, ds.Name, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	r := sinkrun.NewRunner(ds, sk, s, p.Store, nil, log)
	stop := sinkrun.Go(ctx, r)
	defer stop()
	want := uint64(f.selected)
	self0 := selfCPU()
	for s.Stats().Applied < want {
		time.Sleep(10 * time.Millisecond)
		if time.Since(began) > 10*time.Minute {
			_, lastErr := r.Applied()
			b.Fatalf("bench: the postgres sink applied %d of %d row changes in 10 minutes (last error %q)", s.Stats().Applied, want, lastErr)
		}
	}
	took := time.Since(began)
	self := selfCPU() - self0
	conn, err := pgx.Connect(ctx, "postgres://postgres@"+pgAddr+"/"+name)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	// The sink's connections are the database's other backends, open
	// since the sink's start: their CPU is the server's work for it.
	server, err := backendsCPU(ctx, conn, "datname = $1 AND pid <> pg_backend_pid()", name)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("braid → PostgreSQL: %v, CPU a row change: the server's backends %.2f µs, braid's process %.2f µs",
		took.Round(time.Millisecond), perRow(server, f.selected), perRow(self, f.selected))
	if got, err := pgShopSums(ctx, conn); err != nil || got != f.want {
		b.Fatalf("bench: braid → PostgreSQL: the target holds %+v (%v), the shards %+v", got, err, f.want)
	}
	return float64(want) / took.Seconds()
}

// pgShopSums are ShopSums of PostgreSQL's shop tables.
func pgShopSums(ctx context.Context, c *pgx.Conn) (TableSums, error) {
	var s TableSums
	err := c.QueryRow(ctx, "SELECT count(*), coalesce(sum(total * 100), 0)::bigint, coalesce(sum(floor(extract(epoch FROM updated_at))), 0)::bigint FROM shop.orders").
		Scan(&s.Orders, &s.OrdersCents, &s.OrdersUpdated)
	if err != nil {
		return s, err
	}
	err = c.QueryRow(ctx, "SELECT count(*), coalesce(sum(qty), 0)::bigint FROM shop.order_items").Scan(&s.Items, &s.ItemsQty)
	return s, err
}

// copyPeer loads the stream's inserted rows with pgx CopyFrom into tables
// made LIKE braid's, schema peer, and returns its rate.
func (f *pgFixture) copyPeer(b *testing.B, c *pgx.Conn) float64 {
	ctx := context.Background()
	if _, err := c.Exec(ctx, "CREATE SCHEMA peer"); err != nil {
		b.Fatal(err)
	}
	tables := make([]string, 0, len(f.inserts.names))
	for table := range f.inserts.names {
		_, t, _ := strings.Cut(table, ".")
		if _, err := c.Exec(ctx, fmt.Sprintf("CREATE TABLE peer.%s (LIKE shop.%s INCLUDING ALL)", t, t)); err != nil {
			b.Fatal(err)
		}
		tables = append(tables, table)
	}
	if f.inserts.values == nil {
		f.inserts.values = f.convert(b, c)
	}
	var pid int
	if err := c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		b.Fatal(err)
	}
	cpu0, err := ProcCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	began := time.Now()
	var copied int64
	for _, table := range tables {
		_, t, _ := strings.Cut(table, ".")
		n, err := c.CopyFrom(ctx, pgx.Identifier{"peer", t}, f.inserts.names[table], pgx.CopyFromRows(f.inserts.values[table]))
		if err != nil {
			b.Fatalf("bench: COPY into peer.%s: %v", t, err)
		}
		copied += n
	}
	took := time.Since(began)
	if copied != int64(len(f.inserts.rows)) {
		b.Fatalf("bench: COPY loaded %d rows of %d", copied, len(f.inserts.rows))
	}
	if cpu1, err := ProcCPU(pid); err == nil {
		b.Logf("plain COPY: %v, CPU a row: the server's backend %.2f µs", took.Round(time.Millisecond), perRow(cpu1-cpu0, int(copied)))
	}
	return float64(copied) / took.Seconds()
}

// convert turns the inserted rows' values into what pgx's CopyFrom
// encodes for the peer tables' columns without parsing text: a
// string (decimal, date and time text) parsed by the column type's codec
// (pgtype.Numeric, time.Time), an unsigned integer as an int64, the rest
// as it is.
func (f *pgFixture) convert(b *testing.B, c *pgx.Conn) map[string][][]any {
	ctx := context.Background()
	m := c.TypeMap()
	oids := map[string][]uint32{}
	for table, names := range f.inserts.names {
		_, t, _ := strings.Cut(table, ".")
		sd, err := c.Prepare(ctx, "", "SELECT "+strings.Join(names, ", ")+" FROM peer."+t)
		if err != nil {
			b.Fatal(err)
		}
		for _, fd := range sd.Fields {
			oids[table] = append(oids[table], fd.DataTypeOID)
		}
	}
	out := map[string][][]any{}
	for _, r := range f.inserts.rows {
		vals := make([]any, len(r.values))
		for i, v := range r.values {
			switch x := v.(type) {
			case string:
				oid := oids[r.table][i]
				typ, ok := m.TypeForOID(oid)
				if !ok {
					b.Fatalf("bench: no pgx type for OID %d", oid)
				}
				dv, err := typ.Codec.DecodeValue(m, oid, pgtype.TextFormatCode, []byte(x))
				if err != nil {
					b.Fatalf("bench: %s column %d: %q: %v", r.table, i, x, err)
				}
				vals[i] = dv
			case uint64:
				if x > math.MaxInt64 {
					b.Fatalf("bench: %s column %d: an unsigned integer past int64", r.table, i)
				}
				vals[i] = int64(x)
			default:
				vals[i] = v
			}
		}
		out[r.table] = append(out[r.table], vals)
	}
	return out
}

// backendsCPU is the CPU the PostgreSQL backends pg_stat_activity's rows
// matching where (with args) have used, read from /proc (the server runs
// on this machine).
func backendsCPU(ctx context.Context, c *pgx.Conn, where string, args ...any) (time.Duration, error) {
	rows, err := c.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE "+where, args...)
	if err != nil {
		return 0, err
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	for _, p := range pids {
		d, err := ProcCPU(int(p))
		if err != nil {
			return 0, err
		}
		sum += d
	}
	return sum, nil
}

// perRow is d in microseconds a row of n.
func perRow(d time.Duration, n int) float64 {
	return float64(d.Microseconds()) / float64(n)
}
