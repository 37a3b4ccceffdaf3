package mysqlsource_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/braid-cdc/braid/internal/testutil/mysqlsource"
	"github.com/braid-cdc/braid/internal/testutil/mysqlsource/mysqlbinlog"
)

// TestServesEncodedWorkload: the server serves what package mysqlbinlog
// writes as a MySQL server of the same version would: SHOW BINLOG EVENTS
// gives the rows the encoder says the server would print, the binlog
// status its gtid_executed, and a GTID dump skips the transactions the
// replica has (a compressed one and a tagged one among those it sends).
func TestServesEncodedWorkload(t *testing.T) {
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			tag := ""
			if v != mysqlsource.Version80 {
				tag = "batch"
			}
			def := &mysqlbinlog.TableDef{Schema: "shop", Name: "items", PrimaryKey: []string{"id"},
				Columns: []mysqlbinlog.ColumnDef{{Name: "id", Type: "int", NotNull: true}, {Name: "note", Type: "varchar(20)"}}}
			b, err := mysqlbinlog.Write(mysqlbinlog.Workload{Server: mysqlbinlog.Server{Version: v, UUID: mysqlbinlog.MustUUID(sourceUUID)}, Txns: []mysqlbinlog.Txn{
				{DDL: &mysqlbinlog.DDL{Schema: "shop", SQL: "CREATE DATABASE shop", CreatesDatabase: true}},
				{DDL: &mysqlbinlog.DDL{Schema: "shop", Table: def}},
				{Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Insert, Table: "shop.items", Rows: []mysqlbinlog.Row{{After: []any{1, "a"}}, {After: []any{2, "b"}}}}}},
				{Compressed: true, Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Update, Table: "shop.items", Rows: []mysqlbinlog.Row{{Before: []any{1, "a"}, After: []any{1, "A"}}}}}},
				{Tag: tag, RotateAfter: true, Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Delete, Table: "shop.items", Rows: []mysqlbinlog.Row{{Before: []any{2, "b"}}}}}},
				{Statements: []mysqlbinlog.Statement{{Kind: mysqlbinlog.Insert, Table: "shop.items", Rows: []mysqlbinlog.Row{{After: []any{3, "c"}}}}}},
			}})
			if err != nil {
				t.Fatal(err)
			}
			s := mysqlsource.Start(t, mysqlsource.Config{Version: v, ServerUUID: sourceUUID})
			for _, f := range b.Files {
				if err := s.AddFile(f.Name, f.Data); err != nil {
					t.Fatal(err)
				}
			}
			c := connect(t, s)

			var got, want []string
			for _, e := range b.Events {
				info := e.Info
				if strings.Contains(info, "CREATE DATABASE") {
					// MySQL logs a database statement with
					// LOG_EVENT_SUPPRESS_USE_F, which the encoder sets,
					// and its Info then names no database
					// (Query_log_event::pack_info); the encoder's
					// EventInfo still prints one.
					info = strings.TrimPrefix(info, "use `shop`; ")
				}
				want = append(want, fmt.Sprintf("%s %d %s %d %d %s", e.LogName, e.Pos, e.EventType, e.ServerID, e.EndLogPos, info))
			}
			for _, f := range b.Files {
				r := exec(t, c, "SHOW BINLOG EVENTS IN '"+f.Name+"'")
				for i := range r.RowNumber() {
					pos, _ := r.GetUint(i, 1)
					id, _ := r.GetUint(i, 3)
					end, _ := r.GetUint(i, 4)
					got = append(got, fmt.Sprintf("%s %d %s %d %d %s", str(r, i, 0), pos, str(r, i, 2), id, end, str(r, i, 5)))
				}
			}
			sameEvents(t, got, want)

			status := "SHOW BINARY LOG STATUS"
			if v == mysqlsource.Version80 {
				status = "SHOW MASTER STATUS"
			}
			r := exec(t, c, status)
			if str(r, 0, 4) != b.GTIDExecuted {
				t.Errorf("Executed_Gtid_Set %q, want %q", str(r, 0, 4), b.GTIDExecuted)
			}

			set, err := mysql.ParseMysqlGTIDSet(sourceUUID + ":1-3")
			if err != nil {
				t.Fatal(err)
			}
			st, err := syncer(t, s).StartSyncGTID(set)
			if err != nil {
				t.Fatal(err)
			}
			var gtids []string
			for len(gtids) < 3 {
				if d := read(t, st, 1)[0]; strings.HasPrefix(d, "GTID ") {
					gtids = append(gtids, strings.TrimPrefix(d, "GTID "))
				}
			}
			wantGTIDs := []string{sourceUUID + ":4", sourceUUID + ":batch:1", sourceUUID + ":5"}
			if tag == "" {
				wantGTIDs = []string{sourceUUID + ":4", sourceUUID + ":5", sourceUUID + ":6"}
			}
			if strings.Join(gtids, " ") != strings.Join(wantGTIDs, " ") {
				t.Errorf("GTIDs after %s: %q, want %q", set, gtids, wantGTIDs)
			}
		})
	}
}
