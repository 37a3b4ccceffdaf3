// Package rabbittest is the broker side of the rabbitmq sink's tests
// (sink/rabbitmq, cmd/braid's crash test, bench): a vhost of the test's
// own on the machine's RabbitMQ, a consumer of a queue, and what a
// consumer makes of the messages: de-duplicated by message_id, checked
// for stream order, and applied to rows.
//
//	url := rabbittest.Vhost(t)                   // amqp://127.0.0.1:5672/NAME, deleted after
//	c := rabbittest.Consume(t, url, "shop.orders")
//	got := rabbittest.Dedup(t, c.Deliveries(), "shop")
//	got.Ordered(t)
//	rows := got.Rows("id", "id", "amount") // as sinktest's rows: "id amount", sorted
//
// It knows the sink only by what it publishes (canal flat messages,
// message ids "dest:seq:n", headers seq and source), so it is a second
// reading of that format.
//
// # Concurrency
//
// Call it from the test's goroutine; a Consumer's Deliveries is safe for
// concurrent use with its receiving.
package rabbittest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/braid-cdc/braid/internal/testutil/retry"
)

// Addr is the machine's RabbitMQ.
const Addr = "127.0.0.1:5672"

// Vhost creates a vhost of the test's own on the machine's RabbitMQ (guest
// may use it; deleted when the test ends) and returns its url,
// amqp://127.0.0.1:5672/NAME. Without a RabbitMQ (or rabbitmqctl, which
// makes vhosts) the test skips, or fails under CI=true; under go test
// -short (make test-short) it skips.
func Vhost(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("rabbittest: -short: this test publishes to RabbitMQ on " + Addr)
	}
	c, err := net.DialTimeout("tcp", Addr, time.Second)
	if err == nil {
		c.Close()
		_, err = exec.LookPath("rabbitmqctl")
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no RabbitMQ on %s to publish to: %v", Addr, err)
		}
		t.Skipf("no RabbitMQ on %s to publish to: %v", Addr, err)
	}
	name := fmt.Sprintf("braid_test_%d_%d", os.Getpid(), rand.IntN(1e9))
	Ctl(t, "add_vhost", name)
	t.Cleanup(func() { exec.Command("rabbitmqctl", "delete_vhost", name).Run() })
	Ctl(t, "set_permissions", "-p", name, "guest", ".*", ".*", ".*")
	return "amqp://" + Addr + "/" + name
}

// Ctl runs rabbitmqctl with args, failing the test on an error.
func Ctl(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("rabbitmqctl", args...).CombinedOutput(); err != nil {
		t.Fatalf("rabbitmqctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// Dial connects to url as guest; the connection is closed when the test
// ends.
func Dial(t testing.TB, url string) *amqp.Connection {
	t.Helper()
	conn, err := amqp.DialConfig(url, amqp.Config{SASL: []amqp.Authentication{&amqp.PlainAuth{Username: "guest", Password: "guest"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// Consumer keeps what it received from a queue.
type Consumer struct {
	mu  sync.Mutex
	got []amqp.Delivery
}

// Consume consumes queue on url (waiting up to 30 s for the sink to
// declare it), auto-acking, until the test ends.
func Consume(t testing.TB, url, queue string) *Consumer {
	t.Helper()
	conn := Dial(t, url)
	var ds <-chan amqp.Delivery
	retry.Until(t, 30*time.Second, func() error {
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		// A missing queue closes the channel: a new one to try again.
		if ds, err = ch.Consume(queue, "", true, false, false, false, nil); err != nil {
			return fmt.Errorf("consume %s: %w", queue, err)
		}
		return nil
	})
	c := &Consumer{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for d := range ds {
			c.mu.Lock()
			c.got = append(c.got, d)
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() { conn.Close(); <-done })
	return c
}

// Deliveries returns what the consumer has received so far.
func (c *Consumer) Deliveries() []amqp.Delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

// Message is what the tests read of a canal flat message.
type Message struct {
	ID    uint64               `json:"id"`
	IsDDL bool                 `json:"isDdl"`
	Type  string               `json:"type"`
	Data  []map[string]*string `json:"data"`
	Old   []map[string]*string `json:"old"`
}

// Pos is a message's place, from its id: its transaction's seq and its
// place n in it.
type Pos struct {
	Seq uint64
	N   int
}

// Received is a queue's messages de-duplicated by message_id, in the
// order of their first delivery.
type Received struct {
	Msgs []Message
	Pos  []Pos
	// Dups counts the deliveries of a message_id seen before.
	Dups int
}

// Dedup de-duplicates ds by message_id, checking on the way that each id
// is "dest:seq:n" with the flat message's id as seq, that the headers
// seq and source are there, and that the message is persistent JSON.
func Dedup(t testing.TB, ds []amqp.Delivery, dest string) Received {
	t.Helper()
	var r Received
	seen := map[string]bool{}
	for _, d := range ds {
		if seen[d.MessageId] {
			r.Dups++
			continue
		}
		seen[d.MessageId] = true
		parts := strings.Split(d.MessageId, ":")
		var (
			p          Pos
			err1, err2 error = fmt.Errorf("no seq"), fmt.Errorf("no n")
		)
		if len(parts) == 3 && parts[0] == dest {
			p.Seq, err1 = strconv.ParseUint(parts[1], 10, 64)
			p.N, err2 = strconv.Atoi(parts[2])
		}
		if err1 != nil || err2 != nil {
			t.Fatalf("message_id %q: want %s:seq:n", d.MessageId, dest)
		}
		var m Message
		if err := json.Unmarshal(d.Body, &m); err != nil {
			t.Fatalf("message %s: %v: %s", d.MessageId, err, d.Body)
		}
		if m.ID != p.Seq {
			t.Fatalf("message_id %q, flat message id %d: want %s:%d:n", d.MessageId, m.ID, dest, m.ID)
		}
		if h, ok := d.Headers["seq"].(int64); !ok || uint64(h) != p.Seq {
			t.Fatalf("message %s: header seq %#v", d.MessageId, d.Headers["seq"])
		}
		if s, ok := d.Headers["source"].(string); !ok || s == "" {
			t.Fatalf("message %s: header source %#v", d.MessageId, d.Headers["source"])
		}
		if d.ContentType != "application/json" || d.DeliveryMode != amqp.Persistent {
			t.Fatalf("message %s: content type %q, delivery mode %d", d.MessageId, d.ContentType, d.DeliveryMode)
		}
		r.Msgs = append(r.Msgs, m)
		r.Pos = append(r.Pos, p)
	}
	return r
}

// Ordered fails the test unless the messages' places strictly increase.
func (r Received) Ordered(t testing.TB) {
	t.Helper()
	for i := 1; i < len(r.Pos); i++ {
		if a, b := r.Pos[i-1], r.Pos[i]; b.Seq < a.Seq || b.Seq == a.Seq && b.N <= a.N {
			t.Fatalf("message %d:%d after %d:%d: out of stream order", b.Seq, b.N, a.Seq, a.N)
		}
	}
}

// Gaps describes the first seqs missing between the messages' (for a
// test whose transactions are one message each, so that their seqs follow
// on), and the last message's place.
func (r Received) Gaps() string {
	var out []string
	for i := 1; i < len(r.Pos) && len(out) < 3; i++ {
		if a, b := r.Pos[i-1].Seq, r.Pos[i].Seq; b > a+1 {
			out = append(out, fmt.Sprintf("%d-%d missing", a+1, b-1))
		}
	}
	if n := len(r.Pos); n > 0 {
		out = append(out, fmt.Sprintf("last %d:%d", r.Pos[n-1].Seq, r.Pos[n-1].N))
	}
	return strings.Join(out, ", ")
}

// Rows applies the messages' row changes to a map by the column key and
// returns the rows, each cols' values joined by spaces (NULL, or a column
// a message does not have, as "NULL"), sorted, as package sinktest has a
// source's rows.
func (r Received) Rows(key string, cols ...string) []string {
	byKey := map[string]map[string]*string{}
	for _, m := range r.Msgs {
		if m.IsDDL {
			continue
		}
		for i, d := range m.Data {
			switch m.Type {
			case "DELETE":
				delete(byKey, *d[key])
				continue
			case "UPDATE":
				if i < len(m.Old) && m.Old[i][key] != nil {
					delete(byKey, *m.Old[i][key])
				}
			}
			byKey[*d[key]] = d
		}
	}
	out := make([]string, 0, len(byKey))
	for _, d := range byKey {
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
