package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/shoptest"
	"github.com/braid-cdc/braid/spec"
)

// seqRows is what one seq of the stream carried: per message, its origin
// database and ids (DDL: "ddl").
type seqRows map[uint64][]string

func (s seqRows) add(seq uint64, what string) {
	if !slices.Contains(s[seq], what) { // a message read again after a failover
		s[seq] = append(s[seq], what)
	}
}

// TestClusterShardDDLLockSurvivesKill: six shard tables on three servers
// behind a three-node cluster, written to throughout. shop_0 runs an
// ALTER: its rows are held and `braid ddl list` shows the lock, shop_0
// done and five waiting. The owner is SIGKILLed: the new owner shows the
// same lock. The other shards run the ALTER, and one DDL goes out. shop_0
// runs a second ALTER, released with `braid ddl unlock` through a node
// that does not own the destination. The stream the consumer got, seq by
// seq, is the one a single uninterrupted merge of the same binlogs with
// the same decision produces, and it holds every row once.
func TestClusterShardDDLLockSurvivesKill(t *testing.T) {
	srvs, c := nodes.StartShop(t, cli)
	c.OwnerOf(t, "shop")
	cs := startConsumer(t, c, "shop", "ddl")
	var writers []*writer
	for i, s := range srvs {
		writers = append(writers, startWriter(t, s, i, 20*time.Millisecond))
	}
	time.Sleep(1500 * time.Millisecond)
	srvs[0].Exec(t, "ALTER TABLE shop_0.orders ADD COLUMN c INT NULL")

	var before wire.DDLLock
	c.WaitFor(t, 30*time.Second, "the lock, shown", func() (bool, string) {
		st, err := nodes.DDLList(cli, "shop", c.Nodes[1].URL())
		if err != nil || len(st.Locks) != 1 || st.Locks[0].HeldRows == 0 {
			return false, fmt.Sprintf("%+v %v", st, err)
		}
		before = st.Locks[0]
		return true, ""
	})
	if !slices.Equal(before.Done, []string{"a/shop_0.orders"}) || len(before.Waiting) != 5 || before.Table != "shop.orders" || !strings.HasPrefix(before.SQL, "ALTER TABLE `shop`.`orders`") {
		t.Fatalf("lock %+v: want a/shop_0.orders done, five waiting", before)
	}
	owner, epoch := c.OwnerOf(t, "shop")
	owner.Kill()
	c.WaitFor(t, 60*time.Second, "a new owner showing the lock", func() (bool, string) {
		n, e := c.OwnerOf(t, "shop")
		if e == epoch {
			return false, "no takeover yet"
		}
		st, err := nodes.DDLList(cli, "shop", n.URL())
		if err != nil || len(st.Locks) != 1 {
			return false, fmt.Sprintf("%+v %v", st, err)
		}
		if l := st.Locks[0]; l.ID != before.ID || l.SQL != before.SQL || !slices.Equal(l.Done, before.Done) || !slices.Equal(l.Waiting, before.Waiting) {
			t.Fatalf("the new owner's lock %+v differs from the old owner's %+v", l, before)
		}
		return true, ""
	})
	owner.MustStart(t, c.Bin, c.JoinOf(owner))
	for db := 1; db < 6; db++ {
		time.Sleep(200 * time.Millisecond)
		srvs[db/2].Exec(t, fmt.Sprintf("ALTER TABLE shop_%d.orders ADD COLUMN c INT NULL", db))
	}
	c.WaitFor(t, 30*time.Second, "the lock to release", func() (bool, string) {
		st, err := nodes.DDLList(cli, "shop", c.Nodes[0].URL())
		return err == nil && len(st.Locks) == 0, fmt.Sprintf("%+v %v", st, err)
	})

	// A second lock, released by an operator through a node that does
	// not own the destination.
	srvs[0].Exec(t, "ALTER TABLE shop_0.orders ADD COLUMN d INT NULL")
	var lock2 int
	c.WaitFor(t, 30*time.Second, "the second lock", func() (bool, string) {
		st, err := nodes.DDLList(cli, "shop", c.Nodes[2].URL())
		if err != nil || len(st.Locks) != 1 || st.Locks[0].HeldRows == 0 {
			return false, fmt.Sprintf("%+v %v", st, err)
		}
		lock2 = st.Locks[0].ID
		return true, ""
	})
	owner, _ = c.OwnerOf(t, "shop")
	var other *nodes.Node
	for _, n := range c.Nodes {
		if n.Name != owner.Name {
			other = n
		}
	}
	out, errs, code := cli("ddl", "unlock", "shop", fmt.Sprint(lock2), "--server", other.URL())
	if code != 0 || !strings.Contains(out, fmt.Sprintf("lock %d of destination shop released", lock2)) {
		t.Fatalf("ddl unlock: exit %d: %s%s", code, out, errs)
	}
	if _, errs, code := cli("ddl", "unlock", "shop", fmt.Sprint(lock2), "--server", other.URL()); code != 1 || !strings.Contains(errs, "no such lock") {
		t.Fatalf("unlocking it again: exit %d: %s", code, errs)
	}
	time.Sleep(time.Second)
	var committed []int64
	for _, w := range writers {
		committed = append(committed, w.halt(t)...)
	}
	waitRows(t, c, cs, committed)
	st, err := nodes.DDLList(cli, "shop", c.Nodes[0].URL())
	if err != nil || len(st.Decisions) != 1 || st.Decisions[0].Lock != lock2 {
		t.Fatalf("decisions kept: %+v %v", st.Decisions, err)
	}

	// What the consumer got, seq by seq.
	got := seqRows{}
	var last uint64
	for _, m := range cs.snapshot() {
		what := fmt.Sprintf("%s %v", m.db, m.ids)
		if len(m.ids) == 0 {
			what = "ddl " + m.db
		}
		got.add(m.seq, what)
		last = max(last, m.seq)
	}
	// The same binlogs merged once, without a kill, with the decision.
	ds, err := spec.Parse([]byte(shoptest.SpecYAML(srvs, "max_clock_skew: 200ms\n")))
	if err != nil {
		t.Fatal(err)
	}
	ds.Name = "shop-reference" // its own replica server ids
	var decisions []group.DDLDecision
	for _, d := range st.Decisions {
		decisions = append(decisions, group.DDLDecision{Lock: d.Lock, Action: group.DecisionAction(d.Action), AfterSeq: d.AfterSeq, Taken: d.Taken})
	}
	want := referenceStream(t, ds, decisions, last)
	for seq := uint64(1); seq <= last; seq++ {
		g, w := got[seq], want[seq]
		slices.Sort(g)
		slices.Sort(w)
		if !slices.Equal(g, w) {
			t.Fatalf("seq %d: the cluster's stream has %q, one merge without a kill %q", seq, g, w)
		}
	}
	t.Logf("%d rows, %d seqs, equal to the uninterrupted merge", len(committed), last)
}

// referenceStream merges ds's sources in-process until seq last and
// returns what each seq carried, as the consumer records it.
func referenceStream(t *testing.T, ds *spec.Spec, decisions []group.DDLDecision, last uint64) seqRows {
	t.Helper()
	keep := &group.MemKeeper{}
	for _, dec := range decisions {
		if err := keep.KeepDecision(t.Context(), dec); err != nil {
			t.Fatal(err)
		}
	}
	d, err := group.New(group.Config{Spec: ds, Keep: keep, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var mu sync.Mutex
	out := seqRows{}
	done := errorsOnce(func() error {
		return d.Run(ctx, func(ev *change.Event) error {
			mu.Lock()
			defer mu.Unlock()
			switch ev.Type {
			case change.EventDDL:
				ls, _ := ev.DDL.Logical()
				out.add(ev.Seq, "ddl "+ls)
			case change.EventRows:
				var ids []int64
				for i := range ev.Rows {
					if v := ev.Rows[i].After(); v != nil {
						ids = append(ids, v[0].(int64))
					}
				}
				out.add(ev.Seq, fmt.Sprintf("%s %v", ev.Rows[0].Table.Schema, ids))
			}
			if ev.Seq >= last && (ev.Type == change.EventCommit || ev.Type == change.EventDDL) {
				cancel()
			}
			return nil
		})
	})
	if err := <-done; err != nil {
		t.Fatalf("reference merge: %v", err)
	}
	return out
}

// errorsOnce runs f on a goroutine and delivers its error.
func errorsOnce(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}
