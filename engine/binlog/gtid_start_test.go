package binlog_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/internal/testutil/mysqlsource"
	"github.com/braid-cdc/braid/internal/testutil/mysqlsource/mysqlbinlog"
	"github.com/braid-cdc/braid/spec"
)

// gtidWorkload creates shop.items and inserts rows 2..11, one transaction
// each; with tagged, the odd ones are tagged "shop" (8.3+). The binlog
// rotates after row 5.
func gtidWorkload(tagged bool) mysqlbinlog.Workload {
	items := &mysqlbinlog.TableDef{Schema: "shop", Name: "items", PrimaryKey: []string{"id"}, Columns: []mysqlbinlog.ColumnDef{
		{Name: "id", Type: "int", NotNull: true},
		{Name: "name", Type: "varchar(32)"},
	}}
	txns := []mysqlbinlog.Txn{
		{DDL: &mysqlbinlog.DDL{Schema: "shop", CreatesDatabase: true, SQL: "CREATE DATABASE shop"}},
		{DDL: &mysqlbinlog.DDL{Schema: "shop", Table: items}},
	}
	for i := 2; i < 12; i++ {
		txn := mysqlbinlog.Txn{Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Insert, Table: "shop.items",
			Rows: []mysqlbinlog.Row{{After: []any{i, fmt.Sprintf("item %d", i)}}}}}}
		if tagged && i%2 == 1 {
			txn.Tag = "shop"
		}
		txn.RotateAfter = i == 5
		txns = append(txns, txn)
	}
	return mysqlbinlog.Workload{Txns: txns}
}

// TestMySQLSourceStartAtGTIDSet starts a reader at a GTID set on the
// MySQL test source: it reads exactly the transactions not in the set,
// in binlog order. On 8.4 and 9.x the set has tags, written in upper
// case, and covers the tagged transactions further than the untagged
// ones: only a start that sends the tags to the server (MySQL 8.3's
// tagged encoding in COM_BINLOG_DUMP_GTID) gets this right; go-mysql's
// own GTID set cannot even parse it. On 8.0 the set is untagged, and a
// tagged one is refused before connecting, naming the version.
func TestMySQLSourceStartAtGTIDSet(t *testing.T) {
	for _, tc := range []struct {
		version string
		tls     bool // the dump's packet is rewritten above TLS
	}{{mysqlsource.Version80, false}, {mysqlsource.Version84, false}, {mysqlsource.Version9, false}, {mysqlsource.Version84, true}} {
		version := tc.version
		name := version
		if tc.tls {
			name += " over TLS"
		}
		t.Run(name, func(t *testing.T) {
			tagged := version != mysqlsource.Version80
			s, b := serveWorkload(t, version, gtidWorkload(tagged))
			// In the set: every transaction up to row 6, and the tagged
			// ones up to row 9 (the whole first file: the server starts
			// at the second).
			var set change.MySQLGTIDSet
			var want []string
			for i, txn := range b.Txns {
				if i <= 6 || tagged && i <= 9 && i%2 == 1 {
					if err := set.Add(txn.GTID); err != nil {
						t.Fatal(err)
					}
				} else {
					want = append(want, txn.GTID)
				}
			}
			text := set.String()
			if tagged {
				text = strings.ReplaceAll(text, ":shop:", ":SHOP:")
			}
			t.Logf("start at %s", text)
			last := b.Txns[len(b.Txns)-1]
			src := spec.Source{Name: "m8", Address: s.Addr(), User: "root", Start: spec.Start{Kind: spec.StartGTID, GTID: text}}
			if tc.tls {
				ca, _, _ := s.TLSFiles(t)
				src.TLS = &spec.TLS{Mode: spec.TLSVerifyIdentity, CA: ca, CAPEM: s.CAPEM()}
			}
			evs := runSourceSpec(t, src, nil).until(t, last.File, last.End)
			var got []string
			for _, ev := range evs {
				if ev.GTID != "" && !slices.Contains(got, ev.GTID) {
					got = append(got, ev.GTID)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("read the transactions\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			var wantRows []string
			for _, id := range []int{7, 8, 9, 10, 11} {
				if !tagged || id%2 == 0 || id > 9 {
					wantRows = append(wantRows, fmt.Sprintf("INSERT shop.items id=-/%d name=-/item %d", id, id))
				}
			}
			if got := rowLines(evs); got != strings.Join(wantRows, "\n") {
				t.Errorf("read the rows\n%s\nwant\n%s", got, strings.Join(wantRows, "\n"))
			}
		})
	}
	t.Run("tagged on 8.0", func(t *testing.T) {
		s, b := serveWorkload(t, mysqlsource.Version80, gtidWorkload(false))
		text := b.Txns[2].GTID + ",3e11fa47-71ca-11e1-9e33-c80aa9429562:shop:1"
		err := runSourceAt(t, s, nil, spec.Start{Kind: spec.StartGTID, GTID: text}).stopped(t)
		if err == nil || !strings.Contains(err.Error(), "tagged GTIDs, which MySQL 8.0.40 does not know (8.3 and later do)") {
			t.Errorf("a tagged start on 8.0: %v, want it refused naming the version", err)
		}
	})
}

// dropProxy forwards TCP connections to a server; cut closes those open
// (cutProxy, in reconnect_test.go, cuts one stream at a byte count).
type dropProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	n     int // connections accepted
}

func newDropProxy(t *testing.T, to string) *dropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{ln: ln}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.n++
			p.mu.Unlock()
			go func() { io.Copy(s, c); s.Close() }()
			go func() { io.Copy(c, s); c.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done; p.cut() })
	return p
}

func (p *dropProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestMySQLSourceGTIDStartSurvivesReconnect: a reader started at a GTID
// set that holds every transaction so far waits at the start of the file
// the server chose; its connection is cut there, and it reconnects at
// that file's start by position, where the server sends the set's
// transactions again. The reader skips them as the server did: the only
// transaction it emits is the one committed after the set.
func TestMySQLSourceGTIDStartSurvivesReconnect(t *testing.T) {
	s := mysqlsource.Start(t, mysqlsource.Config{Version: mysqlsource.Version84})
	w, err := mysqlbinlog.NewWriter(mysqlbinlog.Server{Version: mysqlsource.Version84})
	if err != nil {
		t.Fatal(err)
	}
	feed := s.Feed(w)
	if err := w.WriteAll(gtidWorkload(true).Txns); err != nil {
		t.Fatal(err)
	}
	if err := feed.Sync(); err != nil {
		t.Fatal(err)
	}
	b, err := w.Binlog()
	if err != nil {
		t.Fatal(err)
	}
	var set change.MySQLGTIDSet
	for _, txn := range b.Txns {
		if err := set.Add(txn.GTID); err != nil {
			t.Fatal(err)
		}
	}
	proxy := newDropProxy(t, s.Addr())
	p, err := binlog.NewReader(binlog.Config{Destination: "test",
		Source:    spec.Source{Name: "m8", Address: proxy.ln.Addr().String(), User: "root", Start: spec.Start{Kind: spec.StartGTID, GTID: set.String()}},
		Heartbeat: 50 * time.Millisecond,
		Logger:    slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		events []*change.Event
		beats  []change.Position
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- p.Run(ctx, func(ev *change.Event) error {
			mu.Lock()
			defer mu.Unlock()
			if ev.Type == change.EventHeartbeat {
				beats = append(beats, ev.Pos)
			} else {
				events = append(events, ev)
			}
			return nil
		})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("reader: %v", err)
		}
	}()
	wait := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; {
			mu.Lock()
			yes := ok()
			mu.Unlock()
			if yes {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	last := b.Files[len(b.Files)-1].Name
	// A heartbeat in the last file: the server chose it and sent nothing
	// of it (every transaction is in the set).
	wait("a heartbeat in "+last, func() bool { return slices.ContainsFunc(beats, func(p change.Position) bool { return p.File == last }) })
	proxy.mu.Lock()
	before := proxy.n
	proxy.mu.Unlock()
	proxy.cut()
	wait("a reconnect", func() bool {
		proxy.mu.Lock()
		defer proxy.mu.Unlock()
		return proxy.n > before
	})
	next := mysqlbinlog.Txn{Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Insert, Table: "shop.items",
		Rows: []mysqlbinlog.Row{{After: []any{12, "item 12"}}}}}}
	if _, err := w.Write(next); err != nil {
		t.Fatal(err)
	}
	if err := feed.Sync(); err != nil {
		t.Fatal(err)
	}
	if b, err = w.Binlog(); err != nil {
		t.Fatal(err)
	}
	want := b.Txns[len(b.Txns)-1].GTID
	wait("the transaction after the set", func() bool {
		return slices.ContainsFunc(events, func(ev *change.Event) bool { return ev.Type == change.EventCommit && ev.GTID == want })
	})
	mu.Lock()
	defer mu.Unlock()
	for _, ev := range events {
		if ev.GTID != want {
			t.Errorf("read %s %s at %s, which the start set holds", ev.Type, ev.GTID, ev.Pos)
		}
	}
}
