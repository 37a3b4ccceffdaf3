package chaos

import (
	"fmt"
	"strings"
	"time"
)

// A row change, as the writer made it and as the stream shows it: its
// kind (I, U, D), its id and its version v (after an INSERT or UPDATE,
// before a DELETE). Ids and versions are unique over a run, so the string
// names one change of one row.
func change(kind byte, id, v int64) string { return fmt.Sprintf("%c %d %d", kind, id, v) }

// Tx is one transaction the writer committed on a source, or may have
// (Uncertain: the connection broke during COMMIT; At the end the run asks
// the source whether it did, and sets Committed).
type Tx struct {
	Source    string
	ID        int64 // its row in chaos_ledger.tx on the source
	At        time.Duration
	Changes   []string
	Uncertain bool
	Committed bool
}

// Txn is one transaction of the stream as a consumer received it.
type Txn struct {
	Seq      uint64
	At       time.Duration // when it arrived (its first message)
	Snapshot bool          // an initial snapshot's chunk
	DDL      string        // a DDL's kind (ALTER, TRUNCATE, ...), "" for rows
	Rows     []string      // its row changes, in order

	// partial: the connection ended before the next transaction began,
	// so it may lack its last messages; a copy received again whole
	// replaces it (recorder.reconnected).
	partial bool
}

// Fingerprint is what must be equal for the same seq at every consumer
// and in every replay. A snapshot chunk read again holds its rows as they
// are then (docs/snapshot.md), so only that it is a chunk counts.
func (t *Txn) Fingerprint() string {
	switch {
	case t.Snapshot:
		return "snapshot chunk"
	case t.DDL != "":
		return "DDL " + t.DDL
	}
	return strings.Join(t.Rows, ", ")
}

// Same says whether t and u are the same transaction by their
// fingerprints, where a snapshot chunk and a transaction of no rows are
// the same too: a chunk read again holds its rows as they are then, none
// when its table was truncated, and a rowless transaction says nothing of
// being a chunk (the native API's EMPTY message, canal's BEGIN and END).
func (t *Txn) Same(u *Txn) bool {
	a, b := t.Fingerprint(), u.Fingerprint()
	return a == b || (t.Snapshot && u.rowless()) || (u.Snapshot && t.rowless())
}

func (t *Txn) rowless() bool { return !t.Snapshot && t.DDL == "" && len(t.Rows) == 0 }

// Consumed is what one consumer received: its transactions by seq, and
// the seqs it received twice with a different content (Conflicts).
type Consumed struct {
	Name      string
	Txns      map[uint64]*Txn
	Conflicts []Conflict
	LastError string // the last error its client met, for the report
}

// Conflict is a seq a consumer received again carrying another
// transaction.
type Conflict struct {
	Seq         uint64
	At          time.Duration
	First, Then string // the fingerprints
}

// TargetRow is a row of a sink's target, or of a source, as the final
// comparison reads it: "id v amount note".
type TargetRow struct {
	ID   int64
	Line string
}

// Target is what a sink's target holds at the end.
type Target struct {
	Sink        string
	ExactlyOnce bool // mysql, postgres: equal to the sources; else holds every current row
	Rows        []TargetRow
}

// Exit is a process that exited when no fault had stopped it.
type Exit struct {
	Process string
	At      time.Duration
	How     string
}

// Observation is everything a run saw, checked by Check.
type Observation struct {
	Head      uint64     // the destination's last seq at the end
	Preloaded []int64    // the ids the sources held before the destination (its snapshot)
	Ledger    []*Tx      // the writer's transactions
	Consumers []Consumed // the first is the reference for the ledger
	Sources   []TargetRow
	Targets   []Target
	Published []Published
	Delivered []Delivered
	Exits     []Exit
	Takeovers []Takeover
	Memory    []Memory
	Follows   []Follow
}

// Memory is a node's peak memory over the run, against its documented
// bound (memoryBound).
type Memory struct {
	Node  string
	Peak  int64         // bytes: the most anonymous resident memory (RssAnon) seen
	At    time.Duration // when it was seen
	Bound int64         // bytes
}

// Follow is how long braid took to read a source from its promoted
// server after a failover moved the source's address to it.
type Follow struct {
	Source string
	At     time.Duration // when the address moved
	After  time.Duration // until the destination's state named the promoted server; -1: not within followWait
	Bound  time.Duration
}

// Delivered is what an at-least-once message sink (RabbitMQ) delivered,
// read as its consumers must read it: de-duplicated by message id.
type Delivered struct {
	Sink      string
	Messages  int            // as taken from the queue, before de-duplication
	Changes   map[string]int // row changes of the distinct messages, snapshot rows left out
	Conflicts []string       // message ids delivered again with another body
}

// Takeover is what followed a partition of the destination's owner: the
// node that took the destination over (By, "" none) and After how long.
type Takeover struct {
	Node  string        // the owner cut off
	At    time.Duration // when the cut began
	For   time.Duration // how long it lasted
	Bound time.Duration // a cut at least this long must see a takeover within it
	By    string
	After time.Duration
}

// Published is what a message sink (Kafka) published: how many times
// each row change, snapshot rows left out.
type Published struct {
	Sink    string
	Changes map[string]int
}
