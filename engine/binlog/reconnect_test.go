package binlog_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/internal/testutil/logline"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/spec"
)

// cutProxy forwards TCP connections to a server and cuts the binlog streams
// of one replica server_id: the k-th stream after the server has sent it
// cutAfter[k] bytes; later streams and other connections pass untouched. It
// simulates network failures at chosen points of the stream.
type cutProxy struct {
	l        net.Listener
	target   string
	serverID uint32
	cutAfter []int64
	streams  atomic.Int32 // binlog streams seen
	cuts     atomic.Int32 // streams cut
	wg       sync.WaitGroup
}

func newCutProxy(t *testing.T, target string, serverID uint32, cutAfter ...int64) *cutProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{l: l, target: target, serverID: serverID, cutAfter: cutAfter}
	p.wg.Go(p.serve)
	t.Cleanup(func() { l.Close(); p.wg.Wait() })
	return p
}

func (p *cutProxy) addr() string { return p.l.Addr().String() }

func (p *cutProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.pipe(c) })
	}
}

func (p *cutProxy) pipe(c net.Conn) {
	defer c.Close()
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer s.Close()
	stream := atomic.Int32{} // 1 + the stream's index once it registered
	go func() {
		// Client to server: watch for COM_REGISTER_SLAVE (0x15) with the
		// replica id, which starts a binlog stream.
		hdr := make([]byte, 4)
		for {
			if _, err := io.ReadFull(c, hdr); err != nil {
				s.Close()
				return
			}
			body := make([]byte, int(hdr[0])|int(hdr[1])<<8|int(hdr[2])<<16)
			if _, err := io.ReadFull(c, body); err != nil {
				s.Close()
				return
			}
			if len(body) >= 5 && body[0] == 0x15 && binary.LittleEndian.Uint32(body[1:]) == p.serverID {
				stream.Store(p.streams.Add(1))
			}
			if _, err := s.Write(append(hdr, body...)); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	var sent int64
	for {
		n, err := s.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
			if k := int(stream.Load()) - 1; k >= 0 && k < len(p.cutAfter) {
				sent += int64(n)
				if sent >= p.cutAfter[k] {
					p.cuts.Add(1)
					return // the cut: both sides see the connection drop
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// TestReconnectMidTransaction cuts the binlog connection in the middle of a
// 20,000-row transaction, and cuts the next one again before it has got as
// far as the first: the reader must reconnect, read the transaction again
// from its start and emit each row exactly once, in order, with one
// EventBegin and one EventCommit.
func TestReconnectMidTransaction(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.big (id INT PRIMARY KEY, pad VARCHAR(200))",
		"CREATE TABLE shop.seq (n INT PRIMARY KEY)",
		"SET max_recursive_iterations = 100000",
		"INSERT INTO shop.seq WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM s WHERE n < 20000) SELECT n FROM s",
		"INSERT INTO shop.big SELECT n, REPEAT('x', 200) FROM shop.seq",
		"INSERT INTO shop.big VALUES (0, 'after')")
	src := spec.Source{Name: "a", Start: earliest, ServerID: 777}
	proxy := newCutProxy(t, srv.Addr(), src.ServerID, 1<<20, 600<<10) // inside the big transaction, then short of that point
	src.Address = proxy.addr()
	filter, _ := spec.CompileTableFilter([]string{`shop\.big`})
	var logs logline.Buffer
	r := startReader(t, binlog.Config{Source: src, Tables: filter,
		Logger: slog.New(slog.NewTextHandler(io.MultiWriter(&logs, t.Output()), nil))}, nil)
	r.waitFor(60*time.Second, "20,001 rows", rowsAtLeast(20001))
	time.Sleep(300 * time.Millisecond)
	evs := r.snapshot()
	if proxy.cuts.Load() != 2 || strings.Count(logs.String(), "reconnecting") != 2 {
		t.Fatalf("the stream was not cut and re-made (cuts %d); log:\n%s", proxy.cuts.Load(), logs.String())
	}
	// The big transaction is the first with rows: exactly one EventBegin,
	// rows with ids and indexes 1..20,000 and 0..19,999 in order, one
	// EventCommit.
	var begins, commits int
	var big []*change.RowChange
	inBig := false
	for _, e := range evs {
		switch e.Type {
		case change.EventBegin:
			begins++
			inBig = begins == 1
		case change.EventRows:
			if inBig {
				for i := range e.Rows {
					big = append(big, &e.Rows[i])
				}
			}
		case change.EventCommit:
			if inBig {
				commits++
				inBig = false
			}
		}
	}
	if begins != 2 || commits != 1 {
		t.Fatalf("%d begins (want 2: the big transaction and the last row) and %d commits of the big transaction (want 1)", begins, commits)
	}
	if len(big) != 20000 {
		t.Fatalf("big transaction has %d rows, want 20,000", len(big))
	}
	for i, rc := range big {
		if id := rc.After()[0].(int64); id != int64(i+1) || rc.Index != i {
			t.Fatalf("row %d has id %d index %d: lost or duplicated", i, id, rc.Index)
		}
	}
	if got := ids(evs); len(got) != 20001 || got[20000] != 0 {
		t.Errorf("the row after the big transaction is missing or duplicated (%d rows)", len(got))
	}
}

// TestReconnectServerRestart restarts the server while the reader streams:
// every row written before and after comes exactly once.
func TestReconnectServerRestart(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id INT PRIMARY KEY)")
	r := startReader(t, binlog.Config{Source: source(srv, earliest)}, nil)
	for i := 1; i <= 50; i++ {
		srv.Exec(t, fmt.Sprintf("INSERT INTO shop.orders VALUES (%d)", i))
	}
	r.waitFor(30*time.Second, "50 rows", rowsAtLeast(50))
	srv.Restart(t)
	for i := 51; i <= 100; i++ {
		srv.Exec(t, fmt.Sprintf("INSERT INTO shop.orders VALUES (%d)", i))
	}
	r.waitFor(60*time.Second, "100 rows", rowsAtLeast(100))
	time.Sleep(500 * time.Millisecond)
	got := ids(r.snapshot())
	if len(got) != 100 {
		t.Fatalf("%d rows, want 100", len(got))
	}
	for i, id := range got {
		if id != int64(i+1) {
			t.Fatalf("row %d has id %d: lost, duplicated or reordered", i, id)
		}
	}
}
