package rabbitmq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// brokerAddr is the machine's RabbitMQ; each test has a vhost of its own,
// deleted after.
const brokerAddr = "127.0.0.1:5672"

// vhost creates a vhost of the test's own on the machine's RabbitMQ
// (guest may use it) and returns its url, amqp://127.0.0.1:5672/NAME. A
// missing RabbitMQ skips the test, or fails it in CI.
func vhost(t testing.TB) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", brokerAddr, time.Second)
	if err == nil {
		c.Close()
		_, err = exec.LookPath("rabbitmqctl")
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no RabbitMQ on %s to publish to: %v", brokerAddr, err)
		}
		t.Skipf("no RabbitMQ on %s to publish to: %v", brokerAddr, err)
	}
	name := fmt.Sprintf("braid_test_%d_%d", os.Getpid(), rand.IntN(1e6))
	ctl(t, "add_vhost", name)
	t.Cleanup(func() { exec.Command("rabbitmqctl", "delete_vhost", name).Run() })
	ctl(t, "set_permissions", "-p", name, "guest", ".*", ".*", ".*")
	return "amqp://" + brokerAddr + "/" + name
}

// ctl runs rabbitmqctl with args.
func ctl(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("rabbitmqctl", args...).CombinedOutput(); err != nil {
		t.Fatalf("rabbitmqctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// dial connects to url as guest, closed after the test.
func dial(t testing.TB, url string) *amqp.Connection {
	t.Helper()
	conn, err := amqp.DialConfig(url, amqp.Config{SASL: []amqp.Authentication{&amqp.PlainAuth{Username: "guest", Password: "guest"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// consumer keeps what it received from a queue.
type consumer struct {
	mu   sync.Mutex
	got  []amqp.Delivery
	done chan struct{}
}

// consume consumes queue on url (waiting for the queue to be declared, by
// the sink), auto-acking, until the test ends.
func consume(t testing.TB, url, queue string) *consumer {
	t.Helper()
	conn := dial(t, url)
	var ds <-chan amqp.Delivery
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		if ds, err = ch.Consume(queue, "", true, false, false, false, nil); err == nil {
			break // a missing queue closes the channel: a new one to try again
		}
		if time.Now().After(deadline) {
			t.Fatalf("consume %s: %v", queue, err)
		}
	}
	c := &consumer{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for d := range ds {
			c.mu.Lock()
			c.got = append(c.got, d)
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() { conn.Close(); <-c.done })
	return c
}

func (c *consumer) deliveries() []amqp.Delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

// flatMessage is what the tests read of a flat message's JSON.
type flatMessage struct {
	ID       uint64               `json:"id"`
	Database string               `json:"database"`
	Table    string               `json:"table"`
	IsDDL    bool                 `json:"isDdl"`
	Type     string               `json:"type"`
	Data     []map[string]*string `json:"data"`
	Old      []map[string]*string `json:"old"`
}

// received is a queue's messages de-duplicated by message_id, in the
// order of their first delivery.
type received struct {
	msgs []flatMessage
	ids  []string
	dups int
}

// dedup de-duplicates ds by message_id, checking each message's
// properties on the way.
func dedup(t testing.TB, ds []amqp.Delivery, dest string) received {
	t.Helper()
	var r received
	seen := map[string]bool{}
	for _, d := range ds {
		if seen[d.MessageId] {
			r.dups++
			continue
		}
		seen[d.MessageId] = true
		var m flatMessage
		if err := json.Unmarshal(d.Body, &m); err != nil {
			t.Fatalf("message %s: %v: %s", d.MessageId, err, d.Body)
		}
		var seq uint64
		var n int
		if _, err := fmt.Sscanf(d.MessageId, dest+":%d:%d", &seq, &n); err != nil || seq != m.ID {
			t.Fatalf("message_id %q, flat message id %d: want %s:%d:n", d.MessageId, m.ID, dest, m.ID)
		}
		if h, ok := d.Headers["seq"].(int64); !ok || uint64(h) != seq {
			t.Fatalf("message %s: header seq %#v", d.MessageId, d.Headers["seq"])
		}
		if s, ok := d.Headers["source"].(string); !ok || s == "" {
			t.Fatalf("message %s: header source %#v", d.MessageId, d.Headers["source"])
		}
		if d.ContentType != "application/json" || d.DeliveryMode != amqp.Persistent {
			t.Fatalf("message %s: content type %q, delivery mode %d", d.MessageId, d.ContentType, d.DeliveryMode)
		}
		r.msgs = append(r.msgs, m)
		r.ids = append(r.ids, d.MessageId)
	}
	return r
}

// ordered fails unless the messages' (seq, n) strictly increase.
func (r received) ordered(t testing.TB) {
	t.Helper()
	var lastSeq uint64
	lastN := -1
	for _, id := range r.ids {
		i := strings.LastIndexByte(id, ':')
		j := strings.LastIndexByte(id[:i], ':')
		var seq uint64
		var n int
		fmt.Sscan(id[j+1:i], &seq)
		fmt.Sscan(id[i+1:], &n)
		if seq < lastSeq || seq == lastSeq && n <= lastN {
			t.Fatalf("message %s after %d:%d: out of stream order", id, lastSeq, lastN)
		}
		lastSeq, lastN = seq, n
	}
}

// rows applies the messages' row changes to a map by id and returns the
// rows, each cols' values joined by spaces (NULL, or a column the message
// does not have, as "NULL"), sorted, as sinktest.ShopRows has them.
func (r received) rows(cols ...string) []string {
	byID := map[string]map[string]*string{}
	for _, m := range r.msgs {
		if m.IsDDL {
			continue
		}
		for i, d := range m.Data {
			switch m.Type {
			case "INSERT":
				byID[*d["id"]] = d
			case "UPDATE":
				if old, ok := m.Old[i]["id"]; ok && old != nil {
					delete(byID, *old)
				}
				byID[*d["id"]] = d
			case "DELETE":
				delete(byID, *d["id"])
			}
		}
	}
	var out []string
	for _, d := range byID {
		vals := make([]string, len(cols))
		for i, c := range cols {
			vals[i] = "NULL"
			if v := d[c]; v != nil {
				vals[i] = *v
			}
		}
		out = append(out, strings.Join(vals, " "))
	}
	slices.Sort(out)
	return out
}

// runner runs a sink over a pipeline until stopped.
type runner struct {
	r    *sink.Runner
	stop func()
}

func startRunner(ctx context.Context, p *stream.Pipeline, pub sink.Publisher, s spec.Sink, cursors group.CursorStore, log *slog.Logger) *runner {
	r := &sink.Runner{Name: s.Name, Dest: "shop", Client: sink.ClientID(s.Name), Store: p.Store, Publisher: pub, Workers: 1,
		Cursors: cursors, Logger: log}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); r.Run(rctx) }()
	return &runner{r: r, stop: func() { cancel(); <-done }}
}

func testLogger(t *testing.T, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: level}))
}

// shopSpec is shard tables shop_N.orders on servers shards[N%len] merged
// to shop.orders, with sink sk.
func shopSpec(t *testing.T, shards []*mysqltest.Server, sk spec.Sink) *spec.Spec {
	ds := spec.Spec{Name: "shop", Tables: []string{`shop_\d+\.orders`}, Route: []spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}},
		Heartbeat: spec.Duration(100 * time.Millisecond), Sinks: []spec.Sink{sk}}
	for i, s := range shards {
		ds.Sources = append(ds.Sources, spec.Source{Name: fmt.Sprintf("s%d", i), Address: s.Addr(), Start: spec.Start{Kind: spec.StartEarliest}})
	}
	ds = ds.WithDefaults()
	if err := ds.Validate(); err != nil {
		t.Fatal(err)
	}
	return &ds
}
