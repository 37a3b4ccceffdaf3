package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/braid-cdc/braid/client"
)

// rabbitTarget is the machine's RabbitMQ; the run publishes into a vhost
// of its own (its tag), made and removed with rabbitmqctl.
const rabbitTarget = "127.0.0.1:5672"

// rabbitQueue is the queue the sink declares for the logical table
// (queues: per-table, named as its routing key).
const rabbitQueue = "shop.orders"

// rabbitCtl runs rabbitmqctl.
func rabbitCtl(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "rabbitmqctl", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("rabbitmqctl %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// startRabbit makes the run's vhost, which guest may use.
func (d *deployment) startRabbit(ctx context.Context) error {
	if err := rabbitCtl(ctx, "add_vhost", d.tag); err != nil {
		return fmt.Errorf("the RabbitMQ target on %s: %w (braid chaos publishes to the machine's RabbitMQ as guest)", rabbitTarget, err)
	}
	d.rabbitVhost = d.tag
	return rabbitCtl(ctx, "set_permissions", "-p", d.tag, "guest", ".*", ".*", ".*")
}

// dropRabbit removes the run's vhost.
func (d *deployment) dropRabbit(ctx context.Context) {
	if d.rabbitVhost != "" {
		_ = rabbitCtl(ctx, "delete_vhost", d.rabbitVhost)
	}
}

// rabbitRows takes every message of the sink's queue (directly, not
// through the proxy) and reads it as a consumer following docs/sinks.md
// would: de-duplicated by message_id. It counts each row change of the
// distinct messages (DDL and snapshot messages left out), and names each
// message id that came again with another body.
func (d *deployment) rabbitRows(ctx context.Context) (Delivered, error) {
	out := Delivered{Sink: "rabbitmq", Changes: map[string]int{}}
	conn, err := amqp.DialConfig("amqp://"+rabbitTarget+"/"+d.tag,
		amqp.Config{SASL: []amqp.Authentication{&amqp.PlainAuth{Username: "guest", Password: "guest"}}})
	if err != nil {
		return out, err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return out, err
	}
	defer ch.Close()
	bodies := map[string][]byte{}
	for ctx.Err() == nil {
		m, ok, err := ch.Get(rabbitQueue, true)
		if err != nil {
			return out, fmt.Errorf("queue %s: %w", rabbitQueue, err)
		}
		if !ok {
			break
		}
		out.Messages++
		if prev, seen := bodies[m.MessageId]; seen {
			if key := differs(prev, m.Body); key != "" {
				out.Conflicts = append(out.Conflicts, fmt.Sprintf("message %s differs in %s: [%s] then [%s]", m.MessageId, key, abbrev(string(prev)), abbrev(string(m.Body))))
			}
			continue
		}
		bodies[m.MessageId] = m.Body
		var msg client.Message
		if json.Unmarshal(m.Body, &msg) != nil || msg.IsDdl || msg.Snapshot {
			continue
		}
		k := kindOf(msg.Type)
		for _, row := range msg.Data {
			out.Changes[rowOf(k, deref(row["id"]), deref(row["v"]))]++
		}
	}
	return out, ctx.Err()
}

// differs names the fields two bodies of one message id differ in ("" when
// none does). ts is canal's time the message was made, which a message
// published again makes anew, and position the file:pos of the server
// its transaction was read from, which a message published again after a
// source failover takes from the promoted server (docs/stream.md: the
// same stream from any server, but for position and ts): neither is a
// difference. gtid names the transaction on every server.
func differs(a, b []byte) string {
	var ma, mb map[string]json.RawMessage
	if json.Unmarshal(a, &ma) != nil || json.Unmarshal(b, &mb) != nil {
		if bytes.Equal(a, b) {
			return ""
		}
		return "its bytes (not JSON)"
	}
	keys := map[string]bool{}
	for k := range ma {
		keys[k] = true
	}
	for k := range mb {
		keys[k] = true
	}
	var diff []string
	for k := range keys {
		if k != "ts" && k != "position" && !bytes.Equal(ma[k], mb[k]) {
			diff = append(diff, k)
		}
	}
	slices.Sort(diff)
	return strings.Join(diff, ", ")
}
