package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// dialTimeout bounds a dial and the AMQP handshake.
const dialTimeout = 10 * time.Second

// session is one connection to the broker and its channel in confirm
// mode, with the listeners Publish reads.
type session struct {
	conn *amqp.Connection
	ch   *amqp.Channel
	// sock is conn's socket: closing it ends a write that a broker's
	// flow control (connection.blocked) holds, which conn.Close, queued
	// behind that write, could not.
	sock net.Conn
	// returns gets the messages the broker returns; closes the channel's
	// closing error. Both are buffered: amqp091-go drops a notification
	// its listener does not take within 5 s.
	returns chan amqp.Return
	closes  chan *amqp.Error
}

// errClosed is Publish's error after Close.
var errClosed = errors.New("rabbitmq: publisher closed")

// session returns the current session, dialing one if there is none.
func (p *Publisher) session(ctx context.Context) (*session, error) {
	p.mu.Lock()
	sess, closed := p.sess, p.closed
	p.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	if sess != nil {
		return sess, nil
	}
	sess, err := p.dial(ctx)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		sess.close()
		return nil, errClosed
	}
	p.sess = sess
	return sess, nil
}

// drop closes sess and forgets it (and the queues it declared), so that
// the next Publish dials again.
func (p *Publisher) drop(sess *session) {
	p.mu.Lock()
	if p.sess == sess {
		p.sess = nil
	}
	p.mu.Unlock()
	sess.close()
	clear(p.declared)
}

// dial connects, opens a channel in confirm mode and declares the
// exchange.
func (p *Publisher) dial(ctx context.Context) (*session, error) {
	var sock net.Conn
	cfg := amqp.Config{
		SASL:       []amqp.Authentication{&amqp.PlainAuth{Username: p.user, Password: p.pass}},
		Heartbeat:  10 * time.Second,
		Properties: amqp.NewConnectionProperties(),
		Dial: func(network, addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: dialTimeout}
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			sock = c
			// Cleared by amqp091-go once the handshake is done.
			return c, c.SetDeadline(time.Now().Add(dialTimeout))
		},
	}
	cfg.Properties.SetClientConnectionName("braid sink " + p.name)
	conn, err := amqp.DialConfig(p.url, cfg)
	if err != nil {
		return nil, fmt.Errorf("sink %s: connect to %s as %s: %w", p.name, p.url, p.user, err)
	}
	sess := &session{conn: conn, sock: sock, returns: make(chan amqp.Return, 64), closes: make(chan *amqp.Error, 1)}
	if sess.ch, err = conn.Channel(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("sink %s: open a channel on %s: %w", p.name, p.url, err)
	}
	if err := sess.ch.Confirm(false); err != nil {
		conn.Close()
		return nil, fmt.Errorf("sink %s: put the channel in confirm mode: %w", p.name, err)
	}
	sess.ch.NotifyClose(sess.closes)
	sess.ch.NotifyReturn(sess.returns)
	if err := sess.ch.ExchangeDeclare(p.exchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		conn.Close()
		return nil, fmt.Errorf("sink %s: declare exchange %s (durable, topic): %w", p.name, p.exchange, err)
	}
	return sess, nil
}

// declareQueue declares routing key key's durable queue, named as the
// key (QueueName), with a single active consumer, and binds it to the
// exchange with the key.
func (p *Publisher) declareQueue(sess *session, key string) error {
	q := QueueName(key)
	if _, err := sess.ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-single-active-consumer": true}); err != nil {
		return fmt.Errorf("sink %s: declare queue %s (durable, x-single-active-consumer): %w", p.name, q, err)
	}
	if err := sess.ch.QueueBind(q, key, p.exchange, false, nil); err != nil {
		return fmt.Errorf("sink %s: bind queue %s to exchange %s: %w", p.name, q, p.exchange, err)
	}
	return nil
}

// closeWait is how long close lets the connection close gracefully: a
// broker holding the connection's writes back (flow control) would hold
// the close frame too.
const closeWait = 5 * time.Second

// close closes the connection, and its socket if the broker does not take
// the close within closeWait.
func (s *session) close() error {
	t := time.AfterFunc(closeWait, func() { s.sock.Close() })
	defer t.Stop()
	return s.conn.Close()
}
