package group

import (
	"context"
	"slices"
	"sync"
)

// Keeper is what one destination keeps so that a restart, a replay or a
// new owner goes on with the same stream: each client's cursor, the
// operators' shard-DDL decisions and the placements of snapshot chunks
// and late transactions. Implementations: FileKeeper (braid capture
// --cursor-dir), MemKeeper (a process that keeps nothing past its run,
// and tests), raftstore.FencedKeeper (a cluster's owner, fenced by its
// epoch). They pass one suite, internal/keeptest.
//
// A Keeper is safe for concurrent use.
type Keeper interface {
	// Cursors returns every client's kept cursor, by client id (none:
	// an empty map).
	Cursors() (map[string]*Cursor, error)
	// SaveCursor keeps client's cursor in place of the one before. It
	// may be written later, in a batch; Close writes what is pending.
	SaveCursor(client string, c *Cursor) error
	// ForgetCursor drops client's cursor (a consumer that unsubscribed).
	ForgetCursor(client string) error

	// Decisions returns the shard-DDL decisions kept, in the order kept.
	Decisions() ([]DDLDecision, error)
	// KeepDecision keeps a new decision before it applies: kept when it
	// returns. An error refuses the decision.
	KeepDecision(ctx context.Context, d DDLDecision) error

	// Placements returns the placements kept, in the order kept.
	Placements() ([]Placement, error)
	// KeepPlacement keeps a new placement before its chunk or
	// transaction goes out: kept when it returns.
	KeepPlacement(ctx context.Context, p Placement) error

	// Close writes what is pending; the keeper is not used after.
	Close() error
}

// MemKeeper keeps in memory, for one process: a destination served by
// braid capture --http-port (a new run reads from the spec's start and
// each sink's target skips what it applied), and tests. Its zero value
// keeps nothing yet; Close keeps what it holds, so a MemKeeper used
// again after Close finds everything (a restart within one process).
type MemKeeper struct {
	mu         sync.Mutex
	cursors    map[string]*Cursor
	decisions  []DDLDecision
	placements []Placement
}

var _ Keeper = (*MemKeeper)(nil)

// Cursors implements Keeper.
func (m *MemKeeper) Cursors() (map[string]*Cursor, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]*Cursor, len(m.cursors))
	for id, c := range m.cursors {
		out[id] = c.Clone()
	}
	return out, nil
}

// SaveCursor implements Keeper.
func (m *MemKeeper) SaveCursor(client string, c *Cursor) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cursors == nil {
		m.cursors = map[string]*Cursor{}
	}
	m.cursors[client] = c.Clone()
	return nil
}

// ForgetCursor implements Keeper.
func (m *MemKeeper) ForgetCursor(client string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.cursors, client)
	return nil
}

// Decisions implements Keeper.
func (m *MemKeeper) Decisions() ([]DDLDecision, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.decisions), nil
}

// KeepDecision implements Keeper.
func (m *MemKeeper) KeepDecision(_ context.Context, d DDLDecision) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.decisions = append(m.decisions, d)
	return nil
}

// Placements implements Keeper.
func (m *MemKeeper) Placements() ([]Placement, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Clone(m.placements)
	for i := range out {
		out[i] = out[i].clone()
	}
	return out, nil
}

// KeepPlacement implements Keeper.
func (m *MemKeeper) KeepPlacement(_ context.Context, p Placement) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.placements = append(m.placements, p.clone())
	return nil
}

// Close implements Keeper: nothing is pending.
func (m *MemKeeper) Close() error { return nil }

// clone copies p's slices, which a caller may reuse.
func (p Placement) clone() Placement {
	p.After, p.Through = slices.Clone(p.After), slices.Clone(p.Through)
	return p
}

// keptDecisions and keptPlacements read cfg.Keep (nothing without one).
func (cfg *Config) keptDecisions() ([]DDLDecision, error) {
	if cfg.Keep == nil {
		return nil, nil
	}
	return cfg.Keep.Decisions()
}

func (cfg *Config) keptPlacements() ([]Placement, error) {
	if cfg.Keep == nil {
		return nil, nil
	}
	return cfg.Keep.Placements()
}
