package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/sqlutf8"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// LatencyConfig describes one latency run: steady writes at a fixed rate
// into every shard while a destination over them is read by one consumer.
type LatencyConfig struct {
	// Addrs are the shard servers (host:port), one source each, in source
	// order. Server i gets the table shop_<i>.orders. Required.
	Addrs []string
	// User logs in to write and to read the binlog. Default: root.
	User string
	// Ordering is the destination's ordering, "strict" or "per-source".
	// Default: strict. Heartbeat and max_clock_skew stay at the spec's
	// defaults (spec.Spec.WithDefaults).
	Ordering string
	// Rate is the total number of single-row transactions a second, spread
	// evenly over the shards. Default: 200.
	Rate float64
	// Warmup is how long the writes run before the measured window, whose
	// rows are discarded; Measure the window (rows whose `sent` falls in it
	// are measured); Cooldown how long the writes go on after it, so that
	// the window's last rows see steady traffic, not the idle tail.
	// Defaults: 2s, 12s, 1.5s.
	Warmup, Measure, Cooldown time.Duration
	// Drain bounds how long the consumer may take, after the last write,
	// to receive every row written; a stream that takes longer fails the
	// run. Default: 30s.
	Drain time.Duration
	// Logger receives the destination's lines. Default: discard.
	Logger *slog.Logger
}

func (c LatencyConfig) withDefaults() LatencyConfig {
	if c.User == "" {
		c.User = spec.DefaultUser
	}
	if c.Ordering == "" {
		c.Ordering = "strict"
	}
	if c.Rate <= 0 {
		c.Rate = 200
	}
	if c.Warmup <= 0 {
		c.Warmup = 2 * time.Second
	}
	if c.Measure <= 0 {
		c.Measure = 12 * time.Second
	}
	if c.Cooldown <= 0 {
		c.Cooldown = 1500 * time.Millisecond
	}
	if c.Drain <= 0 {
		c.Drain = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// LatencyResult is what a latency run measured.
type LatencyResult struct {
	// Spec is the destination's spec, defaults applied.
	Spec spec.Spec
	// Latencies are the commit-to-consumer latencies of the rows whose
	// `sent` lies in the measured window, sorted.
	Latencies []time.Duration
	// BySource are the same latencies per source (shard), each sorted.
	BySource [][]time.Duration
	// Written counts the rows written per shard over the whole run
	// (warm-up and cool-down included); every one was received.
	Written []int
	// Behind counts the writes that went out more than one shard interval
	// after their slot: the writer could not keep the rate.
	Behind int
	// Commits are the writers' INSERT round trips (sent to reply), sorted:
	// how long before the commit itself `sent` may have been read.
	Commits []time.Duration
	// FromReply are the measured rows' latencies counted from the reply to
	// their INSERT instead of from `sent`, sorted: a lower bound (negative
	// when the consumer had the row before the writer had the reply). Where
	// a high latency is the server's slow commit (a disk or a busy machine),
	// it shows as a high Latencies value and an ordinary FromReply one.
	FromReply []time.Duration
	// Ready is how long the destination took, after starting, to hear
	// from every source (its first heartbeat or event), before the writes
	// began.
	Ready time.Duration
	// Drained is how long the consumer took, after the last write, to
	// receive every row.
	Drained time.Duration
}

// Quantile returns the q-quantile (0 to 1, nearest rank) of the measured
// latencies; 0 when none was measured.
func (r *LatencyResult) Quantile(q float64) time.Duration { return latencyQuantile(r.Latencies, q) }

// Max returns the highest measured latency.
func (r *LatencyResult) Max() time.Duration { return latencyQuantile(r.Latencies, 1) }

// latencyQuantile is the nearest-rank q-quantile of sorted durations.
func latencyQuantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// latencySchemaSQL creates a shard's table; {shop} stands for its schema.
// `sent` is the generator's clock (µs since the epoch) when it sent the
// statement that commits the row.
var latencySchemaSQL = []string{
	"CREATE DATABASE IF NOT EXISTS {shop}",
	`CREATE TABLE IF NOT EXISTS {shop}.orders (
		id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
		customer_id INT UNSIGNED NOT NULL,
		status ENUM('new','paid','shipped','cancelled') NOT NULL,
		total DECIMAL(12,2) NOT NULL,
		note VARCHAR(64) NULL,
		sent BIGINT NOT NULL
	) ENGINE=InnoDB`,
}

// latencySentColumn is the column that carries the generator's clock.
const latencySentColumn = "sent"

// MeasureLatency runs one latency measurement. It creates shop_<i>.orders
// on server i if missing, notes every server's binlog end, and starts a
// destination over the servers from there (stream.StartPipeline into an
// stream.Store, as a node serves it), read by one consumer that gets
// batches of up to 1,024 events and acks each. Once the destination has
// heard from every source, one writer per server inserts single-row
// transactions (autocommit INSERTs) at cfg.Rate in all, the shards' slots
// interleaved evenly, for Warmup + Measure + Cooldown. Each row's `sent`
// is the writer's clock right before it sends the INSERT that commits it;
// the row's latency is the time the consumer got the batch holding it
// minus `sent`. Writers and braid run on one machine, so the clocks agree.
//
// The run fails unless the consumer receives every row written, each
// shard's rows in the order written, in transactions with dense seqs, in
// strict order also in merge-key order with no late transaction.
func MeasureLatency(ctx context.Context, cfg LatencyConfig) (*LatencyResult, error) {
	cfg = cfg.withDefaults()
	n := len(cfg.Addrs)
	if n == 0 {
		return nil, errors.New("bench: latency: no server")
	}
	conns := make([]*client.Conn, n)
	defer func() {
		for _, c := range conns {
			if c != nil {
				_ = c.Close()
			}
		}
	}()
	ds := spec.Spec{Name: "bench-latency-" + cfg.Ordering, Tables: SelectedTables, Ordering: spec.Ordering(cfg.Ordering)}
	for i, addr := range cfg.Addrs {
		c, err := sqlutf8.Connect(ctx, addr, cfg.User, "", "", nil)
		if err != nil {
			return nil, fmt.Errorf("bench: latency: connect to %s: %w", addr, err)
		}
		conns[i] = c
		for _, q := range latencySchemaSQL {
			if _, err := c.Execute(latencyShopSQL(q, i)); err != nil {
				return nil, fmt.Errorf("bench: latency: %s on %s: %w", firstLine(latencyShopSQL(q, i)), addr, err)
			}
		}
		pos, err := masterStatus(c)
		if err != nil {
			return nil, err
		}
		ds.Sources = append(ds.Sources, spec.Source{Name: fmt.Sprintf("s%d", i), Address: addr, User: cfg.User,
			Start: spec.Start{Kind: spec.StartPosition, Pos: pos}})
	}
	ds = ds.WithDefaults()
	if err := ds.Validate(); err != nil {
		return nil, fmt.Errorf("bench: latency: %w", err)
	}
	res := &LatencyResult{Spec: ds}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	const clientID = "bench-latency"
	began := time.Now()
	p, err := stream.StartPipeline(ctx, stream.PipelineConfig{Spec: &ds, Clients: map[string]*group.Cursor{clientID: nil}, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("bench: latency: %w", err)
	}
	defer p.Close()
	store := p.Store
	if err := latencyWaitHeard(ctx, p, n); err != nil {
		return nil, err
	}
	res.Ready = time.Since(began)

	// The writers run on their own goroutines; the consumer on this one.
	plan := latencyWritePlan{start: time.Now().Add(10 * time.Millisecond), shards: n, rate: cfg.Rate}
	plan.end = plan.start.Add(cfg.Warmup + cfg.Measure + cfg.Cooldown)
	from := plan.start.Add(cfg.Warmup).UnixMicro()
	to := plan.start.Add(cfg.Warmup + cfg.Measure).UnixMicro()
	want := atomic.Int64{}
	want.Store(-1) // unknown until the writers are done
	var (
		wrote time.Time
		rtts  []map[int64]time.Duration // per shard: each row's INSERT round trip by id
	)
	writeDone := make(chan error, 1)
	go func() {
		var err error
		rtts, err = plan.run(ctx, conns, res)
		if err != nil {
			cancel(err)
		}
		total := 0
		for _, w := range res.Written {
			total += w
		}
		wrote = time.Now()
		want.Store(int64(total)) // publishes rtts, Written, Behind, Commits and wrote
		writeDone <- err
	}()

	chk := newLatencyChecker(n, ds.Ordering == "strict")
	type sample struct {
		src int
		id  int64
		lat time.Duration
	}
	var (
		got      int64
		measured []sample
	)
	var consumeErr error
	for consumeErr == nil {
		if w := want.Load(); w >= 0 && got >= w {
			res.Drained = time.Since(wrote)
			break
		} else if w >= 0 && time.Since(wrote) > cfg.Drain {
			consumeErr = fmt.Errorf("bench: latency: %d of %d rows received %v after the last write", got, w, cfg.Drain)
			break
		}
		b, err := store.Get(ctx, clientID, 1024, 100*time.Millisecond)
		now := time.Now()
		if err != nil {
			if errors.Is(err, stream.ErrClosed) {
				consumeErr = fmt.Errorf("bench: latency: the destination stopped: %w", p.Err())
			} else {
				consumeErr = fmt.Errorf("bench: latency: %w", context.Cause(ctx))
			}
			break
		}
		if b.ID < 0 {
			continue
		}
		for _, ev := range b.Events {
			src, rows, err := chk.check(ev)
			if err != nil {
				consumeErr = err
				break
			}
			for _, r := range rows {
				got++
				if r.sent >= from && r.sent < to {
					measured = append(measured, sample{src, r.id, now.Sub(time.UnixMicro(r.sent))})
				}
			}
		}
		if consumeErr == nil {
			consumeErr = store.Ack(clientID, b.ID)
		}
	}
	cancel(consumeErr)
	if err := <-writeDone; err != nil && !errors.Is(err, context.Canceled) {
		return nil, fmt.Errorf("bench: latency: write: %w", err)
	}
	if consumeErr != nil {
		return nil, consumeErr
	}
	// In per-source order the merger counts every transaction that goes
	// out below another source's last key as late: there it means nothing.
	if late := p.Dest.Late(); late > 0 && ds.Ordering == "strict" {
		return nil, fmt.Errorf("bench: latency: %d transactions came late, out of order", late)
	}
	res.BySource = make([][]time.Duration, n)
	for _, m := range measured {
		res.Latencies = append(res.Latencies, m.lat)
		res.BySource[m.src] = append(res.BySource[m.src], m.lat)
		if rtt, ok := rtts[m.src][m.id]; ok {
			res.FromReply = append(res.FromReply, m.lat-rtt)
		}
	}
	slices.Sort(res.Latencies)
	for _, l := range res.BySource {
		slices.Sort(l)
	}
	slices.Sort(res.FromReply)
	slices.Sort(res.Commits)
	return res, nil
}

// latencyShopSQL puts shard shop's schema, shop_<shop>, into q.
func latencyShopSQL(q string, shop int) string {
	return strings.ReplaceAll(q, "{shop}", fmt.Sprintf("shop_%d", shop))
}

// latencyWaitHeard waits until the destination has heard from every source (a
// heartbeat once it is idle at the end of the binlog), so that the writes
// begin against a running stream; after 10 s it goes on regardless: the
// warm-up covers a slow start.
func latencyWaitHeard(ctx context.Context, p *stream.Pipeline, n int) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		heard := 0
		for _, s := range p.Dest.Stats().Sources {
			if !s.LastSeen.IsZero() {
				heard++
			}
		}
		if heard == n {
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("bench: latency: the destination stopped before the writes: %w", p.Err())
		case <-ctx.Done():
			return fmt.Errorf("bench: latency: %w", context.Cause(ctx))
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// latencyWritePlan schedules the writes: transaction k of shard i goes at
// start + (k·shards + i) / rate, so the shards' slots interleave evenly,
// until end. A writer that falls behind sends at once until it has caught
// up.
type latencyWritePlan struct {
	start, end time.Time
	shards     int
	rate       float64
}

func (w latencyWritePlan) slot(shard, k int) time.Time {
	return w.start.Add(time.Duration(float64(k*w.shards+shard) / w.rate * float64(time.Second)))
}

// run writes into every shard through conns until end, fills in res's
// Written, Behind and Commits, and returns per shard each row's INSERT
// round trip by id. The first failure stops the others.
func (w latencyWritePlan) run(ctx context.Context, conns []*client.Conn, res *LatencyResult) ([]map[int64]time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	interval := time.Duration(float64(w.shards) / w.rate * float64(time.Second))
	written := make([]int, len(conns))
	behind := make([]int, len(conns))
	commits := make([][]time.Duration, len(conns))
	rtts := make([]map[int64]time.Duration, len(conns))
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		rtts[i] = map[int64]time.Duration{}
		wg.Go(func() {
			timer := time.NewTimer(0)
			defer timer.Stop()
			<-timer.C
			for k := 0; ; k++ {
				at := w.slot(i, k)
				if !at.Before(w.end) {
					return
				}
				if d := time.Until(at); d > 0 {
					timer.Reset(d)
					select {
					case <-timer.C:
					case <-ctx.Done():
						return
					}
				} else if -d > interval {
					behind[i]++
				}
				sent := time.Now()
				q := fmt.Sprintf("INSERT INTO shop_%d.orders (customer_id, status, total, note, sent) VALUES (%d, '%s', %d.%02d, 'order %d', %d)",
					i, (k*7919)%1000003, []string{"new", "paid", "shipped", "cancelled"}[k%4], k%10000, k%100, k, sent.UnixMicro())
				r, err := c.Execute(q)
				if err != nil {
					errs[i] = fmt.Errorf("shard %d: %w", i, err)
					cancel()
					return
				}
				rtt := time.Since(sent)
				commits[i] = append(commits[i], rtt)
				rtts[i][int64(r.InsertId)] = rtt
				if r.AffectedRows != 1 {
					errs[i] = fmt.Errorf("shard %d: INSERT affected %d rows, want 1", i, r.AffectedRows)
					cancel()
					return
				}
				written[i]++
			}
		})
	}
	wg.Wait()
	res.Written = written
	for i := range conns {
		res.Behind += behind[i]
		res.Commits = append(res.Commits, commits[i]...)
	}
	if err := errors.Join(errs...); err != nil {
		return rtts, err
	}
	return rtts, ctx.Err()
}

// latencyChecker reads the consumer's events: it returns each row's id and
// `sent` and checks what the stream promises: every shard's rows in the order
// written (ids increasing), transactions whole with dense seqs and, in
// strict order, in merge-key order.
type latencyChecker struct {
	strict bool
	seq    uint64                   // the last transaction's seq
	open   bool                     // a transaction is open
	last   []int64                  // per source: its last merge-key time (µs)
	lastID []int64                  // per source: the last id received
	key    group.Key                // the last transaction's merge key
	sent   map[*change.Table][2]int // per table schema: the id and sent columns
}

func newLatencyChecker(n int, strict bool) *latencyChecker {
	return &latencyChecker{strict: strict, last: make([]int64, n), lastID: make([]int64, n),
		key: group.Key{Time: -1 << 63}, sent: map[*change.Table][2]int{}}
}

// source returns the index of a source named s<i>.
func (c *latencyChecker) source(ev *change.Event) (int, error) {
	var i int
	if _, err := fmt.Sscanf(ev.Source, "s%d", &i); err != nil || i < 0 || i >= len(c.last) {
		return 0, fmt.Errorf("bench: latency: event of unknown source %q", ev.Source)
	}
	return i, nil
}

// latencyRow is a received row's id and `sent`.
type latencyRow struct{ id, sent int64 }

// check checks ev and returns its source's index and, for an EventRows,
// its rows.
func (c *latencyChecker) check(ev *change.Event) (int, []latencyRow, error) {
	src, err := c.source(ev)
	if err != nil {
		return 0, nil, err
	}
	switch ev.Type {
	case change.EventBegin, change.EventDDL:
		if c.open {
			return 0, nil, fmt.Errorf("bench: latency: seq %d (%s) began inside seq %d", ev.Seq, ev.Source, c.seq)
		}
		if ev.Seq != c.seq+1 {
			return 0, nil, fmt.Errorf("bench: latency: seq %d after %d: not dense", ev.Seq, c.seq)
		}
		c.seq, c.open = ev.Seq, ev.Type == change.EventBegin
		t := max(ev.CommitTime.UnixMicro(), c.last[src])
		c.last[src] = t
		k := group.Key{Time: t, Source: src}
		if c.strict && k.Less(c.key) {
			return 0, nil, fmt.Errorf("bench: latency: seq %d (%s at %s) has key %s, below the previous %s", ev.Seq, ev.Source, ev.Pos, k, c.key)
		}
		c.key = k
		if ev.Type == change.EventDDL {
			return 0, nil, fmt.Errorf("bench: latency: unexpected DDL from %s at %s: %s", ev.Source, ev.Pos, ev.DDL.SQL)
		}
	case change.EventCommit:
		if !c.open || ev.Seq != c.seq {
			return 0, nil, fmt.Errorf("bench: latency: commit of seq %d (%s) outside its transaction", ev.Seq, ev.Source)
		}
		c.open = false
	case change.EventRows:
		if !c.open || ev.Seq != c.seq {
			return 0, nil, fmt.Errorf("bench: latency: rows of seq %d (%s) outside their transaction", ev.Seq, ev.Source)
		}
		var rows []latencyRow
		for i := range ev.Rows {
			rc := &ev.Rows[i]
			cols, ok := c.sent[rc.Table]
			if !ok {
				cols = [2]int{rc.Table.ColumnIndex("id"), rc.Table.ColumnIndex(latencySentColumn)}
				if cols[0] < 0 || cols[1] < 0 {
					return 0, nil, fmt.Errorf("bench: latency: table %s has no id or %s column", rc.Table.FullName(), latencySentColumn)
				}
				c.sent[rc.Table] = cols
			}
			if rc.Kind != change.Insert {
				return 0, nil, fmt.Errorf("bench: latency: %s of %s from %s at %s: only inserts were written", rc.Kind, rc.Table.FullName(), ev.Source, ev.Pos)
			}
			after := rc.After()
			id, ok1 := after[cols[0]].(int64)
			sent, ok2 := after[cols[1]].(int64)
			if !ok1 || !ok2 {
				return 0, nil, fmt.Errorf("bench: latency: %s row from %s: id %T, sent %T, want int64", rc.Table.FullName(), ev.Source, after[cols[0]], after[cols[1]])
			}
			if id <= c.lastID[src] {
				return 0, nil, fmt.Errorf("bench: latency: %s row id %d from %s after id %d: out of order or repeated", rc.Table.FullName(), id, ev.Source, c.lastID[src])
			}
			c.lastID[src] = id
			rows = append(rows, latencyRow{id, sent})
		}
		return src, rows, nil
	}
	return src, nil, nil
}
