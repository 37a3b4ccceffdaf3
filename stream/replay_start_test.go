package stream_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/stream"
)

// shaped reads a client id's stream from a store, acking what it read,
// and keeps each transaction as it shows: every row with the column
// names it came with and the values of id and extra, every DDL with its
// statement.
type shaped struct {
	store  *stream.Store
	client string
	mu     sync.Mutex
	txs    []shapedTx
	open   *shapedTx
}

type shapedTx struct {
	seq   uint64
	items []string
}

func (r *shaped) read(ctx context.Context) error {
	b, err := r.store.Get(ctx, r.client, 256, 200*time.Millisecond)
	if err != nil || b.ID < 0 {
		return err
	}
	r.mu.Lock()
	for _, ev := range b.Events {
		if n := len(r.txs); n > 0 && ev.Seq <= r.txs[n-1].seq {
			continue
		}
		switch ev.Type {
		case change.EventBegin:
			r.open = &shapedTx{seq: ev.Seq}
		case change.EventRows:
			for i := range ev.Rows {
				row := &ev.Rows[i]
				var cols []string
				vals := row.After()
				for j, c := range row.Table.Columns {
					switch c.Name {
					case "note":
						cols = append(cols, c.Name)
					default:
						cols = append(cols, fmt.Sprintf("%s=%v", c.Name, vals[j]))
					}
				}
				r.open.items = append(r.open.items, fmt.Sprintf("%s %s.%s (%s)", ev.Source, row.Table.Schema, row.Table.Name, strings.Join(cols, " ")))
			}
		case change.EventCommit:
			r.txs = append(r.txs, *r.open)
			r.open = nil
		case change.EventDDL:
			r.txs = append(r.txs, shapedTx{seq: ev.Seq, items: []string{ev.Source + " DDL " + ev.DDL.SQL}})
		}
	}
	r.mu.Unlock()
	return r.store.Ack(r.client, b.ID)
}

// until reads until the client has n transactions, or fails.
func (r *shaped) until(t *testing.T, n int) []shapedTx {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for len(r.txs) < n {
		if time.Now().After(deadline) {
			t.Fatalf("client %s: %d transactions after 2 minutes, want %d", r.client, len(r.txs), n)
		}
		if err := r.read(context.Background()); err != nil {
			t.Fatalf("client %s, after %d transactions: %v", r.client, len(r.txs), err)
		}
	}
	return slices.Clone(r.txs)
}

// TestReplayFromStartAfterAlter: a late client id that starts at earliest
// after the shard tables were ALTERed (a column added) replays the
// destination from its start with the schema of that time: the rows
// before the ALTER with the columns they had, the ALTER at its seq, the
// rows after it with the new column, the same stream the live client
// got. The binlogs name no columns (binlog_row_metadata is MINIMAL), so
// the servers' schema now, which has the column, cannot label the older
// rows: the destination's start cursor, kept when its first run began,
// does. A new run of the destination (another owner) with no client
// behind it finds that cursor in its keeper and serves a late client the
// same way.
func TestReplayFromStartAfterAlter(t *testing.T) {
	srvs, ds := twoShards(t)
	keep := &group.MemKeeper{}
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	run := func(clients map[string]*group.Cursor) *stream.Pipeline {
		p, err := stream.StartPipeline(context.Background(), stream.PipelineConfig{Spec: ds, Serve: true, Keep: keep, Clients: clients,
			Store: stream.Config{MaxBytes: 64 << 10}, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := run(nil)
	defer func() { p.Close() }()
	p.Store.Subscribe("live")
	live := &shaped{store: p.Store, client: "live"}

	// The readers stream before anything is written: the schema they
	// read holds at their start.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if !slices.ContainsFunc(p.Dest.Stats().Sources, func(s group.SourceStats) bool { return !s.Connected }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sources are not all connected after a minute: %+v", p.Dest.Stats().Sources)
		}
	}
	write(t, srvs, 1, 60, 5) // 120 transactions: more than the store holds
	for i, s := range srvs {
		s.Exec(t, fmt.Sprintf("ALTER TABLE shop_%d.orders ADD COLUMN extra INT NULL", i))
	}
	for i, s := range srvs {
		var sqls []string
		for x := 0; x < 20; x++ {
			id := 1000 + x
			sqls = append(sqls, fmt.Sprintf("INSERT INTO shop_%d.orders (id, note, extra) VALUES (%d, '%s', %d)", i, id, strings.Repeat("y", 150), 2*id))
		}
		s.Exec(t, sqls...)
	}
	const total = 120 + 2 + 40
	want := live.until(t, total)
	if f := p.Store.Stats().Floor; f == 0 {
		t.Fatalf("the store still holds the first transaction (floor %d): make it smaller", f)
	}
	// The live stream is the reference: it holds what was written.
	checkShapes(t, want)
	same := func(who string, got []shapedTx) {
		t.Helper()
		for i := range want {
			if got[i].seq != want[i].seq || !slices.Equal(got[i].items, want[i].items) {
				t.Fatalf("%s's transaction %d: %+v; the live client's: %+v", who, i, got[i], want[i])
			}
		}
	}

	if err := p.Store.Open(context.Background(), "late", stream.OpenOptions{Start: stream.Start{Kind: stream.StartEarliest}}); err != nil {
		t.Fatal(err)
	}
	same("late", (&shaped{store: p.Store, client: "late"}).until(t, total))

	// The start cursor is kept, with each source's schema there.
	kept, _ := keep.Cursors()
	start := kept[group.StartCursorID]
	if start == nil || start.Seq != 0 || len(start.Sources) != len(ds.Sources) {
		t.Fatalf("the keeper's start cursor: %+v", start)
	}
	for i, sc := range start.Sources {
		if sc.Pos != ds.Sources[i].Start.Pos || sc.Schema == nil {
			t.Fatalf("start cursor of source %s: at %v (want the spec's start %v), schema kept %v", sc.Name, sc.Pos, ds.Sources[i].Start.Pos, sc.Schema != nil)
		}
	}

	// A new run (a new owner) from the live client's cursor, every kept
	// cursor given as destination.Run gives them: a late client there
	// replays from the start too.
	mark := p.Store.Mark("live")
	p.Close()
	if err := keep.SaveCursor("live", mark); err != nil {
		t.Fatal(err)
	}
	all, _ := keep.Cursors()
	p = run(all)
	if _, ok := all[group.StartCursorID]; !ok || p.Store.Subscribed(group.StartCursorID) {
		t.Fatalf("the start cursor is a client of the new run's store (kept: %v)", ok)
	}
	if err := p.Store.Open(context.Background(), "later", stream.OpenOptions{Start: stream.Start{Kind: stream.StartEarliest}}); err != nil {
		t.Fatal(err)
	}
	same("later", (&shaped{store: p.Store, client: "later"}).until(t, total))
	if err := stream.CheckClientID(group.StartCursorID); err == nil {
		t.Errorf("a consumer may take the client id %q", group.StartCursorID)
	}
}

// checkShapes checks a stream of the test's workload: per source, the
// rows before its ALTER have id and note, those after it id, note and
// extra (twice the id).
func checkShapes(t *testing.T, txs []shapedTx) {
	t.Helper()
	altered := map[string]bool{}
	for _, tx := range txs {
		for _, it := range tx.items {
			src, rest, _ := strings.Cut(it, " ")
			if strings.HasPrefix(rest, "DDL ") {
				altered[src] = true
				continue
			}
			var db string
			var id, extra int
			if altered[src] {
				if _, err := fmt.Sscanf(rest, "%s (id=%d note extra=%d)", &db, &id, &extra); err != nil || extra != 2*id {
					t.Fatalf("a row of %s after its ALTER: %q", src, it)
				}
			} else if _, err := fmt.Sscanf(rest, "%s (id=%d note)", &db, &id); err != nil || strings.Contains(rest, "extra") {
				t.Fatalf("a row of %s before its ALTER: %q", src, it)
			}
		}
	}
	if len(altered) != 2 {
		t.Fatalf("ALTERs seen on %d sources, want 2", len(altered))
	}
}
