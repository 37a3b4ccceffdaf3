package group_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/spec"
)

// The tests of group's own logic run a Destination on scripted sources
// (grouptest.Sources) and a fake clock (grouptest.Clock): the test
// appends a source's transactions and heartbeats as a binlog would hold
// them, moves the clock by hand, and reads what the merge emits. No
// server, no sleep: each step waits for the transaction it expects.

// scriptT0 is the scripted tests' clock at start: a whole second, as
// MariaDB's commit times are.
var scriptT0 = time.Unix(1_800_000_000, 0)

// scriptSpec is a destination of n scripted sources s0…s{n-1}, each
// holding shop_i.orders, routed to shop.orders; shard DDL mode mode.
func scriptSpec(n int, mode spec.ShardDDLMode) *spec.Spec {
	s := spec.Spec{Name: "shop", Tables: []string{`shop_\d+\.orders`}, ShardDDL: mode,
		Route:     []spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}},
		Heartbeat: spec.Duration(100 * time.Millisecond)}
	for i := range n {
		s.Sources = append(s.Sources, spec.Source{Name: fmt.Sprintf("s%d", i), Address: "127.0.0.1:1"})
	}
	s = s.WithDefaults()
	return &s
}

// orders is shard schema's orders table (id INT key, note VARCHAR).
func orders(schema string) *change.Table {
	return &change.Table{Schema: schema, Name: "orders", Columns: []change.Column{
		{Name: "id", Type: "int", RawType: "int(11)", Key: true},
		{Name: "note", Type: "varchar", RawType: "varchar(20)"}}}
}

// row is an orders row.
func row(id int64, note string) []change.Value { return []change.Value{id, note} }

// scriptedTx is a transaction the scripted destination emitted.
type scriptedTx struct {
	seq    uint64
	source string
	ddl    string  // the DDL's SQL, for a DDL
	ids    []int64 // each row change's key (its row's after, else before)
	pos    change.Position
	commit time.Time     // its commit time as emitted
	cursor *group.Cursor // after it
	// snapshot marks a snapshot chunk; changes are its row changes.
	snapshot bool
	changes  []change.RowChange
	// lost names the lost transactions of a LOST marker.
	lost string
}

func (x scriptedTx) String() string {
	if x.snapshot {
		return fmt.Sprintf("seq %d: %s chunk %v at %s", x.seq, x.source, x.ids, x.pos)
	}
	if x.ddl != "" {
		return fmt.Sprintf("seq %d: %s DDL %q", x.seq, x.source, x.ddl)
	}
	return fmt.Sprintf("seq %d: %s %v at %s", x.seq, x.source, x.ids, x.pos)
}

const stuckAfter = 10 * time.Second

// scripted is a Destination running on scripted sources.
type scripted struct {
	d      *group.Destination
	txs    chan scriptedTx
	cancel context.CancelFunc
	done   chan error
}

func runScripted(t *testing.T, cfg group.Config) *scripted {
	t.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	d, err := group.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &scripted{d: d, txs: make(chan scriptedTx, 1024), cancel: cancel, done: make(chan error, 1)}
	var cur *scriptedTx
	go func() {
		s.done <- d.Run(ctx, func(ev *change.Event) error {
			switch ev.Type {
			case change.EventBegin:
				cur = &scriptedTx{seq: ev.Seq, source: ev.Source, pos: ev.Pos, commit: ev.CommitTime, snapshot: ev.Snapshot, lost: ev.Lost}
			case change.EventRows:
				for _, rc := range ev.Rows {
					img := rc.Before
					if rc.HasAfter() {
						img = rc.After
					}
					cur.ids = append(cur.ids, img()[0].(int64))
				}
				cur.changes = append(cur.changes, ev.Rows...)
			case change.EventCommit:
				cur.cursor = d.Cursor()
				s.txs <- *cur
				cur = nil
			case change.EventDDL:
				s.txs <- scriptedTx{seq: ev.Seq, source: ev.Source, ddl: ev.DDL.SQL, pos: ev.Pos, cursor: d.Cursor()}
			}
			return nil
		})
	}()
	t.Cleanup(func() { s.stop(t) })
	return s
}

// next waits for the next transaction emitted; a destination that emits
// nothing within stuckAfter is stuck (a liveness guard, far above any
// step's time: it turns a hang into a failure naming the test).
func (s *scripted) next(t *testing.T) scriptedTx {
	t.Helper()
	select {
	case x := <-s.txs:
		return x
	case <-time.After(stuckAfter):
		t.Fatalf("nothing went out within %s: the destination is stuck", stuckAfter)
		return scriptedTx{}
	case err := <-s.done:
		s.done <- err
		t.Fatalf("the destination stopped (%v) before the next transaction", err)
		return scriptedTx{}
	}
}

// none checks that nothing more was emitted, once the destination has
// stopped.
func (s *scripted) none(t *testing.T) {
	t.Helper()
	s.stop(t)
	select {
	case x := <-s.txs:
		t.Errorf("unexpected %s", x)
	default:
	}
}

// stop ends the destination (once) and checks it ended cleanly.
func (s *scripted) stop(t *testing.T) {
	s.cancel()
	if err, ok := <-s.done; ok {
		close(s.done)
		if err != nil {
			t.Errorf("destination stopped with %v", err)
		}
	}
}
