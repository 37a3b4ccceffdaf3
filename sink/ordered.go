package sink

import (
	"bytes"
	"context"
	"slices"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/flat"
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
// store batch's messages in one Publish, and acks the batches once their
// messages are confirmed and they end at a transaction's end, so that a
// retry (which starts after the last acked store batch) always starts a
// transaction at its first message.
func (o *Ordered) Apply(ctx context.Context, f *Feed) error {
	fw := &flat.Writer{MaxRows: o.pub.MaxRows(), SplitKeyChanges: o.pub.MaxRows() == 1}
	var (
		msgs    []Message
		pending []int64 // batches published, not acked
		seq     uint64
		n       int
	)
	for {
		b, err := f.Next(ctx)
		if err != nil {
			return err
		}
		if len(b.Events) == 0 {
			continue
		}
		msgs = msgs[:0]
		for _, ev := range b.Events {
			if ch, ok := partialChange(ev); ok {
				// A message holds whole rows: the columns the image
				// leaves out would go as null, which a consumer writes.
				// What came before it is published; it and what follows
				// wait for the source to be fixed.
				if len(msgs) > 0 {
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
		if len(msgs) > 0 {
			if err := o.pub.Publish(ctx, msgs); err != nil {
				return err
			}
		}
		pending = append(pending, b.ID)
		last := b.Events[len(b.Events)-1]
		if b.Marks[len(b.Marks)-1] == nil {
			continue // inside a transaction: acked with its end
		}
		for _, id := range pending {
			if err := f.Ack(id, last.Seq, last.CommitTime); err != nil {
				return err
			}
		}
		pending = pending[:0]
		if err := f.Save(); err != nil {
			return err
		}
	}
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
