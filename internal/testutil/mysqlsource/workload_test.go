package mysqlsource_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/internal/testutil/mysqlsource"
	"github.com/braid-cdc/braid/internal/testutil/mysqlsource/mysqlbinlog"
	"github.com/braid-cdc/braid/spec"
)

func countRows(evs []*change.Event) int {
	n := 0
	for _, e := range evs {
		if e.Type == change.EventRows {
			n += len(e.Rows)
		}
	}
	return n
}

// TestWorkloadReadByBraid serves a workload written as MySQL 8.4 writes
// it and runs braid's reader on it: the DDL and rows arrive with the
// workload's GTIDs and its commit times to the microsecond, and a
// transaction written later through the Feed reaches the waiting dump.
func TestWorkloadReadByBraid(t *testing.T) {
	s := mysqlsource.Start(t, mysqlsource.Config{Version: mysqlsource.Version84})
	items := &mysqlbinlog.TableDef{Schema: "shop", Name: "items", PrimaryKey: []string{"id"}, Columns: []mysqlbinlog.ColumnDef{
		{Name: "id", Type: "int", NotNull: true},
		{Name: "name", Type: "varchar(20)"},
		{Name: "doc", Type: "json"},
		{Name: "secret", Type: "int", Invisible: true},
	}}
	w, err := mysqlbinlog.NewWriter(mysqlbinlog.Server{Version: s.Version(), UUID: mysqlbinlog.MustUUID(s.ServerUUID())})
	if err != nil {
		t.Fatal(err)
	}
	feed := s.Feed(w)
	insert := func(id int) mysqlbinlog.Txn {
		return mysqlbinlog.Txn{Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Insert, Table: "shop.items",
			Rows: []mysqlbinlog.Row{{After: []any{id, "n", `{"a":1}`, id}}}}}}
	}
	if err := w.WriteAll([]mysqlbinlog.Txn{
		{DDL: &mysqlbinlog.DDL{Schema: "shop", SQL: "CREATE DATABASE shop", CreatesDatabase: true}},
		{DDL: &mysqlbinlog.DDL{Schema: "shop", Table: items}},
		insert(1), insert(2),
		{Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Update, Table: "shop.items", Rows: []mysqlbinlog.Row{
			{Before: []any{1, "n", `{"a":1}`, 1}, After: []any{1, "renamed", `{"a":2}`, 1}}}}}},
		{Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Delete, Table: "shop.items", Rows: []mysqlbinlog.Row{
			{Before: []any{2, "n", `{"a":1}`, 2}}}}}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := feed.Sync(); err != nil {
		t.Fatal(err)
	}
	r := runReader(t, s, spec.Start{Kind: spec.StartEarliest})
	evs := r.wait(t, "four row changes", func(evs []*change.Event) bool { return countRows(evs) == 4 })
	b, err := w.Binlog()
	if err != nil {
		t.Fatal(err)
	}
	commits := map[string]int64{}
	for _, tp := range b.Txns {
		commits[tp.GTID] = tp.CommitTime.UnixMicro()
	}
	for _, e := range evs {
		if e.Type != change.EventRows {
			continue
		}
		want, ok := commits[e.GTID]
		if !ok {
			t.Fatalf("rows with GTID %q, which the workload did not write (%s)", e.GTID, summary(evs))
		}
		if e.CommitTime.UnixMicro() != want {
			t.Errorf("rows of %s committed at %d µs, the workload says %d", e.GTID, e.CommitTime.UnixMicro(), want)
		}
	}

	later := insert(3)
	later.Tag = "later" // 8.4 writes tagged GTIDs
	pos, err := w.Write(later)
	if err != nil {
		t.Fatal(err)
	}
	if err := feed.Sync(); err != nil {
		t.Fatal(err)
	}
	r.wait(t, "the row written later", func(evs []*change.Event) bool {
		for _, e := range evs {
			if e.Type == change.EventRows && e.GTID == pos.GTID {
				return true
			}
		}
		return false
	})
}

// TestServeWorkload: Serve puts a whole workload in place: its files
// (a rotation included) and its tables as the last DDL left them.
func TestServeWorkload(t *testing.T) {
	s := mysqlsource.Start(t, mysqlsource.Config{Version: mysqlsource.Version84})
	def, rows := mysqlbinlog.AllTypes("s", "all", false)
	altered := *def
	altered.Columns = append(append([]mysqlbinlog.ColumnDef(nil), def.Columns...), mysqlbinlog.ColumnDef{Name: "added", Type: "varchar(8)"})
	b, err := s.Serve(mysqlbinlog.Workload{Server: mysqlbinlog.Server{Version: s.Version()}, Txns: []mysqlbinlog.Txn{
		{DDL: &mysqlbinlog.DDL{Schema: "s", Table: def}},
		{Compressed: true, RotateAfter: true, Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Insert, Table: "s.all", Rows: rows}}},
		{DDL: &mysqlbinlog.DDL{Schema: "s", SQL: "ALTER TABLE `all` ADD COLUMN added varchar(8)", Table: &altered}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if files := s.Files(); len(files) != 2 || files[1] != b.Files[1].Name {
		t.Fatalf("server files %v, workload files %d", files, len(b.Files))
	}
	if file, pos := s.End(); file != b.Files[1].Name || pos != uint32(len(b.Files[1].Data)) {
		t.Fatalf("end %s:%d, want %s:%d", file, pos, b.Files[1].Name, len(b.Files[1].Data))
	}
	var create string
	for _, sc := range s.Catalog().Schemas {
		for _, tb := range sc.Tables {
			if sc.Name == "s" && tb.Name == "all" {
				create = tb.Create
				if len(tb.Columns) != len(altered.Columns) {
					t.Errorf("catalog lists %d columns, want %d", len(tb.Columns), len(altered.Columns))
				}
			}
		}
	}
	if create != b.Tables[0].Create || !strings.Contains(create, "`added` varchar(8) DEFAULT NULL") {
		t.Fatalf("catalog's SHOW CREATE TABLE:\n%s", create)
	}
}

// renderRows prints what braid's reader made of the row changes: per
// change its GTID, commit time, kind, table, and each column's before and
// after text.
func renderRows(evs []*change.Event) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Type != change.EventRows {
			continue
		}
		for i := range e.Rows {
			rc := &e.Rows[i]
			fmt.Fprintf(&b, "%s %d %s %s", e.GTID, e.CommitTime.UnixMicro(), rc.Kind, rc.Table.FullName())
			for c, col := range rc.Table.Columns {
				text := func(after bool) string {
					if after && !rc.HasAfter() || !after && !rc.HasBefore() {
						return "-"
					}
					v, null := rc.AppendText(nil, after, c)
					if null {
						return "NULL"
					}
					return string(v)
				}
				fmt.Fprintf(&b, " %s=%s/%s", col.Name, text(false), text(true))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// TestCompressedWorkloadReadsAsPlain is issue 41's first check through
// braid's reader: a mixed workload (every column type, JSON, a partial
// JSON update, an ALTER, inserts, updates, deletes, a rotation) with half
// its transactions compressed reads as the same row changes, GTIDs and
// commit times as the workload written plain.
func TestCompressedWorkloadReadsAsPlain(t *testing.T) {
	for _, version := range []string{mysqlsource.Version80, mysqlsource.Version84, mysqlsource.Version9} {
		t.Run(version, func(t *testing.T) {
			read := func(compress bool) string {
				s := mysqlsource.Start(t, mysqlsource.Config{Version: version})
				txns := mixedWorkload(version != mysqlsource.Version80)
				for i := range txns {
					txns[i].Compressed = compress && i%2 == 1
				}
				if _, err := s.Serve(mysqlbinlog.Workload{Server: mysqlbinlog.Server{Version: version, UUID: mysqlbinlog.MustUUID(s.ServerUUID()),
					RowMetadata: mysqlbinlog.MetadataFull}, Txns: txns}); err != nil {
					t.Fatal(err)
				}
				_, err := binlog.CheckSource(context.Background(), spec.Source{Name: "mysql", Address: s.Addr(), User: "root"})
				if err != nil && strings.Contains(err.Error(), "MASTER STATUS") {
					t.Skipf("braid still asks %s for SHOW MASTER STATUS (issue 41, part 2): %v", version, err)
				}
				if err != nil {
					t.Fatal(err)
				}
				want := 0
				for _, txn := range txns {
					for _, st := range txn.Statements {
						want += len(st.Rows)
					}
				}
				r := runReader(t, s, spec.Start{Kind: spec.StartEarliest})
				return renderRows(r.wait(t, fmt.Sprintf("%d row changes", want), func(evs []*change.Event) bool { return countRows(evs) == want }))
			}
			plain, compressed := read(false), read(true)
			if plain != compressed {
				t.Fatalf("compressed:\n%s\nplain:\n%s", compressed, plain)
			}
			for _, want := range []string{"INSERT s.all", "UPDATE s.all", "DELETE s.all", `"color": "blue"`} {
				if !strings.Contains(plain, want) {
					t.Fatalf("the rows lack %q:\n%s", want, plain)
				}
			}
		})
	}
}

// mixedWorkload is AllTypes' table, its rows inserted one transaction
// each, a partial JSON update, an ALTER, an update and a delete of rows
// written after it, a rotation between; tagged GTIDs for some when tags.
func mixedWorkload(tags bool) []mysqlbinlog.Txn {
	def, rows := mysqlbinlog.AllTypes("s", "all", false)
	tag := ""
	if tags {
		tag = "batch"
	}
	txns := []mysqlbinlog.Txn{{DDL: &mysqlbinlog.DDL{Schema: "s", Table: def}}}
	for i, r := range rows {
		txns = append(txns, mysqlbinlog.Txn{Tag: tag, RotateAfter: i == 1,
			Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Insert, Table: "s.all", Rows: []mysqlbinlog.Row{r}}}})
	}
	js := -1
	for i, c := range def.Columns {
		if c.Name == "js" {
			js = i
		}
	}
	after := append([]any(nil), rows[0].After...)
	after[js] = mysqlbinlog.JSONDiffs{{Op: mysqlbinlog.JSONInsert, Path: "$.color", Value: `"blue"`}, {Op: mysqlbinlog.JSONRemove, Path: "$.b"}}
	txns = append(txns, mysqlbinlog.Txn{Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.PartialUpdate, Table: "s.all",
		Rows: []mysqlbinlog.Row{{Before: rows[0].After, After: after}}}}})
	altered := *def
	altered.Columns = append(append([]mysqlbinlog.ColumnDef(nil), def.Columns...), mysqlbinlog.ColumnDef{Name: "added", Type: "varchar(8)"})
	txns = append(txns, mysqlbinlog.Txn{DDL: &mysqlbinlog.DDL{Schema: "s", SQL: "ALTER TABLE `all` ADD COLUMN added varchar(8)", Table: &altered}})
	row := append(append([]any(nil), rows[1].After...), "x")
	row[0] = 10
	updated := append([]any(nil), row...)
	updated[len(updated)-1] = "y"
	txns = append(txns,
		mysqlbinlog.Txn{Tag: tag, Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Insert, Table: "s.all", Rows: []mysqlbinlog.Row{{After: row}}}}},
		mysqlbinlog.Txn{Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Update, Table: "s.all", Rows: []mysqlbinlog.Row{{Before: row, After: updated}}}}},
		mysqlbinlog.Txn{Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Delete, Table: "s.all", Rows: []mysqlbinlog.Row{{Before: updated}}}}},
	)
	return txns
}

// TestWorkloadSnapshot: braid's snapshot connection reads a served
// table's rows as the workload left them.
func TestWorkloadSnapshot(t *testing.T) {
	s := mysqlsource.Start(t, mysqlsource.Config{Version: mysqlsource.Version84})
	def := &mysqlbinlog.TableDef{Schema: "shop", Name: "t", PrimaryKey: []string{"id"}, Columns: []mysqlbinlog.ColumnDef{
		{Name: "id", Type: "int", NotNull: true}, {Name: "note", Type: "varchar(20)"}, {Name: "doc", Type: "json"}}}
	rows := func(kind mysqlbinlog.StatementKind, rs ...mysqlbinlog.Row) mysqlbinlog.Txn {
		return mysqlbinlog.Txn{Statements: []mysqlbinlog.Statement{{Kind: kind, Table: "shop.t", Rows: rs}}}
	}
	if _, err := s.Serve(mysqlbinlog.Workload{Server: mysqlbinlog.Server{Version: s.Version()}, Txns: []mysqlbinlog.Txn{
		{DDL: &mysqlbinlog.DDL{Schema: "shop", Table: def}},
		rows(mysqlbinlog.Insert, mysqlbinlog.Row{After: []any{1, "a", `{"k": [1, 2]}`}}, mysqlbinlog.Row{After: []any{2, "b", nil}},
			mysqlbinlog.Row{After: []any{3, "c", `"s"`}}),
		rows(mysqlbinlog.Update, mysqlbinlog.Row{Before: []any{3, "c", `"s"`}, After: []any{3, "c2", `"s"`}}),
		rows(mysqlbinlog.Delete, mysqlbinlog.Row{Before: []any{2, "b", nil}}),
	}}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := binlog.OpenSnapshot(ctx, spec.Source{Name: "mysql", Address: s.Addr(), User: "root"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tbl := &change.Table{Schema: "shop", Name: "t", Columns: []change.Column{{Name: "id", Type: "int"}, {Name: "note", Type: "varchar"}, {Name: "doc", Type: "json"}}}
	got, err := conn.Chunk(ctx, tbl, []int{0}, nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for k := range got.Len() {
		r := got.Row(k)
		out = append(out, fmt.Sprintf("%v|%v|%v", r[0], r[1], r[2]))
	}
	if want := `1|a|{"k": [1, 2]} 3|c2|"s"`; strings.Join(out, " ") != want {
		t.Fatalf("snapshot rows %q, want %q", strings.Join(out, " "), want)
	}
}
