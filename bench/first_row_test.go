package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
	cfgs, _, _ := ordersFixture(b)
	for i := range cfgs {
		cfgs[i].Want = 1 // canal stops after its first row
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
