package binlog_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/flat"
	"github.com/braid-cdc/braid/internal/testutil/mysqlsource"
	"github.com/braid-cdc/braid/internal/testutil/mysqlsource/mysqlbinlog"
	"github.com/braid-cdc/braid/spec"
)

// These tests read a MySQL test source (internal/testutil/mysqlsource)
// serving binlogs the MySQL 8 encoder wrote, with braid's reader as a
// destination runs it.

// serveWorkload starts a test source of version serving w's binlog and
// its tables, and returns it with the written binlog.
func serveWorkload(t *testing.T, version string, w mysqlbinlog.Workload) (*mysqlsource.Server, *mysqlbinlog.Binlog) {
	t.Helper()
	w.Server.Version = version
	s := mysqlsource.Start(t, mysqlsource.Config{Version: version})
	b, err := s.Serve(w)
	if err != nil {
		t.Fatal(err)
	}
	return s, b
}

// sourceRun is a reader running against a test source.
type sourceRun struct {
	mu     sync.Mutex
	events []*change.Event
	done   chan error
	cancel func()
}

func runSource(t *testing.T, s *mysqlsource.Server, resume *binlog.Resume) *sourceRun {
	t.Helper()
	return runSourceAt(t, s, resume, spec.Start{Kind: spec.StartEarliest})
}

// runSourceAt is runSource for a source whose spec starts at start.
func runSourceAt(t *testing.T, s *mysqlsource.Server, resume *binlog.Resume, start spec.Start) *sourceRun {
	t.Helper()
	return runSourceSpec(t, spec.Source{Name: "m8", Address: s.Addr(), User: "root", Start: start}, resume)
}

// runSourceSpec runs a reader of src.
func runSourceSpec(t *testing.T, src spec.Source, resume *binlog.Resume) *sourceRun {
	t.Helper()
	return runSourceConfig(t, binlog.Config{Source: src, Resume: resume})
}

// runSourceConfig runs a reader configured as cfg, of destination "test"
// with 50 ms heartbeats.
func runSourceConfig(t *testing.T, cfg binlog.Config) *sourceRun {
	t.Helper()
	cfg.Destination, cfg.Heartbeat = "test", 50*time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	p, err := binlog.NewReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &sourceRun{done: make(chan error, 1), cancel: cancel}
	go func() {
		r.done <- p.Run(ctx, func(ev *change.Event) error {
			if ev.Type != change.EventHeartbeat {
				r.mu.Lock()
				r.events = append(r.events, ev)
				r.mu.Unlock()
			}
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

// until waits for an event at or past end (a commit, DDL or progress
// ending there) and returns the events so far.
func (r *sourceRun) until(t *testing.T, file string, end uint32) []*change.Event {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		evs := append([]*change.Event(nil), r.events...)
		r.mu.Unlock()
		for _, ev := range evs {
			at := ev.Pos
			if ev.Type == change.EventDDL || ev.Type == change.EventProgress {
				at = ev.EndPos
			}
			if ev.Type != change.EventRows && ev.Type != change.EventBegin && at.File == file && at.Pos >= end {
				return evs
			}
		}
		select {
		case err := <-r.done:
			r.done <- err
			t.Fatalf("the reader stopped before %s:%d: %v", file, end, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("timed out waiting for %s:%d", file, end)
	return nil
}

// stopped waits for the reader to stop and returns its error.
func (r *sourceRun) stopped(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("the reader did not stop")
		return nil
	}
}

// shopWorkload is a mixed workload on a table of MySQL 8 types: inserts,
// updates (one a partial JSON update), deletes and an ALTER; compress
// picks the transactions written as TRANSACTION_PAYLOADs, tag the tagged
// ones.
func shopWorkload(compress, tag func(i int) bool) mysqlbinlog.Workload {
	orders := &mysqlbinlog.TableDef{Schema: "shop", Name: "orders", PrimaryKey: []string{"id"}, Columns: []mysqlbinlog.ColumnDef{
		{Name: "id", Type: "int", NotNull: true},
		{Name: "name", Type: "varchar(32)"},
		{Name: "price", Type: "decimal(10,2)"},
		{Name: "at", Type: "datetime(6)"},
		{Name: "doc", Type: "json"},
	}}
	altered := *orders
	altered.Columns = append(append([]mysqlbinlog.ColumnDef(nil), orders.Columns...), mysqlbinlog.ColumnDef{Name: "note", Type: "varchar(16)"})
	row := func(id int, name string, doc string) []any {
		return []any{id, name, fmt.Sprintf("%d.50", id), "2026-01-02 03:04:05.123456", doc}
	}
	txns := []mysqlbinlog.Txn{
		{DDL: &mysqlbinlog.DDL{Schema: "shop", CreatesDatabase: true, SQL: "CREATE DATABASE shop"}},
		{DDL: &mysqlbinlog.DDL{Schema: "shop", Table: orders}},
		{Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Insert, Table: "shop.orders", Rows: []mysqlbinlog.Row{
			{After: row(1, "apple", `{"n": 1, "tags": ["a", "b"], "price": 1.5}`)},
			{After: row(2, "pear", `{"n": 2}`)},
		}}}},
		{Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Update, Table: "shop.orders", Rows: []mysqlbinlog.Row{
			{Before: row(1, "apple", `{"n": 1, "tags": ["a", "b"], "price": 1.5}`), After: row(1, "apple pie", `{"n": 1, "tags": ["a", "b"], "price": 2.25}`)},
		}}}},
		{Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.PartialUpdate, Table: "shop.orders", Rows: []mysqlbinlog.Row{
			{Before: row(2, "pear", `{"n": 2}`), After: []any{2, "pear", "2.50", "2026-01-02 03:04:05.123456",
				mysqlbinlog.JSONDiffs{{Op: mysqlbinlog.JSONReplace, Path: "$.n", Value: "3"}, {Op: mysqlbinlog.JSONInsert, Path: "$.tags", Value: `["x"]`}}}},
		}}}},
		{Statements: []mysqlbinlog.Statement{
			{Kind: mysqlbinlog.Insert, Table: "shop.orders", Rows: []mysqlbinlog.Row{{After: row(3, "plum", `[1, 2.5, "three", null, true]`)}}},
			{Kind: mysqlbinlog.Delete, Table: "shop.orders", Rows: []mysqlbinlog.Row{{Before: row(1, "apple pie", `{"n": 1, "tags": ["a", "b"], "price": 2.25}`)}}},
		}},
		{DDL: &mysqlbinlog.DDL{Schema: "shop", SQL: "ALTER TABLE orders ADD COLUMN note varchar(16)", Table: &altered}},
		{Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Insert, Table: "shop.orders", Rows: []mysqlbinlog.Row{
			{After: append(row(4, "fig", `{}`), "ripe")},
		}}}},
	}
	for i := range txns {
		txns[i].Compressed = compress(i) && txns[i].DDL == nil
		if tag(i) {
			txns[i].Tag = "shop"
		}
	}
	return mysqlbinlog.Workload{Txns: txns}
}

// TestMySQLSourceCompressedSameAsPlain reads the same workload written
// with half its transactions compressed and with none, on MySQL 8.0, 8.4
// and 9.x: the same row changes, GTIDs (tagged and untagged in one stream
// from 8.4) and commit times.
func TestMySQLSourceCompressedSameAsPlain(t *testing.T) {
	never := func(int) bool { return false }
	odd := func(i int) bool { return i%2 == 1 }
	for _, version := range []string{mysqlsource.Version80, mysqlsource.Version84, mysqlsource.Version9} {
		t.Run(version, func(t *testing.T) {
			tag := odd
			if version == mysqlsource.Version80 {
				tag = never // tagged GTIDs came with 8.3
			}
			var texts, flats []string
			for _, compress := range []func(int) bool{odd, never} {
				s, b := serveWorkload(t, version, shopWorkload(compress, tag))
				last := b.Txns[len(b.Txns)-1]
				evs := runSource(t, s, nil).until(t, last.File, last.End)
				texts = append(texts, render(evs, false))
				flats = append(flats, flatMessages(t, evs))
			}
			if texts[0] != texts[1] {
				t.Fatalf("compressed and plain read differently:\n%s\n---\n%s", texts[0], texts[1])
			}
			if flats[0] != flats[1] {
				t.Fatalf("compressed and plain make different flat messages:\n%s\n---\n%s", flats[0], flats[1])
			}
			wants := []string{
				`UPDATE shop.orders id=2/2 name=pear/pear price=2.50/2.50 at=2026-01-02 03:04:05.123456/2026-01-02 03:04:05.123456 doc={"n": 2}/{"n": 3, "tags": ["x"]}`,
				`INSERT shop.orders id=-/3 name=-/plum price=-/3.50 at=-/2026-01-02 03:04:05.123456 doc=-/[1, 2.5, "three", null, true]`,
				`INSERT shop.orders id=-/4 name=-/fig price=-/4.50 at=-/2026-01-02 03:04:05.123456 doc=-/{} note=-/ripe`,
			}
			if version != mysqlsource.Version80 {
				wants = append(wants, ":shop:") // a tagged GTID
			}
			for _, want := range wants {
				if !strings.Contains(texts[0], want) {
					t.Errorf("read no %s in:\n%s", want, texts[0])
				}
			}
		})
	}
}

// TestMySQLSourceCompressedFiltered reads compressed transactions that
// change a table the destination reads and one it does not (braid parses
// a payload's events itself, with its row filter), and one that changes
// only the filtered table: exactly the selected table's rows come out,
// and the same events as from the same transactions written plain.
func TestMySQLSourceCompressedFiltered(t *testing.T) {
	orders := &mysqlbinlog.TableDef{Schema: "shop", Name: "orders", PrimaryKey: []string{"id"}, Columns: []mysqlbinlog.ColumnDef{
		{Name: "id", Type: "int", NotNull: true},
		{Name: "doc", Type: "json"},
	}}
	audit := &mysqlbinlog.TableDef{Schema: "shop", Name: "audit", PrimaryKey: []string{"id"}, Columns: []mysqlbinlog.ColumnDef{
		{Name: "id", Type: "int", NotNull: true},
		{Name: "what", Type: "varchar(16)"},
		{Name: "detail", Type: "json"},
	}}
	insert := func(table string, rows ...[]any) mysqlbinlog.Statement {
		st := mysqlbinlog.Statement{Kind: mysqlbinlog.Insert, Table: table}
		for _, r := range rows {
			st.Rows = append(st.Rows, mysqlbinlog.Row{After: r})
		}
		return st
	}
	workload := func(compressed bool) mysqlbinlog.Workload {
		return mysqlbinlog.Workload{Txns: []mysqlbinlog.Txn{
			{DDL: &mysqlbinlog.DDL{Schema: "shop", CreatesDatabase: true, SQL: "CREATE DATABASE shop"}},
			{DDL: &mysqlbinlog.DDL{Schema: "shop", Table: orders}},
			{DDL: &mysqlbinlog.DDL{Schema: "shop", Table: audit}},
			{Compressed: compressed, Statements: []mysqlbinlog.Statement{
				insert("shop.audit", []any{1, "before", `{"n": 1}`}),
				insert("shop.orders", []any{1, `{"sku": "a"}`}, []any{2, `{"sku": "b"}`}),
				insert("shop.audit", []any{2, "after", `{"n": 2}`}),
			}},
			{Compressed: compressed, Statements: []mysqlbinlog.Statement{
				insert("shop.audit", []any{3, "alone", `[1, 2]`}),
			}},
			{Compressed: compressed, Statements: []mysqlbinlog.Statement{
				{Kind: mysqlbinlog.Update, Table: "shop.orders", Rows: []mysqlbinlog.Row{{Before: []any{2, `{"sku": "b"}`}, After: []any{2, `{"sku": "b", "qty": 3}`}}}},
				{Kind: mysqlbinlog.Delete, Table: "shop.audit", Rows: []mysqlbinlog.Row{{Before: []any{1, "before", `{"n": 1}`}}}},
			}},
		}}
	}
	filter, err := spec.CompileTableFilter([]string{`shop\.orders`})
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, compressed := range []bool{true, false} {
		s, b := serveWorkload(t, mysqlsource.Version84, workload(compressed))
		last := b.Txns[len(b.Txns)-1]
		r := runSourceConfig(t, binlog.Config{Tables: filter,
			Source: spec.Source{Name: "m8", Address: s.Addr(), User: "root", Start: spec.Start{Kind: spec.StartEarliest}}})
		evs := r.until(t, last.File, last.End)
		checkText(t, fmt.Sprintf("rows (compressed %v)", compressed), rowLines(evs), ""+
			`INSERT shop.orders id=-/1 doc=-/{"sku": "a"}`+"\n"+
			`INSERT shop.orders id=-/2 doc=-/{"sku": "b"}`+"\n"+
			`UPDATE shop.orders id=2/2 doc={"sku": "b"}/{"qty": 3, "sku": "b"}`) // MySQL orders JSON keys by length
		texts = append(texts, render(evs, false))
	}
	checkText(t, "compressed, against plain", texts[0], texts[1])
}

// TestMySQLSourceResumeAfterCompressed stops a reader after a compressed
// transaction and starts another at the cursor it left: it goes on with
// the next transaction, not inside the payload, and repeats nothing.
func TestMySQLSourceResumeAfterCompressed(t *testing.T) {
	always := func(int) bool { return true }
	never := func(int) bool { return false }
	s, b := serveWorkload(t, mysqlsource.Version84, shopWorkload(always, never))
	compressed := b.Txns[3] // the first UPDATE
	r := runSource(t, s, nil)
	evs := r.until(t, compressed.File, compressed.End)
	r.cancel()
	r.stopped(t)
	var cursor *binlog.Resume
	for i, ev := range evs {
		if ev.Type == change.EventCommit && ev.GTID == compressed.GTID {
			cursor = &binlog.Resume{Pos: ev.Pos, Schema: lastSchema(evs[:i])} // as a cursor saved there holds
		}
	}
	if cursor == nil || cursor.Pos.Pos != compressed.End {
		t.Fatalf("no commit of %s at its payload's end %d: %s", compressed.GTID, compressed.End, render(evs, true))
	}
	last := b.Txns[len(b.Txns)-1]
	again := runSource(t, s, cursor).until(t, last.File, last.End)
	for _, ev := range again {
		if ev.Type == change.EventBegin {
			if ev.GTID != b.Txns[4].GTID {
				t.Errorf("resumed with %s, want the transaction after the compressed one, %s", ev.GTID, b.Txns[4].GTID)
			}
			break
		}
	}
	for _, ev := range again {
		if ev.GTID == compressed.GTID || (ev.Type != change.EventProgress && ev.Pos.Compare(cursor.Pos) < 0) {
			t.Errorf("after resuming at %s: %s %s at %s again", cursor.Pos, ev.Type, ev.GTID, ev.Pos)
		}
	}
}

// lastSchema is the schema history the last DDL left, for a cursor.
func lastSchema(evs []*change.Event) *change.SchemaSnapshot {
	var s *change.SchemaSnapshot
	for _, ev := range evs {
		if ev.Schema != nil {
			s = ev.Schema
		}
	}
	return s
}

// TestMySQLSourceUnknownEventStops serves a binlog with an event of a
// type braid does not know after a transaction: the source stops with
// one line naming its type, its position and what to do.
func TestMySQLSourceUnknownEventStops(t *testing.T) {
	s, b := serveWorkload(t, mysqlsource.Version9, shopWorkload(func(int) bool { return false }, func(int) bool { return false }))
	last := b.Txns[len(b.Txns)-1]
	w := &binlogWriter{pos: last.End, serverID: 1, ts: uint32(last.CommitTime.Unix())}
	if err := s.Append(w.event(99, []byte{1, 2, 3, 4, 5, 6, 7, 8})); err != nil {
		t.Fatal(err)
	}
	err := runSource(t, s, nil).stopped(t)
	if !errors.Is(err, binlog.ErrBadEvent) {
		t.Fatalf("err %v, want ErrBadEvent", err)
	}
	oneLineWith(t, err, "source m8", fmt.Sprintf("%s:%d", last.File, last.End), "event type 99", "braid does not read this event type")
}

// TestMySQLSourceInvisibleGenerated reads rows of a table with INVISIBLE
// and generated columns, its table maps without column names
// (binlog_row_metadata=MINIMAL): braid labels them from the CREATE TABLE
// MySQL 8.4 logs and prints (/*!80023 INVISIBLE */, GENERATED ALWAYS AS),
// every column under its name, in binlog order.
func TestMySQLSourceInvisibleGenerated(t *testing.T) {
	items := &mysqlbinlog.TableDef{Schema: "shop", Name: "items", PrimaryKey: []string{"id"}, Columns: []mysqlbinlog.ColumnDef{
		{Name: "id", Type: "int", NotNull: true},
		{Name: "secret", Type: "varchar(8)", Invisible: true},
		{Name: "qty", Type: "int"},
		{Name: "double_qty", Type: "int", Generated: "(`qty` * 2)", Stored: true},
		{Name: "half_qty", Type: "int", Generated: "(`qty` / 2)"},
	}}
	s, b := serveWorkload(t, mysqlsource.Version84, mysqlbinlog.Workload{Txns: []mysqlbinlog.Txn{
		{DDL: &mysqlbinlog.DDL{Schema: "shop", CreatesDatabase: true, SQL: "CREATE DATABASE shop"}},
		{DDL: &mysqlbinlog.DDL{Schema: "shop", Table: items}},
		{Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Insert, Table: "shop.items", Rows: []mysqlbinlog.Row{
			{After: []any{1, "psst", 10, 20, 5}},
		}}}},
	}})
	last := b.Txns[len(b.Txns)-1]
	evs := runSource(t, s, nil).until(t, last.File, last.End)
	checkText(t, "rows", rowLines(evs), "INSERT shop.items id=-/1 secret=-/psst qty=-/10 double_qty=-/20 half_qty=-/5")
}

// TestMySQLSourceAllTypes reads rows of a table with a column of every
// type MySQL 8.4 has, and VECTOR, from MySQL 9.x, compressed and plain:
// the same text either way, JSON and VECTOR as MySQL prints them.
func TestMySQLSourceAllTypes(t *testing.T) {
	def, rows := mysqlbinlog.AllTypes("shop", "all_types", true)
	var texts []string
	for _, compressed := range []bool{true, false} {
		s, b := serveWorkload(t, mysqlsource.Version9, mysqlbinlog.Workload{Txns: []mysqlbinlog.Txn{
			{DDL: &mysqlbinlog.DDL{Schema: "shop", CreatesDatabase: true, SQL: "CREATE DATABASE shop"}},
			{DDL: &mysqlbinlog.DDL{Schema: "shop", Table: def}},
			{Compressed: compressed, Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Insert, Table: "shop.all_types", Rows: rows}}},
		}})
		last := b.Txns[len(b.Txns)-1]
		texts = append(texts, rowLines(runSource(t, s, nil).until(t, last.File, last.End)))
	}
	if texts[0] != texts[1] {
		t.Fatalf("compressed and plain read differently:\n%s\n---\n%s", texts[0], texts[1])
	}
	first := strings.Split(texts[0], "\n")[0]
	for _, want := range []string{
		` js=-/{"": "empty key", "a": [1, 2.5, "x", null, true, false], "b": {"c": -70000, "d": 18446744073709551615}} `,
		` jss=-/"a string" `,
		` vec=-/[1.50000e+00,-2.00000e+00,3.40282e+38]`,
		` inv=-/42 gen=-/`,
		` tx=-/línea 1\nlínea 2`,
	} {
		if !strings.Contains(first, want) {
			t.Errorf("the first row has no %s:\n%s", want, first)
		}
	}
}

// flatMessages are the canal flat messages of events, one a line, ts
// fixed, without their binlog positions (a compressed binlog's differ:
// its rows are at their payload's start).
func flatMessages(t *testing.T, evs []*change.Event) string {
	t.Helper()
	w := &flat.Writer{Now: func() time.Time { return time.UnixMilli(1_700_000_000_000) }}
	var b strings.Builder
	for _, ev := range evs {
		if err := w.Write(ev, func(line []byte) error { b.Write(line); b.WriteByte('\n'); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	return binlogPosition.ReplaceAllString(b.String(), "")
}

var binlogPosition = regexp.MustCompile(`"position":"[^"]*",`)
