package group

import (
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/spec"
)

// The initial snapshot (spec snapshot: initial) puts the rows each source's
// selected tables hold where the destination starts into the stream, as
// transactions of INSERTs ("chunks"), while the binlog's changes keep
// flowing. It is Flink CDC's incremental snapshot, done per source in
// front of the merge:
//
//   - A source's tables are read one after the other, each in chunks of
//     snapshot_chunk_rows rows in key order (a table whose key is not all
//     integer columns, or that has none, in one piece), by plain SELECTs on
//     a connection of the snapshot's own: no lock, no write.
//   - A chunk is registered before its SELECT runs, and from then on every
//     change the binlog brings to its table's unread keys is kept beside
//     it (a table without a key: its SELECT runs in a consistent
//     snapshot, and those before the snapshot's binlog position are
//     passed over, see fold). Once the SELECT and the server's end of
//     binlog after it (the chunk's high watermark H) are known, the
//     chunk waits until the source's reader has passed H, then the
//     changes kept are folded into
//     the rows selected, in binlog order: the rows are then the table's
//     rows at that boundary, and the chunk goes out there as a transaction
//     of its own. While it waits the next chunks are read (a bounded
//     number, see readChunk), each keeping the changes to its own key
//     range, and they go out in key order: the reader can be a second or
//     more behind the server when strict order holds its queue.
//   - Until then the reader's changes to keys not yet emitted are left
//     out of the stream (their effect is in the chunk when it comes), so a
//     change to a key never goes out before the key's snapshot row. An
//     UPDATE that moves a row from an emitted key to an unread one goes out
//     as the old key's DELETE, and the reverse as the new key's INSERT.
//
// A chunk is not one of the source's transactions, so it takes no part in
// the merge's commit-time order: the merge emits it as soon as it heads
// its source's queue. Where a chunk goes therefore depends on timing, so
// the merge keeps each chunk in the destination's placement log
// (Config.Keep: Raft in a cluster, a file beside the cursors in
// capture) before it goes out: the source, the key range, the source
// boundary it follows and the point of the merged stream it goes out at
// (Taken). A restart, a new owner or a replay reader from an earlier
// cursor emits the logged chunks at the same boundaries and the same
// points, so every transaction keeps its seq, and reads no new chunk
// before they are all out. It selects their key ranges again, so their
// rows are as they are then (marked with the source's end of binlog then,
// change.Event.FreshAt, and its GTID state: the changes that follow may
// be read from another server, a failover since), which a consumer
// applying the stream in order overwrites with the changes that follow
// until it has caught up.
// Progress (per table: the last key emitted, rows, chunks) is part of each
// source's cursor, so a restart goes on at the next chunk.
//
// A shard-DDL catch-up, which reads held rows again from the binlog,
// filters them by the chunks out before their position (filterHeld), as
// the gate did when they were live.

// snapshotBatch is how many rows one EventRows of a chunk carries.
const snapshotBatch = 512

// sourceSnapshot is one source's snapshot: the gate between its reader
// and its queue, and the goroutine that reads its chunks.
type sourceSnapshot struct {
	d    *Destination
	src  int
	name string
	log  *slog.Logger
	push func(*change.Event) error // into the source's queue

	// pushMu is held by whoever pushes into the queue (the reader over
	// pass, the snapshot goroutine over emitDue), taken before mu: the
	// queue's order is the stream's.
	pushMu    sync.Mutex
	mu        sync.Mutex
	state     *change.SnapshotState // nil until the reader announced its tables
	ready     chan struct{}         // closed once the reader announced its tables
	announced bool
	versions  map[string]*change.Table
	keys      map[*change.Table]tableKey
	boundary  change.Position // the boundary after the last transaction passed
	boundMark Mark            // boundary on any server of the source
	server    *change.Server  // the server the reader read last (see switched)
	serverGen int             // counts the server switches (see leftChange)
	inTx      bool
	begin     *change.Event // the open transaction's EventBegin, not yet pushed
	// fresh: the open transaction is before the state's FreshAt (see
	// gate), decided at its EventBegin.
	fresh bool
	// pending are the chunks registered and not yet emitted, in key
	// order: the first goes out first (see readChunk for how many).
	pending []*pendingChunk
	// recent are the changes left out lately (see leftRecently), oldest
	// first from recentHead on.
	recent     []leftChange
	recentHead int
	changed    chan struct{} // signalled (capacity 1) when pending goes or state changes
	after      [][]keyPart   // parsed After of each table, cached per state
	afterOf    *change.SnapshotState
	// recorded are the source's chunks from the log and those queued
	// since, by Index; under recMu, which is never held while pushing (the
	// merge reads them, see filterHeld).
	recMu    sync.Mutex
	recorded []Placement
	// outbox tells the merge of each chunk queued, in queue order.
	outbox chan chunkOut

	// warnedInexact: a keyless table was read on a server that does not
	// tell its snapshot's binlog position (the snapshot goroutine's).
	warnedInexact bool

	rows      atomic.Int64
	estimated atomic.Int64
	started   atomic.Int64 // when this run began reading, Unix ns
	stats     atomic.Pointer[SnapshotStats]
}

func newSourceSnapshot(d *Destination, src int, from *change.SnapshotState, recorded []Placement) *sourceSnapshot {
	g := &sourceSnapshot{d: d, src: src, name: d.cfg.Spec.Sources[src].Name, log: d.log.With("source", d.cfg.Spec.Sources[src].Name),
		ready: make(chan struct{}), versions: map[string]*change.Table{}, keys: map[*change.Table]tableKey{},
		changed: make(chan struct{}, 1),
		outbox:  make(chan chunkOut, d.cfg.QueueEvents+2)} // a chunk takes an event of the queue at least
	g.started.Store(d.cfg.Clock.Now().UnixNano())
	for _, c := range recorded {
		if c.Source == src {
			g.recorded = append(g.recorded, c)
		}
	}
	if from != nil {
		g.state = from
		g.publishStats()
	}
	return g
}

// snapshotOn reports whether spec ds asks for an initial snapshot.
func snapshotOn(ds *spec.Spec) bool { return ds.Snapshot == spec.SnapshotInitial }
