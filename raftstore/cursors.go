package raftstore

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
)

// CursorUpdate sets one client's cursor; a nil Cursor deletes it.
type CursorUpdate struct {
	Client string
	Cursor *group.Cursor
}

// SaveResult is the outcome of a SaveCursors.
type SaveResult struct {
	// Index is the batch's Raft index.
	Index uint64
	// Skipped counts updates not applied because the stored cursor had a
	// higher seq (a cursor never moves backwards).
	Skipped int
}

// SaveCursors writes a batch of cursors of one destination as one Raft
// entry, fenced by epoch: if epoch is not the destination's current epoch
// (or it has no owner) the whole batch is rejected with ErrStaleEpoch, and
// the writer must stop. A destination that does not exist gives
// ErrNotFound.
//
// Each source's schema history (SourceCursor.Schema) is stored once per
// (destination, source, content): the batch names it by hash and carries
// its bytes only when the store does not hold it yet; a history no cursor
// names any more is dropped.
func (s *Store) SaveCursors(ctx context.Context, dest string, epoch uint64, updates []CursorUpdate) (SaveResult, error) {
	c, all, err := s.cursorCommand(dest, epoch, updates)
	if err != nil {
		return SaveResult{}, err
	}
	// Leave out what the store holds already (as far as this node knows:
	// if it was dropped meanwhile, the batch is refused and sent again
	// with everything).
	s.fsm.read(func(t *state) {
		d := t.Dests[dest]
		for _, b := range all {
			if d == nil || d.Schemas[b.Source][b.Hash] == nil {
				c.Schemas = append(c.Schemas, b)
			}
		}
	})
	res, err := s.apply(ctx, c.encode())
	if errors.Is(err, ErrUnknownSchema) && len(c.Schemas) < len(all) {
		c.Schemas = all
		res, err = s.apply(ctx, c.encode())
	}
	if err != nil {
		return SaveResult{}, err
	}
	return SaveResult{Index: res.Index, Skipped: res.Skipped}, nil
}

// cursorCommand builds the save-cursors command of updates without schema
// histories, and returns those separately.
func (s *Store) cursorCommand(dest string, epoch uint64, updates []CursorUpdate) (*command, []schemaBlob, error) {
	if dest == "" {
		return nil, nil, fmt.Errorf("%w: empty destination name", ErrInvalid)
	}
	c := &command{Type: cmdSaveCursors, Dest: dest, Epoch: epoch, Cursors: make([]cursorEntry, 0, len(updates))}
	var all []schemaBlob
	seen := map[[2]string]bool{}
	for _, u := range updates {
		if u.Client == "" {
			return nil, nil, fmt.Errorf("%w: cursor of %q with an empty client id", ErrInvalid, dest)
		}
		if u.Cursor == nil {
			c.Cursors = append(c.Cursors, cursorEntry{Client: u.Client, Delete: true})
			continue
		}
		rec := cursorRecord{Seq: u.Cursor.Seq, Taken: u.Cursor.Taken, Detached: u.Cursor.Detached, Sources: make([]sourceRecord, len(u.Cursor.Sources))}
		if u.Cursor.ShardDDL != nil {
			b, err := json.Marshal(u.Cursor.ShardDDL)
			if err != nil {
				return nil, nil, fmt.Errorf("raftstore: cursor %s/%s: shard-DDL state: %w", dest, u.Client, err)
			}
			rec.ShardDDL = b
		}
		for i, src := range u.Cursor.Sources {
			rec.Sources[i] = sourceRecord{Name: src.Name, File: src.Pos.File, Pos: src.Pos.Pos, LastKey: src.LastKey,
				GTIDs: src.GTIDs.String(), Server: src.Server}
			if src.Snapshot != nil {
				if rec.Snapshots == nil {
					rec.Snapshots = make([]json.RawMessage, len(u.Cursor.Sources))
				}
				b, err := json.Marshal(src.Snapshot)
				if err != nil {
					return nil, nil, fmt.Errorf("raftstore: cursor %s/%s: source %s: snapshot progress: %w", dest, u.Client, src.Name, err)
				}
				rec.Snapshots[i] = b
			}
			if src.Schema == nil {
				continue
			}
			hash, data, err := s.schemas.encode(src.Schema)
			if err != nil {
				return nil, nil, fmt.Errorf("raftstore: cursor %s/%s: source %s: %w", dest, u.Client, src.Name, err)
			}
			rec.Sources[i].Schema = hash
			if k := [2]string{src.Name, hash}; !seen[k] {
				seen[k] = true
				all = append(all, schemaBlob{Source: src.Name, Hash: hash, Data: data})
			}
		}
		c.Cursors = append(c.Cursors, cursorEntry{Client: u.Client, Cursor: rec})
	}
	return c, all, nil
}

// EncodedCursorsSize is the size in bytes of the Raft entry SaveCursors
// writes for updates once the store holds their schema histories (which are
// then named by a 16-byte hash, not carried). It is for capacity planning
// and benchmarks; it returns -1 for updates SaveCursors would refuse.
func EncodedCursorsSize(dest string, epoch uint64, updates []CursorUpdate) int {
	var s Store
	c, _, err := s.cursorCommand(dest, epoch, updates)
	if err != nil {
		return -1
	}
	return len(c.encode())
}

// schemaCache remembers the encoding of schema histories by pointer: the
// group package shares a history between cursors and never modifies it, so
// a history is hashed once, not at every save.
type schemaCache struct {
	mu sync.Mutex
	m  map[*change.SchemaSnapshot]schemaBlob
}

// schemaCacheSize bounds the cache; it is emptied when full.
const schemaCacheSize = 256

func (c *schemaCache) encode(snap *change.SchemaSnapshot) (hash string, data []byte, err error) {
	c.mu.Lock()
	b, ok := c.m[snap]
	c.mu.Unlock()
	if ok {
		return b.Hash, b.Data, nil
	}
	data, err = json.Marshal(snap)
	if err != nil {
		return "", nil, err
	}
	sum := sha256.Sum256(data)
	hash = base64.RawURLEncoding.EncodeToString(sum[:12])
	c.mu.Lock()
	if c.m == nil || len(c.m) >= schemaCacheSize {
		c.m = map[*change.SchemaSnapshot]schemaBlob{}
	}
	c.m[snap] = schemaBlob{Hash: hash, Data: data}
	c.mu.Unlock()
	return hash, data, nil
}

// DefaultCursorInterval is how often FencedCursors writes its batch, chosen
// from BenchmarkRaftCursors (bench/raftstore_test.go): see the package doc.
const DefaultCursorInterval = 500 * time.Millisecond

// FencedCursors is the group.CursorStore of one destination's owner: Save
// only records the latest cursor per client, and every interval the
// pending cursors go to Raft as one SaveCursors batch fenced by the
// owner's epoch. Once a batch is rejected as stale (or the destination is
// gone) every later Save and Flush returns that error: the owner has been
// deposed and must stop. A crash loses at most one interval of cursor
// progress, which the stream's seqs make harmless (consumers drop seq <=
// last seen).
//
// It is safe for concurrent use. It owns one goroutine, stopped by Close.
type FencedCursors struct {
	s        *Store
	dest     string
	epoch    uint64
	interval time.Duration

	mu      sync.Mutex
	pending map[string]*group.Cursor
	err     error // sticky: fenced, gone or closed

	flushMu   sync.Mutex // one batch in flight at a time, in order
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

var _ group.CursorStore = (*FencedCursors)(nil)

// errCursorsClosed is returned by Save after Close.
var errCursorsClosed = errors.New("raftstore: cursor store closed")

// CursorStore returns the cursor store of dest for the holder of epoch,
// flushing every interval (0: DefaultCursorInterval). Close it when the
// destination stops here.
func (s *Store) CursorStore(dest string, epoch uint64, interval time.Duration) *FencedCursors {
	if interval <= 0 {
		interval = DefaultCursorInterval
	}
	f := &FencedCursors{
		s: s, dest: dest, epoch: epoch, interval: interval,
		pending: map[string]*group.Cursor{},
		stop:    make(chan struct{}), done: make(chan struct{}),
	}
	go f.run()
	return f
}

func (f *FencedCursors) run() {
	defer close(f.done)
	t := time.NewTicker(f.interval)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-f.s.closed:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), f.s.cfg.ApplyTimeout)
			err := f.Flush(ctx)
			cancel()
			if err != nil && f.Err() == nil {
				f.s.log.Warn("cursor flush failed; retrying", "dest", f.dest, "epoch", f.epoch, "err", err)
			}
		}
	}
}

// Load implements group.CursorStore: the cursor saved last (pending or
// stored) of client. A stored cursor is read with OwnedCursor, so it is
// current at takeover even on a follower.
func (f *FencedCursors) Load(destination, client string) (*group.Cursor, error) {
	if destination != f.dest {
		return nil, fmt.Errorf("raftstore: cursor store of %q asked for %q", f.dest, destination)
	}
	f.mu.Lock()
	c, ok := f.pending[client]
	err := f.err
	f.mu.Unlock()
	if err != nil && !errors.Is(err, errCursorsClosed) {
		return nil, err
	}
	if ok {
		if c == nil {
			return nil, nil // forgotten, not yet flushed
		}
		return c.Clone(), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.s.cfg.ApplyTimeout)
	defer cancel()
	return f.s.OwnedCursor(ctx, f.dest, client, f.epoch)
}

// Save implements group.CursorStore. It does not block on Raft: the cursor
// is written with the next batch. It fails once the owner is fenced.
func (f *FencedCursors) Save(destination, client string, c *group.Cursor) error {
	if destination != f.dest {
		return fmt.Errorf("raftstore: cursor store of %q asked for %q", f.dest, destination)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	f.pending[client] = c.Clone()
	return nil
}

// Forget deletes client's cursor with the next batch: a consumer that
// unsubscribed, whose place a later owner must not keep for it. It fails
// once the owner is fenced.
func (f *FencedCursors) Forget(client string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	f.pending[client] = nil
	return nil
}

// Err returns the error that stopped the store (fenced, destination
// deleted, closed), or nil.
func (f *FencedCursors) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// Flush writes the pending cursors now, as one batch.
func (f *FencedCursors) Flush(ctx context.Context) error {
	f.flushMu.Lock()
	defer f.flushMu.Unlock()
	f.mu.Lock()
	if f.err != nil && !errors.Is(f.err, errCursorsClosed) {
		err := f.err
		f.mu.Unlock()
		return err
	}
	batch := f.pending
	f.pending = map[string]*group.Cursor{}
	f.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	updates := make([]CursorUpdate, 0, len(batch))
	for client, c := range batch {
		updates = append(updates, CursorUpdate{Client: client, Cursor: c})
	}
	sort.Slice(updates, func(i, j int) bool { return updates[i].Client < updates[j].Client })
	_, err := f.s.SaveCursors(ctx, f.dest, f.epoch, updates)
	if err == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if errors.Is(err, ErrStaleEpoch) || errors.Is(err, ErrNotFound) {
		f.err = err
		f.pending = map[string]*group.Cursor{}
		f.s.log.Warn("cursor writes fenced: this node no longer owns the destination", "dest", f.dest, "epoch", f.epoch, "err", err)
		return err
	}
	// Not written (or not known to be): keep what was not saved again since.
	for client, c := range batch {
		if _, newer := f.pending[client]; !newer {
			f.pending[client] = c
		}
	}
	return err
}

// Close stops the flushing goroutine, writes what is pending and returns
// the first error that stopped the store, if any.
func (f *FencedCursors) Close() error {
	f.closeOnce.Do(func() {
		close(f.stop)
		<-f.done
		ctx, cancel := context.WithTimeout(context.Background(), f.s.cfg.ApplyTimeout)
		defer cancel()
		f.closeErr = f.Flush(ctx)
		f.mu.Lock()
		if f.err == nil {
			f.err = errCursorsClosed
		}
		f.mu.Unlock()
	})
	return f.closeErr
}
