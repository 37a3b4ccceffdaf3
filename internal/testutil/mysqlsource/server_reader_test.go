package mysqlsource_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/internal/testutil/mysqlsource"
	"github.com/braid-cdc/braid/spec"
)

// These tests run braid's own reader (engine/binlog) against the test
// source, as a destination would: it connects, reads the settings, lists
// the binlogs, loads the schema, dumps, and gets heartbeats.

// reader runs a binlog.Reader on s until the test ends and collects its
// events.
type reader struct {
	mu     sync.Mutex
	events []*change.Event
	done   chan error
}

func runReader(t *testing.T, s *mysqlsource.Server, start spec.Start) *reader {
	t.Helper()
	p, err := binlog.NewReader(binlog.Config{
		Destination: "test",
		Source:      spec.Source{Name: "mysql", Address: s.Addr(), User: "root", Start: start},
		Heartbeat:   50 * time.Millisecond,
		Logger:      slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &reader{done: make(chan error, 1)}
	go func() {
		r.done <- p.Run(ctx, func(e *change.Event) error {
			r.mu.Lock()
			r.events = append(r.events, e)
			r.mu.Unlock()
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			t.Error("the reader did not stop")
		}
	})
	return r
}

// wait returns the events once cond holds on them, failing after 10 s
// or when the reader stops.
func (r *reader) wait(t *testing.T, what string, cond func([]*change.Event) bool) []*change.Event {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		evs := append([]*change.Event(nil), r.events...)
		r.mu.Unlock()
		if cond(evs) {
			return evs
		}
		select {
		case err := <-r.done:
			r.done <- err
			t.Fatalf("waiting for %s: the reader stopped: %v", what, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("waiting for %s: timed out with %s", what, summary(r.events))
	return nil
}

// summary names each event: its type and GTID or DDL.
func summary(evs []*change.Event) string {
	var parts []string
	for _, e := range evs {
		switch e.Type {
		case change.EventDDL:
			parts = append(parts, fmt.Sprintf("DDL %s %q", e.GTID, e.DDL.SQL))
		case change.EventHeartbeat:
			parts = append(parts, "heartbeat "+e.Pos.String())
		default:
			parts = append(parts, fmt.Sprintf("%d %s %s", e.Type, e.GTID, e.Pos))
		}
	}
	return strings.Join(parts, "; ")
}

func countType(evs []*change.Event, typ change.EventType) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// TestReaderFromEarliest: braid's reader on MySQL 8.0 reads its
// settings, the binlog list and the schema, dumps both files from the
// start (the DDL of each, with its GTID and the source's commit time),
// gets heartbeats at the end, and a DDL appended later.
func TestReaderFromEarliest(t *testing.T) {
	s, tail := startShop(t, mysqlsource.Version80)
	r := runReader(t, s, spec.Start{Kind: spec.StartEarliest})
	evs := r.wait(t, "two DDL and a heartbeat", func(evs []*change.Event) bool {
		return countType(evs, change.EventDDL) == 2 && countType(evs, change.EventHeartbeat) > 0
	})
	var ddl []string
	for _, e := range evs {
		if e.Type == change.EventDDL {
			ddl = append(ddl, e.GTID+" "+e.DDL.SQL)
			if e.CommitTime.IsZero() {
				t.Errorf("DDL %s without a commit time", e.GTID)
			}
		}
	}
	want := []string{
		sourceUUID + ":119 CREATE TABLE t (id int NOT NULL, PRIMARY KEY (id))",
		sourceUUID + ":121 ALTER TABLE t ADD COLUMN note varchar(20)",
	}
	if strings.Join(ddl, "\n") != strings.Join(want, "\n") {
		t.Errorf("DDL:\n%s\nwant\n%s\nall: %s", strings.Join(ddl, "\n"), strings.Join(want, "\n"), summary(evs))
	}
	last := evs[len(evs)-1]
	if last.Type == change.EventHeartbeat && (last.Pos.File != "binlog.000002" || last.Pos.Pos != fileSize(t, s)) {
		t.Errorf("heartbeat at %s, want binlog.000002:%d", last.Pos, fileSize(t, s))
	}

	appendTransaction(t, s, tail, 122, "shop", "DROP TABLE t")
	r.wait(t, "the appended DROP TABLE", func(evs []*change.Event) bool { return countType(evs, change.EventDDL) == 3 })
	if u := s.Unknown(); len(u) != 0 {
		t.Errorf("braid sent statements the test source does not know: %q", u)
	}
}

// TestReaderFromGTID: a start from a GTID set dumps from there, the
// transactions in the set skipped.
func TestReaderFromGTID(t *testing.T) {
	s, _ := startShop(t, mysqlsource.Version80)
	// The live table as it was before :121's ALTER, which the reader
	// reads on from: braid takes the live schema for the start's.
	s.PutTable("shop", mysqlsource.Table{Name: "t", Columns: shopTable.Columns[:1], Indexes: shopTable.Indexes})
	r := runReader(t, s, spec.Start{Kind: spec.StartGTID, GTID: sourceUUID + ":1-119"})
	evs := r.wait(t, "the ALTER", func(evs []*change.Event) bool {
		return countType(evs, change.EventDDL) == 1 && countType(evs, change.EventHeartbeat) > 0
	})
	for _, e := range evs {
		if e.Type == change.EventDDL && e.GTID != sourceUUID+":121" {
			t.Errorf("DDL %s %q: want only :121's", e.GTID, e.DDL.SQL)
		}
	}
}

// TestReaderOnLaterVersions: 8.4 and 9.x answer SHOW MASTER STATUS with
// error 1064, as the servers do; braid asks them for SHOW BINARY LOG
// STATUS and reads them like 8.0.
func TestReaderOnLaterVersions(t *testing.T) {
	for _, v := range []string{mysqlsource.Version84, mysqlsource.Version9} {
		t.Run(v, func(t *testing.T) {
			s, _ := startShop(t, v)
			src := spec.Source{Name: "mysql", Address: s.Addr(), User: "root"}
			if _, err := binlog.CheckSource(context.Background(), src); err != nil {
				t.Fatal(err)
			}
			r := runReader(t, s, spec.Start{Kind: spec.StartEarliest})
			r.wait(t, "two DDL", func(evs []*change.Event) bool { return countType(evs, change.EventDDL) == 2 })
		})
	}
}

// TestReaderColdAuthCache: on a server whose caching_sha2_password cache
// is cold, braid (which sends no password over a connection without TLS)
// refuses the full authentication, naming it.
func TestReaderColdAuthCache(t *testing.T) {
	s := mysqlsource.Start(t, mysqlsource.Config{Version: mysqlsource.Version84,
		Users: []mysqlsource.User{{Name: "repl", Password: "s3cret"}}, ColdAuthCache: true})
	_, err := binlog.CheckSource(context.Background(), spec.Source{Name: "mysql", Address: s.Addr(), User: "repl", Password: "s3cret"})
	if !errors.Is(err, binlog.ErrClearText) {
		t.Fatalf("CheckSource on a cold cache: %v, want ErrClearText", err)
	}
}

// TestSnapshotChunks: braid's snapshot connection reads the catalog's
// rows as chunks of key ranges, with the server's estimate and position,
// a missing table is ErrNoTable, and a consistent snapshot's position is
// not known, as on MySQL.
func TestSnapshotChunks(t *testing.T) {
	s, _ := startShop(t, mysqlsource.Version80)
	ctx := context.Background()
	conn, err := binlog.OpenSnapshot(ctx, spec.Source{Name: "mysql", Address: s.Addr(), User: "root"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pos, err := conn.Position()
	if err != nil {
		t.Fatal(err)
	}
	if pos.File != "binlog.000002" || pos.Pos != fileSize(t, s) {
		t.Errorf("position %s, want binlog.000002:%d", pos, fileSize(t, s))
	}
	tbl := &change.Table{Schema: "shop", Name: "t", Columns: []change.Column{{Name: "id", Type: "int"}, {Name: "note", Type: "varchar"}}}
	if n := conn.EstimateRows(tbl); n != 4 {
		t.Errorf("EstimateRows = %d, want 4", n)
	}
	ids := func(rows *change.TextRows) string {
		var out []string
		for k := range rows.Len() {
			r := rows.Row(k)
			out = append(out, fmt.Sprintf("%v:%v", r[0], r[1]))
		}
		return strings.Join(out, " ")
	}
	rows, err := conn.Chunk(ctx, tbl, []int{0}, nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(rows); got != "1:a 2:<nil> 3:c 10:j" {
		t.Errorf("whole table: %s", got)
	}
	rows, err = conn.Chunk(ctx, tbl, []int{0}, []string{"1"}, []string{"3"}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(rows); got != "2:<nil> 3:c" {
		t.Errorf("after 1 through 3: %s", got)
	}
	missing := &change.Table{Schema: "shop", Name: "gone", Columns: tbl.Columns}
	if _, err := conn.Chunk(ctx, missing, []int{0}, nil, nil, 0); !errors.Is(err, binlog.ErrNoTable) {
		t.Errorf("a missing table: %v, want ErrNoTable", err)
	}
	// MySQL has no binlog_snapshot_position: a consistent snapshot
	// whose binlog position is not known.
	if at, exact, err := conn.Begin(ctx); err != nil || exact || !at.IsZero() {
		t.Errorf("Begin = %s exact %v, %v; want no position, not exact", at, exact, err)
	}
	if rows, err := conn.Chunk(ctx, tbl, []int{0}, nil, nil, 0); err != nil || rows.Len() != 4 {
		t.Errorf("a chunk in the snapshot: %v", err)
	}
	if err := conn.End(); err != nil {
		t.Error(err)
	}
	if u := s.Unknown(); len(u) != 0 {
		t.Errorf("unknown statements: %q", u)
	}
}

// TestPrivilegesEnforced: a user without REPLICATION SLAVE is refused a
// dump and, without REPLICATION CLIENT, the binlog list, with MySQL's
// error 1227; braid's start-up check reads SHOW GRANTS and names the
// missing privilege.
func TestPrivilegesEnforced(t *testing.T) {
	s := mysqlsource.Start(t, mysqlsource.Config{Version: mysqlsource.Version84, ServerUUID: sourceUUID,
		Users: []mysqlsource.User{{Name: "reader", Password: "pw", Grants: []string{"SELECT"}}}})
	first, _, _ := shopFiles(t)
	if err := s.AddFile("binlog.000001", first.bytes()); err != nil {
		t.Fatal(err)
	}
	c, err := client.Connect(s.Addr(), "reader", "pw", "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := exec(t, c, "SHOW GRANTS")
	if r.RowNumber() != 1 || str(r, 0, 0) != "GRANT SELECT ON *.* TO `reader`@`%`" {
		t.Errorf("SHOW GRANTS = %v", r.Values)
	}
	if _, err := c.Execute("SHOW BINARY LOGS"); err == nil {
		t.Error("SHOW BINARY LOGS without REPLICATION CLIENT answered")
	} else if code, _ := myErr(t, err); code != mysql.ER_SPECIFIC_ACCESS_DENIED_ERROR {
		t.Errorf("SHOW BINARY LOGS: error %d", code)
	}
	host, port, _ := net.SplitHostPort(s.Addr())
	p, _ := strconv.Atoi(port)
	b := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{ServerID: 100, Flavor: mysql.MySQLFlavor, Host: host, Port: uint16(p),
		User: "reader", Password: "pw", DisableRetrySync: true, Logger: slog.New(slog.DiscardHandler)})
	defer b.Close()
	st, err := b.StartSync(mysql.Position{Name: "binlog.000001", Pos: 4})
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = st.GetEvent(ctx)
	}
	if code, msg := myErr(t, err); code != mysql.ER_SPECIFIC_ACCESS_DENIED_ERROR || !strings.Contains(msg, "REPLICATION SLAVE") {
		t.Errorf("dump: %d %s", code, msg)
	}
	report := binlog.Check(context.Background(), spec.Source{Name: "mysql", Address: s.Addr(), User: "reader", Password: "pw"})
	if err := report.Problems(); err == nil || !strings.Contains(err.Error(), "REPLICATION SLAVE") {
		t.Errorf("braid's check: %v, want the missing REPLICATION SLAVE named", err)
	}
}
