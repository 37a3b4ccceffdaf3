package raftstore

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/braid-cdc/braid/group"
)

// TestDecisionsFencedAndKept: the owner's decisions (made on a follower,
// so forwarded) are kept in order on every node; a stale epoch is refused
// whoever sends it; the decisions come back from a snapshot once the log
// holding them is compacted away; deleting the destination removes them.
func TestDecisionsFencedAndKept(t *testing.T) {
	// One trailing entry: a snapshot compacts away the entries it covers.
	c := newCluster(t, 3, func(cfg *Config) { cfg.TrailingLogs = 1 })
	ctx := testCtx(t)
	lead := c.leader()
	var fols []*Store
	for _, s := range c.live() {
		if s != lead {
			fols = append(fols, s)
		}
	}
	oldOwner, newOwner := fols[0], fols[1]
	for _, name := range []string{"shop", "billing"} {
		if _, err := lead.CreateDestination(ctx, testSpec(name)); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := lead.Decisions("shop"); err != nil || got != nil {
		t.Fatalf("decisions of a new destination: %v %v", got, err)
	}
	if _, err := lead.Decisions("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("decisions of a missing destination: %v", err)
	}
	dec := func(lock int, action group.DecisionAction, seq uint64) group.DDLDecision {
		return group.DDLDecision{Lock: lock, Action: action, AfterSeq: seq, Taken: seq + 3}
	}
	// Before any owner there is no epoch to decide with.
	if err := lead.SaveDecision(ctx, "billing", 0, dec(1, group.DecisionUnlock, 1)); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("decision of an unowned destination: %v", err)
	}
	e1, err := lead.Assign(ctx, "shop", oldOwner.ID())
	if err != nil {
		t.Fatal(err)
	}
	// Not in lock order: the list keeps the order they were made in.
	want := []group.DDLDecision{dec(3, group.DecisionUnlock, 10), dec(1, group.DecisionSkip, 10), dec(2, group.DecisionUnlock, 25)}
	for _, d := range want {
		if err := oldOwner.SaveDecision(ctx, "shop", e1, d); err != nil {
			t.Fatal(err)
		}
	}
	for name, err := range map[string]error{
		"no action":   oldOwner.SaveDecision(ctx, "shop", e1, group.DDLDecision{Lock: 4}),
		"bad action":  oldOwner.SaveDecision(ctx, "shop", e1, dec(4, "drop", 30)),
		"no name":     oldOwner.SaveDecision(ctx, "", e1, dec(4, group.DecisionSkip, 30)),
		"missing one": oldOwner.SaveDecision(ctx, "nope", e1, dec(4, group.DecisionSkip, 30)),
	} {
		wantErr := ErrInvalid
		if name == "missing one" {
			wantErr = ErrNotFound
		}
		if !errors.Is(err, wantErr) {
			t.Errorf("%s: %v, want %v", name, err, wantErr)
		}
	}
	check := func(when string, want []group.DDLDecision) {
		t.Helper()
		c.converged()
		for _, s := range c.live() {
			got, err := s.Decisions("shop")
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: %s: decisions %+v %v, want %+v", when, s.ID(), got, err, want)
			}
		}
	}
	check("after three", want)
	// Reads copy: changing what was returned changes nothing stored.
	got, _ := lead.Decisions("shop")
	got[0].Action = "changed"
	check("after changing a read", want)

	// The destination moves: the deposed owner's decisions are refused,
	// whoever sends them; the new owner's are appended.
	e2, err := lead.Assign(ctx, "shop", newOwner.ID())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Store{oldOwner, lead} {
		err := s.SaveDecision(ctx, "shop", e1, dec(5, group.DecisionSkip, 40))
		if !errors.Is(err, ErrStaleEpoch) {
			t.Fatalf("%s: stale decision: %v", s.ID(), err)
		}
		if !strings.Contains(err.Error(), "lock 5") {
			t.Errorf("stale decision's error does not name the lock: %v", err)
		}
	}
	want = append(want, dec(5, group.DecisionSkip, 40))
	if err := newOwner.SaveDecision(ctx, "shop", e2, want[3]); err != nil {
		t.Fatal(err)
	}
	check("after the move", want)

	// Snapshot a follower past the decisions (compacting its log behind
	// them) and restart it: they come back from the snapshot alone.
	f := c.follower()
	end := f.fsm.appliedIndex() // the last decision's index
	if _, err := lead.Assign(ctx, "billing", lead.ID()); err != nil {
		t.Fatal(err)
	}
	c.converged()
	if err := f.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if st := f.Stats(); st.LastSnapshotIndex <= end || st.FirstIndex <= end {
		t.Fatalf("%s: snapshot at %d, log from %d; the decisions end at %d", f.ID(), st.LastSnapshotIndex, st.FirstIndex, end)
	}
	i := c.index(f)
	c.kill(i)
	back := c.restart(i)
	if got, err := back.Decisions("shop"); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("after restoring the snapshot: %+v %v, want %+v", got, err, want)
	}
	check("after the restart", want)

	// Deleting the destination deletes its decisions, and its owner's
	// next one fails; a destination of that name starts with none.
	if err := lead.DeleteDestination(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	if err := newOwner.SaveDecision(ctx, "shop", e2, dec(6, group.DecisionUnlock, 50)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("decision of a deleted destination: %v", err)
	}
	c.converged()
	for _, s := range c.live() {
		if got, err := s.Decisions("shop"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: decisions of a deleted destination: %+v %v", s.ID(), got, err)
		}
	}
	if _, err := lead.CreateDestination(ctx, testSpec("shop")); err != nil {
		t.Fatal(err)
	}
	c.converged()
	for _, s := range c.live() {
		if got, err := s.Decisions("shop"); err != nil || got != nil {
			t.Fatalf("%s: decisions of a re-created destination: %+v %v", s.ID(), got, err)
		}
	}
}

// TestSnapshotWithoutDecisions: a snapshot written before there were
// decisions (no "decisions" field) restores as a destination without any,
// which then takes new ones; a state without decisions still writes no
// such field.
func TestSnapshotWithoutDecisions(t *testing.T) {
	_, spec, err := canonicalSpec(testSpec("shop"))
	if err != nil {
		t.Fatal(err)
	}
	old := newState()
	applyAt(t, old, 1, &command{Type: cmdCreateDest, Dest: "shop", Spec: spec})
	applyAt(t, old, 2, &command{Type: cmdAssign, Dest: "shop", Owner: "n1"})
	applyAt(t, old, 3, &command{Type: cmdSaveCursors, Dest: "shop", Epoch: 2, Cursors: []cursorEntry{{Client: "c1", Cursor: cursorRecord{Seq: 4}}}})
	data, err := old.marshal()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(`"decisions"`)) {
		t.Fatalf("a state without decisions writes the field: %s", data)
	}
	f := newFSM(testLogger(t))
	if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	s := &Store{fsm: f}
	if got, err := s.Decisions("shop"); err != nil || got != nil {
		t.Fatalf("decisions after restoring an old snapshot: %+v %v", got, err)
	}
	d := decisionRecord{Lock: 1, Action: string(group.DecisionUnlock), AfterSeq: 4, Taken: 6}
	c := &command{Type: cmdSaveDecision, Dest: "shop", Epoch: 2, Decision: d}
	if res := f.Apply(&raft.Log{Index: 4, Type: raft.LogCommand, Data: c.encode()}).(result); res.Err != nil {
		t.Fatal(res.Err)
	}
	want := []group.DDLDecision{{Lock: 1, Action: group.DecisionUnlock, AfterSeq: 4, Taken: 6}}
	if got, err := s.Decisions("shop"); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("decisions: %+v %v, want %+v", got, err, want)
	}
}
