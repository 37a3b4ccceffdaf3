package raftstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/schema"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/spec"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testLogger logs warnings and errors to the test's output.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// testCluster is n in-process nodes on loopback TCP with bolt files in
// temporary directories.
type testCluster struct {
	t     testing.TB
	mod   func(*Config)
	nodes []*Store // nil while a node is down
	dirs  []string
	addrs []string
}

func (c *testCluster) config(i int, addr string) Config {
	cfg := Config{
		NodeID:   fmt.Sprintf("n%d", i+1),
		DataDir:  c.dirs[i],
		BindAddr: addr,
		Logger:   testLogger(c.t),
	}
	if c.mod != nil {
		c.mod(&cfg)
	}
	return cfg
}

// newCluster starts and bootstraps n voters and waits for a leader.
func newCluster(t testing.TB, n int, mod func(*Config)) *testCluster {
	t.Helper()
	c := &testCluster{t: t, mod: mod}
	var servers []Server
	for i := range n {
		c.dirs = append(c.dirs, filepath.Join(t.TempDir(), fmt.Sprintf("n%d", i+1)))
		s, err := Open(c.config(i, "127.0.0.1:0"))
		if err != nil {
			t.Fatal(err)
		}
		c.nodes = append(c.nodes, s)
		c.addrs = append(c.addrs, s.Addr())
		servers = append(servers, Server{ID: s.ID(), Addr: s.Addr()})
	}
	t.Cleanup(c.shutdown)
	for _, s := range c.nodes {
		if err := s.Bootstrap(servers); err != nil {
			t.Fatal(err)
		}
	}
	c.leader()
	return c
}

// add opens one more node (not yet a member) and returns its index.
func (c *testCluster) add() int {
	c.t.Helper()
	i := len(c.nodes)
	c.dirs = append(c.dirs, filepath.Join(c.t.TempDir(), fmt.Sprintf("n%d", i+1)))
	s, err := Open(c.config(i, "127.0.0.1:0"))
	if err != nil {
		c.t.Fatal(err)
	}
	c.nodes = append(c.nodes, s)
	c.addrs = append(c.addrs, s.Addr())
	return i
}

func (c *testCluster) shutdown() {
	for i := range c.nodes {
		c.kill(i)
	}
}

// kill stops node i abruptly: raft stops and every connection drops.
func (c *testCluster) kill(i int) {
	if c.nodes[i] == nil {
		return
	}
	if err := c.nodes[i].Shutdown(); err != nil {
		c.t.Errorf("shutdown n%d: %v", i+1, err)
	}
	c.nodes[i] = nil
}

// restart opens node i again on its data directory and address.
func (c *testCluster) restart(i int) *Store {
	c.t.Helper()
	var s *Store
	// The port was just released; retry briefly if the kernel disagrees.
	retry.Until(c.t, time.Second, func() (err error) {
		s, err = Open(c.config(i, c.addrs[i]))
		return err
	})
	if !s.HadState() {
		c.t.Fatalf("n%d restarted without state", i+1)
	}
	c.nodes[i] = s
	return s
}

func (c *testCluster) live() []*Store {
	var out []*Store
	for _, s := range c.nodes {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// leader waits until every live member agrees on one leader and returns it.
func (c *testCluster) leader() *Store {
	c.t.Helper()
	var lead *Store
	retry.Until(c.t, 10*time.Second, func() error {
		lead = nil
		ids := map[string]bool{}
		for _, s := range c.live() {
			id, _ := s.Leader()
			ids[id] = true
			if s.IsLeader() {
				lead = s
			}
		}
		if len(ids) == 1 && !ids[""] && lead != nil {
			if id, _ := lead.Leader(); id == lead.ID() {
				return nil
			}
		}
		return fmt.Errorf("no agreed leader (leaders seen: %v)", ids)
	})
	return lead
}

// follower returns a live node that is not the leader.
func (c *testCluster) follower() *Store {
	c.t.Helper()
	lead := c.leader()
	for _, s := range c.live() {
		if s != lead {
			return s
		}
	}
	c.t.Fatal("no follower")
	return nil
}

func (c *testCluster) index(s *Store) int {
	for i, n := range c.nodes {
		if n == s {
			return i
		}
	}
	c.t.Fatal("node not in cluster")
	return -1
}

// converged waits until the given nodes hold byte-identical states and
// returns that state's encoding.
func (c *testCluster) converged(nodes ...*Store) []byte {
	c.t.Helper()
	if len(nodes) == 0 {
		nodes = c.live()
	}
	var encs [][]byte
	err := retry.Wait(context.Background(), 10*time.Second, func() error {
		encs = encs[:0]
		same := true
		for _, s := range nodes {
			var e []byte
			var err error
			s.fsm.read(func(st *state) { e, err = st.marshal() })
			if err != nil {
				c.t.Fatal(err)
			}
			encs = append(encs, e)
			if !bytes.Equal(e, encs[0]) {
				same = false
			}
		}
		if !same {
			return errors.New("states differ")
		}
		return nil
	})
	if err != nil {
		for i, s := range nodes {
			c.t.Logf("%s: applied %d: %.400s", s.ID(), s.fsm.appliedIndex(), encs[i])
		}
		c.t.Fatalf("states did not converge: %v", err)
	}
	return encs[0]
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// testSpec is a valid spec of two sources.
func testSpec(name string) spec.Spec {
	return spec.Spec{
		Name: name,
		Sources: []spec.Source{
			{Name: "a", Address: "127.0.0.1:3307", Start: spec.Start{Kind: spec.StartPosition, Pos: change.Position{File: "binlog.000002", Pos: 4}}},
			{Name: "b", Address: "127.0.0.1:3308", User: "braid", Password: "pw", Start: spec.Start{Kind: spec.StartTimestamp, Time: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}},
		},
		Tables: []string{`shop_\d+\.orders`},
		Route:  []spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}},
	}
}

// testSchema returns a schema history of db.t with one ALTER at pos.
func testSchema(t testing.TB, pos uint32) *change.SchemaSnapshot {
	t.Helper()
	tr := schema.NewTracker()
	p := change.Position{File: "binlog.000001", Pos: 100}
	if err := tr.LoadCreate(p, "db", "CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(10))"); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.ApplyDDL(change.Position{File: "binlog.000001", Pos: pos}, "db", "ALTER TABLE t ADD COLUMN b INT", 0); err != nil {
		t.Fatal(err)
	}
	snap := tr.Snapshot()
	return &snap
}

// testCursor is a cursor at seq on sources a and b; a carries schema.
func testCursor(seq uint64, schema *change.SchemaSnapshot) *group.Cursor {
	return &group.Cursor{Seq: seq, Sources: []group.SourceCursor{
		{Name: "a", Pos: change.Position{File: "binlog.000003", Pos: uint32(1000 + seq)}, LastKey: int64(1_700_000_000_000_000 + seq), Schema: schema},
		{Name: "b", Pos: change.Position{File: "binlog.000007", Pos: uint32(4 + seq)}, LastKey: -5},
	}}
}
