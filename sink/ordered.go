package sink

import (
	"bytes"
	"context"
	"slices"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/flat"
	"github.com/braid-cdc/braid/stream"
)

// Message is one canal flat message of the stream (as `braid capture`
// prints it), as a Publisher sends it.
type Message struct {
	// Seq is its transaction's seq (a DDL's own) and N its place among
	// that transaction's messages, from 0: "dest:seq:n" names it, the
	// same on every run, because Ordered always starts a transaction at
	// its first message.
	Seq uint64
	N   int
	// Source is the source that wrote it.
	Source string
	// Database and Table are its logical table's.
	Database, Table string
	// Rows are the row changes it carries, empty for a DDL.
	Rows []*change.RowChange
	// DDL is set for a DDL's message.
	DDL bool
	// Reread marks a message of a snapshot chunk read again (after a
	// restart): under the same seq it may hold other rows than the first
	// time, so a target that skips what it holds by (seq, n) publishes
	// it again instead.
	Reread bool
	// Body is the flat message's JSON.
	Body []byte
}

// Publisher is the thin client under an Ordered sink: a target that
// takes the stream in order, as messages (sink/rabbitmq, sink/kafka).
type Publisher interface {
	// MaxRows caps the rows of one message (0: flat's default). 1 makes
	// each message one row, for a target that keys messages by their
	// row's primary key: a key-changing UPDATE then comes as the old
	// key's DELETE and the new key's INSERT, so that each key's changes
	// are in order wherever the key goes.
	MaxRows() int
	// Publish sends msgs, in order, and returns once the target has
	// confirmed every one; an error means some may not have been. A
	// Publisher that can tell which messages it already holds (after a
	// crash) skips them. Publish is called on one goroutine, one call at
	// a time.
	Publish(ctx context.Context, msgs []Message) error
	// Stats returns what the publisher counted (Applied: messages
	// confirmed).
	Stats() Stats
	Close() error
}

// Stager is a Publisher that can send messages before it confirms them
// (sink/kafka, whose transactions commit many store batches at once):
// Stage sends msgs as Publish does, in order, but what it sent may stay
// invisible to the target's readers, and unconfirmed, until Commit. An
// error from either means that what was staged since the last Commit may
// not be confirmed, and Stage starts again from that Commit. Publish is
// Stage then Commit. Ordered stages store batches and commits them at
// most StageBatches batches or StageFor after the first, and whenever the
// stream has nothing more ready, so a quiet stream is confirmed at once.
type Stager interface {
	Stage(ctx context.Context, msgs []Message) error
	Commit(ctx context.Context) error
}

// StageBatches and StageFor bound what Ordered stages before it commits
// (Stager): a commit costs a round trip to the target whatever it holds.
const (
	StageBatches = 32
	StageFor     = 100 * time.Millisecond
)

// Ordered is the Sink that publishes a stream to a Publisher in order,
// on one goroutine: each store batch's messages in one Publish, at least
// once, each message with the same id (seq, n) every time it is sent.
type Ordered struct {
	pub Publisher
}

var _ Sink = (*Ordered)(nil)

// NewOrdered returns the Ordered sink over publisher p.
func NewOrdered(p Publisher) *Ordered { return &Ordered{pub: p} }

// Publisher returns the target client o publishes to.
func (o *Ordered) Publisher() Publisher { return o.pub }

// Checkpoints implements Sink: none, an Ordered sink's place is its
// cursor (and for kafka the topic, which the Publisher reads itself).
func (o *Ordered) Checkpoints(context.Context) ([]Point, error) { return nil, nil }

// Stats implements Sink.
func (o *Ordered) Stats() Stats { return o.pub.Stats() }

// Close implements Sink.
func (o *Ordered) Close() error { return o.pub.Close() }

// Apply implements Sink: it publishes store batches until an error, each
// store batch's messages in one Publish (or Stage, for a Stager, committed
// as Stager says), and acks the batches once their messages are confirmed
// and they end at a transaction's end, so that a retry (which starts after
// the last acked store batch) always starts a transaction at its first
// message.
func (o *Ordered) Apply(ctx context.Context, f *Feed) error {
	fw := &flat.Writer{MaxRows: o.pub.MaxRows(), SplitKeyChanges: o.pub.MaxRows() == 1}
	stager, staging := o.pub.(Stager)
	var (
		msgs     []Message
		pending  []handed // batches published or staged, not acked
		staged   int      // batches of pending staged since the last commit
		stagedAt time.Time
		seq      uint64
		n        int
	)
	// confirm acks the pending batches, all confirmed at the target, up
	// to the last that ends a transaction.
	confirm := func() error {
		end := -1
		for i, h := range pending {
			if h.txEnd {
				end = i
			}
		}
		if end < 0 {
			return nil // inside a transaction: acked with its end
		}
		last := pending[end]
		for _, h := range pending[:end+1] {
			if err := f.Ack(h.id, last.seq, last.at); err != nil {
				return err
			}
		}
		pending = append(pending[:0], pending[end+1:]...)
		return f.Save()
	}
	commit := func() error {
		if err := stager.Commit(ctx); err != nil {
			return err
		}
		staged = 0
		return confirm()
	}
	for {
		var (
			b   stream.Batch
			err error
		)
		if staged > 0 {
			b, err = f.Ready(ctx) // nothing ready: commit what is staged
		} else {
			b, err = f.Next(ctx)
		}
		if err != nil {
			return err
		}
		if len(b.Events) == 0 {
			if staged > 0 {
				if err := commit(); err != nil {
					return err
				}
			}
			continue
		}
		msgs = msgs[:0]
		for _, ev := range b.Events {
			if ch, ok := partialChange(ev); ok {
				// A message holds whole rows: the columns the image
				// leaves out would go as null, which a consumer writes.
				// What came before it is published; it and what follows
				// wait for the source to be fixed.
				if len(msgs) > 0 || staged > 0 {
					if err := o.pub.Publish(ctx, msgs); err != nil {
						return err
					}
				}
				return PartialImageError(f.Sink(), ch)
			}
			if err := fw.Write(ev, func(body []byte) error {
				if fw.Seq != seq {
					seq, n = fw.Seq, 0
				}
				m := Message{Seq: seq, N: n, Source: ev.Source, Body: bytes.Clone(body), Reread: ev.Snapshot && !ev.FreshAt.IsZero()}
				n++
				if ev.Type == change.EventDDL {
					m.DDL = true
					m.Database, m.Table = ev.DDL.Logical()
				} else {
					m.Rows = slices.Clone(fw.Rows())
					m.Database, m.Table = m.Rows[0].Table.Logical()
				}
				msgs = append(msgs, m)
				return nil
			}); err != nil {
				return err
			}
		}
		last := b.Events[len(b.Events)-1]
		pending = append(pending, handed{id: b.ID, seq: last.Seq, at: last.CommitTime, txEnd: b.Marks[len(b.Marks)-1] != nil})
		if !staging {
			if len(msgs) > 0 {
				if err := o.pub.Publish(ctx, msgs); err != nil {
					return err
				}
			}
			if err := confirm(); err != nil {
				return err
			}
			continue
		}
		if len(msgs) > 0 {
			if err := stager.Stage(ctx, msgs); err != nil {
				return err
			}
		}
		if staged++; staged == 1 {
			stagedAt = time.Now()
		}
		if staged >= StageBatches || time.Since(stagedAt) >= StageFor {
			if err := commit(); err != nil {
				return err
			}
		}
	}
}

// handed is a store batch Ordered published: its id, and the seq and
// commit time of its last event, which ends a transaction (txEnd) or not.
type handed struct {
	id    int64
	seq   uint64
	at    time.Time
	txEnd bool
}

// partialChange returns the first row change of ev whose after image
// leaves columns out (change.RowChange.PartialAfter), as a Change naming
// it, or false.
func partialChange(ev *change.Event) (Change, bool) {
	if ev.Type != change.EventRows {
		return Change{}, false
	}
	for i := range ev.Rows {
		rc := &ev.Rows[i]
		if !rc.PartialAfter() {
			continue
		}
		ls, lt := rc.Table.Logical()
		return Change{Seq: ev.Seq, Source: ev.Source, Origin: rc.Table.Schema + "." + rc.Table.Name, Logical: ls + "." + lt, Row: rc}, true
	}
	return Change{}, false
}
