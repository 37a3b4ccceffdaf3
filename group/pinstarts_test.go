package group_test

import (
	"testing"

	"github.com/braid-cdc/braid/group"
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
