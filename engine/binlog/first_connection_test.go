package binlog_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/internal/testutil/tcpproxy"
	"github.com/braid-cdc/braid/spec"
)

// countedSource is a server with one row in shop.orders behind a proxy
// that counts connections, and a source from the earliest binlog that
// reads through the proxy. The lag watch is off, so that the count is
// the reader's own connections.
func countedSource(t *testing.T) (*mysqltest.Server, *tcpproxy.Proxy, spec.Source) {
	t.Helper()
	binlog.SetProgressEvery(t, time.Hour)
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id INT PRIMARY KEY)", "INSERT INTO shop.orders VALUES (1)")
	proxy := tcpproxy.Start(t, srv.Addr())
	src := source(srv, earliest)
	src.Address = proxy.Addr()
	return srv, proxy, src
}

// TestFirstConnectionTakesPrepareAnswer: the first binlog connection
// takes the answer to who the server is that the reader's start asked a
// moment before, so the first row comes over two connections (the
// start's and the binlog's), not three; a reconnect asks again, on a
// connection of its own before the binlog's.
func TestFirstConnectionTakesPrepareAnswer(t *testing.T) {
	srv, proxy, src := countedSource(t)
	r := startReader(t, binlog.Config{Source: src}, nil)
	r.waitFor(30*time.Second, "the first row", rowsAtLeast(1))
	if got := proxy.Stats().Accepted; got != 2 {
		t.Fatalf("%d connections before the first row, want 2: the start's and the binlog's", got)
	}
	proxy.Cut()
	srv.Exec(t, "INSERT INTO shop.orders VALUES (2)")
	r.waitFor(60*time.Second, "the row after the cut", rowsAtLeast(2))
	if got := proxy.Stats().Accepted; got < 4 {
		t.Fatalf("%d connections after a reconnect, want 4 or more: a reconnect asks who answers before its binlog connection", got)
	}
}

// TestFirstDumpBesideSchemaRead: the first binlog connection asks for
// the binlog while the start is still reading the schema (it is opened
// once the start position is decided), not after the whole start: a
// Binlog Dump thread shows on the server while the reader waits inside
// its schema read.
func TestFirstDumpBesideSchemaRead(t *testing.T) {
	binlog.SetProgressEvery(t, time.Hour)
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id INT PRIMARY KEY)", "INSERT INTO shop.orders VALUES (1)")
	c := srv.Conn(t)
	var once sync.Once
	dumping := make(chan error, 1)
	binlog.SetAfterListingTables(t, func() {
		once.Do(func() {
			dumping <- retry.Wait(t.Context(), 60*time.Second, func() error {
				r, err := c.Execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
				if err != nil {
					return err
				}
				defer r.Close()
				if n, _ := r.GetInt(0, 0); n == 0 {
					return errors.New("no Binlog Dump thread on the server")
				}
				return nil
			})
		})
	})
	r := startReader(t, binlog.Config{Source: source(srv, earliest)}, nil)
	r.waitFor(90*time.Second, "the first row", rowsAtLeast(1))
	if err := <-dumping; err != nil {
		t.Fatalf("while the start read the schema: %v: the binlog connection waited for the whole start", err)
	}
}
