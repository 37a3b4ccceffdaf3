package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// BenchmarkShardDDLHeld measures a shard-DDL lock holding one shard table
// while a gigabyte of rows goes by: held rows are left out of the stream
// and re-read from the binlog when the lock releases, never kept, so the
// process's memory stays within the destination's bound however much the
// lock holds.
//
// # What BenchmarkShardDDLHeld measures
//
// The benchmark starts three MariaDB servers; server i holds the shard
// tables shop_<i>.orders and shop_<i+3>.orders (id BIGINT primary key,
// note VARCHAR(255), pad VARBINARY(1000)), routed to shop.orders. A
// destination over the three (every source from `earliest`, the table
// filter `shop_\d+\.orders`, route `shop_\d+\.(\w+)` to `shop.$1`,
// strict order, heartbeat 100ms, shard_ddl pessimistic) runs as a node
// serves it, stream.StartPipeline into a stream.Store bounded to 16 MiB,
// read by one consumer that gets batches of up to 1,024 events and acks
// each. Once the merge has seen the six CREATE TABLEs, shop_0 runs
// `ALTER TABLE shop_0.orders ADD COLUMN c INT NULL` alone, which opens a
// lock holding shop_0.orders (the other five shard tables never run it).
//
// Then one writer per server bulk-loads its two shard tables, taking turns,
// with INSERT … SELECT from MariaDB's sequence engine (seq_1_to_1000):
// 1,000 rows of about 1.2 KB (a 200-byte note and a 1,000-byte pad) per
// statement and transaction, the same number of rows into each of the six,
// BRAID_BENCH_HELD_BYTES of binlog in all (default 1 GiB; the servers run
// with a 512 MiB redo log, no doublewrite and innodb_flush_log_at_trx_commit=2
// so that the load, not braid, is what takes the time). The destination
// streams the other five shard tables' rows while they are written and
// counts shop_0's as held. When the writes are done, every other row has
// reached the consumer and the lock's HeldRows is all of shop_0's, the lock
// is unlocked (Destination.Decide, group.DecisionUnlock): its DDL goes out
// as shop.orders', and shop_0's rows are re-read from server 0's binlog and
// follow it. The run ends when the last of them reaches the consumer.
//
// The consumer must get every row written exactly once per shard (count
// and sum of ids), shop_0's only after the unlocked ALTER; the lock must
// have held all of shop_0's rows. Anything else fails the benchmark.
//
// Reported: MB (the binlogs' growth over the load, 10^6 bytes, all six
// shard tables), rows and held-rows, MB/s (those bytes over the wall time
// from the first write to the last row at the consumer, the re-read
// included; the load bounds it), reread-s (from the unlock to the last
// held row at the consumer) and reread-MB/s (shop_0's share of the binlog
// over it), live-heap-MiB (the process's peak live heap, sampled every
// 10 ms from before the lock opened to the end: what the last GC kept,
// garbage excluded), bound-MiB (group.MemoryBound for three sources at
// the default bounds and the 16 MiB store) and live/bound (target at most
// 1, printed, never asserted), heap-MiB (the peak heap in use, garbage
// included) and store-peak-MiB. The table gets the heap against its bound,
// the rate and the re-read.
//
// It is measured once per process, whatever -benchtime and -count say;
// later runs report the same numbers. On a two-core machine the default
// takes about 20 s, set-up included (the load about 11 s). With BRAID_BENCH_HEAP_PROFILE=DIR,
// heap profiles are written into DIR while rows are held and after the
// re-read.
func BenchmarkShardDDLHeld(b *testing.B) {
	r, fresh := shardDDLParts.held.get(b, measureHeld)
	b.ReportMetric(0, "ns/op") // measured once; an iteration means nothing
	b.ReportMetric(float64(r.binlogBytes)/1e6, "MB")
	b.ReportMetric(float64(r.rows), "rows")
	b.ReportMetric(float64(r.held), "held-rows")
	b.ReportMetric(r.mbPerSec(), "MB/s")
	b.ReportMetric(r.reread.Seconds(), "reread-s")
	b.ReportMetric(r.rereadMBPerSec(), "reread-MB/s")
	b.ReportMetric(mib(r.live), "live-heap-MiB")
	b.ReportMetric(mib(uint64(r.bound)), "bound-MiB")
	b.ReportMetric(r.liveRatio(), "live/bound")
	b.ReportMetric(mib(r.peak), "heap-MiB")
	b.ReportMetric(mib(uint64(r.storePeak)), "store-peak-MiB")
	if fresh {
		r.record()
		r.log(b)
	}
}

const (
	// heldBytesEnv overrides heldDefaultBytes: how much binlog the load
	// writes, in bytes.
	heldBytesEnv     = "BRAID_BENCH_HELD_BYTES"
	heldDefaultBytes = 1 << 30
	// heldProfileEnv names a directory heap profiles are written to.
	heldProfileEnv = "BRAID_BENCH_HEAP_PROFILE"
	// heldStoreBytes bounds the store.
	heldStoreBytes = 16 << 20
	heldServers    = 3
	heldShards     = 2 * heldServers
	// heldBatch is the rows of one INSERT … SELECT, one transaction.
	heldBatch = 1000
	// heldRowBinlogBytes estimates one row's share of the binlog: its
	// image (id 8, note 1+200, pad 2+1,000, the null bitmap 1) and its
	// part of the rows event's header, which six rows share (an event is
	// at most 8 KiB). Only the number of rows is derived from it; the
	// bytes reported are the binlogs' own.
	heldRowBinlogBytes = 1220
	// heldTimeout bounds the whole measurement.
	heldTimeout = 25 * time.Minute
	// heldWait bounds each wait for rows to arrive.
	heldWait   = 5 * time.Minute
	heldClient = "bench"
)

var shardDDLParts struct {
	held once[*heldResult]
}

// heldResult is what BenchmarkShardDDLHeld measured.
type heldResult struct {
	perShard   int64 // rows written into each shard table
	rows, held int64 // every row delivered; shop_0's, held by the lock
	// binlogBytes is the binlogs' growth over the load, heldBytes shop_0's
	// part (half of server 0's: its two shard tables got the same rows).
	binlogBytes, heldBytes int64
	eventBytes             int64 // Event.Size of the rows events delivered
	// From the first write: load to the last commit, others to the other
	// shards' last row at the consumer, total to the last row.
	load, others, total time.Duration
	// From the unlock: firstHeld to shop_0's first row at the consumer,
	// reread to its last.
	firstHeld, reread time.Duration
	cpu               time.Duration // the process's CPU from the first write to the end
	peak, live        uint64
	storePeak, bound  int64
}

func (r *heldResult) mbPerSec() float64 { return float64(r.binlogBytes) / 1e6 / r.total.Seconds() }

func (r *heldResult) rereadMBPerSec() float64 {
	return float64(r.heldBytes) / 1e6 / r.reread.Seconds()
}

func (r *heldResult) liveRatio() float64 { return float64(r.live) / float64(r.bound) }

func (r *heldResult) record() {
	size := fmt.Sprintf("%.2f GB", float64(r.binlogBytes)/1e9)
	Record(Row{Section: "shard-ddl", Measure: fmt.Sprintf("%s through a 16 MiB store while a lock holds shop_0: peak live heap", size),
		Value: mib(r.live), Unit: "MiB", Peer: "memory bound", PeerValue: mib(uint64(r.bound)),
		Target: "ratio <= 1", Met: Met(r.liveRatio() <= 1)})
	Record(Row{Section: "shard-ddl", Measure: fmt.Sprintf("%s while a lock holds shop_0, first write to last row", size),
		Value: r.mbPerSec(), Unit: "MB/s"})
	Record(Row{Section: "shard-ddl", Measure: fmt.Sprintf("re-read of the held rows (%.0f MB) after the unlock", float64(r.heldBytes)/1e6),
		Value: r.reread.Seconds(), Unit: "s"})
}

func (r *heldResult) log(b *testing.B) {
	b.Logf("%.1f MB of binlog (%d rows, %d a shard table, %d held by the lock on shop_0) through a %d MiB store: peak live heap %.1f MiB against the bound %.1f MiB (%s): %.2fx (target <= 1: %s); peak heap in use %.1f MiB, store peak %.1f MiB",
		float64(r.binlogBytes)/1e6, r.rows, r.perShard, r.held, heldStoreBytes>>20, mib(r.live), mib(uint64(r.bound)),
		heldMemoryBoundString(), r.liveRatio(), met(1/r.liveRatio(), 1), mib(r.peak), mib(uint64(r.storePeak)))
	b.Logf("rate: %.1f MB/s, %.0f rows/s from the first write to the last row (%v); the load took %v (%.1f MB/s), the other shards' last row came %v after the first write",
		r.mbPerSec(), float64(r.rows)/r.total.Seconds(), r.total.Round(time.Millisecond), r.load.Round(time.Millisecond),
		float64(r.binlogBytes)/1e6/r.load.Seconds(), r.others.Round(time.Millisecond))
	b.Logf("re-read after the unlock: %d rows, %.1f MB of shop_0's binlog in %v (%.1f MB/s, %.0f rows/s), first row after %v",
		r.held, float64(r.heldBytes)/1e6, r.reread.Round(time.Millisecond), r.rereadMBPerSec(), float64(r.held)/r.reread.Seconds(),
		r.firstHeld.Round(time.Millisecond))
	b.Logf("the consumer got %.1f MB of events (Event.Size); the process used %.1f µs of CPU per row (writers' client side included)",
		float64(r.eventBytes)/1e6, float64(r.cpu.Microseconds())/float64(r.rows))
}

func heldMemoryBoundString() string {
	return fmt.Sprintf("store %d MiB + %d sources × (queue %d MiB + read-ahead %d events × %d KiB)",
		heldStoreBytes>>20, heldServers, group.DefaultQueueBytes>>20, group.DefaultReadAhead, group.ReadAheadEventBytes>>10)
}

// heldTargetBytes is the binlog the load writes: BRAID_BENCH_HELD_BYTES or
// the default.
func heldTargetBytes(b *testing.B) int64 {
	s := os.Getenv(heldBytesEnv)
	if s == "" {
		return heldDefaultBytes
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		b.Fatalf("bench: %s=%q: want a positive number of bytes", heldBytesEnv, s)
	}
	return n
}

func measureHeld(b *testing.B) *heldResult {
	perShard := max(1, heldTargetBytes(b)/heldShards/heldRowBinlogBytes/heldBatch) * heldBatch
	ctx, cancel := context.WithTimeout(b.Context(), heldTimeout)
	defer cancel()

	srvs := mysqltest.StartN(b, heldServers, mysqltest.WithArgs("--max-binlog-size=64M",
		"--innodb-buffer-pool-size=512M", "--innodb-log-file-size=512M",
		"--innodb-doublewrite=0", "--innodb-flush-log-at-trx-commit=2"))
	for i, s := range srvs {
		for _, shard := range []int{i, i + heldServers} {
			s.Exec(b, fmt.Sprintf("CREATE DATABASE shop_%d", shard), fmt.Sprintf(`CREATE TABLE shop_%d.orders (
				id BIGINT NOT NULL PRIMARY KEY, note VARCHAR(255) NOT NULL, pad VARBINARY(1000) NOT NULL) ENGINE=InnoDB`, shard))
		}
	}
	ds := heldSpec(b, srvs)
	p, err := stream.StartPipeline(ctx, stream.PipelineConfig{Spec: ds, Clients: map[string]*group.Cursor{heldClient: nil},
		Store:  stream.Config{MaxBytes: heldStoreBytes},
		Logger: slog.New(slog.NewTextHandler(b.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	cons := startHeldConsumer(ctx, p.Store)
	defer cons.stop()
	fail := func(format string, args ...any) {
		b.Helper()
		select {
		case <-p.Done():
			format += fmt.Sprintf(" (the pipeline stopped: %v)", p.Err())
		default:
		}
		if err := cons.failure(); err != nil {
			format += fmt.Sprintf(" (the consumer stopped: %v)", err)
		}
		b.Fatalf(format, args...)
	}
	waitFor := func(what string, ok func() bool) {
		b.Helper()
		err := retry.Wait(ctx, heldWait, func() error {
			if cons.failure() != nil {
				fail("bench: shard DDL: %s: the consumer stopped (%s)", what, cons)
			}
			if !ok() {
				return errors.New("not yet")
			}
			return nil
		})
		if err != nil {
			fail("bench: shard DDL: %s: %v (%s)", what, err, cons)
		}
	}

	// The lock: every shard table known to the merge, then shop_0 alone
	// runs the ALTER.
	waitFor("the merge knows the six shard tables", func() bool {
		st := p.Dest.ShardDDL()
		return st != nil && len(st.Shards["shop.orders"]) == heldShards
	})
	srvs[0].Exec(b, "ALTER TABLE shop_0.orders ADD COLUMN c INT NULL")
	var lock *group.DDLLock
	waitFor("a lock holding shop_0.orders", func() bool {
		if st := p.Dest.ShardDDL(); st != nil && len(st.Locks) == 1 {
			lock = st.Locks[0]
		}
		return lock != nil
	})
	if len(lock.Done) != 1 || lock.Done[0] != "s0/shop_0.orders" || len(lock.Waiting) != heldShards-1 {
		b.Fatalf("bench: shard DDL: lock %+v: want shop_0 done and five waiting", lock)
	}

	before := heldBinlogSizes(b, srvs)
	heap := startHeapSampler()
	cpu := selfCPU()
	began := time.Now()
	if os.Getenv(heldProfileEnv) != "" {
		// Halfway through the load: what the merge holds under way.
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for cons.rows[1].Load() < perShard/2 {
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
			heldProfile(b, "load")
		}()
		defer func() { close(stop); <-done }()
	}
	if err := heldLoad(ctx, srvs, perShard); err != nil {
		fail("bench: shard DDL: load: %v", err)
	}
	r := &heldResult{perShard: perShard, load: time.Since(began)}
	after := heldBinlogSizes(b, srvs)
	for i := range srvs {
		r.binlogBytes += after[i] - before[i]
	}
	r.heldBytes = (after[0] - before[0]) / 2

	// Every other row out, every shop_0 row held; then the unlock.
	heldRows := func() int64 {
		if st := p.Dest.ShardDDL(); st != nil && len(st.Locks) == 1 {
			return st.Locks[0].HeldRows
		}
		return -1
	}
	waitFor("the other shards' rows at the consumer and shop_0's held", func() bool {
		for shard := 1; shard < heldShards; shard++ {
			if cons.rows[shard].Load() < perShard {
				return false
			}
		}
		return heldRows() >= perShard
	})
	r.others = time.Unix(0, cons.lastOther.Load()).Sub(began)
	if n := cons.rows[0].Load(); n != 0 {
		fail("bench: shard DDL: %d rows of shop_0 reached the consumer while the lock held it", n)
	}
	r.held = heldRows()
	heldProfile(b, "held")
	unlocked := time.Now()
	if err := p.Dest.Decide(ctx, lock.ID, group.DecisionUnlock); err != nil {
		fail("bench: shard DDL: unlock: %v", err)
	}
	waitFor("shop_0's held rows at the consumer", func() bool { return cons.rows[0].Load() >= perShard })
	end := time.Unix(0, cons.lastHeld.Load())
	r.reread, r.firstHeld = end.Sub(unlocked), time.Unix(0, cons.firstHeld.Load()).Sub(unlocked)
	r.total = end.Sub(began)
	r.cpu = selfCPU() - cpu
	r.peak, r.live = heap.Stop(), heap.Live()
	heldProfile(b, "reread")
	r.storePeak = p.Store.Stats().PeakBytes
	r.bound = group.MemoryBound(heldServers, group.Config{}, heldStoreBytes)

	// What came: each shard's rows once, shop_0's after its ALTER.
	time.Sleep(2 * time.Duration(ds.Heartbeat)) // anything extra would come now
	cons.stop()
	if err := cons.failure(); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, stream.ErrClosed) {
		b.Fatalf("bench: shard DDL: consumer: %v", err)
	}
	if st := p.Dest.ShardDDL(); len(st.Locks) != 0 {
		b.Fatalf("bench: shard DDL: locks open after the unlock: %+v", st.Locks)
	}
	want := perShard * (perShard + 1) / 2
	for shard := range heldShards {
		n, sum := cons.rows[shard].Load(), cons.idSum[shard]
		if n != perShard || sum != want {
			b.Fatalf("bench: shard DDL: shop_%d: %d rows (ids summing to %d) reached the consumer, want %d (summing to %d)", shard, n, sum, perShard, want)
		}
		r.rows += n
	}
	if cons.early != 0 || cons.alters != 1 {
		b.Fatalf("bench: shard DDL: %d rows of shop_0 came before its ALTER; %d ALTERs of shop.orders came, want 1", cons.early, cons.alters)
	}
	if r.held != perShard {
		b.Fatalf("bench: shard DDL: the lock held %d rows, want %d (all of shop_0's)", r.held, perShard)
	}
	r.eventBytes = cons.bytes.Load()
	return r
}

// heldSpec is the destination over srvs: their shard tables routed to
// shop.orders, strict order, shard_ddl pessimistic.
func heldSpec(b *testing.B, srvs []*mysqltest.Server) *spec.Spec {
	b.Helper()
	ds := spec.Spec{
		Name:      "bench-held",
		Tables:    []string{`shop_\d+\.orders`},
		Route:     []spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}},
		Ordering:  "strict",
		Heartbeat: spec.Duration(100 * time.Millisecond),
		ShardDDL:  spec.ShardDDLPessimistic,
	}
	for i, s := range srvs {
		ds.Sources = append(ds.Sources, spec.Source{Name: fmt.Sprintf("s%d", i), Address: s.Addr(), User: "root",
			Start: spec.Start{Kind: spec.StartEarliest}})
	}
	ds = ds.WithDefaults()
	if err := ds.Validate(); err != nil {
		b.Fatal(err)
	}
	return &ds
}

// heldLoad writes perShard rows into each shard table, one writer per
// server taking turns between its two, heldBatch rows a transaction.
func heldLoad(ctx context.Context, srvs []*mysqltest.Server, perShard int64) error {
	errs := make([]error, len(srvs))
	var wg sync.WaitGroup
	for i, s := range srvs {
		wg.Go(func() {
			errs[i] = heldWrite(ctx, s, []int{i, i + heldServers}, perShard)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("server %d (%s): %w", i, s.Addr(), errs[i])
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func heldWrite(ctx context.Context, s *mysqltest.Server, shards []int, perShard int64) error {
	c, err := shardConn(s)
	if err != nil {
		return err
	}
	defer c.Close()
	for base := int64(0); base < perShard; base += heldBatch {
		for _, shard := range shards {
			if err := ctx.Err(); err != nil {
				return err
			}
			n := min(heldBatch, perShard-base)
			q := fmt.Sprintf(`INSERT INTO shop_%d.orders (id, note, pad)
				SELECT %d + seq, RPAD(CONCAT('order ', %d + seq, ' of shop_%d '), 200, '.'), REPEAT(CHAR(65 + seq %% 26), 1000)
				FROM shop_%d.seq_1_to_%d`, shard, base, base, shard, shard, n)
			res, err := c.Execute(q)
			if err != nil {
				return fmt.Errorf("shop_%d rows %d..: %w", shard, base+1, err)
			}
			if int64(res.AffectedRows) != n {
				return fmt.Errorf("shop_%d rows %d..: %d rows affected, want %d", shard, base+1, res.AffectedRows, n)
			}
		}
	}
	return nil
}

// heldBinlogSizes sums each server's binlog files.
func heldBinlogSizes(b *testing.B, srvs []*mysqltest.Server) []int64 {
	b.Helper()
	out := make([]int64, len(srvs))
	for i, s := range srvs {
		for _, row := range s.Query(b, "SHOW BINARY LOGS") {
			n, err := strconv.ParseInt(row[1], 10, 64)
			if err != nil {
				b.Fatalf("bench: SHOW BINARY LOGS on %s: size %q: %v", s.Addr(), row[1], err)
			}
			out[i] += n
		}
	}
	return out
}

// heldProfile writes a heap profile named name into BRAID_BENCH_HEAP_PROFILE,
// if set. It may run on any goroutine: a failure is logged, not fatal.
func heldProfile(b *testing.B, name string) {
	dir := os.Getenv(heldProfileEnv)
	if dir == "" {
		return
	}
	path := filepath.Join(dir, "shardddl-"+name+".pprof")
	err := func() error {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}()
	if err != nil {
		b.Logf("bench: heap profile %s: %v", path, err)
		return
	}
	b.Logf("heap profile written to %s", path)
}

// heldConsumer reads and acks everything the store holds, counting rows
// per shard table (shop_<i>). The counts and times are read while it
// runs; the rest after stop.
type heldConsumer struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    atomic.Pointer[error]

	rows  [heldShards]atomic.Int64
	bytes atomic.Int64
	// UnixNano: the other shards' last row, shop_0's first and last.
	lastOther, firstHeld, lastHeld atomic.Int64

	// Read after stop.
	idSum  [heldShards]int64
	early  int64 // shop_0 rows before the ALTER of shop.orders
	alters int   // ALTERs of shop.orders
}

func startHeldConsumer(ctx context.Context, store *stream.Store) *heldConsumer {
	ctx, cancel := context.WithCancel(ctx)
	c := &heldConsumer{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		if err := c.run(ctx, store); err != nil {
			c.err.Store(&err)
		}
	}()
	return c
}

func (c *heldConsumer) run(ctx context.Context, store *stream.Store) error {
	var text []byte
	for {
		bt, err := store.Get(ctx, heldClient, 1024, 100*time.Millisecond)
		if err != nil {
			return err
		}
		now := time.Now().UnixNano()
		for _, ev := range bt.Events {
			switch ev.Type {
			case change.EventDDL:
				if s, t := ev.DDL.Logical(); s == "shop" && t == "orders" && strings.HasPrefix(ev.DDL.SQL, "ALTER") {
					c.alters++
				}
			case change.EventRows:
				shard, err := strconv.Atoi(strings.TrimPrefix(ev.Rows[0].Table.Schema, "shop_"))
				if err != nil || shard < 0 || shard >= heldShards {
					return fmt.Errorf("a row of %s.%s", ev.Rows[0].Table.Schema, ev.Rows[0].Table.Name)
				}
				for i := range ev.Rows {
					text, _ = ev.Rows[i].AppendText(text[:0], true, 0)
					id, err := strconv.ParseInt(string(text), 10, 64)
					if err != nil {
						return fmt.Errorf("shop_%d: id %q: %w", shard, text, err)
					}
					c.idSum[shard] += id
				}
				c.bytes.Add(ev.Size())
				if shard == 0 {
					if c.alters == 0 {
						c.early += int64(len(ev.Rows))
					}
					c.firstHeld.CompareAndSwap(0, now)
					c.lastHeld.Store(now)
				} else {
					c.lastOther.Store(now)
				}
				c.rows[shard].Add(int64(len(ev.Rows)))
			}
		}
		if bt.ID >= 0 {
			if err := store.Ack(heldClient, bt.ID); err != nil {
				return err
			}
		}
	}
}

// failure is the error the consumer stopped with, or nil while it runs.
func (c *heldConsumer) failure() error {
	if p := c.err.Load(); p != nil {
		return *p
	}
	return nil
}

// stop ends the consumer and waits for it.
func (c *heldConsumer) stop() {
	c.cancel()
	<-c.done
}

// String shows the counts so far.
func (c *heldConsumer) String() string {
	var b strings.Builder
	b.WriteString("rows at the consumer:")
	for i := range c.rows {
		fmt.Fprintf(&b, " shop_%d %d", i, c.rows[i].Load())
	}
	return b.String()
}
