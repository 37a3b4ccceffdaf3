package group

import (
	"context"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/spec"
)

// Sources is what a destination reads its sources through: a reader per
// source (and one per shard-DDL catch-up), and the connections its
// initial snapshot selects chunks on. Binlog, the default, reads the
// servers; a test gives captured or scripted events and rows instead, so
// the merge, the snapshot's gate and the shard-DDL merge run on them
// with no server.
type Sources interface {
	// Reader returns a reader configured by cfg; it does not connect.
	Reader(cfg binlog.Config) (Reader, error)
	// Snapshot opens a connection to source src for snapshot reads.
	Snapshot(ctx context.Context, src spec.Source) (SnapshotConn, error)
}

// Reader is one source's reader as group uses it (binlog.Reader is one).
type Reader interface {
	// Run reads the source and calls emit with each event, in binlog
	// order, until ctx ends (then it returns ctx's error or nil) or the
	// source fails for good. An EventProgress carrying Tables comes
	// first when cfg.AnnounceTables is set.
	Run(ctx context.Context, emit func(*change.Event) error) error
	// Stats is the reader's progress, safe to call while it runs.
	Stats() binlog.Stats
}

// SnapshotConn is a connection for snapshot reads as group uses it
// (binlog.SnapshotConn is one); see binlog.SnapshotConn for each method.
type SnapshotConn interface {
	// Chunk selects t's rows with key columns keys after after, up to
	// and including through (either empty: unbounded), at most limit (0:
	// all) in key order.
	Chunk(ctx context.Context, t *change.Table, keys []int, after, through []string, limit int) (*change.TextRows, error)
	// Position is the server's end of binlog now.
	Position() (change.Position, error)
	// Fresh is Position with its Mark (the GTID state there and the
	// server), what a chunk read again is fresh at.
	Fresh() (change.Position, change.Mark, error)
	// Begin starts a transaction WITH CONSISTENT SNAPSHOT, which the
	// Chunks until End read in, and returns the binlog position it
	// sees the tables at; exact false when the server does not tell it
	// (MySQL), with a zero position.
	Begin(ctx context.Context) (pos change.Position, exact bool, err error)
	// End ends the transaction Begin started.
	End() error
	// EstimateRows is the server's estimate of t's rows (0: unknown).
	EstimateRows(t *change.Table) int64
	Close() error
}

// Binlog reads the servers: binlog.NewReader and binlog.OpenSnapshot.
var Binlog Sources = binlogSources{}

type binlogSources struct{}

func (binlogSources) Reader(cfg binlog.Config) (Reader, error) { return binlog.NewReader(cfg) }

func (binlogSources) Snapshot(ctx context.Context, src spec.Source) (SnapshotConn, error) {
	c, err := binlog.OpenSnapshot(ctx, src)
	if err != nil {
		return nil, err
	}
	return c, nil
}

var (
	_ Reader       = (*binlog.Reader)(nil)
	_ SnapshotConn = (SnapshotConn)(nil)
)
