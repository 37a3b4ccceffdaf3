package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/bench"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/sink/postgres"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// BenchmarkApply measures the postgres sink applying the merged stream of
// four shards written by bench.Generate (BRAID_BENCH_SINK_ROUNDS rounds,
// default 93: 502,200 selected row changes, mixed inserts, updates and
// deletes over orders and order_items, as bench's BenchmarkSinkApply),
// routed shop_\d+\.(\w+) → shop.$1 with origin_column _shard, by a sink of
// 16 workers × 100, into a database of its own on the machine's
// PostgreSQL: the stream's CREATE TABLEs make the tables. The runner
// applies a worker's share of a store batch in one transaction, as
// sink/run runs it (BRAID_BENCH_RUNNER_BATCH=n: at most n changes a
// transaction instead). The time runs
// from starting the pipeline to the last row change committed; the rate
// is row changes over it (rows/s). It measures once, whatever -benchtime.
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
	ds := spec.Spec{Name: "bench", Tables: bench.SelectedTables, Route: []spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}},
		Heartbeat: spec.Duration(bench.MergeHeartbeat),
		Sinks: []spec.Sink{{Name: "pg", Type: "postgres", Address: targetAddr, Database: name, OriginColumn: "_shard",
			MetaDatabase: "braid_meta"}}}
	for i, s := range srvs {
		ds.Sources = append(ds.Sources, spec.Source{Name: fmt.Sprintf("s%d", i), Address: s.Addr(), Start: spec.Start{Kind: spec.StartPosition, Pos: ws[i].Start}})
	}
	ds = ds.WithDefaults()
	sk := ds.Sinks[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	began := time.Now()
	p, err := stream.StartPipeline(ctx, stream.PipelineConfig{Spec: &ds, Clients: map[string]*group.Cursor{sink.ClientID("pg"): nil}, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	target, err := postgres.Open(ctx, sk)
	if err != nil {
		b.Fatal(err)
	}
	defer target.Close()
	rs := sk
	rs.Batch = 0 // as sink/run runs it: a worker's share of a store batch in one transaction
	if v, err := strconv.Atoi(os.Getenv("BRAID_BENCH_RUNNER_BATCH")); err == nil {
		rs.Batch = v
	}
	r := startRunner(ctx, p, target, rs, nil, log)
	defer r.stop()
	for target.Stats().Applied < uint64(selected) {
		time.Sleep(10 * time.Millisecond)
		if time.Since(began) > 10*time.Minute {
			_, lastErr := r.r.Applied()
			b.Fatalf("applied %d of %d row changes in 10 minutes (last error %q)", target.Stats().Applied, selected, lastErr)
		}
	}
	took := time.Since(began)
	benchRate = float64(selected) / took.Seconds()
	b.Logf("%d row changes applied in %v: %.0f rows/s; %+v", selected, took.Round(time.Millisecond), benchRate, target.Stats())
	b.ReportMetric(benchRate, "rows/s")
}

// benchRate is BenchmarkApply's measurement, made once per process.
var benchRate float64
