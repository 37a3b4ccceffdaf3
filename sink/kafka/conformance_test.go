package kafka_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/braid-cdc/braid/sink/conformance"
	"github.com/braid-cdc/braid/sink/kafka"
	"github.com/braid-cdc/braid/sink/kafka/kafkatest"
	"github.com/braid-cdc/braid/spec"
)

// TestConformance runs the sinks' suite against an in-process Kafka
// (kfake), a cluster of its own for each case, whose topics (one a
// logical table, of five partitions) it makes before the sink opens.
func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Harness{
		New:             func(t *testing.T) conformance.Target { return &place{t: t} },
		Ordered:         true,
		SplitKeyChanges: true,
		Cannot: map[conformance.Case]string{
			conformance.Collision: "a record names its shard table (database, table) and lands in no table: there is no key to collide in; origin_column is for mysql and postgres",
		},
	})
}

// place is a Kafka cluster of the case's own.
type place struct {
	t       *testing.T
	cluster *kfake.Cluster
}

func (p *place) Sink(name string, tables []string) spec.Sink {
	if p.cluster == nil {
		var topics []string
		for _, tb := range tables {
			db, table, _ := strings.Cut(tb, ".")
			topics = append(topics, kafka.Topic(spec.DefaultTopic, db, table))
		}
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...))
		if err != nil {
			p.t.Fatal(err)
		}
		p.t.Cleanup(c.Close)
		p.cluster = c
	}
	return spec.Sink{Name: name, Type: "kafka", Brokers: p.cluster.ListenAddrs()}
}

// records reads every record of table's topic, and checks them
// (kafkatest.Check: each message once, each partition in stream order,
// each key on its hash's partition).
func (p *place) records(sk spec.Sink, table string) ([]kafkatest.Record, error) {
	db, name, _ := strings.Cut(table, ".")
	ctx, cancel := context.WithTimeout(p.t.Context(), 30*time.Second)
	defer cancel()
	recs, n, err := kafkatest.Read(ctx, sk.Brokers, kafka.Topic(spec.DefaultTopic, db, name))
	if err != nil {
		return nil, err
	}
	return recs, kafkatest.Check(recs, n)
}

// Rows applies the topic's records in stream order to rows by key id, as
// a consumer does: an UPDATE's data over the row its old names.
func (p *place) Rows(sk spec.Sink, table string) ([]map[string]*string, error) {
	recs, err := p.records(sk, table)
	if err != nil {
		return nil, err
	}
	rows := map[string]map[string]*string{}
	for _, r := range kafkatest.InOrder(recs) {
		m := r.Message
		if m.IsDDL {
			continue
		}
		if len(m.Data) != 1 || m.Data[0]["id"] == nil {
			return nil, fmt.Errorf("record %s: %d rows, want 1 with an id", r.Pos, len(m.Data))
		}
		d := m.Data[0]
		switch m.Type {
		case "DELETE":
			delete(rows, *d["id"])
			continue
		case "UPDATE":
			if len(m.Old) == 1 && m.Old[0]["id"] != nil {
				delete(rows, *m.Old[0]["id"])
			}
		}
		rows[*d["id"]] = d
	}
	out := make([]map[string]*string, 0, len(rows))
	for _, r := range rows {
		out = append(out, r)
	}
	return out, nil
}

// Messages returns the topic's records, each one row change.
func (p *place) Messages(sk spec.Sink, table string) ([]conformance.Message, error) {
	recs, err := p.records(sk, table)
	if err != nil {
		return nil, err
	}
	var out []conformance.Message
	for _, r := range recs {
		if !r.Message.IsDDL {
			out = append(out, conformance.Message{Seq: r.Pos.Seq, N: r.Pos.N, Rows: len(r.Message.Data)})
		}
	}
	return out, nil
}
