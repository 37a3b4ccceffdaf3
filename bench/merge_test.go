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
	"github.com/braid-cdc/braid/spec"
)

const (
	// mergeSources is how many servers BenchmarkMerge merges.
	mergeSources = 4
	// mergeRounds is how many workload rounds each server's binlog holds:
	// 800 rounds of 400 orders are 1,080,000 selected row changes a
	// server, 4,320,000 in all (and as many filtered). Fewer make a run so
	// short that its ends weigh on the rates: start-up (connecting,
	// loading schemas and, in strict order, waiting for the slowest
	// source: 0.15 to 0.25 s before the first row, which the rates leave
	// out) and, in strict order, the last transactions, which wait for the
	// other sources' next heartbeat once those have read their whole
	// binlog (up to MergeHeartbeat; measured: the last 2% of the rows took
	// 60-70 ms of a 0.5 s run of 400 rounds, whose merged/unmerged ratio
	// was 0.84-0.92 on a machine merging 4M rows/s, 0.95-1.0 with 800).
	mergeRounds = 800
)

// mergeFixture is the servers and binlogs BenchmarkMerge reads, built once
// per process by the parent benchmark, which go test runs once however
// large -count and -benchtime are; the servers live until it ends.
var mergeFixture struct {
	once sync.Once
	srvs []*mysqltest.Server
	ws   []*Workload
	took time.Duration // writing all the workloads, in parallel
}

// setupMergeFixture starts the servers and writes one workload into each,
// all at once, as shards: server i holds shop_<2i> and shop_<2i+1>. The
// transactions' commit times are the real clock's, so the binlogs
// interleave as the generators happened to.
func setupMergeFixture(b *testing.B) ([]*mysqltest.Server, []*Workload) {
	b.Helper()
	mergeFixture.once.Do(func() {
		srvs := mysqltest.StartN(b, mergeSources,
			mysqltest.WithArgs("--max-binlog-size=16M", "--innodb-buffer-pool-size=256M"))
		conns := make([]*client.Conn, len(srvs))
		for i, s := range srvs {
			conns[i] = s.Conn(b)
		}
		ws := make([]*Workload, len(srvs))
		errs := make([]error, len(srvs))
		began := time.Now()
		var wg sync.WaitGroup
		for i, c := range conns {
			wg.Go(func() {
				ws[i], errs[i] = Generate(c, WorkloadConfig{Batches: mergeRounds, FirstShop: 2 * i})
				if errs[i] != nil {
					errs[i] = fmt.Errorf("server %d (%s): %w", i, srvs[i].Addr(), errs[i])
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			b.Fatal(err)
		}
		mergeFixture.took = time.Since(began)
		// Strict order lets a source's last transaction go once the other
		// sources' heartbeats, stamped with braid's clock minus
		// max_clock_skew, pass its commit time. Wait until they do, so the
		// first merged run does not wait for the clock.
		time.Sleep(spec.DefaultMaxClockSkew + 2*MergeHeartbeat)
		mergeFixture.srvs, mergeFixture.ws = srvs, ws
	})
	if mergeFixture.ws == nil {
		b.Skip("bench: the merge workload could not be set up (see the first failure)")
	}
	return mergeFixture.srvs, mergeFixture.ws
}

// BenchmarkMerge reads four pre-generated binlogs merged into one stream by
// package group, unmerged with four binlog.Readers and with four go-mysql
// canals; see the package documentation for what it reports.
func BenchmarkMerge(b *testing.B) {
	srvs, ws := setupMergeFixture(b)
	cfgs := make([]DecodeConfig, len(srvs))
	for i, s := range srvs {
		cfgs[i] = DecodeConfig{
			Addr: s.Addr(), User: "root", Flavor: s.Flavor,
			Start: ws[i].Start, End: ws[i].End, Tables: SelectedTables,
		}
	}
	b.Run(fmt.Sprintf("%d-sources", len(srvs)), func(b *testing.B) { benchMerge(b, cfgs, ws) })
	b.Run("catch-up", func(b *testing.B) { benchCatchUp(b, cfgs, ws) })
}

// groupDecoder is one way of reading all the sources.
type groupDecoder struct {
	name string
	run  func(ctx context.Context, cfgs []DecodeConfig, want int) (GroupResult, error)
}

var groupDecoders = []groupDecoder{
	{"merged", MergeBraid},
	{"unmerged", func(ctx context.Context, cfgs []DecodeConfig, _ int) (GroupResult, error) {
		return DecodeBraidEach(ctx, cfgs)
	}},
	{"canal", func(ctx context.Context, cfgs []DecodeConfig, _ int) (GroupResult, error) {
		return DecodeCanalEach(ctx, cfgs)
	}},
}

// measure reads every source and fails the benchmark unless each delivered
// exactly the selected row changes its workload wrote.
func (d groupDecoder) measure(b *testing.B, cfgs []DecodeConfig, ws []*Workload) GroupResult {
	b.Helper()
	want := 0
	for _, w := range ws {
		want += w.Selected
	}
	ctx, cancel := context.WithTimeout(b.Context(), decodeTimeout)
	defer cancel()
	cpu := selfCPU()
	r, err := d.run(ctx, cfgs, want)
	if err != nil {
		b.Fatalf("%s: %v", d.name, err)
	}
	r.CPU = selfCPU() - cpu
	for i, w := range ws {
		if r.Sources[i] != w.Selected {
			b.Fatalf("%s delivered %d selected row changes of source %d up to %s, want %d (what the workload wrote)",
				d.name, r.Sources[i], i, cfgs[i].End, w.Selected)
		}
	}
	if r.Rows != want {
		b.Fatalf("%s delivered %d selected row changes in all, want %d", d.name, r.Rows, want)
	}
	return r
}

// workloadsString summarises the sources' workloads in one line.
func workloadsString(ws []*Workload, took time.Duration) string {
	var sum Workload
	for _, w := range ws {
		sum.Selected += w.Selected
		sum.Filtered += w.Filtered
		sum.Transactions += w.Transactions
		sum.Files += w.Files
		sum.Bytes += w.Bytes
	}
	return fmt.Sprintf("%d binlogs written in parallel in %v: %d row changes (%d selected, %d filtered) in %d transactions, %d files, %.1f MiB",
		len(ws), took.Round(time.Millisecond), sum.Selected+sum.Filtered, sum.Selected, sum.Filtered,
		sum.Transactions, sum.Files, mib(uint64(sum.Bytes)))
}

func benchMerge(b *testing.B, cfgs []DecodeConfig, ws []*Workload) {
	totals := map[string]*total{}
	for _, d := range groupDecoders {
		totals[d.name] = &total{}
	}
	var lines []string  // one per iteration, logged after the totals
	var storePeak int64 // the merged runs' store's peak of held bytes
	for i := 0; i < b.N; i++ {
		// Rotate which goes first, so none always gets the warmer caches
		// or the heap another left behind.
		n := len(groupDecoders)
		order := make([]groupDecoder, n)
		for j := range order {
			order[j] = groupDecoders[(i+j)%n]
		}
		res := map[string]GroupResult{}
		began := time.Now()
		for _, d := range order {
			r := d.measure(b, cfgs, ws)
			// Rates count from each run's first row: connecting to four
			// servers and (merged) waiting for every source's first event
			// before the strict merge may emit are start-up, a tenth of a
			// run at 3M rows/s (the latency benchmark measures waits).
			r.Elapsed -= r.FirstRow
			res[d.name] = r
			totals[d.name].add(r.Result)
			storePeak = max(storePeak, r.StorePeak)
		}
		m, u, c := res["merged"], res["unmerged"], res["canal"]
		lines = append(lines, fmt.Sprintf("iteration %d (%s first, %v): merged %.0f rows/s (first row after %v), %.1f MiB peak; unmerged %.0f rows/s, %.1f MiB peak; canal %.0f rows/s, %.1f MiB peak; merged/unmerged %.2f, merged/canal %.2f",
			i+1, order[0].name, time.Since(began).Round(100*time.Millisecond), m.RowsPerSec(), m.FirstRow.Round(time.Millisecond), mib(m.PeakHeap), u.RowsPerSec(), mib(u.PeakHeap),
			c.RowsPerSec(), mib(c.PeakHeap), m.RowsPerSec()/u.RowsPerSec(), m.RowsPerSec()/c.RowsPerSec()))
	}
	m, u, c := totals["merged"], totals["unmerged"], totals["canal"]
	vsUnmerged := m.rowsPerSec() / u.rowsPerSec()
	vsCanal := m.rowsPerSec() / c.rowsPerSec()
	b.ReportMetric(0, "ns/op") // an iteration is three runs: its time alone means nothing
	b.ReportMetric(m.rowsPerSec(), "merged-rows/s")
	b.ReportMetric(u.rowsPerSec(), "unmerged-rows/s")
	b.ReportMetric(c.rowsPerSec(), "canal-rows/s")
	b.ReportMetric(vsUnmerged, "merged/unmerged")
	b.ReportMetric(vsCanal, "merged/canal")
	b.ReportMetric(mib(m.peak), "merged-peak-heap-MiB")
	b.ReportMetric(mib(u.peak), "unmerged-peak-heap-MiB")
	b.ReportMetric(mib(c.peak), "canal-peak-heap-MiB")
	b.ReportMetric(mib(uint64(storePeak)), "merged-store-peak-MiB")
	b.ReportMetric(mib(m.live), "merged-live-heap-MiB")
	bound := mergeMemoryBound(len(cfgs))
	Record(Row{Section: "merge", Measure: "4 sources merged through a 64 MiB store, rows/s from the first row", Value: m.rowsPerSec(), Unit: "rows/s",
		Peer: "unmerged braid", PeerValue: u.rowsPerSec(), Target: "ratio >= 0.9", Met: Met(vsUnmerged >= 0.9)})
	Record(Row{Section: "merge", Measure: "4 sources merged through a 64 MiB store, rows/s from the first row", Value: m.rowsPerSec(), Unit: "rows/s",
		Peer: "go-mysql canal ×4", PeerValue: c.rowsPerSec(), Target: "ratio >= 1.0", Met: Met(vsCanal >= 1)})
	Record(Row{Section: "merge", Measure: "4 sources merged: CPU per row change (median)", Value: m.cpuUs(), Unit: "µs",
		Peer: "go-mysql canal ×4", PeerValue: c.cpuUs()})
	Record(Row{Section: "merge", Measure: "merged run's peak live heap", Value: mib(m.live), Unit: "MiB",
		Target: fmt.Sprintf("<= bound %.0f MiB", bound/(1<<20)), Met: Met(float64(m.live) <= bound)})
	// go test keeps a benchmark's first ten log lines: totals first.
	b.Logf("%d iteration(s) over %d sources: merged %.0f rows/s, unmerged %.0f rows/s, canal %.0f rows/s; merged/unmerged %.2fx (target >= 0.9: %s), merged/canal %.2fx (target >= 1.0: %s); peak heap merged %.1f MiB (store peak %.1f of %d MiB), unmerged %.1f MiB, canal %.1f MiB",
		b.N, len(cfgs), m.rowsPerSec(), u.rowsPerSec(), c.rowsPerSec(),
		vsUnmerged, met(vsUnmerged, 0.9), vsCanal, met(vsCanal, 1.0), mib(m.peak), mib(uint64(storePeak)), MergeStoreBytes>>20, mib(u.peak), mib(c.peak))
	b.Logf("merged memory: peak live heap %.1f MiB against the bound %.1f MiB (%s) (target: within it: %s); the in-use heap adds garbage up to GOGC (100%%) above the live heap",
		mib(m.live), bound/(1<<20), mergeMemoryBoundString(len(cfgs)), met(bound/float64(m.live), 1.0))
	b.Logf("workload: %s", workloadsString(ws, mergeFixture.took))
	for _, l := range lines {
		b.Log(l)
	}
}

// met says whether a ratio reached its target; it is printed, never
// asserted: a loaded machine moves ratios by a few percent.
func met(ratio, target float64) string {
	if ratio >= target {
		return "met"
	}
	return "MISSED"
}
