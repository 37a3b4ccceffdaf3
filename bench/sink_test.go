package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
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
// applying the merged stream of four shards to the machine's MariaDB.
//
// # What BenchmarkSinkApply measures
//
// Four MariaDB servers each get the benchmark workload (Generate:
// BRAID_BENCH_SINK_ROUNDS rounds, default 20, of inserts, updates and
// deletes over the shop schemas' orders and order_items, about 27,000
// selected row changes a server). A destination over the four (from
// earliest, route shop_\d+\.(\w+) to shop.$1, origin_column _shard, since
// the shards' keys overlap) is applied to a database of its own on
// 127.0.0.1:3306 by two sinks in turn, each from the start:
//
//   - braid: 16 workers, batches of 100 (the spec's defaults);
//   - the peer: one worker, one row change a transaction, the shape of
//     canal's RDB adapter (which also checks nothing), with braid's
//     checkpoint in each transaction; it runs for at most 30 s and its
//     rate is what it applied by then.
//
// Each rate is row changes applied per second, from the sink's start to
// its last change. The target must end with as many rows as the shards
// hold (b.Fatal otherwise). MariaDB's own replication of the same binlogs
// (serial and parallel), the bar, is not measured yet.
func BenchmarkSinkApply(b *testing.B) {
	db, err := sql.Open("mysql", "root@tcp(127.0.0.1:3306)/")
	if err != nil || db.Ping() != nil {
		b.Skipf("bench: no MariaDB on 127.0.0.1:3306 to apply to: %v", err)
	}
	defer db.Close()
	rounds := 20
	if v, err := strconv.Atoi(os.Getenv("BRAID_BENCH_SINK_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
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
	selected := 0
	for _, w := range ws {
		selected += w.Selected
	}
	time.Sleep(spec.DefaultMaxClockSkew + 2*MergeHeartbeat)

	var braidRate, peerRate float64
	for i := 0; i < b.N; i++ {
		braidRate = applyRate(b, db, srvs, ws, "braid", 16, 100, 0)
		peerRate = applyRate(b, db, srvs, ws, "peer", 1, 1, 30*time.Second)
	}
	b.ReportMetric(braidRate, "rows/s")
	b.ReportMetric(peerRate, "peer-rows/s")
	b.Logf("%d selected row changes over 4 shards: braid (16 workers × 100) %.0f rows/s; one row a transaction %.0f rows/s (%.1fx)",
		selected, braidRate, peerRate, braidRate/peerRate)
	Record(Row{Section: "sink", Measure: "MySQL sink, 4 shards' merged stream into MariaDB, row changes/s", Value: braidRate, Unit: "rows/s",
		Peer: "one row change a transaction (canal adapter's shape)", PeerValue: peerRate})
}

// applyRate applies the four workloads' merged stream to a fresh
// database with one sink of workers × batch and returns its row changes
// per second; limit (0: none) stops it early.
func applyRate(b *testing.B, db *sql.DB, srvs []*mysqltest.Server, ws []*Workload, name string, workers, batch int, limit time.Duration) float64 {
	b.Helper()
	target := fmt.Sprintf("braid_bench_sink_%s_%d", name, os.Getpid())
	defer func() {
		db.Exec("DROP DATABASE IF EXISTS " + target)
		db.Exec("DROP DATABASE IF EXISTS " + target + "_meta")
	}()
	ds := spec.Spec{Name: "bench", Tables: SelectedTables, Route: []spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}},
		Heartbeat: spec.Duration(MergeHeartbeat)}
	for i, s := range srvs {
		ds.Sources = append(ds.Sources, spec.Source{Name: fmt.Sprintf("s%d", i), Address: s.Addr(), Start: spec.Start{Kind: spec.StartPosition, Pos: ws[i].Start}})
	}
	ds.Sinks = []spec.Sink{{Name: name, Type: "mysql", Address: "127.0.0.1:3306", Workers: workers, Batch: batch, OriginColumn: "_shard",
		MetaDatabase: target + "_meta", Tables: []spec.SinkTable{{From: "shop.orders", To: target + ".orders"}, {From: "shop.order_items", To: target + ".order_items"}}}}
	ds = ds.WithDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	client := sink.ClientID(name)
	p, err := stream.StartPipeline(ctx, stream.PipelineConfig{Spec: &ds, Clients: map[string]*group.Cursor{client: nil}, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	t, err := mysqlsink.Open(ctx, ds.Sinks[0])
	if err != nil {
		b.Fatal(err)
	}
	defer t.Close()
	r := &sink.Runner{Name: name, Dest: ds.Name, Client: client, Store: p.Store, Target: t, Workers: workers, Batch: batch, ByOrigin: true, Logger: log}
	done := make(chan struct{})
	began := time.Now()
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	want := 0
	for _, w := range ws {
		want += w.Selected
	}
	var last time.Time
	for {
		time.Sleep(50 * time.Millisecond)
		applied := t.Stats().Applied
		if applied >= uint64(want) {
			last = time.Now()
			break
		}
		if limit > 0 && time.Since(began) > limit {
			return float64(applied) / time.Since(began).Seconds()
		}
		if time.Since(began) > 10*time.Minute {
			_, lastErr := r.Applied()
			b.Fatalf("bench: sink %s applied %d of %d row changes in 10 minutes (last error %q)", name, applied, want, lastErr)
		}
	}
	return float64(want) / last.Sub(began).Seconds()
}
