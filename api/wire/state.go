package wire

import (
	"encoding/json"
	"time"
)

// State is a destination's state as its owner shows it (GET
// /v1/destinations/{name}): its merge's progress per source, its store's
// use, and the client ids that consume it on that node.
type State struct {
	// Name is the destination's name.
	Name string `json:"name"`
	// Seq is the seq of the last transaction the merge emitted (0 before
	// the first).
	Seq uint64 `json:"seq"`
	// Late counts the transactions that came below a watermark the merge
	// had already passed (a source clock beyond max_clock_skew): they are
	// emitted, out of commit-time order.
	Late int `json:"late"`
	// Undercut counts the transactions that came below their own source's
	// watermark: the source promised too much (a clock behind, a slow
	// commit); each could have gone out late, and the late ones did.
	Undercut int `json:"undercut"`
	// Sources are the destination's sources, in spec order; empty for a
	// destination that does not report a merge's statistics.
	Sources []SourceState `json:"sources"`
	// Stats is reserved for a destination that reports something other than
	// a merge's statistics, as JSON; braid's servers leave it out today.
	Stats json.RawMessage `json:"stats,omitempty"`
	// Store is the destination's store use on this node.
	Store StoreState `json:"store"`
	// Clients are the client ids subscribed to the destination's store on
	// this node, by id.
	Clients []ClientState `json:"clients"`
}

// SourceState is one source of a State.
type SourceState struct {
	// Name is the source's name in the spec.
	Name string `json:"name"`
	// Pos is where the source resumes after the last transaction the merge
	// emitted, "file:pos".
	Pos string `json:"pos"`
	// LastCommit is the commit time of the source's last transaction
	// offered to the merge; missing before the first.
	LastCommit *time.Time `json:"lastCommit,omitempty"`
	// LagMs is the time from LastCommit to the answer, in milliseconds;
	// missing before the first transaction.
	LagMs *int64 `json:"lagMs,omitempty"`
	// LastSeen is when the source's last event or heartbeat reached the
	// merge; missing before the first.
	LastSeen *time.Time `json:"lastSeen,omitempty"`
	// Waiting is true while strict order waits for this source (it is
	// behind the others, or down).
	Waiting bool `json:"waiting"`
	// Connected is true while the source's binlog connection streams.
	Connected bool `json:"connected"`
	// LastError is the error that last ended or refused the source's
	// connection; missing before the first (a source that recovered keeps
	// it: Connected says it is up again).
	LastError string `json:"lastError,omitempty"`
	// LastErrorAt is when LastError happened; missing before the first.
	LastErrorAt *time.Time `json:"lastErrorAt,omitempty"`
	// Idle is true while braid has read everything the source has and the
	// source sends only heartbeats: caught up, no traffic, BehindMs 0.
	Idle bool `json:"idle"`
	// Behind is true while the source is known to hold binlog braid has
	// not read yet (its end of binlog, ServerPos, is after ReadPos).
	Behind bool `json:"behind"`
	// BehindMs is how far braid's reading trails the source, in
	// milliseconds: 0 while idle; else the time since the newer of the
	// last event's commit and the last heartbeat, so it grows while the
	// source is down or cut off. Unlike LagMs, an idle source has none.
	BehindMs int64 `json:"behindMs"`
	// ReadPos is how far braid has read the source's binlog, "file:pos"
	// (ahead of Pos by what waits for the merge); missing before it is
	// known.
	ReadPos string `json:"readPos,omitempty"`
	// ServerPos is the source's end of binlog as braid last learnt it
	// (from heartbeats, and SHOW MASTER STATUS every 10 s while none
	// comes), "file:pos"; missing before it is known.
	ServerPos string `json:"serverPos,omitempty"`
	// GTIDs is the source's GTID position at Pos (MariaDB: the last GTID
	// of each domain, "0-1-42,1-2-7"); missing when braid does not know
	// it.
	GTIDs string `json:"gtids,omitempty"`
	// Server is the server braid reads the source from (or last read),
	// as "server_id N (host:port)", with its server_uuid on MySQL;
	// missing before the first connection.
	Server string `json:"server,omitempty"`
	// Switches counts the times braid resumed the source on another
	// server (a failover behind its address, or to another server its
	// address lists) since the destination started on this node.
	Switches uint64 `json:"switches,omitempty"`
	// LastSwitchAt is when the last of those switches happened; missing
	// before the first.
	LastSwitchAt *time.Time `json:"lastSwitchAt,omitempty"`
	// Lost names the GTIDs the stream has that the server answering
	// lacks although it is writable (a promoted replica): transactions
	// an asynchronous failover lost, which braid waits for; missing
	// otherwise.
	Lost string `json:"lost,omitempty"`
	// Accepted are the losses an operator accepted for the source (braid
	// destination accept-lost), oldest first: the source went on past
	// each without the transactions it names. Missing when none.
	Accepted []AcceptedLoss `json:"accepted,omitempty"`
	// Snapshot is the source's initial-snapshot progress; missing when the
	// spec has snapshot: never.
	Snapshot *SnapshotState `json:"snapshot,omitempty"`
}

// AcceptedLoss is a loss of a SourceState that an operator accepted.
type AcceptedLoss struct {
	// Lost names the transactions lost, as SourceState.Lost named them
	// while the source waited.
	Lost string `json:"lost"`
	// From is the source's GTID state braid had emitted when the loss
	// was found.
	From string `json:"from"`
	// Server is the server that lacked them, which the source went on
	// reading.
	Server string `json:"server,omitempty"`
	// AcceptedAt is when it was accepted; missing for one accepted by a
	// braid that did not keep the time.
	AcceptedAt *time.Time `json:"acceptedAt,omitempty"`
	// MarkerSeq is the seq of the marker transaction (a message of type
	// LOST) that names the loss in the stream; missing before it went
	// out (and for one that went out under a braid that did not keep
	// where).
	MarkerSeq uint64 `json:"markerSeq,omitempty"`
}

// SnapshotState is one source's initial-snapshot progress (spec snapshot:
// initial): its selected tables read in key-range chunks while its binlog
// keeps flowing.
type SnapshotState struct {
	// Tables is how many tables the source's snapshot reads; 0 until the
	// source's reader has found them.
	Tables int `json:"tables"`
	// TablesDone is how many of them have been read to the end.
	TablesDone int `json:"tablesDone"`
	// Rows is how many rows the snapshot has emitted.
	Rows int64 `json:"rows"`
	// EstimatedRows is the server's estimate of all the tables' rows
	// (from its table statistics, so it can be off either way); 0:
	// unknown.
	EstimatedRows int64 `json:"estimatedRows"`
	// RowsPerSecond is the rate of rows since the snapshot started on the
	// node that runs it.
	RowsPerSecond float64 `json:"rowsPerSecond"`
	// EtaSeconds is the time left at that rate, in seconds; 0 when done
	// or not known.
	EtaSeconds float64 `json:"etaSeconds"`
	// Done is true once every table has been read (also for a snapshot
	// that finished before the destination last started here: the counts
	// are then 0).
	Done bool `json:"done"`
}

// StoreState is a destination's store use: the events it holds for its
// consumers, bounded in bytes.
type StoreState struct {
	// Events is how many events the store holds now.
	Events int `json:"events"`
	// Bytes is the store's size now, in bytes (its own accounting of the
	// events, not the process's memory).
	Bytes int64 `json:"bytes"`
	// PeakBytes is the largest Bytes since the store was made.
	PeakBytes int64 `json:"peakBytes"`
	// Floor is the seq of the newest transaction the store no longer
	// holds whole: a client id behind it is served by a replay reader.
	Floor uint64 `json:"floor"`
	// BlockedBy names the client ids the store has been waiting for while
	// full (for a second or more); they are detached after the spec's
	// consumers.detach_after. Missing when the store is not held.
	BlockedBy []string `json:"blockedBy,omitempty"`
}

// ClientState is one client id subscribed to a destination on a node: a
// native stream's (Streaming, AckedSeq and PendingBatches are its own) or a
// canal client's (AckedSeq is its cursor's seq).
type ClientState struct {
	// ID is the client id.
	ID string `json:"id"`
	// Streaming is true while a native stream of the client id is open on
	// this node.
	Streaming bool `json:"streaming"`
	// AckedSeq is the highest seq the client acked.
	AckedSeq uint64 `json:"ackedSeq"`
	// PendingBatches counts the store batches written to the client and not
	// yet acked.
	PendingBatches int `json:"pendingBatches"`
	// Unacked counts the events the store holds for the client: once the
	// store is full, the slowest client id holds the stream back.
	Unacked int `json:"unacked"`
	// Cursor is the destination cursor of the client's last acked
	// transaction boundary; missing before the first ack.
	Cursor *CursorState `json:"cursor,omitempty"`
	// Ephemeral: the client id keeps no cursor and goes when its stream
	// ends (braid tail without --client-id).
	Ephemeral bool `json:"ephemeral,omitempty"`
	// Detached: it held the store full longer than consumers.detach_after
	// and holds nothing now.
	Detached bool `json:"detached,omitempty"`
	// Replaying: a replay reader of its own serves it (it started, or
	// fell, behind what the store holds).
	Replaying bool `json:"replaying,omitempty"`
	// Refused says why the destination cannot serve it: its cursor lies
	// before transactions a failover lost (drop it and subscribe it
	// again after their LOST marker).
	Refused string `json:"refused,omitempty"`
	// LastSeen is when it last read or acked.
	LastSeen *time.Time `json:"lastSeen,omitempty"`
}

// ConsumerDropped answers DELETE /v1/destinations/{name}/consumers/{id}.
type ConsumerDropped struct {
	// Destination is the destination it consumed.
	Destination string `json:"destination"`
	// ClientID is the client id dropped.
	ClientID string `json:"clientId"`
	// AckedSeq is the seq its cursor had.
	AckedSeq uint64 `json:"ackedSeq"`
}

// CursorState is a client's cursor: a seq and each source's position, from
// which the stream after that seq can be read again.
type CursorState struct {
	// Seq is the seq of the last transaction the cursor covers.
	Seq uint64 `json:"seq"`
	// Sources are each source's position after that transaction, in spec
	// order.
	Sources []SourcePosition `json:"sources"`
}

// SourcePosition is one source's position in a cursor.
type SourcePosition struct {
	// Name is the source's name in the spec.
	Name string `json:"name"`
	// Pos is the binlog position, "file:pos".
	Pos string `json:"pos"`
}

// AckResult answers POST /v1/destinations/{name}/ack?client-id=ID&seq=SEQ.
type AckResult struct {
	// ClientID is the client id that acked.
	ClientID string `json:"clientId"`
	// Seq is the highest seq the client acked so far (at least the ack's).
	Seq uint64 `json:"seq"`
	// Acked counts the store batches this ack confirmed.
	Acked int `json:"acked"`
	// Pending counts the store batches written to the client and still
	// waiting for an ack.
	Pending int `json:"pending"`
}
