package group_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
)

// TestCursorFileBeforeMark: testdata/shop.before-mark.cursor.json was
// saved by FileStore before SourceCursor embedded a Mark (when GTIDs
// and Server were its own fields): sources with a MariaDB state, a
// MySQL set, none, and nothing read. It loads with every field where
// it was, and saved again it is the same bytes, so cursors saved by
// either build load in the other.
func TestCursorFileBeforeMark(t *testing.T) {
	c, err := (&group.FileStore{Dir: "testdata"}).Load("shop", "before-mark")
	if err != nil || c == nil {
		t.Fatalf("load: %v, %v", c, err)
	}
	want := []group.SourceCursor{
		{Name: "a", Pos: change.Position{File: "bin.000003", Pos: 4534}, LastKey: 1700000000123456,
			Mark: group.Mark{GTIDs: change.GTIDText("0-101-42,1-102-7"), Server: &change.Server{ID: 101, Host: "db1:3306", Binlog: "/var/lib/mysql/bin"}}},
		{Name: "b", Pos: change.Position{File: "binlog.000002", Pos: 9}, LastKey: 1700000000000001,
			Mark: group.Mark{GTIDs: change.GTIDText("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"),
				Server: &change.Server{ID: 7, UUID: "3e11fa47-71ca-11e1-9e33-c80aa9429562", Host: "db2:3306"}}},
		{Name: "c", Pos: change.Position{File: "bin.000001", Pos: 12}, LastKey: 1700000000000002},
		{Name: "d"},
	}
	if c.Seq != 42 || c.Taken != 45 || !reflect.DeepEqual(c.Sources, want) {
		t.Fatalf("loaded seq %d, taken %d, sources %+v; want 42, 45, %+v", c.Seq, c.Taken, c.Sources, want)
	}
	dir := t.TempDir()
	if err := (&group.FileStore{Dir: dir}).Save("shop", "before-mark", c); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(filepath.Join("testdata", "shop.before-mark.cursor.json"))
	if err != nil {
		t.Fatal(err)
	}
	saved, err := os.ReadFile(filepath.Join(dir, "shop.before-mark.cursor.json"))
	if err != nil {
		t.Fatal(err)
	}
	if string(saved) != string(old) {
		t.Fatalf("saved again:\n%s\nsaved by the old code:\n%s", saved, old)
	}
}
