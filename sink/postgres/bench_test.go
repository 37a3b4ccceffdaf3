package postgres_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/braid-cdc/braid/bench"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/sink/sinkrun"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// BenchmarkApply measures the postgres sink applying the merged stream of
// four shards written by bench.Generate (BRAID_BENCH_SINK_ROUNDS rounds,
// default 93: 502,200 selected row changes, mixed inserts, updates and
// deletes over orders and order_items, as bench's BenchmarkSinkApply),
// routed shop_\d+\.(\w+) → shop.$1 with origin_column _shard, by a sink of
// 16 workers × 100, into a database of its own on the machine's
// PostgreSQL: the stream's CREATE TABLEs make the tables. The sink runs
// as braid runs it (sinkrun.Open): a worker applies what it was handed
// since its last transaction in one. The time runs
// from starting the pipeline to the last row change committed; the rate
// is row changes over it (rows/s). The MySQL sink then applies the same
// stream into a database of its own on the machine's MariaDB (3306), as
// bench's "braid → 3306", for the ratio (x-mysql-sink). It measures once,
// whatever -benchtime.
func BenchmarkApply(b *testing.B) {
	b.ReportMetric(0, "ns/op")
	if benchRate > 0 {
		b.ReportMetric(benchRate, "rows/s")
		return
	}
	rounds := 93
	if v, err := strconv.Atoi(os.Getenv("BRAID_BENCH_SINK_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	_, name := targetDB(b)
	srvs := mysqltest.StartN(b, 4)
	ws := make([]*bench.Workload, len(srvs))
	errs := make([]error, len(srvs))
	var wg sync.WaitGroup
	for i, s := range srvs {
		wg.Go(func() {
			c := s.Conn(b)
			defer c.Close()
			ws[i], errs[i] = bench.Generate(c, bench.WorkloadConfig{Batches: rounds, FirstShop: 2 * i})
		})
	}
	wg.Wait()
	selected := 0
	for i, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
		selected += ws[i].Selected
	}
	time.Sleep(spec.DefaultMaxClockSkew + 2*bench.MergeHeartbeat)
	mdb, err := sql.Open("mysql", "root@tcp(127.0.0.1:3306)/")
	if err != nil {
		b.Fatal(err)
	}
	defer mdb.Close()
	mname := fmt.Sprintf("braid_bench_pg_%d", os.Getpid())
	defer func() {
		mdb.Exec("DROP DATABASE IF EXISTS " + mname)
		mdb.Exec("DROP DATABASE IF EXISTS " + mname + "_meta")
	}()
	pgSink := spec.Sink{Name: "pg", Type: "postgres", Address: targetAddr, Database: name, OriginColumn: "_shard"}
	mySink := spec.Sink{Name: "my", Type: "mysql", Address: "127.0.0.1:3306", OriginColumn: "_shard", MetaDatabase: mname + "_meta",
		Tables: []spec.SinkTable{{From: "shop.orders", To: mname + ".orders"}, {From: "shop.order_items", To: mname + ".order_items"}}}
	rates := map[string]float64{}
	for _, sk := range []spec.Sink{pgSink, mySink} {
		if sk.Type == "mysql" && mdb.Ping() != nil {
			b.Logf("no MariaDB on 3306: the MySQL sink is not measured beside")
			continue
		}
		ds := spec.Spec{Name: "bench", Tables: bench.SelectedTables, Route: []spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}},
			Heartbeat: spec.Duration(bench.MergeHeartbeat), Sinks: []spec.Sink{sk}}
		for i, s := range srvs {
			ds.Sources = append(ds.Sources, spec.Source{Name: fmt.Sprintf("s%d", i), Address: s.Addr(), Start: spec.Start{Kind: spec.StartPosition, Pos: ws[i].Start}})
		}
		ds = ds.WithDefaults()
		rates[sk.Name] = applyRate(b, &ds, selected)
	}
	benchRate = rates["pg"]
	b.ReportMetric(benchRate, "rows/s")
	if my := rates["my"]; my > 0 {
		b.Logf("postgres %.0f rows/s, mysql %.0f rows/s: %.2fx", benchRate, my, benchRate/my)
		b.ReportMetric(benchRate/my, "x-mysql-sink")
	}
}

// applyRate runs ds's sink over ds's stream until it has applied want
// row changes and returns its rate.
func applyRate(b *testing.B, ds *spec.Spec, want int) float64 {
	sk := ds.Sinks[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	began := time.Now()
	p, err := stream.StartPipeline(ctx, stream.PipelineConfig{Spec: ds, Clients: map[string]*group.Cursor{sink.ClientID(sk.Name): nil}, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	target, err := sinkrun.Open(ctx, sk, "shop", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer target.Close()
	r := startRunner(ctx, p, target, ds, sk, nil, log)
	defer r.stop()
	for target.Stats().Applied < uint64(want) {
		time.Sleep(10 * time.Millisecond)
		if time.Since(began) > 10*time.Minute {
			_, lastErr := r.r.Applied()
			b.Fatalf("sink %s applied %d of %d row changes in 10 minutes (last error %q)", sk.Name, target.Stats().Applied, want, lastErr)
		}
	}
	took := time.Since(began)
	rate := float64(want) / took.Seconds()
	b.Logf("%s: %d row changes applied in %v: %.0f rows/s; %+v", sk.Type, want, took.Round(time.Millisecond), rate, target.Stats())
	return rate
}

// benchRate is BenchmarkApply's measurement, made once per process.
var benchRate float64
