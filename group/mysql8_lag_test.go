package group_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqlsource"
	"github.com/braid-cdc/braid/internal/testutil/mysqlsource/mysqlbinlog"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/spec"
)

// TestLaggingMySQLReplica: a MySQL replica keeps each transaction's
// original_commit_timestamp, its primary's commit time, and braid orders
// by it. Read while the replica runs an hour behind its primary, a
// transaction it applies now has a key an hour old, far below what the
// replica's heartbeats (braid's clock less max_clock_skew) promised while
// it was idle: the merge sends it at once, after the other shard's
// transaction of now, and counts it late (Stats.Late,
// braid_destination_late_transactions_total), with its original commit
// time kept. Nothing is dropped and nothing waits; the order is the
// order of arrival, not the order the same history read from the
// primaries would have (docs/sources.md).
func TestLaggingMySQLReplica(t *testing.T) {
	orders := func(schema string) *mysqlbinlog.TableDef {
		return &mysqlbinlog.TableDef{Schema: schema, Name: "orders", PrimaryKey: []string{"id"}, Columns: []mysqlbinlog.ColumnDef{
			{Name: "id", Type: "int", NotNull: true}, {Name: "note", Type: "varchar(20)"}}}
	}
	insert := func(schema string, id int, commit, original time.Time) mysqlbinlog.Txn {
		return mysqlbinlog.Txn{CommitTime: commit, OriginalCommitTime: original, Statements: []mysqlbinlog.Statement{{
			Kind: mysqlbinlog.Insert, Table: schema + ".orders", Rows: []mysqlbinlog.Row{{After: []any{id, schema}}}}}}
	}
	start := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	lag := func(i int, commit time.Time) time.Time {
		if i == 1 {
			return commit.Add(-time.Hour)
		}
		return time.Time{} // this server is the source
	}
	type live struct {
		w    *mysqlbinlog.Writer
		feed *mysqlsource.Feed
	}
	var srcs []live
	ds := spec.Spec{Name: "shop", Tables: []string{`shop_\d+\.orders`},
		Route:     []spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}},
		Heartbeat: spec.Duration(100 * time.Millisecond)}
	for i := range 2 {
		schema := fmt.Sprintf("shop_%d", i)
		s := mysqlsource.Start(t, mysqlsource.Config{Version: mysqlsource.Version84, ServerID: uint32(10 + i)})
		w, err := mysqlbinlog.NewWriter(mysqlbinlog.Server{Version: mysqlsource.Version84, ServerID: uint32(10 + i), Start: start.Add(-time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		for _, txn := range []mysqlbinlog.Txn{
			{DDL: &mysqlbinlog.DDL{Schema: schema, CreatesDatabase: true, SQL: "CREATE DATABASE " + schema}, CommitTime: start},
			{DDL: &mysqlbinlog.DDL{Schema: schema, Table: orders(schema)}, CommitTime: start.Add(time.Millisecond)},
			// Shard 1 is read from a replica an hour behind its
			// primary: it applies at start+1s what its primary
			// committed an hour before.
			insert(schema, 1+10*i, start.Add(time.Second), lag(i, start.Add(time.Second))),
		} {
			if _, err := w.Write(txn); err != nil {
				t.Fatal(err)
			}
		}
		feed := s.Feed(w)
		if err := feed.Sync(); err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, live{w, feed})
		ds.Sources = append(ds.Sources, spec.Source{Name: fmt.Sprintf("s%d", i), Address: s.Addr(), User: "root",
			Start: spec.Start{Kind: spec.StartEarliest}})
	}
	ds = ds.WithDefaults()
	d := runScripted(t, group.Config{Spec: &ds})
	for range 3 { // the shards' CREATE TABLE, merged into one, and the first rows
		if x := d.next(t); x.ddl == "" && len(x.ids) != 1 {
			t.Fatalf("unexpected %s", x)
		}
	}
	// Both sources idle, each with a heartbeat seen more than
	// max_clock_skew after mark: each promised a watermark past mark.
	mark := time.Now()
	retry.Until(t, 20*time.Second, func() error {
		for i, s := range d.d.Stats().Sources {
			if !s.Idle || !s.LastSeen.After(mark.Add(time.Duration(ds.MaxClockSkew)+100*time.Millisecond)) {
				return fmt.Errorf("source %d: idle %v, last seen %v", i, s.Idle, s.LastSeen)
			}
		}
		return nil
	})
	now := time.Now().Truncate(time.Microsecond)
	// Shard 0 commits now; shard 1's replica, still an hour behind,
	// applies now what its primary committed an hour ago.
	write := func(i int, txn mysqlbinlog.Txn) {
		t.Helper()
		if _, err := srcs[i].w.Write(txn); err != nil {
			t.Fatal(err)
		}
		if err := srcs[i].feed.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	write(0, insert("shop_0", 2, now, time.Time{}))
	first := d.next(t)
	write(1, insert("shop_1", 12, now.Add(time.Millisecond), lag(1, now)))
	lagged := d.next(t)
	if first.source != "s0" || len(first.ids) != 1 || first.ids[0] != 2 || !first.commit.Equal(now) {
		t.Errorf("first out %s at %v, want s0's row 2 at %v", first, first.commit, now)
	}
	if lagged.source != "s1" || len(lagged.ids) != 1 || lagged.ids[0] != 12 || lagged.seq != first.seq+1 {
		t.Errorf("then %s, want s1's row 12 at seq %d", lagged, first.seq+1)
	}
	if want := now.Add(-time.Hour); !lagged.commit.Equal(want) {
		t.Errorf("the replica's transaction went out with commit time %v, want its original commit time %v", lagged.commit, want)
	}
	// Stats are published at the merge's next tick.
	retry.Until(t, 10*time.Second, func() error {
		if st := d.d.Stats(); st.Late != 1 {
			return fmt.Errorf("%d transactions counted late, want 1 (the replica's)", st.Late)
		}
		return nil
	})
}
