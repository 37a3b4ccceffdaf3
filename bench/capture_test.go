package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/braidproc"
)

// BenchmarkCapture runs `braid capture` as a user runs it, a built braid
// binary printing the merged stream of BenchmarkMerge's four binlogs as
// JSON lines into a pipe read by `wc -l`, beside four go-mysql canals
// reading the same binlogs; see the package documentation for what it
// reports.
//
// It builds the merge fixture itself (setupMergeFixture) and, since the
// fixture's servers stop when this benchmark ends, forgets it then, so
// that a BenchmarkMerge later in the same process builds its own instead
// of reading stopped servers. (Run as a sub-benchmark of BenchmarkMerge,
// benchCapture would share BenchmarkMerge's fixture.)
func BenchmarkCapture(b *testing.B) {
	built := mergeFixture.ws == nil
	srvs, ws := setupMergeFixture(b)
	if built {
		b.Cleanup(func() {
			mergeFixture.once = sync.Once{}
			mergeFixture.srvs, mergeFixture.ws = nil, nil
		})
	}
	cfgs := make([]DecodeConfig, len(srvs))
	for i, s := range srvs {
		cfgs[i] = DecodeConfig{
			Addr: s.Addr(), User: "root", Flavor: s.Flavor,
			Start: ws[i].Start, End: ws[i].End, Tables: SelectedTables,
		}
	}
	b.Run(fmt.Sprintf("%d-sources", len(srvs)), func(b *testing.B) { benchCapture(b, cfgs, ws) })
}

// captureCount is CountCapture's answer for the fixture whose sources it
// names (key), kept for the process: the stream is a function of the
// binlogs, so every run's first Messages lines hold the same row changes.
var captureCount struct {
	key string
	CaptureCount
}

// captureSpecName names the destination capture runs: its replica server
// ids are derived from it, so they differ from MergeBraid's.
const captureSpecName = "bench-capture"

func benchCapture(b *testing.B, cfgs []DecodeConfig, ws []*Workload) {
	b.ReportMetric(0, "ns/op") // an iteration is two runs: its time alone means nothing
	bin := braidproc.Binary(b)
	specPath := filepath.Join(b.TempDir(), "spec.yaml")
	if err := os.WriteFile(specPath, CaptureSpec(captureSpecName, cfgs), 0o644); err != nil {
		b.Fatal(err)
	}
	want := 0
	for _, w := range ws {
		want += w.Selected
	}
	ctx, cancel := context.WithTimeout(b.Context(), 2*decodeTimeout)
	defer cancel()

	var key strings.Builder
	for _, cfg := range cfgs {
		fmt.Fprintf(&key, "%s@%s ", cfg.Addr, cfg.End)
	}
	if captureCount.key != key.String() {
		began := time.Now()
		c, err := CountCapture(ctx, bin, specPath, want)
		if err != nil {
			b.Fatal(err)
		}
		for i, w := range ws {
			if got := c.Sources[fmt.Sprintf("s%d", i)]; got != w.Selected {
				b.Fatalf("capture printed %d selected row changes of source s%d in its first %d messages, want %d (what the workload wrote)",
					got, i, c.Messages, w.Selected)
			}
		}
		captureCount.key, captureCount.CaptureCount = key.String(), c
		b.Logf("counting run (%v): the first %d messages (%d of them DDL, seq 1..%d) hold all %d selected row changes; timed runs use --max %d",
			time.Since(began).Round(time.Millisecond), c.Messages, c.DDLs, c.LastSeq, c.Rows, c.Messages)
	}
	n := captureCount.Messages

	var capt, canal total
	var rss uint64
	var readerCPU time.Duration
	var lines []string
	var paired []float64 // each iteration's capture/canal
	for i := 0; i < b.N; i++ {
		var cr CaptureResult
		var gr GroupResult
		runCapture := func() {
			var err error
			if cr, err = RunCapture(ctx, bin, specPath, n, want); err != nil {
				b.Fatal(err)
			}
		}
		runCanal := func() {
			cpu := selfCPU()
			var err error
			if gr, err = DecodeCanalEach(ctx, cfgs); err != nil {
				b.Fatalf("canal: %v", err)
			}
			gr.CPU = selfCPU() - cpu
			for j, w := range ws {
				if gr.Sources[j] != w.Selected {
					b.Fatalf("canal delivered %d selected row changes of source %d up to %s, want %d", gr.Sources[j], j, cfgs[j].End, w.Selected)
				}
			}
		}
		first := "capture"
		if i%2 == 0 {
			runCapture()
			runCanal()
		} else {
			first = "canal"
			runCanal()
			runCapture()
		}
		r := cr.Result
		r.CPU = cr.CPU
		capt.add(r)
		canal.add(gr.Result)
		rss = max(rss, cr.PeakRSS)
		readerCPU += cr.ReaderCPU
		paired = append(paired, cr.RowsPerSec()/gr.RowsPerSec())
		lines = append(lines, fmt.Sprintf("iteration %d (%s first): capture %.0f rows/s (%v to wc's exit, capture exited at %v, %.2f µs CPU/row, peak RSS %.0f MiB, wc %v CPU); canal x4 %.0f rows/s (%v, first row after %v, %.2f µs CPU/row); capture/canal %.2f",
			i+1, first, cr.RowsPerSec(), cr.Elapsed.Round(time.Millisecond), cr.Exited.Round(time.Millisecond),
			float64(cr.CPU.Microseconds())/float64(want), mib(cr.PeakRSS), cr.ReaderCPU.Round(time.Millisecond),
			gr.RowsPerSec(), gr.Elapsed.Round(time.Millisecond), gr.FirstRow.Round(time.Millisecond),
			float64(gr.CPU.Microseconds())/float64(want), cr.RowsPerSec()/gr.RowsPerSec()))
	}
	ratio := capt.rowsPerSec() / canal.rowsPerSec()
	b.ReportMetric(capt.rowsPerSec(), "capture-rows/s")
	b.ReportMetric(canal.rowsPerSec(), "canal-rows/s")
	b.ReportMetric(ratio, "capture/canal")
	b.ReportMetric(capt.cpuUs(), "capture-us/row")
	b.ReportMetric(canal.cpuUs(), "canal-us/row")
	b.ReportMetric(mib(rss), "capture-peak-RSS-MiB")
	const measure = "4 shards merged → `braid capture | wc -l` (JSON lines), rows/s from process start"
	Record(Row{Section: "catch-up", Measure: measure, Value: capt.rowsPerSec(), Unit: "rows/s",
		Peer: "go-mysql canal ×4", PeerValue: canal.rowsPerSec(), Target: "ratio >= 1.3", Met: Met(ratio >= 1.3)})
	Record(Row{Section: "catch-up", Measure: "braid capture process: CPU per row change (median)", Value: capt.cpuUs(), Unit: "µs",
		Peer: "go-mysql canal ×4", PeerValue: canal.cpuUs()})
	// go test keeps a benchmark's first ten log lines: totals first.
	b.Logf("%d iteration(s): braid capture --max %d | wc -l %.0f rows/s, go-mysql canal x4 %.0f rows/s: capture/canal %.2fx (target >= 1.3: %s; median of the iterations' own ratios %.2fx); CPU per row change capture %.2f µs, canal %.2f µs; capture peak RSS %.0f MiB; wc used %v CPU in all",
		b.N, n, capt.rowsPerSec(), canal.rowsPerSec(), ratio, met(ratio, 1.3), median(paired), capt.cpuUs(), canal.cpuUs(), mib(rss), readerCPU.Round(time.Millisecond))
	b.Logf("workload: %s", workloadsString(ws, mergeFixture.took))
	for _, l := range lines {
		b.Log(l)
	}
}

// TestFlatLineCounts checks the line scanner CountCapture counts with on
// flat messages whose values hold JSON's special characters.
func TestFlatLineCounts(t *testing.T) {
	for _, tc := range []struct {
		line   string
		seq    uint64
		source string
		rows   int
		ddl    bool
	}{
		{`{"id":7,"database":"shop_0","table":"orders","pkNames":["id"],"isDdl":false,"type":"UPDATE","es":1,"ts":2,"sql":"","sqlType":{"id":-5,"data":12},"mysqlType":{"id":"bigint","data":"json"},` +
			`"data":[{"id":"1","data":"{\"a\":[1,2]}"},{"id":"2","data":"x\\\"]}"},{"id":"3","data":null}],"old":[{"data":"]"},{"data":"{"},{"data":"["}],` +
			`"seq":7,"source":"s2","originDatabase":"shop_4","originTable":"orders","position":"mariadb-bin.000001:4"}`, 7, "s2", 3, false},
		{`{"id":8,"database":"shop_0","table":"","pkNames":null,"isDdl":true,"type":"CREATE","es":1,"ts":2,"sql":"CREATE TABLE t (data JSON, \"x\" INT)","sqlType":null,"mysqlType":null,"data":null,"old":null,` +
			`"seq":8,"source":"s0","originDatabase":"shop_0","originTable":"t","position":"mariadb-bin.000001:400","gtid":"0-1-2"}`, 8, "s0", 0, true},
	} {
		seq, source, rows, ddl, err := flatLineCounts([]byte(tc.line))
		if err != nil || seq != tc.seq || source != tc.source || rows != tc.rows || ddl != tc.ddl {
			t.Errorf("flatLineCounts(%.60s…) = %d, %q, %d rows, ddl %v, %v; want %d, %q, %d rows, ddl %v",
				tc.line, seq, source, rows, ddl, err, tc.seq, tc.source, tc.rows, tc.ddl)
		}
	}
	for _, bad := range []string{``, `{"seq":1}`, `{"seq":1,"source":"s0","data":[{"a":"1"}`, `{"seq":x,"source":"s0","data":null}`} {
		if _, _, _, _, err := flatLineCounts([]byte(bad)); err == nil {
			t.Errorf("flatLineCounts(%q): no error", bad)
		}
	}
}
