package mysqlbinlog

import (
	"testing"
	"time"
)

// TestWorkloadOfAReplica: a replica's binlog logs replicated transactions
// under their origin's GTID (numbered per origin) and server_id and with
// the origin's original commit time, its own under its own; the executed
// set names both UUIDs, in order, as MySQL prints it.
func TestWorkloadOfAReplica(t *testing.T) {
	origin := Origin{UUID: MustUUID("11111111-1111-1111-1111-111111111111"), ServerID: 7}
	own := Server{ServerID: 9, UUID: MustUUID("22222222-2222-2222-2222-222222222222")}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ddl := func(db string) *DDL { return &DDL{Schema: db, CreatesDatabase: true, SQL: "CREATE DATABASE " + db} }
	b, err := Write(Workload{Server: own, Txns: []Txn{
		{DDL: ddl("a"), Origin: origin, CommitTime: at.Add(time.Millisecond), OriginalCommitTime: at},
		{DDL: ddl("mine")},
		{DDL: ddl("b"), Origin: origin, CommitTime: at.Add(2 * time.Millisecond), OriginalCommitTime: at.Add(time.Millisecond)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var gtids []string
	for _, x := range b.Txns {
		gtids = append(gtids, x.GTID)
	}
	want := []string{"11111111-1111-1111-1111-111111111111:1", "22222222-2222-2222-2222-222222222222:1", "11111111-1111-1111-1111-111111111111:2"}
	if len(gtids) != 3 || gtids[0] != want[0] || gtids[1] != want[1] || gtids[2] != want[2] {
		t.Errorf("GTIDs %v, want %v", gtids, want)
	}
	if wantSet := "11111111-1111-1111-1111-111111111111:1-2,\n22222222-2222-2222-2222-222222222222:1"; b.GTIDExecuted != wantSet {
		t.Errorf("gtid_executed %q, want %q", b.GTIDExecuted, wantSet)
	}
	ids := map[string]uint32{}
	for _, e := range b.Events {
		if e.EventType == "Gtid" {
			ids[e.Info] = e.ServerID
		}
	}
	for info, id := range ids {
		if wantID := map[bool]uint32{true: 7, false: 9}[info != "SET @@SESSION.GTID_NEXT= '22222222-2222-2222-2222-222222222222:1'"]; id != wantID {
			t.Errorf("%s logged with server_id %d, want %d", info, id, wantID)
		}
	}
	if len(ids) != 3 {
		t.Errorf("%d GTID events, want 3", len(ids))
	}
}
