package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/braid-cdc/braid/internal/testutil/braidproc"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
)

// TestCaptureRabbitMQSinkSurvivesKills: `braid capture --quiet
// --cursor-dir` relays six shard tables on three servers, merged to
// shop.orders, to the machine's RabbitMQ (a vhost of the test's own) with
// queues: per-table, under a workload of single-row and multi-row
// inserts, updates (one changes a key) and deletes, every statement its
// own transaction and so its own message; it is SIGKILLed twice while it
// publishes. A consumer of the shop.orders queue, once it de-duplicates
// by message_id, has every message exactly once (as many as the
// statements, plus the CREATE TABLE) in stream order, and the rows they
// carry, applied in that order, equal the shards'.
func TestCaptureRabbitMQSinkSurvivesKills(t *testing.T) {
	url := rabbitVhost(t)
	shards := sinktest.StartShop(t)
	specFile := writeSpec(t, shopSpecYAML(shards[:3], fmt.Sprintf(
		"sinks:\n  - {name: mq, type: rabbitmq, url: '%s', password: guest, queues: per-table}\n", url)))
	bin := braidproc.Binary(t)
	cursorDir := t.TempDir()
	logPath := filepath.Join(t.TempDir(), "capture.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("capture's log:\n%s", b)
		}
	})
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "capture", "-f", specFile, "--quiet", "--cursor-dir", cursorDir)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}

	cmd := start()
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	c := rabbitConsume(t, url, "shop.orders")
	const rounds, perRound = 8, 6 * 38 // messages a round: 38 statements on each shard
	written := 1                       // the shards' CREATE TABLE, merged into one
	for round := range rounds {
		killed := make(chan *exec.Cmd, 1)
		if round == 2 || round == 5 {
			// Killed while it publishes this round, as it is written:
			// once the queue holds some of it.
			go func(old *exec.Cmd, n int) {
				for deadline := time.Now().Add(30 * time.Second); len(c.deliveries()) <= n && time.Now().Before(deadline); {
					time.Sleep(time.Millisecond)
				}
				old.Process.Kill() // SIGKILL
				old.Wait()
				killed <- start()
			}(cmd, written+rand.IntN(perRound/2))
		} else {
			killed <- cmd
		}
		for n, s := range shards {
			base := int64(n)*1_000_000 + int64(round)*1000
			var vals []string
			for k := range 40 {
				vals = append(vals, fmt.Sprintf("(%d, 'c%d', %d, 'r%d')", base+int64(k), base+int64(k), k, round))
			}
			stmts := []string{"INSERT INTO shop_%[1]d.orders (id, code, amount, note) VALUES " + strings.Join(vals, ", ")}
			for k := range 20 {
				id := base + 100 + int64(k)
				stmts = append(stmts, fmt.Sprintf("INSERT INTO shop_%%[1]d.orders VALUES (%d, 'c%d', %d, NULL)", id, id, k))
			}
			for k := range 10 {
				stmts = append(stmts, fmt.Sprintf("UPDATE shop_%%[1]d.orders SET amount = amount + 1, note = 'u' WHERE id = %d", base+10+int64(k)))
			}
			stmts = append(stmts, fmt.Sprintf("UPDATE shop_%%[1]d.orders SET id = id + 500 WHERE id = %d", base+1))
			for k := range 5 {
				stmts = append(stmts, fmt.Sprintf("DELETE FROM shop_%%[1]d.orders WHERE id = %d", base+100+2*int64(k)))
			}
			stmts = append(stmts, fmt.Sprintf("UPDATE shop_%%[1]d.orders SET amount = amount * 2 WHERE id BETWEEN %d AND %d", base+20, base+39))
			for _, q := range stmts {
				s.Exec(t, fmt.Sprintf(q, n))
			}
		}
		written += perRound
		cmd = <-killed
	}

	want := sinktest.SourceRows(t, shards, func(n int) string {
		return fmt.Sprintf("SELECT id, code, amount, IFNULL(note, 'NULL') FROM shop_%d.orders", n)
	})
	var got rabbitReceived
	sinktest.WaitFor(t, 60*time.Second, func() (bool, string) {
		got = rabbitDedup(t, c.deliveries(), "shop")
		rows := got.rows("id", "code", "amount", "note")
		return len(got.ids) >= written && slices.Equal(rows, want),
			fmt.Sprintf("the queue has %d messages of %d (%d delivered again; %s), %d rows of %d",
				len(got.ids), written, got.dups, got.gaps(), len(rows), len(want))
	})
	if len(got.ids) != written {
		t.Fatalf("the queue has %d distinct messages, the shards wrote %d", len(got.ids), written)
	}
	got.ordered(t)
	t.Logf("%d messages once each, in stream order, after 2 SIGKILLs (%d delivered again); %d rows equal the shards",
		written, got.dups, len(want))
}

// rabbitVhost creates a vhost of the test's own on the machine's RabbitMQ
// (guest may use it; deleted after) and returns its url. No RabbitMQ
// skips the test, or fails it in CI.
func rabbitVhost(t *testing.T) string {
	t.Helper()
	const addr = "127.0.0.1:5672"
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
		_, err = exec.LookPath("rabbitmqctl")
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no RabbitMQ on %s to publish to: %v", addr, err)
		}
		t.Skipf("no RabbitMQ on %s to publish to: %v", addr, err)
	}
	name := fmt.Sprintf("braid_test_%d_%d", os.Getpid(), rand.IntN(1e6))
	for _, args := range [][]string{{"add_vhost", name}, {"set_permissions", "-p", name, "guest", ".*", ".*", ".*"}} {
		if out, err := exec.Command("rabbitmqctl", args...).CombinedOutput(); err != nil {
			t.Fatalf("rabbitmqctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		if args[0] == "add_vhost" {
			t.Cleanup(func() { exec.Command("rabbitmqctl", "delete_vhost", name).Run() })
		}
	}
	return "amqp://" + addr + "/" + name
}

// rabbitConsumer keeps what it received from a queue.
type rabbitConsumer struct {
	mu  sync.Mutex
	got []amqp.Delivery
}

// rabbitConsume consumes queue (waiting for the sink to declare it),
// auto-acking, until the test ends.
func rabbitConsume(t *testing.T, url, queue string) *rabbitConsumer {
	t.Helper()
	conn, err := amqp.DialConfig(url, amqp.Config{SASL: []amqp.Authentication{&amqp.PlainAuth{Username: "guest", Password: "guest"}}})
	if err != nil {
		t.Fatal(err)
	}
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
	c := &rabbitConsumer{}
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

func (c *rabbitConsumer) deliveries() []amqp.Delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

// rabbitMessage is what the test reads of a flat message's JSON.
type rabbitMessage struct {
	IsDDL bool                 `json:"isDdl"`
	Type  string               `json:"type"`
	Data  []map[string]*string `json:"data"`
	Old   []map[string]*string `json:"old"`
}

// rabbitReceived is a queue's messages de-duplicated by message_id, in the
// order of their first delivery, and their (seq, n) from it.
type rabbitReceived struct {
	msgs []rabbitMessage
	ids  [][2]uint64
	dups int
}

// rabbitDedup de-duplicates ds by message_id ("dest:seq:n").
func rabbitDedup(t *testing.T, ds []amqp.Delivery, dest string) rabbitReceived {
	t.Helper()
	var r rabbitReceived
	seen := map[string]bool{}
	for _, d := range ds {
		if seen[d.MessageId] {
			r.dups++
			continue
		}
		seen[d.MessageId] = true
		parts := strings.Split(d.MessageId, ":")
		if len(parts) != 3 || parts[0] != dest {
			t.Fatalf("message_id %q: want %s:seq:n", d.MessageId, dest)
		}
		seq, err1 := strconv.ParseUint(parts[1], 10, 64)
		n, err2 := strconv.ParseUint(parts[2], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("message_id %q: want %s:seq:n", d.MessageId, dest)
		}
		if h, ok := d.Headers["seq"].(int64); !ok || uint64(h) != seq {
			t.Fatalf("message %s: header seq %#v", d.MessageId, d.Headers["seq"])
		}
		var m rabbitMessage
		if err := json.Unmarshal(d.Body, &m); err != nil {
			t.Fatalf("message %s: %v", d.MessageId, err)
		}
		r.msgs = append(r.msgs, m)
		r.ids = append(r.ids, [2]uint64{seq, n})
	}
	return r
}

// ordered fails unless the messages' (seq, n) strictly increase.
func (r rabbitReceived) ordered(t *testing.T) {
	t.Helper()
	for i := 1; i < len(r.ids); i++ {
		if a, b := r.ids[i-1], r.ids[i]; b[0] < a[0] || b[0] == a[0] && b[1] <= a[1] {
			t.Fatalf("message %d:%d after %d:%d: out of stream order", b[0], b[1], a[0], a[1])
		}
	}
}

// gaps describes the first seqs missing between the messages' (each of
// the test's transactions is one message, so their seqs follow on).
func (r rabbitReceived) gaps() string {
	var out []string
	for i := 1; i < len(r.ids) && len(out) < 3; i++ {
		if a, b := r.ids[i-1][0], r.ids[i][0]; b > a+1 {
			out = append(out, fmt.Sprintf("%d-%d missing", a+1, b-1))
		}
	}
	if len(r.ids) > 0 {
		out = append(out, fmt.Sprintf("last %d:%d", r.ids[len(r.ids)-1][0], r.ids[len(r.ids)-1][1]))
	}
	return strings.Join(out, ", ")
}

// rows applies the messages' row changes by id and returns the rows, each
// cols' values joined by spaces (NULL or a missing column as "NULL"),
// sorted.
func (r rabbitReceived) rows(cols ...string) []string {
	byID := map[string]map[string]*string{}
	for _, m := range r.msgs {
		for i, d := range m.Data {
			switch {
			case m.IsDDL:
			case m.Type == "DELETE":
				delete(byID, *d["id"])
			case m.Type == "UPDATE" && m.Old[i]["id"] != nil:
				delete(byID, *m.Old[i]["id"])
				fallthrough
			default:
				byID[*d["id"]] = d
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
