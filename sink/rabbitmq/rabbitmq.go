package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/spec"
)

// Publisher publishes a sink's messages to a RabbitMQ exchange (see the
// package doc).
type Publisher struct {
	name, dest string
	url        string
	user, pass string
	exchange   string
	routingKey string // the template
	perTable   bool

	mu     sync.Mutex
	sess   *session // nil: dial at the next Publish
	closed bool

	// declared are the routing keys whose queue is declared and bound on
	// the current connection, keys the routing key of each logical table
	// met. Publish's alone.
	declared map[string]bool
	keys     map[table]string
	// through is the last message the broker confirmed in this process
	// (valid once any is): a retry hands Publish the messages since the
	// last store batch acked again, and those through it are not sent twice.
	// Publish's alone.
	through    sink.Point
	confirmedN int
	// unroutable are the routing keys the broker returned a message of
	// and has not routed one of since. Publish's alone.
	unroutable map[string]bool

	applied, pending, returns atomic.Uint64
}

var _ sink.Publisher = (*Publisher)(nil)

// table is a logical table.
type table struct{ database, name string }

// ErrReturned is the error of a message the broker returned as
// unroutable.
var ErrReturned = errors.New("rabbitmq: message returned unroutable")

// ErrNacked is the error of a message the broker nacked.
var ErrNacked = errors.New("rabbitmq: message nacked")

// Open connects to sink s's broker and declares its exchange; dest names
// the destination (message ids are "dest:seq:n"). s has spec's defaults.
func Open(ctx context.Context, s spec.Sink, dest string) (*Publisher, error) {
	pass, err := s.ResolvePassword()
	if err != nil {
		return nil, err
	}
	p := &Publisher{name: s.Name, dest: dest, url: s.URL, user: s.User, pass: pass,
		exchange: s.Exchange, routingKey: s.RoutingKey, perTable: s.Queues == "per-table",
		declared: map[string]bool{}, keys: map[table]string{}, unroutable: map[string]bool{}}
	if p.exchange == "" || p.routingKey == "" || p.user == "" {
		return nil, fmt.Errorf("sink %s: exchange, routing_key and user must be set (spec's defaults)", s.Name)
	}
	sess, err := p.dial(ctx)
	if err != nil {
		return nil, err
	}
	p.sess = sess
	return p, nil
}

// MaxRows is flat's default: a message carries a run of up to 1,000 rows
// of one table and kind, as canal's do.
func (p *Publisher) MaxRows() int { return 0 }

// Stats returns the messages confirmed (Applied; a retry may confirm some
// again), sent and not yet confirmed (Pending) and returned (Returns).
func (p *Publisher) Stats() sink.Stats {
	return sink.Stats{Applied: p.applied.Load(), Pending: p.pending.Load(), Returns: p.returns.Load()}
}

// Close disconnects; a Publish blocked on the broker returns an error.
func (p *Publisher) Close() error {
	p.mu.Lock()
	sess := p.sess
	p.sess, p.closed = nil, true
	p.mu.Unlock()
	if sess != nil {
		return sess.close()
	}
	return nil
}

// MessageID is message m's id in destination dest: "dest:seq:n".
func MessageID(dest string, m *sink.Message) string {
	b := make([]byte, 0, len(dest)+24)
	b = append(b, dest...)
	b = append(b, ':')
	b = strconv.AppendUint(b, m.Seq, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(m.N), 10)
	return string(b)
}

// Publish sends msgs to the exchange in order and returns once the broker
// has confirmed every one. An unroutable message (returned), a nack, or a
// closed channel is an error, after which the publisher dials again at
// the next call.
func (p *Publisher) Publish(ctx context.Context, msgs []sink.Message) (err error) {
	sess, err := p.session(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			p.drop(sess)
		}
	}()
	// Canceled, a Publish returns even from a write the broker holds.
	defer context.AfterFunc(ctx, func() { sess.sock.Close() })()
	// A retry (after a return, a nack, a lost connection) starts again
	// after the last store batch acked: what the broker confirmed since is not
	// sent again, so a sink held up by an unbound routing key does not
	// publish its confirmed messages again at every retry.
	for p.confirmedN > 0 && len(msgs) > 0 && !p.through.Before(sink.Point{Seq: msgs[0].Seq, Idx: msgs[0].N}) {
		msgs = msgs[1:]
	}
	keys, ids := make([]string, len(msgs)), make([]string, len(msgs))
	for i := range msgs {
		keys[i], ids[i] = p.key(&msgs[i]), MessageID(p.dest, &msgs[i])
		if len(keys[i]) > maxKey {
			return fmt.Errorf("sink %s: message %s: the routing key of table %s.%s is %d bytes (its names escaped), and AMQP carries at most %d: route the table to a shorter logical name, leave it out of the destination's tables, or shorten routing_key",
				p.name, ids[i], msgs[i].Database, msgs[i].Table, len(keys[i]), maxKey)
		}
		if p.perTable && !p.declared[keys[i]] {
			if err := p.declareQueue(sess, keys[i]); err != nil {
				return err
			}
			p.declared[keys[i]] = true
		}
	}
	// The messages go in runs that end at a message whose routing key the
	// broker returned before: it is confirmed (or returned again) before
	// anything after it is sent, so a retry held up by that key sends
	// nothing past it, and nothing there twice.
	for len(msgs) > 0 {
		n := len(msgs)
		for i := range msgs {
			if p.unroutable[keys[i]] {
				n = i + 1
				break
			}
		}
		if err := p.send(ctx, sess, msgs[:n], keys[:n], ids[:n]); err != nil {
			return err
		}
		msgs, keys, ids = msgs[n:], keys[n:], ids[n:]
	}
	return nil
}

// send publishes msgs (their routing keys and ids beside them) and waits
// for their confirms: every message first, so that they stream; then
// their confirms, each checked for a return.
func (p *Publisher) send(ctx context.Context, sess *session, msgs []sink.Message, keys, ids []string) error {
	dcs := make([]*amqp.DeferredConfirmation, 0, len(msgs))
	confirmed := 0
	defer func() { p.pending.Add(-uint64(len(dcs) - confirmed)) }()
	for i := range msgs {
		m := &msgs[i]
		dc, err := sess.ch.PublishWithDeferredConfirmWithContext(ctx, p.exchange, keys[i], true, false, amqp.Publishing{
			ContentType:  "application/json",
			DeliveryMode: amqp.Persistent,
			MessageId:    ids[i],
			Headers:      amqp.Table{"seq": int64(m.Seq), "source": m.Source},
			Body:         m.Body,
		})
		if err != nil {
			return p.failed(sess, fmt.Errorf("sink %s: publish message %s to exchange %s: %w", p.name, ids[i], p.exchange, err))
		}
		dcs = append(dcs, dc)
		p.pending.Add(1)
	}
	// The broker returns an unroutable message before it acks it, and
	// amqp091-go hands a return over before it reads the next frame: once
	// a message's confirm is in, its return, if any, is in sess.returns.
	var back map[string]amqp.Return // returned, by message id
	take := func(r amqp.Return, ok bool) error {
		if !ok {
			return p.failed(sess, fmt.Errorf("sink %s: the channel to exchange %s closed", p.name, p.exchange))
		}
		if back == nil {
			back = map[string]amqp.Return{}
		}
		back[r.MessageId] = r
		return nil
	}
	for i, dc := range dcs {
		for done := false; !done; {
			select {
			case <-dc.Done():
				done = true
			case r, ok := <-sess.returns:
				if err := take(r, ok); err != nil {
					return err
				}
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		for drained := false; !drained; {
			select {
			case r, ok := <-sess.returns:
				if err := take(r, ok); err != nil {
					return err
				}
			default:
				drained = true
			}
		}
		if r, ok := back[ids[i]]; ok {
			p.unroutable[keys[i]] = true
			return p.returned(r)
		}
		if !dc.Acked() {
			return p.failed(sess, fmt.Errorf("sink %s: message %s to exchange %s: %w", p.name, ids[i], p.exchange, ErrNacked))
		}
		delete(p.unroutable, keys[i])
		confirmed++
		p.through, p.confirmedN = sink.Point{Seq: msgs[i].Seq, Idx: msgs[i].N}, p.confirmedN+1
		p.applied.Add(1)
		p.pending.Add(^uint64(0))
	}
	return nil
}

// maxKey is the longest routing key (and queue name) AMQP carries: a
// short string. Names of 64 characters of 3 bytes each, or escaped, make
// longer ones.
const maxKey = 255

// key is message m's routing key.
func (p *Publisher) key(m *sink.Message) string {
	t := table{m.Database, m.Table}
	k, ok := p.keys[t]
	if !ok {
		k = RoutingKey(p.routingKey, m.Database, m.Table)
		p.keys[t] = k
	}
	return k
}

// returned is the error of message r, which the broker returned.
func (p *Publisher) returned(r amqp.Return) error {
	p.returns.Add(1)
	hint := "bind a queue to the exchange for that key, or set queues: per-table"
	if p.perTable {
		hint = "its per-table queue was deleted or unbound; the sink declares it again when it retries"
	}
	return fmt.Errorf("sink %s: message %s with routing key %q was returned unroutable by exchange %s (%d %s): %s: %w",
		p.name, r.MessageId, r.RoutingKey, r.Exchange, r.ReplyCode, r.ReplyText, hint, ErrReturned)
}

// failed is err, with why the channel or connection closed when it did.
func (p *Publisher) failed(sess *session, err error) error {
	select {
	case e, ok := <-sess.closes:
		if ok && e != nil {
			return fmt.Errorf("%w (the broker closed the channel: %v)", err, e)
		}
	default:
	}
	return err
}
