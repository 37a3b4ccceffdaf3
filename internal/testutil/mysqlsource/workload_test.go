package mysqlsource_test

import (
	"strings"
	"testing"

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

// TestWorkloadReadByBraid serves a workload written as MySQL 8.0 writes
// it and runs braid's reader on it: the DDL and rows arrive with the
// workload's GTIDs and its commit times to the microsecond, and a
// transaction written later through the Feed reaches the waiting dump.
// (8.0: braid does not read 8.4 yet, issue 41 part 2.)
func TestWorkloadReadByBraid(t *testing.T) {
	s := mysqlsource.Start(t, mysqlsource.Config{Version: mysqlsource.Version80})
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

	pos, err := w.Write(insert(3))
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
	if u := s.Unknown(); len(u) != 0 {
		t.Errorf("braid sent statements the test source does not know: %q", u)
	}
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
