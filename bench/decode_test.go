package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
)

// decodeTimeout bounds one decoder run; a run that has not reached the end
// by then is stuck.
const decodeTimeout = 5 * time.Minute

// fixture is the server and the binlog every sub-benchmark reads. It is
// built once per process by BenchmarkDecode, the parent, which go test runs
// once however large -count and -benchtime are; the server lives until the
// parent ends.
var fixture struct {
	once sync.Once
	srv  *mysqltest.Server
	w    *Workload
}

func setupFixture(b *testing.B) (*mysqltest.Server, *Workload) {
	b.Helper()
	fixture.once.Do(func() {
		srv := mysqltest.Start(b,
			mysqltest.WithArgs("--max-binlog-size=16M", "--innodb-buffer-pool-size=256M"))
		c := srv.Conn(b)
		w, err := Generate(c, WorkloadConfig{})
		if err != nil {
			b.Fatal(err)
		}
		fixture.srv, fixture.w = srv, w
	})
	if fixture.w == nil {
		b.Skip("bench: the workload could not be set up (see the first failure)")
	}
	return fixture.srv, fixture.w
}

// BenchmarkDecode reads one pre-generated binlog with braid's binlog.Reader and
// with go-mysql's canal package; see the package documentation for what each
// sub-benchmark reports.
func BenchmarkDecode(b *testing.B) {
	srv, w := setupFixture(b)
	cfg := DecodeConfig{
		Addr: srv.Addr(), User: "root", Flavor: srv.Flavor,
		Start: w.Start, End: w.End, Tables: SelectedTables,
	}
	b.Run("braid-vs-canal", func(b *testing.B) { benchVersusCanal(b, cfg, w) })
	b.Run("heap-by-length", func(b *testing.B) { benchHeapByLength(b, cfg, w) })
}

// decoder is DecodeBraid or DecodeCanal.
type decoder struct {
	name   string
	decode func(context.Context, DecodeConfig) (Result, error)
}

var (
	braidDecoder = decoder{"braid", DecodeBraid}
	canalDecoder = decoder{"canal", DecodeCanal}
)

// run decodes and fails the benchmark unless exactly want rows came out.
func (d decoder) run(b *testing.B, cfg DecodeConfig, want int) Result {
	b.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), decodeTimeout)
	defer cancel()
	r, err := d.decode(ctx, cfg)
	if err != nil {
		b.Fatalf("%s: %v", d.name, err)
	}
	if r.Rows != want {
		b.Fatalf("%s delivered %d selected row changes up to %s, want %d (what the workload wrote)",
			d.name, r.Rows, cfg.End, want)
	}
	return r
}

// total accumulates the runs of one decoder.
type total struct {
	rows    int
	elapsed time.Duration
	peak    uint64
	live    uint64
	rates   []float64 // each run's rows/s
	cpus    []float64 // each run's CPU µs per row change, where measured
}

func (t *total) add(r Result) {
	t.rows += r.Rows
	t.elapsed += r.Elapsed
	t.peak = max(t.peak, r.PeakHeap)
	t.live = max(t.live, r.PeakLive)
	t.rates = append(t.rates, r.RowsPerSec())
	if r.CPU > 0 && r.Rows > 0 {
		t.cpus = append(t.cpus, float64(r.CPU.Microseconds())/float64(r.Rows))
	}
}

// rowsPerSec is the median of the runs' rates: on a shared machine one
// slow run (another tenant, a GC at the wrong time) moves a mean, not a
// median.
func (t *total) rowsPerSec() float64 { return median(t.rates) }

// cpuUs is the median of the runs' CPU µs per row change, 0 if not
// measured.
func (t *total) cpuUs() float64 { return median(t.cpus) }

// median is the middle value of xs (the mean of the middle two), 0 for
// none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	r := slices.Sorted(slices.Values(xs))
	if n := len(r); n%2 == 0 {
		return (r[n/2-1] + r[n/2]) / 2
	}
	return r[len(r)/2]
}

func benchVersusCanal(b *testing.B, cfg DecodeConfig, w *Workload) {
	want := w.Selected
	var br, cn total
	for i := 0; i < b.N; i++ {
		// Alternate which goes first, so neither always gets the warmer
		// caches or the heap the other left behind.
		order := []decoder{braidDecoder, canalDecoder}
		if i%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		res := map[string]Result{}
		for _, d := range order {
			res[d.name] = d.run(b, cfg, want)
		}
		rb, rc := res["braid"], res["canal"]
		br.add(rb)
		cn.add(rc)
		b.Logf("iteration %d (%s first): braid %.0f rows/s (first row after %v), %.1f MiB peak; canal %.0f rows/s (first row after %v), %.1f MiB peak; ratio %.2f",
			i+1, order[0].name, rb.RowsPerSec(), rb.FirstRow.Round(time.Millisecond), mib(rb.PeakHeap),
			rc.RowsPerSec(), rc.FirstRow.Round(time.Millisecond), mib(rc.PeakHeap), rb.RowsPerSec()/rc.RowsPerSec())
	}
	ratio := br.rowsPerSec() / cn.rowsPerSec()
	b.ReportMetric(0, "ns/op") // an iteration is two decoders: its time alone means nothing
	b.ReportMetric(br.rowsPerSec(), "braid-rows/s")
	b.ReportMetric(cn.rowsPerSec(), "canal-rows/s")
	b.ReportMetric(ratio, "ratio")
	b.ReportMetric(mib(br.peak), "braid-peak-heap-MiB")
	b.ReportMetric(mib(cn.peak), "canal-peak-heap-MiB")
	Record(Row{Section: "decode", Measure: "one source, selected row changes/s", Value: br.rowsPerSec(), Unit: "rows/s",
		Peer: "go-mysql canal", PeerValue: cn.rowsPerSec(), Target: "ratio >= 1.0", Met: Met(ratio >= 1)})
	Record(Row{Section: "decode", Measure: "one source, peak heap", Value: mib(br.peak), Unit: "MiB", Peer: "go-mysql canal", PeerValue: mib(cn.peak)})
	b.Logf("workload: %s", w)
	b.Logf("%d iteration(s): braid %.0f rows/s vs canal %.0f rows/s = %.2fx; peak heap braid %.1f MiB, canal %.1f MiB",
		b.N, br.rowsPerSec(), cn.rowsPerSec(), ratio, mib(br.peak), mib(cn.peak))
}

func benchHeapByLength(b *testing.B, whole DecodeConfig, w *Workload) {
	half := whole
	half.End = w.Half
	wantHalf, wantWhole := w.HalfSelected, w.Selected
	peaks := map[string]*[2]uint64{"braid": {}, "canal": {}}
	for i := 0; i < b.N; i++ {
		for _, d := range []decoder{braidDecoder, canalDecoder} {
			rh := d.run(b, half, wantHalf)
			rw := d.run(b, whole, wantWhole)
			p := peaks[d.name]
			p[0], p[1] = max(p[0], rh.PeakHeap), max(p[1], rw.PeakHeap)
		}
	}
	b.ReportMetric(0, "ns/op")
	var summary string
	for _, name := range []string{"braid", "canal"} {
		p := peaks[name]
		b.ReportMetric(mib(p[0]), name+"-half-peak-heap-MiB")
		b.ReportMetric(mib(p[1]), name+"-whole-peak-heap-MiB")
		summary += fmt.Sprintf("; %s %.1f MiB for %d rows, %.1f MiB for %d (%s)",
			name, mib(p[0]), wantHalf, mib(p[1]), wantWhole, verdict(p[0], p[1]))
	}
	b.Logf("workload: %s", w)
	b.Logf("peak heap, first half vs whole binlog%s", summary)
}

// verdict says whether a peak grew with the binlog's length. Doubling the
// binlog doubles what an accumulating decoder holds; a bounded one stays
// within GC noise.
func verdict(half, whole uint64) string {
	if float64(whole) <= 1.25*float64(half)+8<<20 {
		return "flat"
	}
	return fmt.Sprintf("GROWS %.2fx", float64(whole)/float64(half))
}
