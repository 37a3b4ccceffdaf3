package flat_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/flat"
)

// TestSplitKeyChanges: with SplitKeyChanges, an UPDATE that moves its row
// to another primary key is written as the old key's DELETE and the new
// key's INSERT, one row a message; an UPDATE that keeps its key stays an
// UPDATE. Without it, both are UPDATEs.
func TestSplitKeyChanges(t *testing.T) {
	tbl := &change.Table{Schema: "shop_0", Name: "orders", LogicalSchema: "shop", LogicalName: "orders", Columns: []change.Column{
		{Name: "id", Type: "bigint", RawType: "bigint(20)", Key: true},
		{Name: "note", Type: "varchar", RawType: "varchar(20)", Nullable: true},
	}}
	tm := &replication.TableMapEvent{ColumnType: []byte{mysql.MYSQL_TYPE_LONGLONG, mysql.MYSQL_TYPE_VARCHAR}, ColumnMeta: []uint16{0, 80}}
	codec := change.NewCodec(tbl, tm, nil)
	im := &change.Images{Decoded: [][]any{
		{int64(7), "a"}, {int64(8), "a"}, // id 7 becomes 8
		{int64(9), "b"}, {int64(9), "c"}, // id 9's note changes
	}}
	at := time.Unix(1_700_000_000, 0)
	evs := []*change.Event{
		{Type: change.EventBegin, Seq: 5, Source: "a", CommitTime: at},
		{Type: change.EventRows, Seq: 5, Source: "a", CommitTime: at, Rows: []change.RowChange{
			change.NewRowChange(codec, change.Update, 0, im, 0), change.NewRowChange(codec, change.Update, 1, im, 2)}},
		{Type: change.EventCommit, Seq: 5, Source: "a", CommitTime: at},
	}
	type msg struct {
		Type string              `json:"type"`
		Data []map[string]string `json:"data"`
	}
	write := func(split bool) []msg {
		w := &flat.Writer{MaxRows: 1, SplitKeyChanges: split}
		var out []msg
		for _, ev := range evs {
			if err := w.Write(ev, func(line []byte) error {
				var m msg
				if err := json.Unmarshal(line, &m); err != nil {
					t.Fatalf("%v: %s", err, line)
				}
				if len(w.Rows()) != 1 {
					t.Errorf("message of %d rows, want 1", len(w.Rows()))
				}
				out = append(out, m)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	got := write(true)
	want := []struct{ kind, id, note string }{{"DELETE", "7", "a"}, {"INSERT", "8", "a"}, {"UPDATE", "9", "c"}}
	if len(got) != len(want) {
		t.Fatalf("%d messages %+v, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		if g := got[i]; g.Type != w.kind || g.Data[0]["id"] != w.id || g.Data[0]["note"] != w.note {
			t.Errorf("message %d: %+v, want %s of id %s note %s", i, g, w.kind, w.id, w.note)
		}
	}
	if got := write(false); len(got) != 2 || got[0].Type != "UPDATE" || got[1].Type != "UPDATE" {
		t.Errorf("without the option: %+v, want two UPDATEs", got)
	}
}
