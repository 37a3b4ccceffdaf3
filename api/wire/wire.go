// Package wire holds the JSON shapes of braid's native HTTP API that both
// the server (api/native) and the Go client (client) use.
package wire

import (
	"encoding/json"
	"time"
)

// State is a destination's state as GET /v1/destinations/{name} shows it.
type State struct {
	Name string `json:"name"`
	// Seq is the last transaction the merge emitted; Late counts those that
	// came below a promised watermark. Set when the destination reports
	// group.Stats.
	Seq     uint64        `json:"seq"`
	Late    int           `json:"late"`
	Sources []SourceState `json:"sources"`
	// Stats is what the destination reports when it is not a merge's
	// group.Stats, as JSON.
	Stats   json.RawMessage `json:"stats,omitempty"`
	Store   StoreState      `json:"store"`
	Clients []ClientState   `json:"clients"`
}

// SourceState is one source of a State.
type SourceState struct {
	Name string `json:"name"`
	// Pos is where the source resumes after the last transaction emitted,
	// "file:pos".
	Pos string `json:"pos"`
	// LastCommit is the commit time of its last transaction offered; LagMs
	// the time since, in milliseconds (absent before the first).
	LastCommit *time.Time `json:"lastCommit,omitempty"`
	LagMs      *int64     `json:"lagMs,omitempty"`
	// LastSeen is when its last event or heartbeat reached the merge.
	LastSeen *time.Time `json:"lastSeen,omitempty"`
	// Waiting is set while strict order waits for this source.
	Waiting bool `json:"waiting"`
}

// StoreState is the destination's store use.
type StoreState struct {
	Events    int   `json:"events"`
	Bytes     int64 `json:"bytes"`
	PeakBytes int64 `json:"peakBytes"`
}

// ClientState is one client id subscribed to the destination on this
// node: a native stream's (Streaming, AckedSeq and PendingBatches are its
// own) or a canal client's (AckedSeq is its cursor's seq).
type ClientState struct {
	ID        string `json:"id"`
	Streaming bool   `json:"streaming"`
	// AckedSeq is the highest seq the client acked.
	AckedSeq uint64 `json:"ackedSeq"`
	// PendingBatches counts store batches written and not yet acked.
	PendingBatches int `json:"pendingBatches"`
	// Unacked counts the events the store holds for the client: once the
	// store is full, the slowest client id holds the stream back.
	Unacked int `json:"unacked"`
	// Cursor is the destination cursor of the client's last acked
	// transaction boundary (absent before the first).
	Cursor *CursorState `json:"cursor,omitempty"`
}

// CursorState is a client's cursor: a seq and each source's position.
type CursorState struct {
	Seq     uint64           `json:"seq"`
	Sources []SourcePosition `json:"sources"`
}

// SourcePosition is one source's position in a cursor.
type SourcePosition struct {
	Name string `json:"name"`
	Pos  string `json:"pos"`
}
