package stream_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// TestReplayAcrossTruncate: a shard table TRUNCATEd after the initial
// snapshot read it, a consumer replaying from an older point (a saved
// cursor among the snapshot's chunks, or the destination's start) gets
// every seq the live client got, each the same transaction: the TRUNCATE
// at its seq, the live changes as they were, and each snapshot chunk at
// its seq, the truncated table's read again with the rows it holds then
// (none), as docs/snapshot.md says of a chunk emitted again.
func TestReplayAcrossTruncate(t *testing.T) {
	srvs, ds := twoShards(t)
	for i, s := range srvs {
		var vals []string
		for id := 1; id <= 40; id++ {
			vals = append(vals, fmt.Sprintf("(%d, 'pre')", id))
		}
		s.Exec(t, fmt.Sprintf("INSERT INTO shop_%d.orders VALUES %s", i, strings.Join(vals, ",")))
		file, pos := s.MasterStatus(t)
		ds.Sources[i].Start.Pos = change.Position{File: file, Pos: pos}
	}
	ds.Snapshot, ds.SnapshotChunkRows = spec.SnapshotInitial, 10
	keep := &group.MemKeeper{}
	p, err := stream.StartPipeline(context.Background(), stream.PipelineConfig{Spec: ds, Serve: true, Keep: keep,
		Store: stream.Config{MaxBytes: 16 << 10}, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { p.Close() }()
	p.Store.Subscribe("live")
	p.Store.Subscribe("old")
	// "old" takes the first chunk (its three events) and keeps the cursor
	// after it, as a consumer that saved it and went away. Fill waits for
	// the three: the merge puts a transaction in the store an event at a
	// time, and Get would hand out what is there at first.
	b, err := p.Store.Fill(context.Background(), "old", 3, 0, time.Minute)
	if err != nil || len(b.Events) != 3 || b.Marks[2] == nil {
		t.Fatalf("old's first batch: %v, %+v", err, b)
	}
	if err := p.Store.Ack("old", b.ID); err != nil {
		t.Fatal(err)
	}
	oldMark := p.Store.Mark("old")
	p.Store.Unsubscribe("old")
	live := newReader(p.Store, "live")
	// Each table's 40 rows in chunks of 10, and a last, empty one that
	// says the table is done: 10 transactions.
	if snap := live.until(t, 10, time.Minute); countRows(snap) != 80 {
		t.Fatalf("the snapshot brought %d rows, want 80: %+v", countRows(snap), snap)
	}
	write(t, srvs, 1000, 30, 5) // 60 transactions
	live.until(t, 70, time.Minute)
	srvs[0].Exec(t, "TRUNCATE TABLE shop_0.orders")
	write(t, srvs, 5000, 30, 5)
	want := live.until(t, 70+1+60, time.Minute)
	checkDense(t, "live", want, 1)
	if f := p.Store.Stats().Floor; f < 10 {
		t.Fatalf("the store still holds the snapshot's chunks (floor %d): make it smaller", f)
	}

	// The rows each table holds now, which a snapshot chunk read again
	// holds of its key range; the last chunk of a table, read to its end,
	// holds those after the snapshot's too (ids past 40).
	now := map[string]bool{}
	var after [2][]string
	for i, s := range srvs {
		for _, r := range s.Query(t, fmt.Sprintf("SELECT id FROM shop_%d.orders ORDER BY id", i)) {
			row := fmt.Sprintf("s%d:%s", i, r[0])
			now[row] = true
			if len(r[0]) > 2 {
				after[i] = append(after[i], row)
			}
		}
	}
	compare := func(who string, got []txn, from uint64) {
		t.Helper()
		checkDense(t, who, got, from)
		lastChunks := 0
		for _, g := range got {
			w := want[g.seq-1]
			switch {
			case g.seq > 10:
				if !slices.Equal(g.rows, w.rows) {
					t.Errorf("%s: seq %d holds %v, the live client's %v", who, g.seq, g.rows, w.rows)
				}
			case len(w.rows) == 0: // a table's last chunk
				lastChunks++
				if len(g.rows) > 0 && !slices.Equal(g.rows, after[g.rows[0][1]-'0']) {
					t.Errorf("%s: seq %d, a table's last chunk read again, holds %v; the table holds %v past the snapshot", who, g.seq, g.rows, after)
				}
			default:
				var held []string
				for _, r := range w.rows {
					if now[r] {
						held = append(held, r)
					}
				}
				if !slices.Equal(g.rows, held) {
					t.Errorf("%s: seq %d, a chunk read again, holds %v; of the live client's %v the table holds %v", who, g.seq, g.rows, w.rows, held)
				}
			}
		}
		if from == 1 && lastChunks != 2 {
			t.Errorf("%s: %d last chunks, want one a table", who, lastChunks)
		}
	}
	for _, st := range []stream.Start{{Kind: stream.StartEarliest}, {Kind: stream.StartSeq, Seq: 4}, {Kind: stream.StartSeq, Seq: 40}} {
		id := fmt.Sprintf("from-%s-%d", st.Kind, st.Seq)
		if err := p.Store.Open(context.Background(), id, stream.OpenOptions{Start: st}); err != nil {
			t.Fatal(err)
		}
		from := max(st.Seq, 1)
		compare(id, newReader(p.Store, id).until(t, len(want)-int(from)+1, time.Minute), from)
	}

	// A new run (another owner) from the live client's cursor: "old"
	// comes back with its saved cursor, after seq 1, and a replay from it
	// serves it.
	liveMark := p.Store.Mark("live")
	p.Close()
	detached := oldMark.Clone()
	detached.Detached = true
	p, err = stream.StartPipeline(context.Background(), stream.PipelineConfig{Spec: ds, Serve: true, Keep: keep,
		Clients: map[string]*group.Cursor{"live": liveMark, "old": detached},
		Store:   stream.Config{MaxBytes: 16 << 10}, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	compare("old", newReader(p.Store, "old").until(t, len(want)-1, time.Minute), 2)
}
