package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/spec"
)

// firstRowBinsEnv names the braid binaries BenchmarkCaptureFirstRow
// compares, comma-separated (an old build and a new one); without it the
// benchmark does not run (BenchmarkCaptureOrders measures the first row
// of this tree's build in `make bench`).
const firstRowBinsEnv = "BRAID_BENCH_FIRST_ROW_BINS"

// BenchmarkCaptureFirstRow measures what a change to capture's start
// does to its first row: on BenchmarkCaptureOrders' fixture (four shards,
// BRAID_BENCH_ORDERS_TX transactions each, default 3,000), each
// iteration runs every binary of BRAID_BENCH_FIRST_ROW_BINS once
// (CaptureFirstRow: process start to the first row printed), in an order
// that rotates, then four go-mysql canals from the same positions (the
// time from NewCanal to the first row of any), so that binaries measured
// minutes apart on a shared machine are compared within each iteration.
// Reported: each binary's median, its ratio to canal's, and the median
// of each iteration's ratio to the first binary.
//
//	BRAID_BENCH_FIRST_ROW_BINS=old/braid,new/braid go test -run '^$' -bench CaptureFirstRow -benchtime 12x ./bench/
func BenchmarkCaptureFirstRow(b *testing.B) {
	list := os.Getenv(firstRowBinsEnv)
	if list == "" {
		b.Skipf("set %s to the braid binaries to compare, comma-separated", firstRowBinsEnv)
	}
	bins := strings.Split(list, ",")
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
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() { ws[i], errs[i] = GenerateOrders(c, OrdersConfig{Transactions: txs, Shop: i}) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	time.Sleep(spec.DefaultMaxClockSkew + 2*MergeHeartbeat) // as BenchmarkCaptureOrders
	cfgs := make([]DecodeConfig, len(srvs))
	for i, s := range srvs {
		// Want: canal stops after its first row.
		cfgs[i] = DecodeConfig{Addr: s.Addr(), User: "root", Flavor: s.Flavor, Start: ws[i].Start, End: ws[i].End, Tables: OrdersTables, Want: 1}
	}
	specPath := filepath.Join(b.TempDir(), "spec.yaml")
	if err := os.WriteFile(specPath, CaptureSpec("bench-orders", cfgs), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Run(fmt.Sprintf("%d-binaries", len(bins)), func(b *testing.B) { benchFirstRows(b, bins, specPath, cfgs) })
}

func benchFirstRows(b *testing.B, bins []string, specPath string, cfgs []DecodeConfig) {
	b.ReportMetric(0, "ns/op")
	firsts := make([][]float64, len(bins))
	paired := make([][]float64, len(bins))
	var canal []float64
	for i := 0; i < b.N; i++ {
		line := fmt.Sprintf("iteration %d:", i+1)
		got := make([]float64, len(bins))
		for k := range bins {
			j := (k + i) % len(bins)
			d, err := CaptureFirstRow(b.Context(), bins[j], specPath)
			if err != nil {
				b.Fatalf("%s: %v", bins[j], err)
			}
			got[j] = d.Seconds() * 1000
			line += fmt.Sprintf(" %s %.1f ms,", bins[j], got[j])
		}
		for j := range bins {
			firsts[j] = append(firsts[j], got[j])
			paired[j] = append(paired[j], got[j]/got[0])
		}
		gr, err := DecodeCanalEach(b.Context(), cfgs)
		if err != nil {
			b.Fatalf("canal: %v", err)
		}
		canal = append(canal, gr.FirstRow.Seconds()*1000)
		b.Logf("%s canal x4 %.1f ms", line, canal[len(canal)-1])
	}
	spread := func(v []float64) string {
		return fmt.Sprintf("%.0f–%.0f", slices.Min(v), slices.Max(v))
	}
	for j, bin := range bins {
		b.Logf("%s: first row median %.1f ms (%s), %.2fx canal's; against %s, median of the iterations' ratios %.2f (%.2f–%.2f)",
			bin, median(firsts[j]), spread(firsts[j]), median(firsts[j])/median(canal), bins[0], median(paired[j]), slices.Min(paired[j]), slices.Max(paired[j]))
		b.ReportMetric(median(firsts[j]), fmt.Sprintf("bin%d-first-row-ms", j))
	}
	b.Logf("go-mysql canal x4, from NewCanal in process: first row median %.1f ms (%s)", median(canal), spread(canal))
	b.ReportMetric(median(canal), "canal-first-row-ms")
}
