package raftstore

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/braid-cdc/braid/group"
)

// FencedKeeper is the group.Keeper of one destination's owner, fenced by
// its epoch: cursors go to Raft in batches (FencedCursors), decisions and
// placements one Raft entry each (SaveDecision, SavePlacement), each
// refused with an error wrapping ErrStaleEpoch once a newer epoch is
// committed. Reads are local: current on the owner once its assignment
// is applied here (only the holder of the current epoch writes).
//
// It is safe for concurrent use. It owns one goroutine (the cursor
// batches), stopped by Close.
type FencedKeeper struct {
	s       *Store
	dest    string
	epoch   uint64
	cursors *FencedCursors
}

var _ group.Keeper = (*FencedKeeper)(nil)

// Keeper returns the keeper of dest for the holder of epoch, writing
// cursors every interval (0: DefaultCursorInterval). Close it when the
// destination stops here.
func (s *Store) Keeper(dest string, epoch uint64, interval time.Duration) *FencedKeeper {
	return &FencedKeeper{s: s, dest: dest, epoch: epoch, cursors: s.CursorStore(dest, epoch, interval)}
}

// Cursors implements group.Keeper: the stored cursors, with those saved
// or forgotten and not yet written in their place.
func (k *FencedKeeper) Cursors() (map[string]*group.Cursor, error) {
	stored, err := k.s.Cursors(k.dest)
	if err != nil {
		return nil, err
	}
	out := maps.Clone(stored)
	if out == nil {
		out = map[string]*group.Cursor{}
	}
	f := k.cursors
	f.mu.Lock()
	defer f.mu.Unlock()
	for client, c := range f.pending {
		if c == nil {
			delete(out, client)
		} else {
			out[client] = c.Clone()
		}
	}
	return out, nil
}

// SaveCursor implements group.Keeper: written with the next batch. It
// fails once the owner is fenced.
func (k *FencedKeeper) SaveCursor(client string, c *group.Cursor) error {
	return k.cursors.Save(k.dest, client, c)
}

// ForgetCursor implements group.Keeper: deleted with the next batch. It
// fails once the owner is fenced.
func (k *FencedKeeper) ForgetCursor(client string) error { return k.cursors.Forget(client) }

// Decisions implements group.Keeper.
func (k *FencedKeeper) Decisions() ([]group.DDLDecision, error) { return k.s.Decisions(k.dest) }

// KeepDecision implements group.Keeper: committed when it returns.
func (k *FencedKeeper) KeepDecision(ctx context.Context, d group.DDLDecision) error {
	return k.s.SaveDecision(ctx, k.dest, k.epoch, d)
}

// Placements implements group.Keeper.
func (k *FencedKeeper) Placements() ([]group.Placement, error) { return k.s.Placements(k.dest) }

// KeepPlacement implements group.Keeper: committed when it returns.
func (k *FencedKeeper) KeepPlacement(ctx context.Context, p group.Placement) error {
	return k.s.SavePlacement(ctx, k.dest, k.epoch, p)
}

// Err returns the error that fenced the cursor writes (a newer epoch, the
// destination deleted), or nil; after Close, the close.
func (k *FencedKeeper) Err() error { return k.cursors.Err() }

// Close implements group.Keeper: it writes the pending cursors and stops
// the batches, returning the first error that stopped them, if any.
func (k *FencedKeeper) Close() error {
	if err := k.cursors.Close(); err != nil {
		return fmt.Errorf("raftstore: %s: last cursors: %w", k.dest, err)
	}
	return nil
}
