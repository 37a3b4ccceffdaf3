package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/schema"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/raftstore"
	"github.com/braid-cdc/braid/spec"
)

// What BenchmarkRaftCursors measures
//
// How many consumer cursor updates a three-node raftstore cluster commits
// per second, and how long a commit takes, with one cursor per Raft entry
// and with many per entry, so that the interval at which
// raftstore.FencedCursors flushes (raftstore.DefaultCursorInterval) is
// chosen from numbers.
//
// Setup, once per run of the parent benchmark: three raftstore nodes in this
// process, on loopback TCP ports, each with its bolt log (fsync on) and
// snapshots in a temporary directory, with the package's default timeouts
// and snapshot settings. 48 destinations of two sources each, 16 owned by
// each node: enough writers at once to load the cluster (at 12 the
// writers wait on commit latency and the cluster idles; at 96 latency
// grows and throughput does not). Each destination has raftCursorClients consumers,
// whose cursors carry a schema history on source a (stored once, then
// named by hash).
//
// Each iteration, one writer per destination, all 48 at once, on the
// owner's node (so two in three writes are forwarded to the leader, as
// owners are spread over the cluster), makes raftCursorEntries
// SaveCursors calls, each waiting for its commit:
//
//   - one-per-entry: each call carries one client's cursor (one Raft entry
//     per cursor update, what the design rules out);
//   - batched: each call carries all raftCursorClients clients' cursors
//     (what FencedCursors sends every interval).
//
// Reported: updates/s (cursor updates committed per second of wall time),
// entries/s (Raft entries committed per second), p50-ms and p99-ms (commit
// latency of one SaveCursors as its writer saw it, forwarding included) and
// B/entry (the encoded command's size). ns/op is suppressed. The parent
// then prints both modes' last runs side by side and what each flush
// interval would cost (see logRaftCursorTable): the share of the cluster a
// load of 100 or 1,000 destinations with 10 moving clients each would
// keep busy, and a cursor's worst age in the store (interval + p99), which
// is also how much of the stream a crash can make consumers see twice
// (dropped by seq). Last it prints the interval the numbers choose: the
// shortest of those listed at which 100 destinations with 10 moving clients
// each keep at most 15% of the cluster busy (a budget that leaves room for
// every other write, for a node on a busier machine, and for a burst).
const (
	raftCursorDests   = 48
	raftCursorClients = 100
	raftCursorEntries = 25
)

// printRaftCursorTable prints both modes' last runs and what each flush interval would
// cost. The cost model has two terms, both in seconds of the whole
// cluster's time: a fixed cost per entry (1 / one-per-entry's entries/s)
// and a cost per cursor (what a batched entry costs beyond that, over its
// cursors). A load of D destinations with C clients each moving, flushed
// every T, uses (D/T)·entry + (D·C/T)·cursor of the cluster.
func printRaftCursorTable(one, batched raftBenchResult) {
	entry := 1 / one.entriesPerSec
	cursor := max(0, (1/batched.entriesPerSec-entry)/float64(raftCursorClients-1))
	load := func(dests, clients float64, iv time.Duration) float64 {
		return 100 * (dests/iv.Seconds()*entry + dests*clients/iv.Seconds()*cursor)
	}
	fmt.Printf("%-14s %10s %10s %8s %8s %8s\n", "mode", "updates/s", "entries/s", "p50", "p99", "B/entry")
	for _, r := range []struct {
		name string
		raftBenchResult
	}{{"one-per-entry", one}, {"batched", batched}} {
		fmt.Printf("%-14s %10.0f %10.0f %8s %8s %8d\n", r.name, r.updatesPerSec, r.entriesPerSec,
			r.p50.Round(10*time.Microsecond), r.p99.Round(10*time.Microsecond), r.bytesPerEntry)
	}
	fmt.Printf("cost: %.0fµs an entry + %.1fµs a cursor; cluster busy at interval T for 100 dests×10 clients | 1,000 dests×10 clients; worst cursor age T+p99:\n",
		entry*1e6, cursor*1e6)
	pick := time.Duration(0)
	for _, iv := range []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond, time.Second} {
		fmt.Printf("  T=%-6s %6.1f%% | %6.1f%%   age %s\n", iv, load(100, 10, iv), load(1000, 10, iv), (iv + batched.p99).Round(time.Millisecond))
		if pick == 0 && load(100, 10, iv) <= 15 {
			pick = iv
		}
	}
	fmt.Printf("interval: the shortest T at which 100 dests×10 clients keep at most 15%% of this cluster busy: %v (raftstore.DefaultCursorInterval is %v)\n",
		pick, raftstore.DefaultCursorInterval)
}

// raftBenchResult is a sub-benchmark's last run.
type raftBenchResult struct {
	updatesPerSec, entriesPerSec float64
	p50, p99                     time.Duration
	bytesPerEntry                int
}

func BenchmarkRaftCursors(b *testing.B) {
	nodes := startRaftBenchCluster(b)
	ctx := b.Context()
	leader := nodes[0]
	for _, s := range nodes {
		if s.IsLeader() {
			leader = s
		}
	}
	type dest struct {
		name  string
		owner *raftstore.Store
		epoch uint64
	}
	var dests []dest
	for i := range raftCursorDests {
		name := fmt.Sprintf("d%02d", i)
		spec := spec.Spec{Name: name, Sources: []spec.Source{
			{Name: "a", Address: "127.0.0.1:3307"}, {Name: "b", Address: "127.0.0.1:3308"},
		}}
		if _, err := leader.CreateDestination(ctx, spec); err != nil {
			b.Fatal(err)
		}
		owner := nodes[i%len(nodes)]
		epoch, err := leader.Assign(ctx, name, owner.ID())
		if err != nil {
			b.Fatal(err)
		}
		dests = append(dests, dest{name, owner, epoch})
	}
	schema := raftBenchSchema(b)

	results := map[string]raftBenchResult{} // each mode's last run
	for _, mode := range []struct {
		name      string
		perUpdate int // cursors per entry
	}{{"one-per-entry", 1}, {"batched", raftCursorClients}} {
		b.Run(mode.name, func(b *testing.B) {
			var (
				mu    sync.Mutex
				lat   []time.Duration
				seq   uint64
				bytes int
			)
			start := time.Now()
			for range b.N {
				seq++
				var wg sync.WaitGroup
				errs := make(chan error, len(dests))
				for _, d := range dests {
					wg.Go(func() {
						mine := make([]time.Duration, 0, raftCursorEntries)
						for e := range raftCursorEntries {
							ups := make([]raftstore.CursorUpdate, mode.perUpdate)
							for k := range ups {
								client := (e*mode.perUpdate + k) % raftCursorClients
								ups[k] = raftstore.CursorUpdate{
									Client: fmt.Sprintf("client-%03d", client),
									Cursor: raftBenchCursor(seq*raftCursorEntries+uint64(e), schema),
								}
							}
							t0 := time.Now()
							if _, err := d.owner.SaveCursors(ctx, d.name, d.epoch, ups); err != nil {
								errs <- err
								return
							}
							mine = append(mine, time.Since(t0))
						}
						mu.Lock()
						lat = append(lat, mine...)
						mu.Unlock()
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					b.Fatal(err)
				}
			}
			elapsed := time.Since(start)
			entries := b.N * raftCursorDests * raftCursorEntries
			bytes = raftBenchEntrySize(mode.perUpdate, schema)
			slices.Sort(lat)
			r := raftBenchResult{
				updatesPerSec: float64(entries*mode.perUpdate) / elapsed.Seconds(),
				entriesPerSec: float64(entries) / elapsed.Seconds(),
				p50:           lat[len(lat)*50/100],
				p99:           lat[len(lat)*99/100],
				bytesPerEntry: bytes,
			}
			results[mode.name] = r
			b.ReportMetric(0, "ns/op") // an iteration is a fixed amount of work by 48 writers
			b.ReportMetric(r.updatesPerSec, "updates/s")
			b.ReportMetric(r.entriesPerSec, "entries/s")
			b.ReportMetric(float64(r.p50.Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(r.p99.Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(r.bytesPerEntry), "B/entry")
			Record(Row{Section: "raft", Measure: fmt.Sprintf("cursor updates through 3 nodes, %s", mode.name), Value: r.updatesPerSec, Unit: "updates/s"})
			Record(Row{Section: "raft", Measure: fmt.Sprintf("cursor commit p99, %s", mode.name), Value: float64(r.p99.Microseconds()) / 1000, Unit: "ms"})
		})
	}
	one, okOne := results["one-per-entry"]
	batched, okBatched := results["batched"]
	if okOne && okBatched {
		printRaftCursorTable(one, batched)
	}
}

// startRaftBenchCluster starts three bootstrapped nodes and waits for a
// leader; they are shut down when b ends.
func startRaftBenchCluster(b *testing.B) []*raftstore.Store {
	b.Helper()
	var (
		nodes   []*raftstore.Store
		servers []raftstore.Server
	)
	dir := b.TempDir()
	for i := range 3 {
		s, err := raftstore.Open(raftstore.Config{
			NodeID:   fmt.Sprintf("n%d", i+1),
			DataDir:  filepath.Join(dir, fmt.Sprintf("n%d", i+1)),
			BindAddr: "127.0.0.1:0",
			// No Logger: raft's complaints while nodes shut down one by
			// one are noise here, and a failure shows as an error anyway.
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Shutdown() })
		nodes = append(nodes, s)
		servers = append(servers, raftstore.Server{ID: s.ID(), Addr: s.Addr()})
	}
	for _, s := range nodes {
		if err := s.Bootstrap(servers); err != nil {
			b.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Second)
	defer cancel()
	for _, s := range nodes {
		if _, _, err := s.WaitLeader(ctx); err != nil {
			b.Fatal(err)
		}
	}
	return nodes
}

// raftBenchSchema is a schema history of two tables with one ALTER.
func raftBenchSchema(b *testing.B) *change.SchemaSnapshot {
	tr := schema.NewTracker()
	p := change.Position{File: "binlog.000001", Pos: 4}
	for _, ddl := range []string{
		"CREATE TABLE orders (id BIGINT PRIMARY KEY, customer INT NOT NULL, total DECIMAL(12,2), created DATETIME(6))",
		"CREATE TABLE order_items (order_id BIGINT, line INT, sku VARCHAR(32), qty INT, PRIMARY KEY (order_id, line))",
	} {
		if err := tr.LoadCreate(p, "shop_0", ddl); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := tr.ApplyDDL(change.Position{File: "binlog.000001", Pos: 500}, "shop_0", "ALTER TABLE orders ADD COLUMN note TEXT", 0); err != nil {
		b.Fatal(err)
	}
	snap := tr.Snapshot()
	return &snap
}

// raftBenchCursor is a cursor at seq on two sources; a names schema.
func raftBenchCursor(seq uint64, schema *change.SchemaSnapshot) *group.Cursor {
	return &group.Cursor{Seq: seq, Sources: []group.SourceCursor{
		{Name: "a", Pos: change.Position{File: "binlog.000012", Pos: uint32(4 + seq*311)}, LastKey: 1_780_000_000_000_000 + int64(seq), Schema: schema},
		{Name: "b", Pos: change.Position{File: "binlog.000009", Pos: uint32(4 + seq*173)}, LastKey: 1_780_000_000_000_000 + int64(seq)},
	}}
}

// raftBenchEntrySize is the size of a SaveCursors entry of n cursors whose
// schema history is held already, measured by encoding one.
func raftBenchEntrySize(n int, schema *change.SchemaSnapshot) int {
	ups := make([]raftstore.CursorUpdate, n)
	for k := range ups {
		ups[k] = raftstore.CursorUpdate{Client: fmt.Sprintf("client-%03d", k), Cursor: raftBenchCursor(1_000_000, schema)}
	}
	return raftstore.EncodedCursorsSize("d00", 1<<20, ups)
}
