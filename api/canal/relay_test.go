package canal_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/withlin/canal-go/client"
	pbp "github.com/withlin/canal-go/protocol/packet"

	"github.com/braid-cdc/braid/api/canal"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/stream"
)

// startServer serves cfg on a loopback port until the test ends, or until
// stop.
func startServer(t *testing.T, cfg canal.Config) (port int, stop func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	srv := canal.NewServer(cfg)
	go func() { done <- srv.Serve(ctx, l) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return l.Addr().(*net.TCPAddr).Port, stop
}

// route is a Forward whose answer a test sets, counting its calls.
type route struct {
	mu    sync.Mutex
	addr  string
	err   error
	calls int
}

func (r *route) forward(dest string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	return r.addr, r.err
}

func (r *route) set(addr string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addr, r.err = addr, err
}

func (r *route) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

func addrOf(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }

// script drives a canal-go client through get, rollback, get again, ack,
// get, rollback, get again and the rest of the stream, acked; it checks
// the stream and what each rollback re-delivered, and returns every batch
// id and entry it received, in order.
func script(t *testing.T, c *client.SimpleCanalConnector) []string {
	t.Helper()
	var out []string
	rec := func(id int64, es []got) []got {
		out = append(out, fmt.Sprintf("batch %d: %v", id, es))
		return es
	}
	b1 := rec(getBatch(t, c, 5, 1000))
	b2 := rec(getBatch(t, c, 5, 1000))
	if len(b1) != 5 || len(b2) != 5 {
		t.Fatalf("batches of %d and %d entries, want 5 and 5", len(b1), len(b2))
	}
	if err := c.RollBack(0); err != nil {
		t.Fatal(err)
	}
	id3, b3 := getBatch(t, c, 10, 1000)
	rec(id3, b3)
	if fmt.Sprint(b3) != fmt.Sprint(append(append([]got(nil), b1...), b2...)) {
		t.Fatalf("after rollback got\n%v\nwant\n%v", b3, append(b1, b2...))
	}
	if err := c.Ack(id3); err != nil {
		t.Fatal(err)
	}
	b4 := rec(getBatch(t, c, 3, 1000))
	if err := c.RollBack(0); err != nil {
		t.Fatal(err)
	}
	id5, b5 := getBatch(t, c, 3, 1000)
	rec(id5, b5)
	if fmt.Sprint(b5) != fmt.Sprint(b4) || len(b5) != 3 {
		t.Fatalf("after ack and rollback got\n%v\nwant\n%v", b5, b4)
	}
	if err := c.Ack(id5); err != nil {
		t.Fatal(err)
	}
	rest := readAll(t, c, shopTxs, 4, true)
	for _, e := range rest {
		out = append(out, fmt.Sprintf("batch %d: %v", e.batch, e))
	}
	checkStream(t, append(append(b3, b5...), rest...))
	return out
}

// TestRelay: server A serves no destination and relays to server B, which
// serves shop. canal-go's client on A receives exactly what it receives on
// B; authentication is A's; Forward's errors, an owner that cannot be
// reached or refuses A, and an owner that goes away reach the client as
// canal would have them.
func TestRelay(t *testing.T) {
	f := newFixture(t, canal.Config{User: "canal", Password: "s3cret"})
	owner := addrOf(f.port)
	// A client id starts at the oldest event the store still holds: every
	// client of the test subscribes before any acks.
	r := dialRaw(t, f.port)
	r.auth("canal", "s3cret")
	for _, id := range []string{"1001", "1002", "1003", "1004", "1005"} {
		r.send(pbp.PacketType_SUBSCRIPTION, &pbp.Sub{Destination: "shop", ClientId: id})
		r.wantAck(0, "")
	}
	quiet := stream.NewStore(stream.Config{})
	f.reg.Add(&stream.Served{Name: "quiet", Store: quiet})
	// big holds DDLs of 1 MiB each: a batch of them is a frame the relay
	// streams in many reads.
	big := stream.NewStore(stream.Config{})
	for i := range 3 {
		sql := fmt.Sprintf("CREATE TABLE t%d (c INT) COMMENT '%s'", i, strings.Repeat(string(rune('a'+i)), 1<<20))
		ev := &change.Event{Type: change.EventDDL, Source: "s0", ServerID: 1, Seq: uint64(i + 1),
			Pos: change.Position{File: "binlog.000001", Pos: uint32(4 + i)}, CommitTime: time.Unix(1700000000, 0),
			DDL: &change.DDL{Schema: "db", SQL: sql, Tables: []string{fmt.Sprintf("db.t%d", i)}}}
		if err := big.Put(t.Context(), ev, nil); err != nil {
			t.Fatal(err)
		}
	}
	f.reg.Add(&stream.Served{Name: "big", Store: big})

	rt := &route{addr: owner}
	lbA := &logBuf{out: t.Output()}
	portA, _ := startServer(t, canal.Config{User: "canal", Password: "s3cret", Forward: rt.forward, Logger: slogFor(lbA)})

	t.Run("same stream as direct", func(t *testing.T) {
		direct := script(t, f.connector(t, 1001, "canal", "s3cret"))
		relayed := script(t, connectAt(t, portA, 1002, "canal", "s3cret"))
		if strings.Join(relayed, "\n") != strings.Join(direct, "\n") {
			t.Fatalf("relayed client got\n%s\ndirect client got\n%s", strings.Join(relayed, "\n"), strings.Join(direct, "\n"))
		}
		// canal-go's first request is its rollback on connect.
		lbA.waitFor(t, "relaying the connection to the destination's owner")
		lbA.waitFor(t, "user=canal dest=shop owner="+owner+" type=CLIENTROLLBACK")
	})

	t.Run("big batch", func(t *testing.T) {
		get := func(port int, client string) *pbp.Packet {
			c := dialRaw(t, port)
			c.auth("canal", "s3cret")
			c.send(pbp.PacketType_SUBSCRIPTION, &pbp.Sub{Destination: "big", ClientId: client})
			c.wantAck(0, "")
			c.send(pbp.PacketType_GET, &pbp.Get{Destination: "big", ClientId: client, FetchSize: 10})
			return c.read()
		}
		direct, relayed := get(f.port, "1"), get(portA, "2")
		if m := messages(t, direct); len(m.Messages) != 3 || len(direct.Body) < 3<<20 {
			t.Fatalf("direct GET: %d entries in %d bytes", len(m.Messages), len(direct.Body))
		}
		if !bytes.Equal(relayed.Body, direct.Body) {
			t.Fatalf("relayed MESSAGES of %d bytes differs from the direct one of %d", len(relayed.Body), len(direct.Body))
		}
	})

	t.Run("client shuts its side", func(t *testing.T) {
		// The owner answers what it was sent before the relay ends.
		c := dialRaw(t, portA)
		c.auth("canal", "s3cret")
		c.send(pbp.PacketType_SUBSCRIPTION, &pbp.Sub{Destination: "quiet", ClientId: "3"})
		start := time.Now()
		c.send(pbp.PacketType_GET, &pbp.Get{Destination: "quiet", ClientId: "3", FetchSize: 1,
			TimeoutPresent: &pbp.Get_Timeout{Timeout: 300}})
		c.conn.(*net.TCPConn).CloseWrite()
		c.wantAck(0, "")
		if m := messages(t, c.read()); m.BatchId != -1 || time.Since(start) < 300*time.Millisecond {
			t.Fatalf("GET waiting 300ms: batch %d after %v", m.BatchId, time.Since(start))
		}
		c.wantClosed()
	})

	t.Run("wrong password refused by A", func(t *testing.T) {
		calls := rt.count()
		c := client.NewSimpleCanalConnector("127.0.0.1", portA, "canal", "wrong", "shop", 60000, 60000)
		if err := c.Connect(); err == nil || !strings.Contains(err.Error(), "auth failed for user:canal") {
			t.Fatalf("connect to A with a wrong password: %v", err)
		}
		c.DisConnection()
		lbA.waitFor(t, "auth failed for user:canal")
		if rt.count() != calls {
			t.Fatal("A asked Forward for a client that failed to authenticate")
		}
	})

	t.Run("relay at authentication", func(t *testing.T) {
		// canal's server subscribes a client whose ClientAuth names the
		// destination; so does the owner, through the relay.
		c := dialRaw(t, portA)
		c.authWith(&pbp.ClientAuth{Username: "canal", Destination: "shop", ClientId: "1003"}, "s3cret")
		c.wantAck(0, "")
		c.send(pbp.PacketType_GET, &pbp.Get{Destination: "shop", ClientId: "1003", FetchSize: 3})
		if m := messages(t, c.read()); m.BatchId != 1 || len(m.Messages) != 3 {
			t.Fatalf("relayed GET: batch %d with %d entries", m.BatchId, len(m.Messages))
		}
	})

	t.Run("forward error", func(t *testing.T) {
		rt.set("", errors.New("destination shop has no owner right now: retry"))
		c := dialRaw(t, portA)
		c.auth("canal", "s3cret")
		c.send(pbp.PacketType_SUBSCRIPTION, &pbp.Sub{Destination: "shop", ClientId: "1004"})
		c.wantAck(canal.CodeError, "destination shop has no owner right now: retry")
		c.send(pbp.PacketType_GET, &pbp.Get{Destination: "shop", ClientId: "1004", FetchSize: 1})
		c.wantAck(canal.CodeError, "has no owner right now")
		// No node serves it.
		rt.set("", nil)
		c.send(pbp.PacketType_SUBSCRIPTION, &pbp.Sub{Destination: "shop", ClientId: "1004"})
		c.wantAck(canal.CodeError, `unknown destination "shop"`)
		// The connection is usable: once there is an owner, it is relayed.
		rt.set(owner, nil)
		c.send(pbp.PacketType_SUBSCRIPTION, &pbp.Sub{Destination: "shop", ClientId: "1004"})
		c.wantAck(0, "")
		c.send(pbp.PacketType_GET, &pbp.Get{Destination: "shop", ClientId: "1004", FetchSize: 2})
		if m := messages(t, c.read()); m.BatchId != 1 || len(m.Messages) != 2 {
			t.Fatalf("GET after retry: batch %d with %d entries", m.BatchId, len(m.Messages))
		}
	})

	t.Run("owner unreachable", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := l.Addr().String()
		l.Close()
		rt.set(closed, nil)
		c := dialRaw(t, portA)
		c.auth("canal", "s3cret")
		c.send(pbp.PacketType_SUBSCRIPTION, &pbp.Sub{Destination: "shop", ClientId: "1005"})
		c.wantAck(canal.CodeError, "destination shop: cannot relay to its owner "+closed+": dial tcp")
		lbA.waitFor(t, `level=WARN msg="cannot relay to the destination's owner"`)
		lbA.waitFor(t, "dest=shop client=1005 owner="+closed)
		rt.set(owner, nil)
		c.send(pbp.PacketType_SUBSCRIPTION, &pbp.Sub{Destination: "shop", ClientId: "1005"})
		c.wantAck(0, "")
	})

	t.Run("owner refuses A", func(t *testing.T) {
		// A node whose canal account differs from the owner's.
		rt.set(owner, nil)
		lb := &logBuf{out: t.Output()}
		port, _ := startServer(t, canal.Config{User: "canal", Password: "other", Forward: rt.forward, Logger: slogFor(lb)})
		c := dialRaw(t, port)
		c.auth("canal", "other")
		c.send(pbp.PacketType_SUBSCRIPTION, &pbp.Sub{Destination: "shop", ClientId: "1005"})
		c.wantAck(canal.CodeError, "refused authentication (code 400): auth failed for user:canal")
		lb.waitFor(t, "cannot relay")
	})

	t.Run("owner goes away", func(t *testing.T) {
		// A second server on B's registry, stopped mid-stream.
		lb := &logBuf{out: t.Output()}
		port, stop := startServer(t, canal.Config{Registry: f.reg, User: "canal", Password: "s3cret", Logger: slogFor(lb)})
		rt.set(addrOf(port), nil)
		c := dialRaw(t, portA)
		c.auth("canal", "s3cret")
		c.send(pbp.PacketType_SUBSCRIPTION, &pbp.Sub{Destination: "shop", ClientId: "1005"})
		c.wantAck(0, "")
		c.send(pbp.PacketType_GET, &pbp.Get{Destination: "shop", ClientId: "1005", FetchSize: 2})
		if m := messages(t, c.read()); len(m.Messages) != 2 {
			t.Fatalf("GET: %d entries", len(m.Messages))
		}
		// A GET waiting without limit when the owner stops.
		c.send(pbp.PacketType_SUBSCRIPTION, &pbp.Sub{Destination: "quiet", ClientId: "1005"})
		c.wantAck(0, "")
		c.send(pbp.PacketType_GET, &pbp.Get{Destination: "quiet", ClientId: "1005", FetchSize: 1,
			TimeoutPresent: &pbp.Get_Timeout{Timeout: 0}})
		time.Sleep(100 * time.Millisecond)
		stop()
		c.wantClosed()
		lbA.waitFor(t, "relay ended: the owner closed the connection; closing the client's")
		rt.set(owner, nil)
	})

	t.Run("timeouts", func(t *testing.T) {
		// A's idle timeout is short; a relayed GET waits longer than it
		// and is answered, and the idle client is then closed.
		lb := &logBuf{out: t.Output()}
		port, _ := startServer(t, canal.Config{User: "canal", Password: "s3cret", Forward: rt.forward,
			IdleTimeout: 300 * time.Millisecond, Logger: slogFor(lb)})
		c := dialRaw(t, port)
		c.auth("canal", "s3cret")
		c.send(pbp.PacketType_SUBSCRIPTION, &pbp.Sub{Destination: "quiet", ClientId: "1"})
		c.wantAck(0, "")
		start := time.Now()
		c.send(pbp.PacketType_GET, &pbp.Get{Destination: "quiet", ClientId: "1", FetchSize: 1,
			TimeoutPresent: &pbp.Get_Timeout{Timeout: 1}, UnitPresent: &pbp.Get_Unit{Unit: 3}})
		if m := messages(t, c.read()); m.BatchId != -1 || time.Since(start) < time.Second {
			t.Fatalf("relayed GET with a 1s timeout: batch %d after %v", m.BatchId, time.Since(start))
		}
		c.send(pbp.PacketType_GET, &pbp.Get{Destination: "quiet", ClientId: "1", FetchSize: 1})
		if m := messages(t, c.read()); m.BatchId != -1 {
			t.Fatalf("second GET: batch %d", m.BatchId)
		}
		start = time.Now()
		c.wantClosed()
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("idle relayed client closed after %v, want about 300ms", d)
		}
		f.log.waitFor(t, "closing idle connection")
		lb.waitFor(t, "relay ended: the owner closed the connection")
	})
}

// TestRelayRing: two nodes, each believing the other owns a destination,
// answer "unknown destination" instead of relaying in a ring; no account
// is configured, so the relay authenticates with an empty one.
func TestRelayRing(t *testing.T) {
	var ra, rb route
	lb := &logBuf{out: t.Output()}
	portA, _ := startServer(t, canal.Config{Forward: ra.forward, Logger: slogFor(lb)})
	portB, _ := startServer(t, canal.Config{Forward: rb.forward, Logger: slogFor(lb)})
	ra.set(addrOf(portB), nil)
	rb.set(addrOf(portA), nil)

	c := dialRaw(t, portA)
	c.auth("", "")
	c.send(pbp.PacketType_SUBSCRIPTION, &pbp.Sub{Destination: "shop", ClientId: "1"})
	c.wantAck(canal.CodeError, `unknown destination "shop"`)
	// The relay goes on: B answers again.
	c.send(pbp.PacketType_GET, &pbp.Get{Destination: "shop", ClientId: "1", FetchSize: 1})
	c.wantAck(canal.CodeError, `unknown destination "shop"`)
	if ra.count() != 1 || rb.count() != 0 {
		t.Fatalf("Forward asked %d times on A and %d on B, want 1 and 0", ra.count(), rb.count())
	}

	// At authentication the owner's refusal closes the connection, as an
	// unknown destination does there.
	c = dialRaw(t, portA)
	c.authWith(&pbp.ClientAuth{Destination: "shop", ClientId: "1"}, "")
	c.wantAck(canal.CodeError, `refused authentication (code 400): stream: unknown destination "shop"`)
	c.wantClosed()
}
