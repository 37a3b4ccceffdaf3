package spec_test

import (
	"strings"
	"testing"

	"github.com/braid-cdc/braid/spec"
)

// TestSinkSpec: a sink's defaults, its problems with their paths, and a
// password the redacted spec does not show.
func TestSinkSpec(t *testing.T) {
	src := "sources: [{name: a, address: 'h:1'}]\n"
	s, err := spec.Parse([]byte("name: d\n" + src + "sinks: [{name: w, type: mysql, address: 'h:3306', password: pw, tables: [{from: shop.orders, to: wh.orders}]}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	sk := s.Sinks[0]
	if sk.Workers != spec.DefaultSinkWorkers || sk.Connections != spec.DefaultSinkConnections || sk.Batch != spec.DefaultSinkBatch || sk.User != spec.DefaultUser || sk.DDL != "apply" {
		t.Errorf("defaults: %+v", sk)
	}
	if sk.Target("shop.orders") != "wh.orders" || sk.Target("shop.items") != "shop.items" {
		t.Errorf("targets: %q %q", sk.Target("shop.orders"), sk.Target("shop.items"))
	}
	if r := s.Redacted(); r.Sinks[0].Password != spec.Hidden || s.Sinks[0].Password != "pw" {
		t.Errorf("redacted sink password %q (spec's %q)", r.Sinks[0].Password, s.Sinks[0].Password)
	}
	// Connections: at most the workers by default.
	s, err = spec.Parse([]byte("name: d\n" + src + "sinks: [{name: w, type: mysql, address: 'h:3306', workers: 2}]\n"))
	if err != nil || s.Sinks[0].Connections != 2 {
		t.Errorf("a mysql sink of 2 workers: connections %d (%v), want 2", s.Sinks[0].Connections, err)
	}
	_, err = spec.Parse([]byte("name: d\n" + src + "sinks:\n  - {name: w, type: oracle, address: 'h', workers: -1}\n  - {name: w, type: mysql, address: 'h:1', tables: [{from: orders, to: x}], connections: 300}\n  - {name: p, type: postgres, address: 'h:1', connections: 2}\n"))
	for _, want := range []string{`sinks[0].type: "oracle": want one of mysql`, "sinks[0].address", "sinks[0].workers", `sinks[1].name: "w" is used twice`, "sinks[1].tables[0].from", "sinks[1].tables[0].to",
		"sinks[1].connections: 300: want 1 to 256", "sinks[2].connections: only a mysql sink has connections"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("problems %v: want %q", err, want)
		}
	}
}

// TestMessageSinkSpec: the rabbitmq, kafka and redis keys, their
// defaults, and one clear problem for each mistake.
func TestMessageSinkSpec(t *testing.T) {
	src := "name: d\nsources: [{name: a, address: 'h:1'}]\n"
	s, err := spec.Parse([]byte(src + `sinks:
  - {name: mq, type: rabbitmq, url: 'amqp://h:5672/v', password: guest}
  - {name: k, type: kafka, brokers: ['h:9092']}
  - {name: c, type: redis, address: 'h:6379'}
`))
	if err != nil {
		t.Fatal(err)
	}
	mq, k, c := s.Sinks[0], s.Sinks[1], s.Sinks[2]
	if mq.Exchange != "braid" || mq.RoutingKey != "{database}.{table}" || mq.Queues != "none" || mq.User != "guest" || mq.Workers != 1 || mq.Mode != spec.SinkAtLeastOnce {
		t.Errorf("rabbitmq defaults: %+v", mq)
	}
	if k.Topic != "{database}.{table}" || k.Workers != 1 || k.Where() != "h:9092" {
		t.Errorf("kafka defaults: %+v", k)
	}
	if c.Key != "{table}:{pk}" || c.Format != "json" || c.TombstoneTTL != spec.Duration(spec.DefaultTombstoneTTL) || c.Workers != spec.DefaultSinkWorkers {
		t.Errorf("redis defaults: %+v", c)
	}
	if r := s.Redacted(); r.Sinks[0].Password != spec.Hidden {
		t.Errorf("rabbitmq password not hidden: %q", r.Sinks[0].Password)
	}
	_, err = spec.Parse([]byte(src + `sinks:
  - {name: a, type: rabbitmq, url: 'amqp://guest:secret@h:5672/', queues: all, workers: 4}
  - {name: b, type: kafka, password: pw, address: 'h:1'}
  - {name: c, type: redis, address: 'h:6379', key: 'c:{table}', format: xml, topic: t}
  - {name: e, type: mysql, address: 'h:1', exchange: x}
`))
	for _, want := range []string{"sinks[0].url: the url holds a password", `sinks[0].queues: "all"`, "sinks[0].workers: 4: a rabbitmq sink publishes in stream order",
		"sinks[1].brokers: give the kafka brokers", "sinks[1].password: only a mysql or postgres or rabbitmq or redis sink has password",
		"sinks[1].address: only a mysql or postgres or redis sink has address", `sinks[2].key: "c:{table}": the key template needs {pk}`, `sinks[2].format: "xml"`,
		"sinks[2].topic: only a kafka sink has topic", "sinks[3].exchange: only a rabbitmq sink has exchange"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("problems %v: want %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "secret") {
		t.Errorf("a problem repeats the url's password: %v", err)
	}
	// A url that is wrong besides holding a password does not repeat it
	// either, and a user in it is named as what to move.
	for _, u := range []string{"rabbit://u:secret@h/", "amqp//u:secret@h/", "amqp://u:secret@h:bad/"} {
		_, err := spec.Parse([]byte(src + "sinks: [{name: a, type: rabbitmq, url: '" + u + "'}]\n"))
		if err == nil || strings.Contains(err.Error(), "secret") {
			t.Errorf("url %s: %v", u, err)
		}
	}
	if _, err := spec.Parse([]byte(src + "sinks: [{name: a, type: rabbitmq, url: 'amqp://alice@h/'}]\n")); err == nil || !strings.Contains(err.Error(), `the url names user "alice": give it as user instead`) {
		t.Errorf("a user in the url: %v", err)
	}
}
