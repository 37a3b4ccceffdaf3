package rabbitmq_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/rabbittest"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/sink/conformance"
	"github.com/braid-cdc/braid/sink/rabbitmq"
	"github.com/braid-cdc/braid/sink/sinkrun"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

func TestNames(t *testing.T) {
	for _, tc := range []struct{ tmpl, want string }{
		{spec.DefaultRoutingKey, "shop.orders"},
		{"cdc.{table}", "cdc.orders"},
		{"{database}", "shop"},
		{"all", "all"},
	} {
		if got := rabbitmq.RoutingKey(tc.tmpl, "shop", "orders"); got != tc.want {
			t.Errorf("RoutingKey(%q) = %q, want %q", tc.tmpl, got, tc.want)
		}
	}
	// Names are escaped: no word, wildcard or escape of their own.
	for _, tc := range []struct{ db, table, want string }{
		{"shop", "#", "shop.%23"},
		{"shop", "*", "shop.%2A"},
		{"a", "b.c", "a.b%2Ec"},
		{"a.b", "c", "a%2Eb.c"},
		{"shop", "100%", "shop.100%25"},
		{"shop", "%23", "shop.%2523"},
		{"shop", "order_items-2", "shop.order_items-2"},
	} {
		if got := rabbitmq.RoutingKey(spec.DefaultRoutingKey, tc.db, tc.table); got != tc.want {
			t.Errorf("RoutingKey(%q, %q) = %q, want %q", tc.db, tc.table, got, tc.want)
		}
	}
	for key, want := range map[string]string{"shop.orders": "shop.orders", "amq.orders": "%61mq.orders", "amq": "amq", "xamq.t": "xamq.t"} {
		if got := rabbitmq.QueueName(key); got != want {
			t.Errorf("QueueName(%q) = %q, want %q", key, got, want)
		}
	}
	if got := rabbitmq.MessageID("shop", &sink.Message{Seq: 1234, N: 7}); got != "shop:1234:7" {
		t.Errorf("MessageID = %q", got)
	}
}

// TestQueueDeclared: the shop workload relayed by a rabbitmq sink with
// queues: per-table (that its messages, de-duplicated, rebuild the
// sources in stream order, restarted or replayed, is the conformance
// suite's). The ALTER every shard runs arrives as a DDL message in the
// table's queue, and the queue is durable with x-single-active-consumer:
// declaring it so again is no change (a different declaration fails).
func TestQueueDeclared(t *testing.T) {
	url := rabbittest.Vhost(t)
	shards := sinktest.StartShop(t)
	ds := conformance.ShopSpec(t, shards[:3], spec.Sink{Name: "mq", Type: "rabbitmq", URL: url, Password: "guest", Queues: "per-table"})
	sk := ds.Sinks[0]
	log := testLogger(t, slog.LevelWarn)
	ctx := t.Context()
	p, err := stream.StartPipeline(ctx, stream.PipelineConfig{Spec: ds, Clients: map[string]*group.Cursor{sink.ClientID("mq"): nil}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	pub, err := sinkrun.Open(ctx, sk, "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	r := startRunner(ctx, p, pub, ds, nil, log)
	defer r.stop()
	c := rabbittest.Consume(t, url, "shop.orders")
	sinktest.WriteShop(t, shards, nil)
	want := sinktest.ShopRows(t, shards)
	var got rabbittest.Received
	sinktest.WaitFor(t, 60*time.Second, func() (bool, string) {
		got = rabbittest.Dedup(t, c.Deliveries(), "shop")
		rows := got.Rows("id", "id", "code", "amount", "note", "c")
		applied, lastErr := r.r.Applied()
		return slices.Equal(rows, want), fmt.Sprintf("the queue's rows: %d, sources %d (applied seq %d of %d, last error %q)",
			len(rows), len(want), applied, p.Dest.Stats().Seq, lastErr)
	})
	ddl := 0
	for _, m := range got.Msgs {
		if m.IsDDL {
			ddl++
		}
	}
	if ddl == 0 {
		t.Errorf("no DDL message of the ALTER in the queue")
	}
	ch, err := rabbittest.Dial(t, url).Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("shop.orders", true, false, false, false, amqp.Table{"x-single-active-consumer": true}); err != nil {
		t.Fatalf("the sink's queue is not durable with x-single-active-consumer: %v", err)
	}
}

// TestUnroutableStopsSink: with queues: none and no queue bound, the
// first message is returned unroutable: the sink stops with an error
// that names the routing key and the exchange and says what to do, the
// returns are counted, and nothing is acked (the sink's applied seq and
// its saved cursor stay where they were). Once a queue is bound by hand
// the retry publishes everything, from the first message on.
func TestUnroutableStopsSink(t *testing.T) {
	url := rabbittest.Vhost(t)
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop_0", "CREATE TABLE shop_0.orders (id BIGINT PRIMARY KEY, note VARCHAR(20))")
	ds := conformance.ShopSpec(t, []*mysqltest.Server{srv}, spec.Sink{Name: "mq", Type: "rabbitmq", URL: url, Password: "guest"})
	sk := ds.Sinks[0]
	log := testLogger(t, slog.LevelError)
	cursors := &group.FileStore{Dir: t.TempDir()}
	ctx := t.Context()
	p, err := stream.StartPipeline(ctx, stream.PipelineConfig{Spec: ds, Clients: map[string]*group.Cursor{sink.ClientID("mq"): nil}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	pub, err := sinkrun.Open(ctx, sk, "shop", log)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	for i := range 3 {
		srv.Exec(t, fmt.Sprintf("INSERT INTO shop_0.orders VALUES (%d, 'a'), (%d, 'b')", 2*i, 2*i+1))
	}
	srv.Exec(t, "UPDATE shop_0.orders SET note = 'c' WHERE id = 3", "DELETE FROM shop_0.orders WHERE id = 0")
	r := startRunner(ctx, p, pub, ds, cursors, log)
	defer func() { r.stop() }()
	sinktest.WaitFor(t, 20*time.Second, func() (bool, string) {
		_, lastErr := r.r.Applied()
		return pub.Stats().Returns >= 2 && lastErr != "", fmt.Sprintf("returns %d, last error %q", pub.Stats().Returns, lastErr)
	})
	applied, lastErr := r.r.Applied()
	for _, s := range []string{`routing key "shop.orders"`, "exchange braid", "bind a queue", "queues: per-table"} {
		if !strings.Contains(lastErr, s) {
			t.Errorf("the error does not say %q: %s", s, lastErr)
		}
	}
	if applied != 0 {
		t.Fatalf("applied seq %d after the first message was returned, want 0", applied)
	}
	if c, err := cursors.Load("shop", sink.ClientID("mq")); err == nil && c != nil {
		t.Fatalf("the sink saved a cursor past a returned message: %+v", c)
	}

	// A queue bound by hand: the retry publishes it all.
	ch, err := rabbittest.Dial(t, url).Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("mine", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind("mine", "shop.#", "braid", false, nil); err != nil {
		t.Fatal(err)
	}
	c := rabbittest.Consume(t, url, "mine")
	want := sinktest.SourceRows(t, []*mysqltest.Server{srv}, func(int) string { return "SELECT id, note FROM shop_0.orders" })
	sinktest.WaitFor(t, 30*time.Second, func() (bool, string) {
		got := rabbittest.Dedup(t, c.Deliveries(), "shop")
		applied, lastErr := r.r.Applied()
		return slices.Equal(got.Rows("id", "id", "note"), want) && applied == p.Dest.Stats().Seq,
			fmt.Sprintf("rows %v, want %v; applied seq %d of %d, last error %q", got.Rows("id", "id", "note"), want, applied, p.Dest.Stats().Seq, lastErr)
	})
	got := rabbittest.Dedup(t, c.Deliveries(), "shop")
	got.Ordered(t)
	// The stream's first message (seq 1, its CREATE TABLE) is the first
	// the queue got: nothing was acked past the returns.
	if first := got.Msgs[0]; got.Pos[0] != (rabbittest.Pos{Seq: 1, N: 0}) || !first.IsDDL || first.Type != "CREATE" {
		t.Fatalf("the first message is %+v %+v, want shop:1:0, the CREATE TABLE", got.Pos[0], first)
	}
	t.Logf("returned %d times before a queue was bound; then %d messages; %+v", pub.Stats().Returns, len(got.Msgs), pub.Stats())
}

// TestReturnInBatch publishes, straight through the Publisher, a batch
// whose middle message no queue takes: Publish fails with ErrReturned
// naming its key, and counts as confirmed only the message before it
// (the broker acks a returned message too, after its return). Then, as
// the Runner would, the batch again once a queue is bound: it goes
// through. A connection the broker closes fails at most one Publish;
// the next dials again; so does a Publish canceled.
func TestReturnInBatch(t *testing.T) {
	url := rabbittest.Vhost(t)
	ctx := t.Context()
	sk := spec.Sink{Name: "mq", Type: "rabbitmq", URL: url, User: "guest", Password: "guest",
		Exchange: "ex", RoutingKey: spec.DefaultRoutingKey, Queues: "none"}
	pub, err := rabbitmq.Open(ctx, sk, "d")
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	ch, err := rabbittest.Dial(t, url).Channel()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"a.t"} {
		if _, err := ch.QueueDeclare(q, false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		if err := ch.QueueBind(q, q, "ex", false, nil); err != nil {
			t.Fatal(err)
		}
	}
	msg := func(seq uint64, db string) sink.Message {
		return sink.Message{Seq: seq, Source: "s0", Database: db, Table: "t", Body: []byte(`{"id":1}`)}
	}
	batch := []sink.Message{msg(1, "a"), msg(2, "b"), msg(3, "a")}
	err = pub.Publish(ctx, batch)
	if !errors.Is(err, rabbitmq.ErrReturned) || !strings.Contains(err.Error(), `"b.t"`) || !strings.Contains(err.Error(), "d:2:0") {
		t.Fatalf("Publish: %v, want the return of d:2:0, key b.t", err)
	}
	if st := pub.Stats(); st.Applied != 1 || st.Returns != 1 || st.Pending != 0 {
		t.Fatalf("stats %+v, want 1 confirmed, 1 returned", st)
	}
	// Retried while b.t is still unbound, it sends the returned message
	// first and alone: nothing after it is sent again, and nothing before.
	for range 2 {
		if err := pub.Publish(ctx, batch); !errors.Is(err, rabbitmq.ErrReturned) {
			t.Fatalf("Publish retried: %v, want the return again", err)
		}
	}
	if got, err := ch.QueueDeclarePassive("a.t", false, false, false, false, nil); err != nil || got.Messages != 2 {
		t.Fatalf("queue a.t holds %+v (%v) after the retries, want the first attempt's 2 messages", got, err)
	}
	if _, err := ch.QueueDeclare("b.t", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind("b.t", "b.t", "ex", false, nil); err != nil {
		t.Fatal(err)
	}
	// The retry is handed the whole batch again, as the Runner hands it:
	// the message the broker confirmed is not sent twice.
	if err := pub.Publish(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if st := pub.Stats(); st.Applied != 3 || st.Returns != 3 || st.Pending != 0 {
		t.Fatalf("stats %+v, want 3 confirmed, 3 returned", st)
	}
	for q, want := range map[string]int{"a.t": 3, "b.t": 1} {
		if got, err := ch.QueueDeclarePassive(q, false, false, false, false, nil); err != nil || got.Messages != want {
			t.Fatalf("queue %s holds %+v (%v), want %d messages", q, got, err, want)
		}
	}

	vh := url[strings.LastIndexByte(url, '/')+1:]
	rabbittest.Ctl(t, "close_all_connections", "-p", vh, "test")
	time.Sleep(200 * time.Millisecond)
	var errs []error
	for range 3 {
		err := pub.Publish(ctx, []sink.Message{msg(4, "a")})
		if err == nil {
			break
		}
		errs = append(errs, err)
	}
	if len(errs) > 1 {
		t.Fatalf("Publish after the broker closed the connection: %v", errs)
	}
	t.Logf("after the broker closed the connection: %v", errs)

	// A Publish canceled (the sink stopping) fails with the context's
	// error, and the next goes on, on a new connection.
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	later := []sink.Message{msg(5, "a"), msg(6, "b")}
	if err := pub.Publish(canceled, later); !errors.Is(err, context.Canceled) {
		t.Fatalf("Publish canceled: %v", err)
	}
	if err := pub.Publish(ctx, later); err != nil {
		t.Fatalf("Publish after a canceled one: %v", err)
	}
}

// TestLongRoutingKey: a table whose routing key is longer than AMQP
// carries (here its names are 64 #s, escaped to three bytes each) stops
// the sink with a line that says so and what to do, and nothing of the
// batch is sent; the amqp client's own error named no table.
func TestLongRoutingKey(t *testing.T) {
	url := rabbittest.Vhost(t)
	ctx := t.Context()
	sk := spec.Sink{Name: "mq", Type: "rabbitmq", URL: url, User: "guest", Password: "guest",
		Exchange: "ex", RoutingKey: spec.DefaultRoutingKey, Queues: "per-table"}
	pub, err := rabbitmq.Open(ctx, sk, "d")
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	long := strings.Repeat("#", 64)
	err = pub.Publish(ctx, []sink.Message{{Seq: 1, Source: "s0", Database: "a", Table: "t", Body: []byte(`{}`)},
		{Seq: 2, Source: "s0", Database: long, Table: long, Body: []byte(`{}`)}})
	for _, want := range []string{"d:2:0", "385 bytes", "at most 255", "shorter logical name"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Publish: %v, want it to say %q", err, want)
		}
	}
	if st := pub.Stats(); st.Applied != 0 {
		t.Errorf("stats %+v: want nothing sent", st)
	}
}
