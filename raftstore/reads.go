package raftstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/spec"
)

// The read methods below read this node's state: they are local and never
// block on the network, and on a follower they may lag the leader by the
// entries in flight (usually a few milliseconds; longer when the node is
// cut off). For a linearizable read, call Consistent first; for a cursor
// at takeover, use OwnedCursor.

// Destination is a stored destination.
type Destination struct {
	// Spec is the spec with defaults applied, as validated when written.
	Spec spec.Spec
	// Version is the Raft index of the create or the last update: it
	// changes whenever the spec does.
	Version uint64
}

// Assignment says which node runs a destination.
type Assignment struct {
	Destination string
	// Owner is the node id, "" when none.
	Owner string
	// Epoch is the Raft index of the assignment, 0 if never assigned. It
	// grows with every assignment.
	Epoch uint64
}

// copySpec copies s so the caller can modify it.
func copySpec(s *spec.Spec) spec.Spec {
	out := *s
	out.Sources = slices.Clone(s.Sources)
	out.Tables = slices.Clone(s.Tables)
	out.Route = slices.Clone(s.Route)
	return out
}

// Destinations returns every destination, by name (local read).
func (s *Store) Destinations() []Destination {
	var out []Destination
	s.fsm.read(func(t *state) {
		for _, d := range t.Dests {
			out = append(out, Destination{Spec: copySpec(d.spec), Version: d.Version})
		}
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Spec.Name < out[j].Spec.Name })
	return out
}

// readDest runs f on destination dest's record under the state's read
// lock and returns what it returns, or ErrNotFound when there is no such
// destination. f must copy what it keeps: the record changes after.
func readDest[T any](s *Store, dest string, f func(*destRecord) T) (T, error) {
	var (
		out T
		ok  bool
	)
	s.fsm.read(func(t *state) {
		var d *destRecord
		if d, ok = t.Dests[dest]; ok {
			out = f(d)
		}
	})
	if !ok {
		return out, fmt.Errorf("%w: destination %q", ErrNotFound, dest)
	}
	return out, nil
}

// Destination returns one destination or ErrNotFound (local read).
func (s *Store) Destination(name string) (Destination, error) {
	return readDest(s, name, func(d *destRecord) Destination {
		return Destination{Spec: copySpec(d.spec), Version: d.Version}
	})
}

// Assignment returns a destination's assignment or ErrNotFound (local
// read).
func (s *Store) Assignment(dest string) (Assignment, error) {
	return readDest(s, dest, func(d *destRecord) Assignment {
		return Assignment{Destination: dest, Owner: d.Owner, Epoch: d.Epoch}
	})
}

// Assignments returns every destination's assignment, by destination
// (local read).
func (s *Store) Assignments() []Assignment {
	var out []Assignment
	s.fsm.read(func(t *state) {
		for name, d := range t.Dests {
			out = append(out, Assignment{Destination: name, Owner: d.Owner, Epoch: d.Epoch})
		}
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Destination < out[j].Destination })
	return out
}

// Cursor returns a client's cursor with each source's schema history, nil
// if the client has none, ErrNotFound if the destination does not exist
// (local read).
func (s *Store) Cursor(dest, client string) (*group.Cursor, error) {
	type item struct {
		rec     *cursorRecord
		schemas map[string]json.RawMessage
	}
	it, err := readDest(s, dest, func(d *destRecord) item {
		if r, ok := d.Cursors[client]; ok {
			return item{r, pickSchemas(d, r)}
		}
		return item{}
	})
	if err != nil || it.rec == nil {
		return nil, err
	}
	return toCursor(dest, client, it.rec, it.schemas)
}

// Cursors returns every client's cursor of a destination (local read).
func (s *Store) Cursors(dest string) (map[string]*group.Cursor, error) {
	type item struct {
		rec     *cursorRecord
		schemas map[string]json.RawMessage
	}
	items, err := readDest(s, dest, func(d *destRecord) map[string]item {
		items := make(map[string]item, len(d.Cursors))
		for client, r := range d.Cursors {
			items[client] = item{r, pickSchemas(d, r)}
		}
		return items
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string]*group.Cursor, len(items))
	for client, it := range items {
		c, err := toCursor(dest, client, it.rec, it.schemas)
		if err != nil {
			return nil, err
		}
		out[client] = c
	}
	return out, nil
}

// OwnedCursor is the read a new owner makes at takeover: it waits until
// this node has applied the log up to epoch (the index of the assignment),
// checks that epoch is still the destination's epoch (else ErrStaleEpoch),
// and returns the client's cursor. It is current without asking the
// leader: only the holder of the current epoch can change the cursors, so
// once the assignment is applied here no other write to them can follow.
func (s *Store) OwnedCursor(ctx context.Context, dest, client string, epoch uint64) (*group.Cursor, error) {
	if err := s.CatchUp(ctx, epoch); err != nil {
		return nil, err
	}
	a, err := s.Assignment(dest)
	if err != nil {
		return nil, err
	}
	if a.Epoch != epoch {
		return nil, fmt.Errorf("%w: %q is at epoch %d (owner %q), not %d", ErrStaleEpoch, dest, a.Epoch, a.Owner, epoch)
	}
	return s.Cursor(dest, client)
}

// SchemaHistory returns the schema histories held for one source of a
// destination: one per distinct history its clients' cursors name (most
// often one), oldest Applied position first (local read).
func (s *Store) SchemaHistory(dest, source string) ([]change.SchemaSnapshot, error) {
	raws, err := readDest(s, dest, func(d *destRecord) []json.RawMessage {
		var raws []json.RawMessage
		for _, raw := range d.Schemas[source] {
			raws = append(raws, raw)
		}
		return raws
	})
	if err != nil {
		return nil, err
	}
	out := make([]change.SchemaSnapshot, len(raws))
	for i, raw := range raws {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			return nil, fmt.Errorf("raftstore: schema history of %s/%s: %w", dest, source, err)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if c := out[i].Applied.Compare(out[j].Applied); c != 0 {
			return c < 0
		}
		return len(out[i].Tables) < len(out[j].Tables)
	})
	return out, nil
}

// pickSchemas collects the schema histories r names; the state's byte
// slices are never modified, so they can be decoded outside the lock.
func pickSchemas(d *destRecord, r *cursorRecord) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	for _, src := range r.Sources {
		if src.Schema == "" {
			continue
		}
		if m == nil {
			m = map[string]json.RawMessage{}
		}
		m[src.Name+"\x00"+src.Schema] = d.Schemas[src.Name][src.Schema]
	}
	return m
}

func toCursor(dest, client string, r *cursorRecord, schemas map[string]json.RawMessage) (*group.Cursor, error) {
	c := &group.Cursor{Seq: r.Seq, Taken: r.Taken, Detached: r.Detached, Sources: make([]group.SourceCursor, len(r.Sources))}
	if len(r.ShardDDL) > 0 {
		c.ShardDDL = &group.ShardDDLState{}
		if err := json.Unmarshal(r.ShardDDL, c.ShardDDL); err != nil {
			return nil, fmt.Errorf("raftstore: cursor %s/%s: shard-DDL state: %w", dest, client, err)
		}
	}
	for i, src := range r.Sources {
		sc := group.SourceCursor{Name: src.Name, Pos: change.Position{File: src.File, Pos: src.Pos}, LastKey: src.LastKey,
			Mark: group.Mark{GTIDs: change.GTIDText(src.GTIDs)}}
		if src.Server != nil {
			srv := *src.Server // the state's own is never handed out
			sc.Server = &srv
		}
		if src.Schema != "" {
			raw := schemas[src.Name+"\x00"+src.Schema]
			if raw == nil {
				return nil, fmt.Errorf("raftstore: cursor %s/%s: source %s: schema history %s missing", dest, client, src.Name, src.Schema)
			}
			var snap change.SchemaSnapshot
			if err := json.Unmarshal(raw, &snap); err != nil {
				return nil, fmt.Errorf("raftstore: cursor %s/%s: source %s: %w", dest, client, src.Name, err)
			}
			sc.Schema = &snap
		}
		if i < len(r.Snapshots) && len(r.Snapshots[i]) > 0 && string(r.Snapshots[i]) != "null" {
			sc.Snapshot = &change.SnapshotState{}
			if err := json.Unmarshal(r.Snapshots[i], sc.Snapshot); err != nil {
				return nil, fmt.Errorf("raftstore: cursor %s/%s: source %s: snapshot progress: %w", dest, client, src.Name, err)
			}
		}
		c.Sources[i] = sc
	}
	return c, nil
}
