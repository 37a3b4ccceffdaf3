package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/braid-cdc/braid/internal/testutil/braidproc"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/spec"
)

// ordersTxEnv sizes BenchmarkCaptureOrders: INSERT transactions per shard
// (GenerateOrders). The issue on capture's speed measured 8,000 (2.4M
// selected row changes over four shards).
const ordersTxEnv = "BRAID_BENCH_ORDERS_TX"

// BenchmarkCaptureOrders runs `braid capture | wc -l` on the shape users
// run (GenerateOrders: four shards, 50-order INSERT transactions beside a
// filtered audit table, then UPDATEs of half the orders with before
// images, JSON, DECIMAL and DATETIME(6) columns) beside four go-mysql
// canals and four `mariadb-binlog --verbose` reading the same binlogs, the
// CPU a row change takes capture's process and canal's (this process,
// while the canals run), and the time from start to the first row,
// capture's against canal's.
func BenchmarkCaptureOrders(b *testing.B) {
	cfgs, ws, took := ordersFixture(b)
	b.Run(fmt.Sprintf("%d-shards", len(cfgs)), func(b *testing.B) { benchCaptureOrders(b, cfgs, ws, took) })
}

// ordersFixture starts mergeSources servers and writes GenerateOrders'
// workload (BRAID_BENCH_ORDERS_TX transactions each, default 3,000) into
// each, in parallel. It returns a DecodeConfig for each server's binlog
// of the workload, the workloads, and how long writing them took.
func ordersFixture(b *testing.B) ([]DecodeConfig, []*Workload, time.Duration) {
	txs := 3000
	if s := os.Getenv(ordersTxEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 2 {
			b.Fatalf("%s=%q: want a number of transactions, 2 or more", ordersTxEnv, s)
		}
		txs = n
	}
	srvs := mysqltest.StartN(b, mergeSources,
		mysqltest.WithArgs("--max-binlog-size=16M", "--innodb-buffer-pool-size=256M"))
	ws := make([]*Workload, len(srvs))
	errs := make([]error, len(srvs))
	conns := make([]*client.Conn, len(srvs))
	for i, s := range srvs {
		conns[i] = s.Conn(b)
	}
	began := time.Now()
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() { ws[i], errs[i] = GenerateOrders(c, OrdersConfig{Transactions: txs, Shop: i}) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	took := time.Since(began)
	// Let the sources' heartbeats pass their last commit time, as the
	// merge fixture does, so strict order does not wait for the clock.
	time.Sleep(spec.DefaultMaxClockSkew + 2*MergeHeartbeat)
	cfgs := make([]DecodeConfig, len(srvs))
	for i, s := range srvs {
		cfgs[i] = DecodeConfig{Addr: s.Addr(), User: "root", Flavor: s.Flavor, Start: ws[i].Start, End: ws[i].End, Tables: OrdersTables}
	}
	return cfgs, ws, took
}

// cpuPerRow is cpu over rows, in µs.
func cpuPerRow(cpu time.Duration, rows int) float64 {
	return float64(cpu.Microseconds()) / float64(rows)
}

func benchCaptureOrders(b *testing.B, cfgs []DecodeConfig, ws []*Workload, took time.Duration) {
	b.ReportMetric(0, "ns/op")
	bin := braidproc.Binary(b)
	specPath := filepath.Join(b.TempDir(), "spec.yaml")
	if err := os.WriteFile(specPath, CaptureSpec("bench-orders", cfgs), 0o644); err != nil {
		b.Fatal(err)
	}
	want := 0
	for _, w := range ws {
		want += w.Selected
	}
	ctx, cancel := context.WithTimeout(b.Context(), 2*decodeTimeout)
	defer cancel()
	count, err := CountCapture(ctx, bin, specPath, want)
	if err != nil {
		b.Fatal(err)
	}
	tool := binlogTool()
	var capt, canal total
	var tools, paired, toolPaired, firsts, canalFirsts []float64
	var lines []string
	for i := 0; i < b.N; i++ {
		var cr CaptureResult
		var gr GroupResult
		runCapture := func() {
			if cr, err = RunCapture(ctx, bin, specPath, count.Messages, want); err != nil {
				b.Fatal(err)
			}
		}
		runCanal := func() {
			cpu := selfCPU()
			if gr, err = DecodeCanalEach(ctx, cfgs); err != nil {
				b.Fatalf("canal: %v", err)
			}
			gr.CPU = selfCPU() - cpu
			for j, w := range ws {
				if gr.Sources[j] != w.Selected {
					b.Fatalf("canal delivered %d selected row changes of shard %d, want %d", gr.Sources[j], j, w.Selected)
				}
			}
		}
		if i%2 == 0 {
			runCapture()
			runCanal()
		} else {
			runCanal()
			runCapture()
		}
		line := fmt.Sprintf("iteration %d: capture %.0f rows/s (%v, %.2f µs CPU/row), canal x4 %.0f rows/s (%v, first row after %v, %.2f µs CPU/row): %.2fx",
			i+1, cr.RowsPerSec(), cr.Elapsed.Round(time.Millisecond), cpuPerRow(cr.CPU, want), gr.RowsPerSec(), gr.Elapsed.Round(time.Millisecond),
			gr.FirstRow.Round(time.Millisecond), cpuPerRow(gr.CPU, want), cr.RowsPerSec()/gr.RowsPerSec())
		if tool != "" {
			d, err := DecodeBinlogTool(ctx, tool, cfgs)
			if err != nil {
				b.Fatal(err)
			}
			rate := float64(want) / d.Seconds()
			tools = append(tools, rate)
			toolPaired = append(toolPaired, cr.RowsPerSec()/rate)
			line += fmt.Sprintf("; %s x4 %v (%.0f selected rows/s): %.2fx", filepath.Base(tool), d.Round(time.Millisecond), rate, cr.RowsPerSec()/rate)
		}
		first, err := CaptureFirstRow(ctx, bin, specPath)
		if err != nil {
			b.Fatal(err)
		}
		firsts = append(firsts, first.Seconds()*1000)
		canalFirsts = append(canalFirsts, gr.FirstRow.Seconds()*1000)
		line += fmt.Sprintf("; capture's first row after %v", first.Round(time.Millisecond))
		r := cr.Result
		r.CPU = cr.CPU
		capt.add(r)
		canal.add(gr.Result)
		paired = append(paired, cr.RowsPerSec()/gr.RowsPerSec())
		lines = append(lines, line)
	}
	ratio := capt.rowsPerSec() / canal.rowsPerSec()
	b.ReportMetric(capt.rowsPerSec(), "capture-rows/s")
	b.ReportMetric(canal.rowsPerSec(), "canal-rows/s")
	b.ReportMetric(ratio, "capture/canal")
	b.ReportMetric(median(firsts), "capture-first-row-ms")
	b.ReportMetric(median(canalFirsts), "canal-first-row-ms")
	measure := fmt.Sprintf("orders shape (JSON, DECIMAL, DATETIME(6), UPDATE before images; 50-row txs, filtered audit), %d row changes: `braid capture | wc -l`, rows/s", want)
	Record(Row{Section: "catch-up", Measure: measure, Value: capt.rowsPerSec(), Unit: "rows/s",
		Peer: "go-mysql canal ×4", PeerValue: canal.rowsPerSec(), Target: "ratio >= 1.3", Met: Met(ratio >= 1.3)})
	if len(tools) > 0 {
		b.ReportMetric(median(tools), "binlog-tool-rows/s")
		Record(Row{Section: "catch-up", Measure: measure, Value: capt.rowsPerSec(), Unit: "rows/s",
			Peer: filepath.Base(tool) + " --verbose ×4", PeerValue: median(tools)})
	}
	// CPU a row holds still on a loaded machine, where rows/s moves with
	// the other tenants: capture's process against canal's four in this
	// process (its other goroutines included).
	Record(Row{Section: "catch-up", Measure: "orders shape: braid capture process CPU per row change (median)", Value: capt.cpuUs(), Unit: "µs",
		Peer: "go-mysql canal ×4", PeerValue: canal.cpuUs()})
	Record(Row{Section: "catch-up", Measure: "orders shape: time from process start to the first row", Value: median(firsts), Unit: "ms",
		Peer: "go-mysql canal ×4 (from NewCanal, in process)", PeerValue: median(canalFirsts)})
	b.Logf("%d iteration(s), %d selected row changes (%d messages): capture %.0f rows/s, canal x4 %.0f rows/s: %.2fx (target >= 1.3: %s; median of the iterations' ratios %.2fx); against %s: median %.2fx; first row: capture %.0f ms, canal %.0f ms; CPU per row change: capture %.2f µs, canal %.2f µs",
		b.N, want, count.Messages, capt.rowsPerSec(), canal.rowsPerSec(), ratio, met(ratio, 1.3), median(paired),
		filepath.Base(tool), median(toolPaired), median(firsts), median(canalFirsts), capt.cpuUs(), canal.cpuUs())
	b.Logf("workload: %s", workloadsString(ws, took))
	for _, l := range lines {
		b.Log(l)
	}
}
