package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/stream"
)

const (
	// consumeSources is how many servers feed the consumer benchmark's
	// store.
	consumeSources = 2
	// consumeRounds is how many workload rounds each server's binlog
	// holds: 320 rounds are 432,000 selected row changes a server, 864,000
	// in all, enough that a consumer's start-up (connecting, subscribing,
	// its first batch, its buffers' first growth) is a small part of its
	// time: with 80 rounds a native run took 0.12–0.14 s, of which 15–30
	// ms before the first row, and read 15–25% fewer rows a second.
	consumeRounds = 320
	// consumeAnchor is the store client id that keeps every event in the
	// store: subscribed before filling, never acked.
	consumeAnchor = "bench-anchor"
)

// consumeStoreConfig bounds the store generously: it holds the whole
// stream, since nobody acks while it fills.
var consumeStoreConfig = stream.Config{MaxBytes: 2 << 30, MaxEvents: 10_000_000}

// consumeFixture is a filled store, served under ConsumeDest, and the
// servers whose binlogs filled it.
type consumeFixture struct {
	reg  *stream.Registry
	want int // the selected row changes in the store
	cfgs []DecodeConfig
	ws   []*Workload
	gen  time.Duration // writing the workloads, in parallel
	fill FillResult
}

// setupConsumeFixture starts the servers, writes one workload into each
// as shards (server i holds shop_<2i> and shop_<2i+1>) and runs a
// group.Destination over them into a store until every selected row change
// is in it. The servers stay up for the merged runs (MergeBraid over the
// same binlogs) measured beside the consumers; idle, they cost nothing the
// consumers would notice. The store and the servers live as long as the
// returned fixture: BenchmarkConsume, the parent, builds it once per run
// (once per -count), and lets it go when it returns, so that the other
// benchmarks' heap peaks do not include it.
func setupConsumeFixture(b *testing.B) *consumeFixture {
	b.Helper()
	srvs := mysqltest.StartN(b, consumeSources,
		mysqltest.WithArgs("--max-binlog-size=16M", "--innodb-buffer-pool-size=256M"))
	conns := make([]*client.Conn, len(srvs))
	for i, s := range srvs {
		conns[i] = s.Conn(b)
	}
	f := &consumeFixture{ws: make([]*Workload, len(srvs))}
	errs := make([]error, len(srvs))
	began := time.Now()
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			f.ws[i], errs[i] = Generate(c, WorkloadConfig{Batches: consumeRounds, FirstShop: 2 * i})
			if errs[i] != nil {
				errs[i] = fmt.Errorf("server %d (%s): %w", i, srvs[i].Addr(), errs[i])
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	f.gen = time.Since(began)

	f.cfgs = make([]DecodeConfig, len(srvs))
	for i, s := range srvs {
		f.cfgs[i] = DecodeConfig{Addr: s.Addr(), User: "root", Flavor: s.Flavor,
			Start: f.ws[i].Start, End: f.ws[i].End, Tables: SelectedTables}
		f.want += f.ws[i].Selected
	}
	store := stream.NewStore(consumeStoreConfig)
	ctx, cancel := context.WithTimeout(b.Context(), decodeTimeout)
	defer cancel()
	var err error
	if f.fill, err = FillStore(ctx, f.cfgs, store, consumeAnchor, f.want); err != nil {
		b.Fatal(err)
	}
	f.reg = stream.NewRegistry()
	f.reg.Add(&stream.Served{Name: ConsumeDest, Store: store})
	return f
}

// BenchmarkConsume reads a pre-filled store with one canal-go consumer
// through api/canal and with one Go-client consumer through api/native;
// see the package documentation for what it reports.
func BenchmarkConsume(b *testing.B) {
	f := setupConsumeFixture(b)
	b.Run(fmt.Sprintf("%d-sources", consumeSources), func(b *testing.B) { benchConsume(b, f) })
}

// recordConsumeVsMerge puts the consumers against the merge of the same
// binlogs, run beside them (merged): the target is that one
// consumer keeps up with the merge. Their rows/s compare on this machine,
// where server, consumer and merge each had the same two cores; their CPU
// per row change compares on any: a side that costs at most the merge's
// CPU per row keeps up with it on as many cores as the merge uses.
func recordConsumeVsMerge(merged, canal, native *consumeTotal) {
	mergedRate, mergedCPU := merged.rowsPerSec(), merged.serverUs()
	const peer = "the merge of the same binlogs"
	Record(Row{Section: "consume", Measure: "one Go client (StreamViews, every value read) from a pre-filled store, rows/s",
		Value: native.rowsPerSec(), Unit: "rows/s", Peer: peer, PeerValue: mergedRate,
		Target: "ratio >= 1.0", Met: Met(native.rowsPerSec() >= mergedRate)})
	Record(Row{Section: "consume", Measure: "one canal-go consumer from a pre-filled store, rows/s",
		Value: canal.rowsPerSec(), Unit: "rows/s", Peer: peer, PeerValue: mergedRate,
		Target: "ratio >= 1.0", Met: Met(canal.rowsPerSec() >= mergedRate)})
	for _, side := range []struct {
		name string
		us   float64
	}{{"native server", native.serverUs()}, {"Go client (every value read)", native.clientUs()}, {"canal server", canal.serverUs()}} {
		Record(Row{Section: "consume", Measure: side.name + ": CPU per row change against the merge's", Value: side.us, Unit: "µs",
			Peer: peer, PeerValue: mergedCPU, Target: "ratio <= 1.0", Met: Met(side.us <= mergedCPU)})
	}
}

// consumer is one way of reading the store, or (merged) the reference
// the consumers are measured against: the merge of the binlogs that
// filled it, as BenchmarkMerge runs it, measured in the same iterations,
// since this machine's speed drifts by a quarter and more within minutes.
type consumer struct {
	name string
	run  func(ctx context.Context, f *consumeFixture, id int) (ConsumeResult, error)
}

var consumers = []consumer{
	{"canal", func(ctx context.Context, f *consumeFixture, id int) (ConsumeResult, error) {
		return ConsumeCanal(ctx, f.reg, ConsumeDest, id, f.want)
	}},
	{"native", func(ctx context.Context, f *consumeFixture, id int) (ConsumeResult, error) {
		return ConsumeNative(ctx, f.reg, ConsumeDest, fmt.Sprintf("native-%d", id), f.want, false)
	}},
	{"native-json", func(ctx context.Context, f *consumeFixture, id int) (ConsumeResult, error) {
		return ConsumeNative(ctx, f.reg, ConsumeDest, fmt.Sprintf("native-json-%d", id), f.want, true)
	}},
	{"merged", func(ctx context.Context, f *consumeFixture, _ int) (ConsumeResult, error) {
		cpu := selfCPU()
		r, err := MergeBraid(ctx, f.cfgs, f.want)
		if err == nil && r.SteadyRows == 0 {
			err = fmt.Errorf("bench: merge: no steady rate measured")
		}
		// Its steady rate: neither the start-up (a strict merge waits for
		// every source's first event) nor the tail (its last transactions
		// wait for a heartbeat), which a run this short would feel.
		if err == nil {
			r.Elapsed = time.Duration(float64(r.Steady) * float64(r.Rows) / float64(r.SteadyRows))
		}
		return ConsumeResult{Result: r.Result, ServerCPU: selfCPU() - cpu}, err
	}},
}

// measure runs the consumer with a fresh client id; it fails the benchmark
// unless every row change arrived, once.
func (c consumer) measure(b *testing.B, f *consumeFixture) ConsumeResult {
	b.Helper()
	consumeIDs++
	ctx, cancel := context.WithTimeout(b.Context(), decodeTimeout)
	defer cancel()
	r, err := c.run(ctx, f, consumeIDs)
	if err != nil {
		b.Fatalf("%s: %v", c.name, err)
	}
	if r.Rows != f.want {
		b.Fatalf("%s delivered %d row changes, want %d (what the store holds)", c.name, r.Rows, f.want)
	}
	return r
}

// consumeTotal accumulates the runs of one consumer.
type consumeTotal struct {
	total
	bytes                int64
	serverCPU, clientCPU time.Duration
}

func (t *consumeTotal) add(r ConsumeResult) {
	t.total.add(r.Result)
	t.bytes += r.Bytes
	t.serverCPU += r.ServerCPU
	t.clientCPU += r.ClientCPU
}

// serverUs and clientUs are the CPU microseconds per row change the
// server (for merged, the merge) and the consumer spent.
func (t *consumeTotal) serverUs() float64 {
	return float64(t.serverCPU.Microseconds()) / float64(t.rows)
}
func (t *consumeTotal) clientUs() float64 {
	return float64(t.clientCPU.Microseconds()) / float64(t.rows)
}

// mbPerSec is the wire's MB/s at the median rate.
func (t *consumeTotal) mbPerSec() float64 {
	return float64(t.bytes) / float64(t.rows) * t.rowsPerSec() / 1e6
}

func benchConsume(b *testing.B, f *consumeFixture) {
	totals := map[string]*consumeTotal{}
	for _, c := range consumers {
		totals[c.name] = &consumeTotal{}
	}
	var lines []string // one per iteration, logged after the totals
	for i := 0; i < b.N; i++ {
		// Rotate which goes first.
		var order []consumer
		for k := range consumers {
			order = append(order, consumers[(i+k)%len(consumers)])
		}
		res := map[string]ConsumeResult{}
		for _, c := range order {
			r := c.measure(b, f)
			res[c.name] = r
			totals[c.name].add(r)
		}
		line := fmt.Sprintf("iteration %d (%s first):", i+1, order[0].name)
		for k, c := range consumers {
			if k > 0 {
				line += ";"
			}
			r := res[c.name]
			line += fmt.Sprintf(" %s %.0f rows/s, %.1f MB/s, first row after %v",
				c.name, r.RowsPerSec(), r.MBPerSec(), r.FirstRow.Round(time.Millisecond))
		}
		line += fmt.Sprintf("; native/merged %.2f", res["native"].RowsPerSec()/res["merged"].RowsPerSec())
		lines = append(lines, line)
	}
	cn, nt, js, mg := totals["canal"], totals["native"], totals["native-json"], totals["merged"]
	b.ReportMetric(0, "ns/op") // an iteration is three consumers and a merge: its time alone means nothing
	b.ReportMetric(cn.rowsPerSec(), "canal-rows/s")
	b.ReportMetric(nt.rowsPerSec(), "native-rows/s")
	b.ReportMetric(mg.rowsPerSec(), "merged-rows/s")
	b.ReportMetric(cn.mbPerSec(), "canal-MB/s")
	b.ReportMetric(nt.mbPerSec(), "native-MB/s")
	b.ReportMetric(cn.serverUs(), "canal-server-us/row")
	b.ReportMetric(cn.clientUs(), "canal-client-us/row")
	b.ReportMetric(nt.serverUs(), "native-server-us/row")
	b.ReportMetric(nt.clientUs(), "native-client-us/row")
	b.ReportMetric(mg.serverUs(), "merged-us/row")
	b.ReportMetric(js.rowsPerSec(), "native-json-rows/s")
	b.ReportMetric(js.serverUs(), "native-json-server-us/row")
	b.ReportMetric(js.clientUs(), "native-json-client-us/row")
	recordConsumeVsMerge(mg, cn, nt)
	Record(Row{Section: "consume", Measure: "canal server CPU per row change", Value: cn.serverUs(), Unit: "µs"})
	Record(Row{Section: "consume", Measure: "canal-go consumer CPU per row change", Value: cn.clientUs(), Unit: "µs"})
	Record(Row{Section: "consume", Measure: "native server CPU per row change (binary)", Value: nt.serverUs(), Unit: "µs"})
	Record(Row{Section: "consume", Measure: "Go client consumer CPU per row change (binary)", Value: nt.clientUs(), Unit: "µs"})
	Record(Row{Section: "consume", Measure: "native server CPU per row change (JSON lines)", Value: js.serverUs(), Unit: "µs"})
	Record(Row{Section: "consume", Measure: "Go client consumer CPU per row change (JSON lines)", Value: js.clientUs(), Unit: "µs"})
	Record(Row{Section: "consume", Measure: "one Go client, JSON lines, from a pre-filled store, rows/s", Value: js.rowsPerSec(), Unit: "rows/s"})
	// go test keeps a benchmark's first ten log lines: totals first.
	b.Logf("%d iteration(s), %d row changes each: canal-go consumer %.0f rows/s (%.1f MB/s on the wire), native Go-client consumer %.0f rows/s (%.1f MB/s); the merge of the same binlogs, beside them: %.0f rows/s, canal/merged %.2fx (target >= 1.0: %s), native/merged %.2fx (target >= 1.0: %s)",
		b.N, f.want, cn.rowsPerSec(), cn.mbPerSec(), nt.rowsPerSec(), nt.mbPerSec(), mg.rowsPerSec(),
		cn.rowsPerSec()/mg.rowsPerSec(), met(cn.rowsPerSec()/mg.rowsPerSec(), 1.0),
		nt.rowsPerSec()/mg.rowsPerSec(), met(nt.rowsPerSec()/mg.rowsPerSec(), 1.0))
	// met takes ratio >= target: the merge's CPU over a side's is >= 1 when the side's is <= the merge's.
	b.Logf("CPU per row change (consumer in a process of its own): merge %.2f us; canal server %.2f us (%.2fx the merge's, target <= 1.0: %s), canal-go consumer %.2f us; native server %.2f us (%.2fx, target <= 1.0: %s), Go-client consumer %.2f us (%.2fx); with JSON lines: native server %.2f us, Go client %.2f us, %.0f rows/s",
		mg.serverUs(), cn.serverUs(), cn.serverUs()/mg.serverUs(), met(mg.serverUs()/cn.serverUs(), 1.0), cn.clientUs(),
		nt.serverUs(), nt.serverUs()/mg.serverUs(), met(mg.serverUs()/nt.serverUs(), 1.0),
		nt.clientUs(), nt.clientUs()/mg.serverUs(), js.serverUs(), js.clientUs(), js.rowsPerSec())
	b.Logf("store: %d events, %.1f MiB (estimated), filled in %v; workload: %s",
		f.fill.Events, mib(uint64(f.fill.Bytes)), f.fill.Took.Round(time.Millisecond), workloadsString(f.ws, f.gen))
	for _, l := range lines {
		b.Log(l)
	}
}
