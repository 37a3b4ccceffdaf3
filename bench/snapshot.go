package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/go-mysql-org/go-mysql/canal"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/flat"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// SnapshotShard is one shard of BenchmarkSnapshot: a server and the
// database whose table the ways read.
type SnapshotShard struct {
	// Addr is the server's host:port; User logs in without a password.
	Addr, User string
	// Flavor is "mariadb" or "mysql", as go-mysql spells flavours.
	Flavor string
	// DB is the shard's database, e.g. "shop_2".
	DB string
}

// SnapshotResult is what one way's run over all the shards measured.
type SnapshotResult struct {
	// Rows counts the rows delivered (for a dump tool: the rows the
	// tables hold, its output is not read); Elapsed is the wall time from
	// starting the way to its last row, FirstRow to its first.
	Rows     int
	Elapsed  time.Duration
	FirstRow time.Duration
	// CPU is the CPU time of this process (braid, canal) and of the dump
	// processes (rusage, user and system) over the run.
	CPU time.Duration
	// PeakHeap and PeakLive are braid's peak heap in use and peak live
	// heap over the run (heap.go); StorePeak the most its store held.
	PeakHeap, PeakLive uint64
	StorePeak          int64
	// Messages and Bytes count the flat messages braid formatted (with
	// formatting on) and their bytes.
	Messages int
	Bytes    int64
}

// RowsPerSec is Rows over Elapsed.
func (r SnapshotResult) RowsPerSec() float64 { return float64(r.Rows) / r.Elapsed.Seconds() }

// snapshotDest names BenchmarkSnapshot's destination, and its store's
// one client id.
const snapshotDest = "bench-snapshot"

// SnapshotConfig says what SnapshotBraid reads and how.
type SnapshotConfig struct {
	// Table is the shards' table, read as `shop_\d+\.<Table>` and routed
	// to shop.<Table>; Want is how many rows the tables hold.
	Table string
	Want  int
	// Ordering is the spec's ordering. Default: the spec's, strict.
	Ordering string
	// Format makes the consumer render every batch as canal flat JSON.
	Format bool
	// Pause is how long the consumer waits after each batch, which is
	// then of 16 events: a consumer slower than the snapshot, so that
	// the store fills and stays full.
	Pause time.Duration
}

// snapshotSpec is the destination SnapshotBraid runs: the shards as
// sources s0, s1, … from `latest`, cfg's table routed to shop.<table>,
// snapshot initial, cfg's ordering, everything else at its default
// (heartbeat 200ms, max_clock_skew 1s, chunks of 8,192 rows, all four
// sources read at once).
func snapshotSpec(shards []SnapshotShard, cfg SnapshotConfig) (*spec.Spec, error) {
	ds := spec.Spec{
		Name:     snapshotDest,
		Tables:   []string{`shop_\d+\.` + cfg.Table},
		Route:    []spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}},
		Snapshot: spec.SnapshotInitial,
		Ordering: spec.Ordering(cfg.Ordering),
	}
	for i, sh := range shards {
		ds.Sources = append(ds.Sources, spec.Source{Name: fmt.Sprintf("s%d", i), Address: sh.Addr, User: sh.User,
			Start: spec.Start{Kind: spec.StartLatest}})
	}
	ds = ds.WithDefaults()
	if err := ds.Validate(); err != nil {
		return nil, fmt.Errorf("bench: snapshot: %w", err)
	}
	return &ds, nil
}

// SnapshotBraid runs a destination with snapshot: initial over the
// shards' table (snapshotSpec) as a node serves it, stream.StartPipeline
// into a store at stream's default bounds, read by one consumer that
// gets batches of up to 1,024 events and acks each, until cfg.Want
// snapshot rows have arrived. With cfg.Format the consumer also renders
// every batch as canal flat JSON messages (flat.Writer.WriteEvents on
// GOMAXPROCS goroutines, as `braid capture` prints), counting their
// bytes. A row change not marked snapshot, more than Want rows, or a
// source whose snapshot is not Done once they have arrived fails it.
func SnapshotBraid(ctx context.Context, shards []SnapshotShard, cfg SnapshotConfig) (SnapshotResult, error) {
	var res SnapshotResult
	want := cfg.Want
	ds, err := snapshotSpec(shards, cfg)
	if err != nil {
		return res, err
	}
	heap := startHeapSampler()
	cpu0 := selfCPU()
	began := time.Now()
	p, err := stream.StartPipeline(ctx, stream.PipelineConfig{Spec: ds, Clients: map[string]*group.Cursor{snapshotDest: nil}})
	if err != nil {
		heap.Stop()
		return res, fmt.Errorf("bench: snapshot: %w", err)
	}
	defer p.Close()
	fw := &flat.Writer{}
	workers := runtime.GOMAXPROCS(0)
	line := func(b []byte) error {
		res.Messages++
		res.Bytes += int64(len(b)) + 1
		return nil
	}
	batch := 1024
	if cfg.Pause > 0 {
		batch = 16
	}
	for res.Rows < want {
		b, err := p.Store.Get(ctx, snapshotDest, batch, 100*time.Millisecond)
		if err != nil {
			if perr := p.Err(); perr != nil {
				err = perr
			}
			heap.Stop()
			return res, fmt.Errorf("bench: snapshot: %d of %d rows: %w", res.Rows, want, err)
		}
		if b.ID < 0 {
			continue // idle
		}
		for _, ev := range b.Events {
			if ev.Type != change.EventRows {
				continue
			}
			if !ev.Snapshot {
				heap.Stop()
				return res, fmt.Errorf("bench: snapshot: seq %d: %d row changes not of the snapshot (nothing writes the shards)", ev.Seq, len(ev.Rows))
			}
			if res.Rows == 0 {
				res.FirstRow = time.Since(began)
			}
			res.Rows += len(ev.Rows)
		}
		if cfg.Format {
			if err := fw.WriteEvents(b.Events, workers, line); err != nil {
				heap.Stop()
				return res, fmt.Errorf("bench: snapshot: flat: %w", err)
			}
		}
		if err := p.Store.Ack(snapshotDest, b.ID); err != nil {
			heap.Stop()
			return res, fmt.Errorf("bench: snapshot: ack: %w", err)
		}
		if cfg.Pause > 0 {
			time.Sleep(cfg.Pause)
		}
	}
	res.Elapsed = time.Since(began)
	res.CPU = selfCPU() - cpu0
	res.PeakHeap = heap.Stop()
	res.PeakLive = heap.Live()
	res.StorePeak = p.Store.Stats().PeakBytes
	if res.Rows != want {
		return res, fmt.Errorf("bench: snapshot: %d rows, want %d", res.Rows, want)
	}
	// The last chunk's commit goes out a moment before its source's
	// stats say the snapshot is done: wait for that, briefly.
	for deadline := time.Now().Add(5 * time.Second); !snapshotsDone(p.Dest.Stats().Sources) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	for i, s := range p.Dest.Stats().Sources {
		if s.Snapshot == nil || !s.Snapshot.Done {
			return res, fmt.Errorf("bench: snapshot: every row arrived, but source %d's snapshot is not done: %+v", i, s.Snapshot)
		}
	}
	return res, nil
}

// dumpTool is MariaDB's (or MySQL's) dump client; "" when not installed.
func dumpTool() string {
	for _, name := range []string{"mariadb-dump", "mysqldump"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// DumpArgs are the options SnapshotDump gives the dump tool besides the
// connection and the table: a consistent dump without locks, as a user
// runs it to copy a live shard (--single-transaction reads one
// snapshot; --skip-lock-tables leaves the tables unlocked; --quick, on
// by default, streams rows instead of buffering the table). The rest of
// the defaults (--opt: multi-row INSERTs, CREATE TABLE) are kept.
var DumpArgs = []string{"--single-transaction", "--skip-lock-tables", "--quick"}

// SnapshotDump runs tool (mariadb-dump) once per shard, all at once,
// each dumping the shard's table with DumpArgs into /dev/null; it
// returns when the last has exited. Rows is rows, the tables' count, as
// the output is not read.
func SnapshotDump(ctx context.Context, tool string, shards []SnapshotShard, table string, rows int) (SnapshotResult, error) {
	cpu0 := childrenCPU()
	began := time.Now()
	errs := make([]error, len(shards))
	var wg sync.WaitGroup
	for i, sh := range shards {
		wg.Go(func() {
			host, port, _ := splitAddr(sh.Addr)
			args := append([]string{"--host", host, "--port", strconv.Itoa(port), "--user", sh.User}, DumpArgs...)
			errs[i] = runToNull(ctx, sh.Addr, tool, append(args, sh.DB, table)...)
		})
	}
	wg.Wait()
	res := SnapshotResult{Rows: rows, Elapsed: time.Since(began), CPU: childrenCPU() - cpu0}
	return res, errors.Join(errs...)
}

// childrenCPU is the CPU time, user and system, of this process's
// children that have exited and been waited for (rusage): a run's dump
// processes are the difference across it.
func childrenCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// SnapshotCanal runs go-mysql canal's dump path once per shard, all at
// once: canal.NewCanal with Dump.ExecutionPath tool and the shard's
// table (Dump.TableDB, Dump.Tables), the rest as canal.NewDefaultConfig
// leaves it, then Canal.Dump, which runs tool (`--master-data
// --single-transaction --skip-lock-tables --compact --skip-opt --quick
// --no-create-info --skip-extended-insert`, one INSERT a row), parses
// its output and hands each row to OnRow as an InsertAction RowsEvent
// of one row, and returns at the dump's end without reading the binlog.
// Each canal must count perShard rows.
func SnapshotCanal(ctx context.Context, tool string, shards []SnapshotShard, table string, perShard int) (SnapshotResult, error) {
	cpu0, child0 := selfCPU(), childrenCPU()
	began := time.Now()
	errs := make([]error, len(shards))
	counters := make([]*canalDumpCounter, len(shards))
	var wg sync.WaitGroup
	for i, sh := range shards {
		h := &canalDumpCounter{began: began}
		counters[i] = h
		wg.Go(func() {
			cfg := canal.NewDefaultConfig()
			cfg.Addr, cfg.User, cfg.Password, cfg.Flavor = sh.Addr, sh.User, "", sh.Flavor
			cfg.ServerID = canalServerID + uint32(i)
			cfg.Dump.ExecutionPath = tool
			cfg.Dump.TableDB, cfg.Dump.Tables = sh.DB, []string{table}
			cfg.Dump.DiscardErr = true // canal's default; an exit status says it failed
			cfg.Logger = slog.New(slog.DiscardHandler)
			c, err := canal.NewCanal(cfg)
			if err != nil {
				errs[i] = fmt.Errorf("bench: canal dump of %s: %w", sh.Addr, err)
				return
			}
			defer c.Close()
			c.SetEventHandler(h)
			stop := context.AfterFunc(ctx, c.Close)
			defer stop()
			if err := c.Dump(); err != nil {
				errs[i] = fmt.Errorf("bench: canal dump of %s: %w", sh.Addr, err)
				return
			}
			if h.rows != perShard {
				errs[i] = fmt.Errorf("bench: canal dump of %s: %d rows, want %d", sh.Addr, h.rows, perShard)
			}
		})
	}
	wg.Wait()
	res := SnapshotResult{Elapsed: time.Since(began), CPU: selfCPU() - cpu0 + childrenCPU() - child0}
	for _, h := range counters {
		res.Rows += h.rows
		if h.firstRow > 0 && (res.FirstRow == 0 || h.firstRow < res.FirstRow) {
			res.FirstRow = h.firstRow
		}
	}
	return res, errors.Join(errs...)
}

// canalDumpCounter counts the rows canal's dump hands OnRow.
type canalDumpCounter struct {
	canal.DummyEventHandler
	began    time.Time
	firstRow time.Duration
	rows     int
}

func (h *canalDumpCounter) OnRow(e *canal.RowsEvent) error {
	if h.rows == 0 {
		h.firstRow = time.Since(h.began)
	}
	h.rows += len(e.Rows)
	return nil
}

func (h *canalDumpCounter) String() string { return "bench-canal-dump" }

// snapshotsDone reports whether every source's snapshot is done.
func snapshotsDone(sources []group.SourceStats) bool {
	for _, s := range sources {
		if s.Snapshot == nil || !s.Snapshot.Done {
			return false
		}
	}
	return true
}
