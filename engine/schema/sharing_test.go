package schema_test

import (
	"testing"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/schema"
)

// These properties are about Go values, not about what the tracker
// answers, so they stay out of the scripts: a version's *Table is never
// modified after it is recorded, and nothing a caller hands in or gets
// out (a live table, a snapshot) aliases the tracker's state.

func schPos(n uint32) change.Position { return change.Position{File: "binlog.000001", Pos: n} }

// TestSchemaVersionsShareNothing: an ALTER makes a new version; the old one
// keeps its own columns, so rows before the ALTER still map through them.
func TestSchemaVersionsShareNothing(t *testing.T) {
	s := schema.NewTracker()
	if err := s.LoadCreate(schPos(100), "db", "CREATE TABLE t (id int PRIMARY KEY, a int)"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplyDDL(schPos(200), "db", "ALTER TABLE t ADD b int", 0); err != nil {
		t.Fatal(err)
	}
	old, _ := s.TableAt("db", "t", schPos(100))
	cur, _ := s.TableAt("db", "t", schPos(200))
	if &old.Columns[0] == &cur.Columns[0] {
		t.Error("versions share their column slice")
	}
	if len(old.Columns) != 2 || len(cur.Columns) != 3 {
		t.Errorf("versions: %d and %d columns, want 2 and 3", len(old.Columns), len(cur.Columns))
	}
}

// TestSchemaMarkUnknownCopies: the live table the caller passes is copied,
// so the caller may reuse it.
func TestSchemaMarkUnknownCopies(t *testing.T) {
	s := schema.NewTracker()
	live := &change.Table{Schema: "db", Name: "t", Columns: []change.Column{
		{Name: "id", Type: "int", RawType: "int(11)", Key: true},
		{Name: "c", Type: "varchar", RawType: "varchar(5)", Nullable: true},
	}}
	s.MarkUnknownUntil("db", "t", schPos(300), live)
	live.Columns[1].Name = "changed"
	snap := s.Snapshot()
	if got := snap.Tables[0].Pending.After.Columns[1].Name; got != "c" {
		t.Errorf("pending table's column is %q after the caller changed its own", got)
	}
	if _, err := s.ApplyDDL(schPos(300), "db", "ALTER TABLE t ADD COLUMN x int", 0); err != nil {
		t.Fatal(err)
	}
	if tbl, _ := s.Table("db", "t"); tbl.Columns[1].Name != "c" {
		t.Errorf("flipped table's column is %q after the caller changed its own", tbl.Columns[1].Name)
	}
}

// TestSchemaSnapshotSharesNothing: a snapshot belongs to its caller (it is
// saved while the tracker goes on), and Restore copies what it is given.
func TestSchemaSnapshotSharesNothing(t *testing.T) {
	s := schema.NewTracker()
	if err := s.LoadCreate(schPos(100), "db", "CREATE TABLE gone (x int, UNIQUE KEY (x))"); err != nil {
		t.Fatal(err)
	}
	s.MarkUnknownUntil("db", "later", schPos(900), &change.Table{Schema: "db", Name: "later", Columns: []change.Column{{Name: "k", Type: "int", RawType: "int(11)", Key: true}}})
	snap := s.Snapshot()
	snap.Tables[0].Versions[0].Table.Columns[0].Name = "mutated"
	snap.Tables[0].Versions[0].Indexes[0].Columns[0] = "mutated"
	snap.Tables[1].Pending.After.Columns[0].Name = "mutated"
	again := s.Snapshot()
	if tbl, _ := s.TableAt("db", "gone", schPos(100)); tbl.Columns[0].Name != "x" {
		t.Error("Snapshot shares columns with the tracker")
	}
	if got := again.Tables[0].Versions[0].Indexes[0].Columns[0]; got != "x" {
		t.Errorf("Snapshot shares indexes with the tracker: %q", got)
	}
	if got := again.Tables[1].Pending.After.Columns[0].Name; got != "k" {
		t.Errorf("Snapshot shares the pending table with the tracker: %q", got)
	}

	r, err := schema.Restore(again)
	if err != nil {
		t.Fatal(err)
	}
	again.Tables[0].Versions[0].Table.Columns[0].Name = "mutated"
	again.Tables[0].Versions[0].Indexes[0].Columns[0] = "mutated"
	again.Tables[1].Pending.After.Columns[0].Name = "mutated"
	back := r.Snapshot()
	if back.Tables[0].Versions[0].Table.Columns[0].Name != "x" || back.Tables[0].Versions[0].Indexes[0].Columns[0] != "x" || back.Tables[1].Pending.After.Columns[0].Name != "k" {
		t.Errorf("Restore shares the snapshot it was given: %+v", back)
	}
}
