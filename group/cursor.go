package group

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/spec"
)

// Cursor is a point in a destination's merged stream, at a transaction
// boundary: the seq of the last transaction out and, per source, where its
// binlog resumes, its last merge key and its schema history there.
// Restarting from a cursor reproduces the stream after it exactly, with the
// same seqs.
type Cursor struct {
	Seq uint64 `json:"seq"`
	// Taken counts the source transactions the merge has taken: those
	// emitted and those left out whole (all their rows held by a
	// shard-DDL lock). It names a point of the stream where seq cannot.
	Taken   uint64         `json:"taken,omitempty"`
	Sources []SourceCursor `json:"sources"`
	// Detached marks the saved cursor of a consumer that held its
	// destination's store full too long (package stream): whoever runs
	// the destination next does not start its merge from it, and serves
	// the consumer with a replay when it reads again.
	Detached bool `json:"detached,omitempty"`
	// ShardDDL is the shard-DDL merge's state here (locks, held tables,
	// re-reads under way); nil in passthrough mode. Shared by cursors,
	// never modified.
	ShardDDL *ShardDDLState `json:"shardDDL,omitempty"`
}

// SourceCursor is one source's part of a Cursor.
type SourceCursor struct {
	Name string          `json:"name"`
	Pos  change.Position `json:"pos"`
	// LastKey is the source's last merge key time (µs).
	LastKey int64 `json:"lastKey"`
	// Schema is the schema history at Pos; nil when no DDL was read since
	// a start where the live schema was not known to hold (a start in the
	// past; see binlog.Config.AnnounceTables): the reader then rebuilds it
	// from the server.
	Schema *change.SchemaSnapshot `json:"schema,omitempty"`
	// Snapshot is the source's initial-snapshot progress at Pos; nil
	// before its first chunk (or without a snapshot).
	Snapshot *change.SnapshotState `json:"snapshot,omitempty"`
	// Mark names Pos beyond its file:pos: the source's GTID state there
	// (MariaDB: the last GTID of each domain; MySQL: the executed set,
	// printed when saved) and the server whose binlog Pos is in, so that
	// a reader that finds another server at the source's address resumes
	// there by GTID. Zero in a cursor saved before braid kept them: it
	// resumes by Pos, as it did. Embedded without a tag, its fields
	// encode inline ("gtids", "server"), as they did when they were
	// SourceCursor's own (TestCursorFileBeforeMark); a MarshalJSON of
	// Mark's would be promoted and encode the whole cursor as a Mark.
	Mark
}

// at moves the source's cursor to the boundary pos that ev ends at, with
// ev's GTID state and server when it carries them (a binlog reader's).
func (sc *SourceCursor) at(pos change.Position, ev *change.Event) {
	sc.Pos = pos
	switch {
	case ev.Lost != "":
		// The marker of an accepted loss: no position yet, the GTID
		// state the reader went on from (a resume starts by GTID there).
		sc.Mark = Mark{GTIDs: ev.GTIDs}
	case ev.Server != nil:
		sc.Mark = markOf(ev)
	}
}

// passed reports whether the cursor is at or past the point st's chunks
// read again are fresh at (SnapshotState.FreshAt), which may be on
// another server than Pos (compared by GTID then): past it, the
// source's changes no longer need the snapshot's gate to say they may
// find their rows already so.
func (sc *SourceCursor) passed(st *change.SnapshotState) bool {
	return reached(sc.Pos, sc.Mark, st.FreshAt, st.FreshMark)
}

// resume is where the source's reader resumes after the cursor; nil
// when the source had sent nothing before it (the spec's start).
func (sc *SourceCursor) resume() *binlog.Resume {
	if sc.Pos.IsZero() && sc.GTIDs.IsZero() {
		return nil
	}
	return &binlog.Resume{Pos: sc.Pos, Schema: sc.Schema, GTIDs: sc.GTIDs.String(), Server: sc.Server}
}

// counted reports whether the cursor counts its points (Taken): one
// saved before braid did has transactions out and no Taken, and a point
// counted from it would name another than in the run that saved it.
func (c *Cursor) counted() bool { return c.Taken > 0 || c.Seq == 0 }

// Clone returns a deep copy (schema snapshots are shared: they are never
// modified).
func (c *Cursor) Clone() *Cursor {
	out := &Cursor{Seq: c.Seq, Taken: c.Taken, Sources: append([]SourceCursor(nil), c.Sources...), Detached: c.Detached, ShardDDL: c.ShardDDL}
	return out
}

// CursorStore keeps cursors by destination and client: what a sink.Runner
// saves its cursor to when it keeps its own. Implementations: FileStore
// here; raftstore.FencedCursors, replicated and fenced by ownership
// epoch. A destination's run keeps its clients' cursors through its
// Keeper instead.
type CursorStore interface {
	// Load returns the saved cursor of (destination, client), or nil.
	Load(destination, client string) (*Cursor, error)
	// Save replaces it.
	Save(destination, client string, c *Cursor) error
}

// FileStore keeps cursors as JSON files in a directory, one per destination
// and client, replaced atomically (write to a temporary file, rename).
type FileStore struct {
	Dir string
}

var _ CursorStore = (*FileStore)(nil)

func (f *FileStore) path(destination, client string) string {
	return filepath.Join(f.Dir, fmt.Sprintf("%s.%s.cursor.json", destination, client))
}

// Load implements CursorStore.
func (f *FileStore) Load(destination, client string) (*Cursor, error) {
	data, err := os.ReadFile(f.path(destination, client))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("group: load cursor: %w", err)
	}
	var c Cursor
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("group: cursor file %s is damaged (%v): delete it to start from the spec's start positions", f.path(destination, client), err)
	}
	return &c, nil
}

// Save implements CursorStore.
func (f *FileStore) Save(destination, client string, c *Cursor) error {
	if err := os.MkdirAll(f.Dir, 0o755); err != nil {
		return fmt.Errorf("group: save cursor: %w", err)
	}
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	p := f.path(destination, client)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("group: save cursor: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("group: save cursor: %w", err)
	}
	return nil
}

// ErrPurged: a source's binlog no longer holds where a read would start.
var ErrPurged = binlog.ErrPurged

// CheckHistory checks that every source of ds still holds where a read
// after from starts (nil: the spec's start positions; a start that names
// no position, such as latest, is not checked): a replay would otherwise
// fail only once its readers are running. Its error wraps ErrPurged when
// a binlog is gone.
func CheckHistory(ctx context.Context, ds *spec.Spec, from *Cursor) error {
	for i, src := range ds.Sources {
		var pos change.Position
		switch {
		case from != nil && i < len(from.Sources) && from.Sources[i].Server != nil:
			// The reader checks who answers: another server is resumed by
			// GTID, after checking what it purged.
			if err := binlog.CheckResume(ctx, src, from.Sources[i].Pos, from.Sources[i].Server); err != nil {
				return err
			}
			continue
		case from != nil && i < len(from.Sources) && from.Sources[i].Pos.IsZero() && !from.Sources[i].GTIDs.IsZero():
			continue // by GTID (after an accepted loss): the server finds the place
		case from != nil && i < len(from.Sources) && !from.Sources[i].Pos.IsZero():
			pos = from.Sources[i].Pos
		case src.Start.Kind == spec.StartPosition: // nothing read yet, or no cursor
			pos = src.Start.Pos
		default:
			continue
		}
		if err := binlog.CheckPosition(ctx, src, pos); err != nil {
			return err
		}
	}
	return nil
}

// PinStarts checks every source of ds as its reader would (binlog.Check),
// all at once, and pins a `latest` start to the source's current position,
// so that the destination's start, which a consumer starting at earliest
// replays from, stays the same point for every later run, replay and
// owner. A source whose address lists several servers is pinned to its
// GTID position when the server checked has one (MariaDB): its reader
// may start on another of them, where the checked server's file:pos
// would be foreign coordinates. Its error holds every problem of every
// source, one line each.
func PinStarts(ctx context.Context, ds *spec.Spec) error {
	reports := binlog.CheckAll(ctx, ds.Sources)
	var errs []error
	for _, r := range reports {
		errs = append(errs, r.Problems())
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for i := range ds.Sources {
		src := &ds.Sources[i]
		switch {
		case src.Start.Kind != spec.StartLatest:
		case len(src.Addresses()) > 1 && reports[i].GTIDs != "":
			src.Start = spec.Start{Kind: spec.StartGTID, GTID: reports[i].GTIDs}
		default:
			src.Start = spec.Start{Kind: spec.StartPosition, Pos: reports[i].Pos}
		}
	}
	return nil
}

// StartCursorID is the client id a destination's start cursor is kept
// under (Keeper.SaveCursor): the cursor before its first transaction,
// each source where its first run from the spec's start began and with
// the schema its reader read there. A replay from the destination's start
// (a late consumer at earliest) and a run that has no client's cursor to
// resume from start from it, so that they read the rows before a DDL with
// the columns of their time rather than the server's schema as it is
// now. It is no consumer's (stream.CheckClientID refuses it).
const StartCursorID = "@start"

// StartTap returns inner with the readers of a run from the spec's start
// watched (those announcing their tables with no Resume): done gets ds's
// start cursor once every source's reader has announced where it starts
// and, when it knows it to hold there, the schema (binlog.Config's
// AnnounceTables). A source that starts at a time, or by GTID, keeps no
// position in it: a run from it starts that source at the spec's start.
func StartTap(inner Sources, ds *spec.Spec, done func(*Cursor)) Sources {
	t := &startTap{Sources: inner, ds: ds, done: done, seen: make([]bool, len(ds.Sources))}
	t.start.Sources = make([]SourceCursor, len(ds.Sources))
	for i, src := range ds.Sources {
		t.start.Sources[i].Name = src.Name
	}
	return t
}

type startTap struct {
	Sources
	ds   *spec.Spec
	done func(*Cursor)

	mu    sync.Mutex
	seen  []bool
	start Cursor
	sent  bool
}

func (t *startTap) Reader(cfg binlog.Config) (Reader, error) {
	r, err := t.Sources.Reader(cfg)
	if err != nil || !cfg.AnnounceTables || cfg.Resume != nil {
		return r, err
	}
	i := slices.IndexFunc(t.ds.Sources, func(s spec.Source) bool { return s.Name == cfg.Source.Name })
	if i < 0 {
		return r, nil
	}
	return &tappedReader{Reader: r, tap: t, src: i, kind: cfg.Source.Start.Kind}, nil
}

// note records source src's announcement, and hands the start cursor on
// once every source's is in.
func (t *startTap) note(src int, kind spec.StartKind, ev *change.Event) {
	t.mu.Lock()
	if t.seen[src] || t.sent {
		t.mu.Unlock()
		return
	}
	t.seen[src] = true
	if kind != spec.StartTimestamp && kind != spec.StartGTID && !ev.Pos.IsZero() {
		// A start at a time skips what committed before it only when
		// read from the spec's start, not from a position.
		sc := &t.start.Sources[src]
		sc.Pos, sc.Schema = ev.Pos, ev.Schema
	}
	if slices.Contains(t.seen, false) {
		t.mu.Unlock()
		return
	}
	t.sent = true
	c := t.start.Clone()
	t.mu.Unlock()
	t.done(c)
}

// tappedReader hands its first event, the announcement, to its tap.
type tappedReader struct {
	Reader
	tap  *startTap
	src  int
	kind spec.StartKind
}

// Unwrap returns the reader tapped (for its optional powers, such as
// LossAccepter).
func (r *tappedReader) Unwrap() Reader { return r.Reader }

func (r *tappedReader) Run(ctx context.Context, emit func(*change.Event) error) error {
	first := true
	return r.Reader.Run(ctx, func(ev *change.Event) error {
		if first {
			first = false
			if ev.Type == change.EventProgress && ev.Tables != nil {
				r.tap.note(r.src, r.kind, ev)
			}
		}
		return emit(ev)
	})
}
