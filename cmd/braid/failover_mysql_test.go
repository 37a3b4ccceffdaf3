package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/braid-cdc/braid/internal/testutil/mysqlsource"
	"github.com/braid-cdc/braid/internal/testutil/mysqlsource/mysqlbinlog"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/internal/testutil/tcpproxy"
)

// Issue 42 on MySQL: two MySQL test sources share one GTID history (a
// primary and its replica, log_replica_updates) under different
// server_uuids, file names and offsets, behind a tcpproxy standing in for
// the virtual IP.

// mysqlPair is a MySQL primary and its replica with one history, whose
// shop.orders has a BIGINT id.
type mysqlPair struct {
	primary, replica *mysqlsource.Server
	h                *mysqlsource.History
}

func startMySQLPair(t *testing.T) *mysqlPair {
	t.Helper()
	p := &mysqlPair{
		primary: mysqlsource.Start(t, mysqlsource.Config{ServerID: 1, ServerUUID: "11111111-1111-1111-1111-111111111111"}),
		replica: mysqlsource.Start(t, mysqlsource.Config{ServerID: 2, ServerUUID: "22222222-2222-2222-2222-222222222222"}),
	}
	var err error
	if p.h, err = mysqlsource.NewHistory(p.primary, p.replica); err != nil {
		t.Fatal(err)
	}
	orders := &mysqlbinlog.TableDef{Schema: "shop", Name: "orders", PrimaryKey: []string{"id"},
		Columns: []mysqlbinlog.ColumnDef{{Name: "id", Type: "bigint", NotNull: true}}}
	p.commit(t, mysqlbinlog.Txn{DDL: &mysqlbinlog.DDL{Schema: "shop", CreatesDatabase: true, SQL: "CREATE DATABASE shop"}})
	p.commit(t, mysqlbinlog.Txn{DDL: &mysqlbinlog.DDL{Schema: "shop", Table: orders}})
	return p
}

func (p *mysqlPair) commit(t *testing.T, txn mysqlbinlog.Txn) {
	t.Helper()
	if _, err := p.h.Commit(txn); err != nil {
		t.Fatal(err)
	}
}

// insert commits INSERTs of ids on the current primary, one transaction
// each.
func (p *mysqlPair) insert(t *testing.T, ids ...int64) {
	t.Helper()
	for _, id := range ids {
		p.commit(t, mysqlbinlog.Txn{Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Insert, Table: "shop.orders",
			Rows: []mysqlbinlog.Row{{After: []any{id}}}}}})
	}
}

func ids(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// TestCaptureFollowsMySQLFailover: the proxy switched from a MySQL
// primary to its replica, which lags two transactions: braid waits for
// it (saying so), resumes there by GTID once it holds everything braid
// printed, and prints every row once, in order, those the promoted
// replica commits under its own uuid included. The old code stopped:
// it did not resume a MySQL source on another server.
func TestCaptureFollowsMySQLFailover(t *testing.T) {
	p := startMySQLPair(t)
	p.insert(t, ids(1, 5)...)
	// The replica's files do not line up with the primary's: braid's
	// file:pos would mean something else there.
	if err := p.h.Rotate(p.replica); err != nil {
		t.Fatal(err)
	}
	if err := p.h.CatchUp(p.replica); err != nil {
		t.Fatal(err)
	}
	vip := tcpproxy.Start(t, p.primary.Addr())
	c := startFailoverCapture(t, vip.Addr())
	c.waitIDs(t, ids(1, 5), 60e9)
	p.insert(t, 6, 7) // the replica has not applied them yet
	c.waitIDs(t, ids(1, 7), 60e9)

	vip.Switch(p.replica.Addr())
	c.waitLog(t, "waiting for it to catch up")
	if got := c.inserts(t); !slices.Equal(got, ids(1, 7)) {
		t.Fatalf("printed %v while waiting, want 1..7", got)
	}
	if err := p.h.CatchUp(p.replica); err != nil {
		t.Fatal(err)
	}
	p.h.Promote(p.replica)
	p.insert(t, 8, 9, 10)
	c.waitIDs(t, ids(1, 10), 60e9)
	if !strings.Contains(c.errb.String(), "source switched servers") {
		t.Errorf("no switch line in the log:\n%s", c.errb.String())
	}
}

// waitLog waits until the capture logged a line containing want, and
// fails at once when it exited.
func (c *failoverCapture) waitLog(t *testing.T, want string) {
	t.Helper()
	defer func() {
		if t.Failed() {
			t.Logf("stderr:\n%s", c.errb.String())
		}
	}()
	retry.Until(t, 60e9, func() error {
		select {
		case code := <-c.code:
			t.Fatalf("capture exited (%d) before logging %q; stderr:\n%s", code, want, c.errb.String())
		default:
		}
		if !strings.Contains(c.errb.String(), want) {
			return fmt.Errorf("no %q line yet", want)
		}
		return nil
	})
}

// TestCaptureRestartsOnAnotherMySQLServer: a capture restarted from its
// cursor (the executed GTID set saved with it) after the address moved
// to the replica goes on there by GTID, printing only what came after the
// cursor; back on the primary, which purged GTIDs braid has not read, it
// is refused with those GTIDs named and prints nothing.
func TestCaptureRestartsOnAnotherMySQLServer(t *testing.T) {
	p := startMySQLPair(t)
	p.insert(t, 1, 2)
	if err := p.h.Rotate(p.replica); err != nil {
		t.Fatal(err)
	}
	if err := p.h.CatchUp(p.replica); err != nil {
		t.Fatal(err)
	}
	vip := tcpproxy.Start(t, p.primary.Addr())
	dir := t.TempDir()
	code, c := captureOnce(t, vip.Addr(), dir, 3) // CREATE TABLE, 1, 2
	if got := c.inserts(t); code != 0 || !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("first run: exit %d, printed %v, want 0 and [1 2]; stderr:\n%s", code, got, c.errb.String())
	}
	p.insert(t, 3, 4)
	if err := p.h.CatchUp(p.replica); err != nil {
		t.Fatal(err)
	}
	vip.Switch(p.replica.Addr())
	code, c = captureOnce(t, vip.Addr(), dir, 2)
	if got := c.inserts(t); code != 0 || !slices.Equal(got, []int64{3, 4}) {
		t.Fatalf("on the replica: exit %d, printed %v, want 0 and [3 4]; stderr:\n%s", code, got, c.errb.String())
	}

	// The cursor is on the replica now (GTIDs up to 6); the primary
	// commits a 7th and purges it.
	p.insert(t, 5)
	if err := p.h.Rotate(p.primary); err != nil {
		t.Fatal(err)
	}
	files := p.primary.Files()
	if err := p.primary.PurgeTo(files[len(files)-1]); err != nil {
		t.Fatal(err)
	}
	vip.Switch(p.primary.Addr())
	code, c = captureOnce(t, vip.Addr(), dir, 1)
	purged := "purged GTIDs braid has not read yet (11111111-1111-1111-1111-111111111111:7;"
	if code != 1 || !strings.Contains(c.errb.String(), purged) {
		t.Fatalf("purged primary: exit %d, want 1 naming the purged GTIDs; stderr:\n%s", code, c.errb.String())
	}
	if got := c.inserts(t); len(got) != 0 {
		t.Fatalf("printed %v from a server that purged what follows the cursor", got)
	}
}
