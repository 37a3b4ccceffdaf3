package group_test

import (
	"slices"
	"testing"
	"time"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqlsource"
	"github.com/braid-cdc/braid/internal/testutil/mysqlsource/mysqlbinlog"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/spec"
)

// TestPinStartsListByGTID: a `latest` start is pinned to the checked
// server's file:pos for a source of one address, but to its GTID
// position for one whose address lists several servers: its reader may
// start on another of them (read_from: replica, or the first one down),
// where the primary's file:pos would be foreign coordinates. Pinned to
// a position, the list's replica would have been read at the primary's
// offsets.
func TestPinStartsListByGTID(t *testing.T) {
	tp := mysqltest.StartTopology(t, 1)
	primary, replica := tp.Primary(), tp.Replicas()[0]
	replica.FlushLogs(t) // its files and offsets are not the primary's
	primary.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id BIGINT PRIMARY KEY)", "INSERT INTO shop.orders VALUES (1)")
	tp.WaitCaughtUp(t)
	ds, err := spec.Parse([]byte("name: shop\nsources:\n" +
		"  - {name: one, address: '" + primary.Addr() + "'}\n" +
		"  - {name: list, address: ['" + primary.Addr() + "', '" + replica.Addr() + "'], read_from: replica}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := group.PinStarts(t.Context(), ds); err != nil {
		t.Fatal(err)
	}
	file, pos := primary.MasterStatus(t)
	if st := ds.Sources[0].Start; st.Kind != spec.StartPosition || st.Pos.File != file || st.Pos.Pos != pos {
		t.Errorf("one address: start %+v, want the position %s:%d", st, file, pos)
	}
	if st, want := ds.Sources[1].Start, primary.GTIDBinlogPos(t); st.Kind != spec.StartGTID || st.GTID != want {
		t.Errorf("address list: start %+v, want the GTID position %s", st, want)
	}
}

// TestPinStartsMySQLListByGTID: the same for a MySQL source of two
// servers (one history, other files and offsets on each): the `latest`
// start of the list is pinned to gtid_executed, and a destination that
// starts on the replica from it reads the transactions after the pin,
// each once. Pinned to the primary's file:pos, the replica would have
// been read at the primary's offsets.
func TestPinStartsMySQLListByGTID(t *testing.T) {
	primary := mysqlsource.Start(t, mysqlsource.Config{ServerID: 1, ServerUUID: "11111111-1111-1111-1111-111111111111"})
	replica := mysqlsource.Start(t, mysqlsource.Config{ServerID: 2, ServerUUID: "22222222-2222-2222-2222-222222222222"})
	h, err := mysqlsource.NewHistory(primary, replica)
	if err != nil {
		t.Fatal(err)
	}
	commit := func(txn mysqlbinlog.Txn) {
		t.Helper()
		if _, err := h.Commit(txn); err != nil {
			t.Fatal(err)
		}
		if err := h.CatchUp(replica); err != nil {
			t.Fatal(err)
		}
	}
	orders := &mysqlbinlog.TableDef{Schema: "shop_0", Name: "orders", PrimaryKey: []string{"id"},
		Columns: []mysqlbinlog.ColumnDef{{Name: "id", Type: "bigint", NotNull: true}}}
	insert := func(id int64) {
		commit(mysqlbinlog.Txn{Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Insert, Table: "shop_0.orders",
			Rows: []mysqlbinlog.Row{{After: []any{id}}}}}})
	}
	commit(mysqlbinlog.Txn{DDL: &mysqlbinlog.DDL{Schema: "shop_0", CreatesDatabase: true, SQL: "CREATE DATABASE shop_0"}})
	if err := h.Rotate(replica); err != nil { // its files no longer line up with the primary's
		t.Fatal(err)
	}
	commit(mysqlbinlog.Txn{DDL: &mysqlbinlog.DDL{Schema: "shop_0", Table: orders}})
	insert(1)
	insert(2)

	ds, err := spec.Parse([]byte("name: shop\ntables: ['shop_\\d+\\.orders']\nheartbeat: 100ms\nsources:\n" +
		"  - {name: list, address: ['" + primary.Addr() + "', '" + replica.Addr() + "'], read_from: replica}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := group.PinStarts(t.Context(), ds); err != nil {
		t.Fatal(err)
	}
	if st := ds.Sources[0].Start; st.Kind != spec.StartGTID || st.GTID != "11111111-1111-1111-1111-111111111111:1-4" {
		t.Fatalf("address list: start %+v, want the GTID set 11111111-…:1-4", st)
	}
	c := collect(t, group.Config{Spec: ds})
	insert(3)
	insert(4)
	waitRows(t, c, 2, 30*time.Second)
	time.Sleep(300 * time.Millisecond) // three heartbeats: nothing more comes
	var ids []int64
	_, rows, _ := streamOf(c)
	for _, r := range rows {
		ids = append(ids, r.id)
	}
	if !slices.Equal(ids, []int64{3, 4}) {
		t.Fatalf("rows after the pin: %v, want [3 4], each once", ids)
	}
}
