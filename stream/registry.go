package stream

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/spec"
)

// ErrUnknownDestination: no destination of that name is served here.
var ErrUnknownDestination = errors.New("stream: unknown destination")

// Served is one destination as the servers see it: its store, whose
// events carry their logical names (stamped by package group), and its
// progress.
type Served struct {
	Name  string
	Store *Store
	// Stats, if set, reports the destination's progress for status pages.
	Stats func() group.Stats
	// Live, if set, says whether this node may hand the destination's
	// events out now: in a cluster, only while its ownership lease holds.
	// The servers check it before each batch and refuse the consumer with
	// its error (the consumer reconnects, to whichever node owns the
	// destination then). nil: always.
	Live func() error
	// ShardDDL, if set, is the shard-DDL merge's state (its locks), and
	// Decide applies an operator's decision about a lock
	// (group.Destination's methods of those names).
	ShardDDL     func() *group.ShardDDLState
	ShardDDLMode spec.ShardDDLMode // the spec's shard_ddl
	// DDLLockWarnAfter is the spec's ddl_lock_warn_after.
	DDLLockWarnAfter time.Duration
	Decide           func(ctx context.Context, lock int, action group.DecisionAction) error
	// Decisions, if set, lists the decisions kept, in the order made.
	Decisions func() []group.DDLDecision
	// Migrations, if set, lists the online schema changes under way on
	// the shard tables (group.Destination.Migrations).
	Migrations func() []group.Migration
	// AcceptLost, if set, accepts the loss of transactions a source
	// waits on (group.Destination.AcceptLost).
	AcceptLost func(ctx context.Context, source string) (change.Loss, error)
	// Sinks, if set, reports the destination's sinks running here.
	Sinks func() []SinkStats
}

// CheckLive returns s.Live's verdict (nil when s has no Live).
func (s *Served) CheckLive() error {
	if s.Live == nil {
		return nil
	}
	return s.Live()
}

// Registry is the set of destinations a node serves. Safe for concurrent
// use.
type Registry struct {
	mu    sync.RWMutex
	dests map[string]*Served
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{dests: map[string]*Served{}} }

// Add serves a destination (replacing one of the same name).
func (r *Registry) Add(s *Served) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dests[s.Name] = s
}

// Remove stops serving a destination.
func (r *Registry) Remove(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.dests, name)
}

// Lookup returns the destination of that name.
func (r *Registry) Lookup(name string) (*Served, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s, ok := r.dests[name]
	if !ok {
		return nil, fmt.Errorf("%w %q: this node serves %v", ErrUnknownDestination, name, r.namesLocked())
	}
	return s, nil
}

// Names lists the destinations served, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.namesLocked()
}

func (r *Registry) namesLocked() []string {
	names := make([]string, 0, len(r.dests))
	for n := range r.dests {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// SinkStats is one sink of a destination (package sink), as the servers
// show it.
type SinkStats struct {
	Name    string
	Type    spec.SinkType
	Address string
	Workers int
	// Running is set once its target was reached.
	Running bool
	// AppliedSeq is the seq of the last transaction applied whole.
	AppliedSeq uint64
	// AppliedAt is when the transaction AppliedSeq committed at its
	// source (zero before the first).
	AppliedAt time.Time
	// Rows, Upserts and Missing count the row changes applied, the
	// INSERTs that found their key and the UPDATEs and DELETEs that found
	// no row, since it started here; Conflicts the changes that waited
	// for another worker to apply one of their keys first.
	Rows, Upserts, Missing, Conflicts uint64
	// Replayed counts the row changes a mysql sink applied as the
	// binlog's row events (BINLOG statements), of Rows.
	Replayed uint64
	// Pending counts the messages a rabbitmq or kafka sink sent that the
	// broker has not confirmed yet; Returns those it handed back as
	// unroutable (each holds the sink up until a queue takes it).
	Pending, Returns uint64
	// RowsPerSecond is the rate of Rows over about the last second (0
	// when idle).
	RowsPerSecond float64
	// LastError is why it last failed (it retries), "" when it is well.
	LastError string
}

// LagSeconds is how far behind the sink is in time at now: 0 when it has
// applied head (the destination's last seq), else how long ago the last
// transaction it applied committed (0 before its first).
func (sk SinkStats) LagSeconds(head uint64, now time.Time) float64 {
	if sk.AppliedSeq >= head || sk.AppliedAt.IsZero() {
		return 0
	}
	return max(0, now.Sub(sk.AppliedAt).Seconds())
}
