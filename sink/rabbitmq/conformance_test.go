package rabbitmq_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"

	"github.com/braid-cdc/braid/internal/testutil/rabbittest"
	"github.com/braid-cdc/braid/sink/conformance"
	"github.com/braid-cdc/braid/sink/rabbitmq"
	"github.com/braid-cdc/braid/spec"
)

// TestConformance runs the sinks' suite against the machine's RabbitMQ,
// each case in a vhost of its own, with a queue per table the sink
// declares and the harness consumes.
func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Harness{
		New: func(t *testing.T) conformance.Target {
			return &place{t: t, url: rabbittest.Vhost(t), queues: map[string]*rabbittest.Consumer{}}
		},
		Ordered:    true,
		Duplicates: true, // after a restart, under the same message_id
		Cannot: map[conformance.Case]string{
			conformance.Collision: "a message names its shard table (database, table) and lands in no table: there is no key to collide in; origin_column is for mysql and postgres",
		},
	})
}

// place is a vhost of the test's own.
type place struct {
	t      *testing.T
	url    string
	queues map[string]*rabbittest.Consumer // by logical table
}

func (p *place) Sink(name string, tables []string) spec.Sink {
	return spec.Sink{Name: name, Type: "rabbitmq", URL: p.url, Password: "guest", Queues: "per-table"}
}

// received is what the queue of table got, de-duplicated by message_id
// (rabbittest.Dedup, which checks each message's id, headers and
// persistence on the way); its destination is named after the table's
// database, as the suite names it.
func (p *place) received(table string) rabbittest.Received {
	c := p.queues[table]
	db, name, _ := strings.Cut(table, ".")
	if c == nil {
		// The sink declared the queue when it was first opened, and it
		// keeps what was published before a consumer came.
		c = rabbittest.Consume(p.t, p.url, rabbitmq.QueueName(rabbitmq.RoutingKey(spec.DefaultRoutingKey, db, name)))
		p.queues[table] = c
	}
	return rabbittest.Dedup(p.t, c.Deliveries(), db)
}

// Rows applies the queue's messages, in the order they came, to rows by
// key id, as a consumer does: an UPDATE's data over the row its old
// names (a minimal image's data holds the columns it changed only).
func (p *place) Rows(sk spec.Sink, table string) ([]map[string]*string, error) {
	rows := map[string]map[string]*string{}
	for _, m := range p.received(table).Msgs {
		if m.IsDDL {
			continue
		}
		for i, d := range m.Data {
			key := d["id"]
			var old map[string]*string
			if i < len(m.Old) {
				old = m.Old[i]
			}
			if key == nil && old != nil {
				key = old["id"]
			}
			if key == nil {
				return nil, fmt.Errorf("message %d: a row without id", m.ID)
			}
			switch m.Type {
			case "DELETE":
				delete(rows, *key)
				continue
			case "UPDATE":
				from := key
				if old != nil && old["id"] != nil {
					from = old["id"]
				}
				r := maps.Clone(rows[*from])
				delete(rows, *from)
				if r == nil {
					r = map[string]*string{}
				}
				maps.Copy(r, d)
				d = r
			}
			rows[*key] = d
		}
	}
	out := make([]map[string]*string, 0, len(rows))
	for _, r := range rows {
		out = append(out, r)
	}
	return out, nil
}

// Messages returns every delivery of a row message, duplicates included,
// once it has checked that the distinct ones came in stream order.
func (p *place) Messages(sk spec.Sink, table string) ([]conformance.Message, error) {
	got := p.received(table)
	for i := 1; i < len(got.Pos); i++ {
		if a, b := got.Pos[i-1], got.Pos[i]; b.Seq < a.Seq || b.Seq == a.Seq && b.N <= a.N {
			return nil, fmt.Errorf("message %d:%d came after %d:%d: out of stream order", b.Seq, b.N, a.Seq, a.N)
		}
	}
	var out []conformance.Message
	for _, d := range p.queues[table].Deliveries() {
		var m rabbittest.Message
		if err := json.Unmarshal(d.Body, &m); err != nil {
			return nil, err
		}
		if m.IsDDL {
			continue
		}
		parts := strings.Split(d.MessageId, ":")
		n, err := strconv.Atoi(parts[len(parts)-1])
		if err != nil {
			return nil, fmt.Errorf("message_id %q: %w", d.MessageId, err)
		}
		out = append(out, conformance.Message{Seq: m.ID, N: n, Rows: len(m.Data)})
	}
	return out, nil
}
