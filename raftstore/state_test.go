package raftstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/spec"
)

// sampleCommands are one command of every type, with every field set.
func sampleCommands(t testing.TB) []*command {
	_, spec, err := canonicalSpec(testSpec("shop"))
	if err != nil {
		t.Fatal(err)
	}
	return []*command{
		{Type: cmdCreateDest, Dest: "shop", Spec: spec},
		{Type: cmdUpdateDest, Dest: "shop", Spec: spec},
		{Type: cmdAssign, Dest: "shop", Owner: "n2", Conditional: true, IfEpoch: 42},
		{Type: cmdSaveCursors, Dest: "shop", Epoch: 7,
			Schemas: []schemaBlob{{Source: "a", Hash: "ab12", Data: []byte(`{"applied":{}}`)}},
			Cursors: []cursorEntry{
				{Client: "c1", Cursor: cursorRecord{Seq: 9, Sources: []sourceRecord{{Name: "a", File: "binlog.000001", Pos: 1<<32 - 1, LastKey: -3, Schema: "ab12", GTIDs: "0-1-42", Server: &change.Server{ID: 1<<32 - 1, UUID: "u", Host: "h:1", Binlog: "/b"}}, {Name: "b"}},
					Taken: 11, ShardDDL: []byte(`{"lastLock":2}`), Detached: true}},
				{Client: "c2", Delete: true},
				{Client: "c3", Cursor: cursorRecord{Seq: 1, Sources: []sourceRecord{{Name: "a"}}}},
			}},
		{Type: cmdSaveDecision, Dest: "shop", Epoch: 7, Decision: decisionRecord{Lock: -2, Action: "unlock", AfterSeq: 1 << 63, Taken: 12}},
		{Type: cmdDeleteDest, Dest: "shop"},
	}
}

// TestCommandRoundTrip: every command decodes to what was encoded.
func TestCommandRoundTrip(t *testing.T) {
	for _, c := range sampleCommands(t) {
		got, err := decodeCommand(c.encode())
		if err != nil {
			t.Fatalf("%s: %v", c.Type, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("%s: round trip\n got %+v\nwant %+v", c.Type, got, c)
		}
	}
}

// TestDecodeCommandRefusesBadInput: an unknown version or type, a
// truncated or padded command is an ErrBadCommand, never a panic.
func TestDecodeCommandRefusesBadInput(t *testing.T) {
	good := sampleCommands(t)[3].encode()
	cases := map[string][]byte{
		"empty":        nil,
		"version 2":    append([]byte{2}, good[1:]...),
		"version 0":    append([]byte{0}, good[1:]...),
		"unknown type": {cmdVersion, 99, 0},
		"truncated":    good[:len(good)-3],
		"trailing":     append(append([]byte(nil), good...), 0),
		"huge count":   {cmdVersion, byte(cmdSaveCursors), 0, 1, 0xff, 0xff, 0xff, 0xff, 0x0f},
	}
	for name, data := range cases {
		if _, err := decodeCommand(data); !errors.Is(err, ErrBadCommand) {
			t.Errorf("%s: got %v, want ErrBadCommand", name, err)
		}
	}
	// The state machine answers such an entry with the error and moves on.
	f := newFSM(testLogger(t))
	res := f.Apply(&raft.Log{Index: 5, Type: raft.LogCommand, Data: cases["version 2"]}).(result)
	if !errors.Is(res.Err, ErrBadCommand) || f.appliedIndex() != 5 {
		t.Fatalf("Apply(version 2) = %+v, applied %d", res, f.appliedIndex())
	}
}

func FuzzDecodeCommand(f *testing.F) {
	for _, c := range sampleCommands(f) {
		f.Add(c.encode())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := decodeCommand(data)
		if err != nil {
			return
		}
		if back := c.encode(); !bytes.Equal(back, data) {
			// Non-canonical varints may decode; the re-encoding must then decode the same.
			c2, err := decodeCommand(back)
			if err != nil || !reflect.DeepEqual(c, c2) {
				t.Fatalf("re-encoding differs: %v", err)
			}
		}
	})
}

// TestSpecRoundTrip: a spec stored and read back is the spec with its
// defaults, and spec.Parse reads the stored form.
func TestSpecRoundTrip(t *testing.T) {
	want, data, err := canonicalSpec(testSpec("shop"))
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := spec.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := parseStoredSpec(string(data))
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]*spec.Spec{"ParseSpec": parsed, "stored": stored} {
		if !reflect.DeepEqual(*got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", name, *got, want)
		}
	}
	bad := testSpec("shop")
	bad.Sources[1].Name = "a"
	bad.Ordering = "random"
	if _, _, err := canonicalSpec(bad); !errors.Is(err, ErrInvalid) {
		t.Fatalf("invalid spec: %v", err)
	}
}

// apply is a test helper: the command at index, its result.
func applyAt(t *testing.T, st *state, index uint64, c *command) result {
	t.Helper()
	// Go through the encoding, as the log does.
	dc, err := decodeCommand(c.encode())
	if err != nil {
		t.Fatal(err)
	}
	return st.apply(index, dc)
}

// TestStateRules: the state machine's rules, one step at a time.
func TestStateRules(t *testing.T) {
	st := newState()
	_, spec, _ := canonicalSpec(testSpec("shop"))
	cur := func(client string, seq uint64, schema string) cursorEntry {
		return cursorEntry{Client: client, Cursor: cursorRecord{Seq: seq, Sources: []sourceRecord{{Name: "a", File: "binlog.000001", Pos: 4, Schema: schema}}}}
	}
	steps := []struct {
		why     string
		c       *command
		wantErr error
		skipped int
	}{
		{"create", &command{Type: cmdCreateDest, Dest: "shop", Spec: spec}, nil, 0},
		{"create twice", &command{Type: cmdCreateDest, Dest: "shop", Spec: spec}, ErrExists, 0},
		{"update a missing one", &command{Type: cmdUpdateDest, Dest: "x", Spec: spec}, ErrBadCommand, 0}, // spec names shop
		{"cursors before any owner", &command{Type: cmdSaveCursors, Dest: "shop", Epoch: 0, Cursors: []cursorEntry{cur("c1", 1, "")}}, ErrStaleEpoch, 0},
		{"assign (epoch 5)", &command{Type: cmdAssign, Dest: "shop", Owner: "n1"}, nil, 0},
		{"cursors at epoch 5", &command{Type: cmdSaveCursors, Dest: "shop", Epoch: 5, Cursors: []cursorEntry{cur("c1", 10, "")}}, nil, 0},
		{"cursor naming an unknown schema: whole batch refused", &command{Type: cmdSaveCursors, Dest: "shop", Epoch: 5, Cursors: []cursorEntry{cur("c2", 1, ""), cur("c1", 11, "h1")}}, ErrUnknownSchema, 0},
		{"schema sent with the cursor", &command{Type: cmdSaveCursors, Dest: "shop", Epoch: 5, Schemas: []schemaBlob{{Source: "a", Hash: "h1", Data: []byte(`{}`)}}, Cursors: []cursorEntry{cur("c1", 11, "h1")}}, nil, 0},
		{"schema held: named only", &command{Type: cmdSaveCursors, Dest: "shop", Epoch: 5, Cursors: []cursorEntry{cur("c2", 3, "h1")}}, nil, 0},
		{"an older cursor is skipped", &command{Type: cmdSaveCursors, Dest: "shop", Epoch: 5, Cursors: []cursorEntry{cur("c1", 9, "")}}, nil, 1},
		{"conditional assign with a stale epoch", &command{Type: cmdAssign, Dest: "shop", Owner: "n2", Conditional: true, IfEpoch: 4}, ErrStaleEpoch, 0},
		{"conditional assign (epoch 12)", &command{Type: cmdAssign, Dest: "shop", Owner: "n2", Conditional: true, IfEpoch: 5}, nil, 0},
		{"the deposed owner's cursors", &command{Type: cmdSaveCursors, Dest: "shop", Epoch: 5, Cursors: []cursorEntry{cur("c1", 20, "")}}, ErrStaleEpoch, 0},
		{"the new owner moves c1 and c2 off h1: h1 is dropped", &command{Type: cmdSaveCursors, Dest: "shop", Epoch: 12, Cursors: []cursorEntry{cur("c1", 20, ""), {Client: "c2", Delete: true}}}, nil, 0},
		{"delete", &command{Type: cmdDeleteDest, Dest: "shop"}, nil, 0},
		{"cursors of a deleted destination", &command{Type: cmdSaveCursors, Dest: "shop", Epoch: 12}, ErrNotFound, 0},
		{"assign a missing one", &command{Type: cmdAssign, Dest: "shop", Owner: "n1"}, ErrNotFound, 0},
	}
	checks := map[int]func(){
		8: func() { // after "schema held"
			if got := len(st.Dests["shop"].Schemas["a"]); got != 1 {
				t.Errorf("schemas held: %d, want 1", got)
			}
		},
		9: func() {
			if got := st.Dests["shop"].Cursors["c1"].Seq; got != 11 {
				t.Errorf("c1 seq %d, want 11 (never backwards)", got)
			}
		},
		11: func() {
			if d := st.Dests["shop"]; d.Epoch != 12 || d.Owner != "n2" {
				t.Errorf("assignment %q@%d, want n2@12", d.Owner, d.Epoch)
			}
		},
		13: func() {
			d := st.Dests["shop"]
			if len(d.Schemas) != 0 || len(d.Cursors) != 1 {
				t.Errorf("schemas %v cursors %d, want none and 1", d.Schemas, len(d.Cursors))
			}
		},
	}
	for i, s := range steps {
		index := uint64(i + 1)
		res := applyAt(t, st, index, s.c)
		if (s.wantErr == nil) != (res.Err == nil) || (s.wantErr != nil && !errors.Is(res.Err, s.wantErr)) {
			t.Errorf("step %d (%s): err %v, want %v", index, s.why, res.Err, s.wantErr)
		}
		if res.Skipped != s.skipped {
			t.Errorf("step %d (%s): skipped %d, want %d", index, s.why, res.Skipped, s.skipped)
		}
		if check := checks[i]; check != nil {
			check()
		}
		if st.Applied != index {
			t.Errorf("step %d: applied %d", index, st.Applied)
		}
	}
}

// TestSnapshotRestoreRoundTrip: an FSM snapshot restored into a fresh FSM
// gives the same whole state, and the same reads.
func TestSnapshotRestoreRoundTrip(t *testing.T) {
	log := testLogger(t)
	src := newFSM(log)
	schemaA, schemaB := testSchema(t, 200), testSchema(t, 300)
	hash := func(s *change.SchemaSnapshot) (string, []byte) {
		var c schemaCache
		h, d, err := c.encode(s)
		if err != nil {
			t.Fatal(err)
		}
		return h, d
	}
	ha, da := hash(schemaA)
	hb, db := hash(schemaB)
	var cmds []*command
	for _, name := range []string{"shop", "billing", "empty"} {
		_, spec, _ := canonicalSpec(testSpec(name))
		cmds = append(cmds, &command{Type: cmdCreateDest, Dest: name, Spec: spec})
	}
	cmds = append(cmds,
		&command{Type: cmdAssign, Dest: "shop", Owner: "n1"},    // epoch 4
		&command{Type: cmdAssign, Dest: "billing", Owner: "n3"}, // epoch 5
		&command{Type: cmdSaveCursors, Dest: "shop", Epoch: 4,
			Schemas: []schemaBlob{{Source: "a", Hash: ha, Data: da}, {Source: "a", Hash: hb, Data: db}},
			Cursors: []cursorEntry{
				{Client: "c1", Cursor: cursorRecord{Seq: 5, Sources: []sourceRecord{{Name: "a", File: "binlog.000002", Pos: 77, LastKey: 12, Schema: ha}, {Name: "b", File: "binlog.000001", Pos: 4}}}},
				{Client: "c2", Cursor: cursorRecord{Seq: 9, Sources: []sourceRecord{{Name: "a", File: "binlog.000002", Pos: 99, LastKey: 13, Schema: hb}}}},
			}},
		&command{Type: cmdSaveCursors, Dest: "billing", Epoch: 5, Cursors: []cursorEntry{{Client: "x", Cursor: cursorRecord{Seq: 1}}}},
		&command{Type: cmdSaveDecision, Dest: "shop", Epoch: 4, Decision: decisionRecord{Lock: 1, Action: "skip", AfterSeq: 5, Taken: 8}},
		&command{Type: cmdSaveDecision, Dest: "shop", Epoch: 4, Decision: decisionRecord{Lock: 2, Action: "unlock", AfterSeq: 9, Taken: 11}},
	)
	for i, c := range cmds {
		if res := src.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: c.encode()}).(result); res.Err != nil {
			t.Fatalf("command %d: %v", i+1, res.Err)
		}
	}
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	dst := newFSM(log)
	if err := dst.Restore(io.NopCloser(bytes.NewReader(sink.buf.Bytes()))); err != nil {
		t.Fatal(err)
	}
	a, _ := src.st.marshal()
	b, _ := dst.st.marshal()
	if !bytes.Equal(a, b) {
		t.Fatalf("restored state differs:\n%s\n%s", a, b)
	}
	for name, d := range src.st.Dests {
		if !reflect.DeepEqual(d.spec, dst.st.Dests[name].spec) {
			t.Fatalf("%s: restored spec differs", name)
		}
	}
	if dst.appliedIndex() != uint64(len(cmds)) {
		t.Fatalf("applied %d after restore", dst.appliedIndex())
	}
	// The cursor comes back whole, schema history included.
	var rec *cursorRecord
	var schemas map[string]json.RawMessage
	dst.read(func(st *state) {
		rec = st.Dests["shop"].Cursors["c1"]
		schemas = pickSchemas(st.Dests["shop"], rec)
	})
	c, err := toCursor("shop", "c1", rec, schemas)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Sources[0].Schema, schemaA) {
		t.Fatalf("schema after restore:\n got %+v\nwant %+v", c.Sources[0].Schema, schemaA)
	}
	// A snapshot of another version is refused, not guessed at.
	bad := append([]byte{9}, sink.buf.Bytes()[1:]...)
	if err := dst.Restore(io.NopCloser(bytes.NewReader(bad))); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("restore of version 9: %v", err)
	}
}

// memSink is a raft.SnapshotSink in memory.
type memSink struct{ buf bytes.Buffer }

func (s *memSink) Write(p []byte) (int, error) { return s.buf.Write(p) }
func (s *memSink) Close() error                { return nil }
func (s *memSink) ID() string                  { return "mem" }
func (s *memSink) Cancel() error               { return nil }

// TestConfigValidate: every problem is reported at once, defaults fill the
// rest, and Validate does not modify the config.
func TestConfigValidate(t *testing.T) {
	cfg := Config{BindAddr: "nope", AdvertiseAddr: "0.0.0.0:7001", LeaderLeaseTimeout: time.Second, ElectionTimeout: 100 * time.Millisecond}
	before := cfg
	err := cfg.Validate()
	for _, want := range []string{"NodeID", "DataDir", "BindAddr", "AdvertiseAddr", "LeaderLeaseTimeout", "ElectionTimeout"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v: want a complaint about %s", err, want)
		}
	}
	if !reflect.DeepEqual(cfg, before) {
		t.Error("Validate modified the config")
	}
	ok := Config{NodeID: "n1", DataDir: t.TempDir(), BindAddr: "127.0.0.1:0"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Config{NodeID: "n1"}); err == nil {
		t.Fatal("Open with an invalid config succeeded")
	}
}

// TestCursorsWrittenBeforeShardDDL: a save-cursors entry written before
// cursors carried their shard-DDL part still reads, without it; and a
// cursor's shard-DDL part, Taken and Detached survive the store.
func TestCursorsWrittenBeforeShardDDL(t *testing.T) {
	c := &command{Type: cmdSaveCursors, Dest: "shop", Epoch: 3,
		Cursors: []cursorEntry{{Client: "c1", Cursor: cursorRecord{Seq: 4, Sources: []sourceRecord{{Name: "a", File: "binlog.000001", Pos: 4}}}}}}
	full := c.encode()
	old := full[:len(full)-6] // Taken 0, no state, not detached, no snapshot progress, no GTIDs or server: six bytes
	got, err := decodeCommand(old)
	if err != nil {
		t.Fatalf("an entry of the old form: %v", err)
	}
	if rec := got.Cursors[0].Cursor; rec.Seq != 4 || rec.Taken != 0 || rec.ShardDDL != nil {
		t.Fatalf("old entry read as %+v", rec)
	}

	var s Store
	state := group.NewShardDDLState(1)
	state.Join("shop.orders", "a/shop_0.orders")
	cur := &group.Cursor{Seq: 4, Taken: 6, Detached: true, ShardDDL: state,
		Sources: []group.SourceCursor{{Name: "a", Pos: change.Position{File: "binlog.000001", Pos: 4}}}}
	cmd, _, err := s.cursorCommand("shop", 3, []CursorUpdate{{Client: "c1", Cursor: cur}})
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeCommand(cmd.encode())
	if err != nil {
		t.Fatal(err)
	}
	rec := back.Cursors[0].Cursor
	out, err := toCursor("shop", "c1", &rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Taken != 6 || !out.Detached || out.ShardDDL == nil || !slices.Equal(out.ShardDDL.Shards["shop.orders"], []string{"a/shop_0.orders"}) {
		t.Fatalf("cursor back from the store: %+v (state %+v)", out, out.ShardDDL)
	}
}
