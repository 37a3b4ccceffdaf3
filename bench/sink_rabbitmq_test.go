package bench

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/rabbittest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/sink/rabbitmq"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// BenchmarkRabbitMQSink measures the rabbitmq sink's publisher (package
// sink/rabbitmq) publishing with confirms, beside a plain amqp091-go loop
// that publishes the same messages the same way, in one run.
//
// # What BenchmarkRabbitMQSink measures
//
// The messages. One MariaDB server (mysqltest) writes
// BRAID_BENCH_RABBITMQ_TXNS transactions (default 200) on shop_0.orders,
// each of 50 single-row INSERTs, each followed by an UPDATE of the row
// it inserted: 100 runs of one kind a transaction, so 100 canal flat
// messages of one row each (580 bytes of JSON on average), 20,000 in all
// and the CREATE TABLE's: the shape of the seed's canal → RabbitMQ
// pipeline, which sent a message a row change. A destination over the
// server (route shop_\d+\.(\w+) to shop.$1) is then read from its first
// position by a sink.Runner whose Publisher records what it is handed:
// the messages in the store batches the Runner publishes them in (up to
// 1,024 events a batch, as it reads a stream that is behind: 253
// batches, about 79 messages each). Both ways publish exactly those
// batches.
//
// The ways, each into the same vhost of the machine's RabbitMQ (3.10,
// 127.0.0.1:5672, a vhost of the benchmark's own), exchange braid
// (durable, topic), routing key shop.orders, one durable queue bound to
// it (the sink's queues: per-table declares it), emptied before each way:
//
//   - braid: rabbitmq.Open, then Publish of each batch in order, which
//     publishes the batch's messages (mandatory, persistent, message_id,
//     headers seq and source) on one channel in confirm mode and returns
//     once every one is confirmed and none returned.
//   - plain amqp091-go: one connection, one channel in confirm mode;
//     for each batch, PublishWithDeferredConfirm of every message with the
//     same properties and body, then a wait for each confirm: the same
//     window, without the sink's bookkeeping (returns, stats, routing-key
//     template).
//
// Each rate is messages over the time of the publishes (dial and
// declarations excluded for both). BRAID_BENCH_RABBITMQ_RUNS (default 5)
// runs both that many times, alternating which goes first; the rates are
// the medians. It measures once per process (about 45 s); later calls
// report the same numbers again.
//
// Recorded (section sink): braid's messages/s against the plain loop's
// (target ratio >= 0.8).
func BenchmarkRabbitMQSink(b *testing.B) {
	b.ReportMetric(0, "ns/op")
	if r := rabbitResult; r != nil {
		r.report(b)
		return
	}
	url := rabbittest.Vhost(b)
	txns := rabbitEnvInt("BRAID_BENCH_RABBITMQ_TXNS", 200)
	runs := rabbitEnvInt("BRAID_BENCH_RABBITMQ_RUNS", 5)
	batches := rabbitMessages(b, txns)
	n := 0
	for _, bt := range batches {
		n += len(bt)
	}
	bytes := 0
	for _, bt := range batches {
		for _, m := range bt {
			bytes += len(m.Body)
		}
	}
	b.Logf("%d messages (%d bytes on average) in %d store batches", n, bytes/n, len(batches))

	sk := spec.Sink{Name: "bench", Type: "rabbitmq", URL: url, Password: "guest", Queues: "per-table"}
	ds := spec.Spec{Sinks: []spec.Sink{sk}}.WithDefaults()
	sk = ds.Sinks[0]
	ways := []struct {
		name string
		run  func(b *testing.B) time.Duration
	}{
		{"braid", func(b *testing.B) time.Duration { return rabbitBraid(b, sk, batches) }},
		{"plain amqp091-go", func(b *testing.B) time.Duration { return rabbitPlain(b, url, sk.Exchange, batches) }},
	}
	// The sink declares the exchange and queue once, before either runs.
	rabbitBraid(b, sk, batches[:1])
	rates := make([][]float64, len(ways))
	for run := range runs {
		var line []string
		for k := range ways {
			i := (k + run) % len(ways)
			rabbitPurge(b, url, "shop.orders")
			took := ways[i].run(b)
			rate := float64(n) / took.Seconds()
			rates[i] = append(rates[i], rate)
			line = append(line, fmt.Sprintf("%s %.0f msgs/s (%v)", ways[i].name, rate, took.Round(time.Millisecond)))
		}
		b.Logf("run %d: %s", run+1, strings.Join(line, "; "))
	}
	var ratios []float64
	for i := range rates[0] {
		ratios = append(ratios, rates[0][i]/rates[1][i])
	}
	b.Logf("the ratio of each run: median %.2fx, from %.2fx to %.2fx", median(ratios), slices.Min(ratios), slices.Max(ratios))
	r := &rabbitMetrics{messages: n, braid: median(rates[0]), plain: median(rates[1])}
	rabbitResult = r
	r.report(b)
	r.record(b)
}

// rabbitResult is BenchmarkRabbitMQSink's result, measured once per
// process.
var rabbitResult *rabbitMetrics

type rabbitMetrics struct {
	messages     int
	braid, plain float64 // messages/s
}

func (r *rabbitMetrics) report(b *testing.B) {
	b.ReportMetric(r.braid, "msgs/s")
	b.ReportMetric(r.plain, "plain-msgs/s")
	b.ReportMetric(r.braid/r.plain, "ratio")
}

func (r *rabbitMetrics) record(b *testing.B) {
	b.Logf("%d messages with confirms: braid's publisher %.0f msgs/s, plain amqp091-go %.0f msgs/s: ratio %.2fx (target >= 0.8)",
		r.messages, r.braid, r.plain, r.braid/r.plain)
	Record(Row{Section: "sink", Measure: "RabbitMQ sink, publish with confirms, one-row flat messages, msgs/s", Value: r.braid, Unit: "msgs/s",
		Peer: "plain amqp091-go loop, same bodies, confirms awaited per batch", PeerValue: r.plain, Target: "ratio >= 0.8", Met: Met(r.braid >= 0.8*r.plain)})
}

// rabbitBraid publishes batches through the sink's publisher and returns
// how long the publishes took.
func rabbitBraid(b *testing.B, sk spec.Sink, batches [][]sink.Message) time.Duration {
	ctx := b.Context()
	pub, err := rabbitmq.Open(ctx, sk, "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer pub.Close()
	start := time.Now()
	for _, bt := range batches {
		if err := pub.Publish(ctx, bt); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

// rabbitPlain publishes batches as a plain amqp091-go program would:
// each batch's messages with deferred confirms, then a wait for them.
func rabbitPlain(b *testing.B, url, exchange string, batches [][]sink.Message) time.Duration {
	ctx := b.Context()
	conn := rabbittest.Dial(b, url)
	ch, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	dcs := make([]*amqp.DeferredConfirmation, 0, 1024)
	for _, bt := range batches {
		dcs = dcs[:0]
		for _, m := range bt {
			dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, m.Database+"."+m.Table, true, false, amqp.Publishing{
				ContentType:  "application/json",
				DeliveryMode: amqp.Persistent,
				MessageId:    "bench:" + strconv.FormatUint(m.Seq, 10) + ":" + strconv.Itoa(m.N),
				Headers:      amqp.Table{"seq": int64(m.Seq), "source": m.Source},
				Body:         m.Body,
			})
			if err != nil {
				b.Fatal(err)
			}
			dcs = append(dcs, dc)
		}
		for _, dc := range dcs {
			if ok, err := dc.WaitContext(ctx); err != nil || !ok {
				b.Fatalf("plain publisher: confirm %v, %v", ok, err)
			}
		}
	}
	return time.Since(start)
}

// rabbitMessages writes the benchmark's transactions to a fresh server
// and returns the flat messages a Runner hands its Publisher for them, in
// its batches.
func rabbitMessages(b *testing.B, txns int) [][]sink.Message {
	srv := mysqltest.Start(b)
	srv.Exec(b, "CREATE DATABASE shop_0",
		"CREATE TABLE shop_0.orders (id BIGINT PRIMARY KEY, code VARCHAR(20) NOT NULL, amount INT NOT NULL, note VARCHAR(40), created DATETIME NOT NULL)")
	for tx := range txns {
		stmts := []string{"BEGIN"}
		for k := range 50 {
			id := tx*50 + k
			stmts = append(stmts,
				fmt.Sprintf("INSERT INTO shop_0.orders VALUES (%d, 'c%d', %d, 'a note of some length %d', NOW())", id, id, rand.IntN(1000), id),
				fmt.Sprintf("UPDATE shop_0.orders SET amount = amount + 1 WHERE id = %d", id))
		}
		srv.Exec(b, append(stmts, "COMMIT")...)
	}
	want := txns*100 + 1 // and the CREATE TABLE
	ds := spec.Spec{Name: "bench", Tables: []string{`shop_\d+\.orders`}, Route: []spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}},
		Heartbeat: spec.Duration(MergeHeartbeat),
		Sources:   []spec.Source{{Name: "s0", Address: srv.Addr(), Start: spec.Start{Kind: spec.StartEarliest}}}}
	ds = ds.WithDefaults()
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	p, err := stream.StartPipeline(ctx, stream.PipelineConfig{Spec: &ds, Clients: map[string]*group.Cursor{sink.ClientID("rec"): nil}, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	rec := &rabbitRecorder{}
	r := &sink.Runner{Name: "rec", Dest: ds.Name, Client: sink.ClientID("rec"), Store: p.Store, Sink: sink.NewOrdered(rec), Logger: log}
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	retry.Until(b, 2*time.Minute, func() error {
		if n := rec.Stats().Applied; n < uint64(want) {
			_, lastErr := r.Applied()
			return fmt.Errorf("bench: the stream gave %d messages of %d (last error %q)", n, want, lastErr)
		}
		return nil
	})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.batches
}

// rabbitRecorder is a Publisher that keeps what it is handed.
type rabbitRecorder struct {
	mu      sync.Mutex
	batches [][]sink.Message
	n       uint64
}

func (r *rabbitRecorder) MaxRows() int { return 0 }

func (r *rabbitRecorder) Publish(_ context.Context, msgs []sink.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, slices.Clone(msgs))
	r.n += uint64(len(msgs))
	return nil
}

func (r *rabbitRecorder) Stats() sink.Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return sink.Stats{Applied: r.n}
}

func (r *rabbitRecorder) Close() error { return nil }

// rabbitPurge empties queue.
func rabbitPurge(b *testing.B, url, queue string) {
	conn := rabbittest.Dial(b, url)
	ch, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := ch.QueuePurge(queue, false); err != nil {
		b.Fatal(err)
	}
}

// rabbitEnvInt is env's value as a positive int, or def.
func rabbitEnvInt(env string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(env)); err == nil && v > 0 {
		return v
	}
	return def
}
