package group

import (
	"fmt"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/braid-cdc/braid/engine/change"
)

// TestFoldAppliesWindowAsLatest: a chunk's window starts a moment before
// its SELECT (leftRecently), so it may hold changes the SELECT saw and
// changes it missed. Folded, each key ends as the window's latest change
// of it says: a row the SELECT has and the window inserts again comes
// once, a row inserted just before the SELECT that the SELECT missed
// comes, an UPDATE or DELETE the SELECT saw changes nothing more, and a
// key moved out of the range and one moved in are where they belong.
func TestFoldAppliesWindowAsLatest(t *testing.T) {
	tbl := &change.Table{Schema: "d", Name: "t", Columns: []change.Column{{Name: "id", Type: "bigint", Key: true}, {Name: "v", Type: "varchar"}}}
	codec := change.NewCodec(tbl, &replication.TableMapEvent{ColumnType: []byte{mysql.MYSQL_TYPE_LONGLONG, mysql.MYSQL_TYPE_VARCHAR}, ColumnMeta: []uint16{0, 40}}, nil)
	row := func(id int64, v string) []change.Value { return []change.Value{id, v} }
	change1 := func(kind change.ChangeKind, rows ...[]change.Value) change.RowChange {
		return change.NewRowChange(codec, kind, 0, &change.Images{Decoded: rows}, 0)
	}
	selected := [][]change.Value{row(1, "a2"), row(2, "b"), row(5, "e"), row(8, "h"), row(9, "i")}
	p := &pendingChunk{version: tbl, key: tableKey{cols: []int{0}, ints: true}, after: []keyPart{{mag: 0}}, through: []string{"10"},
		rows: chunkRows{values: selected}}
	p.window = []change.RowChange{
		change1(change.Insert, row(3, "c")),               // missed by the SELECT
		change1(change.Update, row(1, "a"), row(1, "a2")), // seen
		change1(change.Delete, row(4, "d")),               // seen
		change1(change.Insert, row(8, "h")),               // seen
		change1(change.Insert, row(6, "f")),
		change1(change.Update, row(6, "f"), row(7, "f")),   // moved within the range
		change1(change.Update, row(9, "i"), row(19, "i")),  // moved out of it
		change1(change.Update, row(12, "l"), row(10, "l")), // moved into it
		change1(change.Update, row(2, "b"), row(2, "b2")),  // after the SELECT
	}
	got := fold(p)
	var out []string
	for k := range got.len() {
		r := got.row(k)
		out = append(out, fmt.Sprintf("%v:%v", r[0], r[1]))
	}
	if want := "[1:a2 2:b2 3:c 5:e 7:f 8:h 10:l]"; fmt.Sprint(out) != want {
		t.Errorf("folded %v, want %s", out, want)
	}
}
