package mysqlbinlog

import (
	"fmt"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/replication"
)

// TestAllTypesDecode writes the table of every type as 8.4 and 9.1, with
// either row metadata, compressed and not, and checks that go-mysql
// decodes the three rows of each transaction, the same compressed or not.
func TestAllTypesDecode(t *testing.T) {
	for _, tc := range []struct {
		version string
		vector  bool
		meta    RowMetadata
	}{
		{"8.4.3", false, MetadataFull},
		{"8.4.3", false, MetadataMinimal},
		{"9.1.0", true, MetadataFull},
	} {
		t.Run(fmt.Sprintf("%s/%d", tc.version, tc.meta), func(t *testing.T) {
			def, rows := AllTypes("s", "all", tc.vector)
			b, err := Write(Workload{Server: Server{Version: tc.version, RowMetadata: tc.meta}, Txns: []Txn{
				{DDL: &DDL{Schema: "s", Table: def}},
				{Statements: []Statement{{Kind: Insert, Table: "s.all", Rows: rows}}},
				{Compressed: true, Statements: []Statement{{Kind: Delete, Table: "s.all", Rows: beforeOf(rows)}}},
			}})
			if err != nil {
				t.Fatal(err)
			}
			byType := map[replication.EventType][]string{}
			collect := func(e *replication.BinlogEvent) {
				if re, ok := e.Event.(*replication.RowsEvent); ok {
					for _, r := range re.Rows {
						byType[e.Header.EventType] = append(byType[e.Header.EventType], fmt.Sprint(r))
					}
				}
			}
			for _, e := range parseFile(t, b.Files[0].Data) {
				collect(e)
				if p, ok := e.Event.(*replication.TransactionPayloadEvent); ok {
					for _, inner := range p.Events {
						collect(inner)
					}
				}
			}
			ins, del := byType[replication.WRITE_ROWS_EVENTv2], byType[replication.DELETE_ROWS_EVENTv2]
			if len(ins) != 3 || strings.Join(ins, "\n") != strings.Join(del, "\n") {
				t.Fatalf("inserted rows:\n%s\ndeleted rows (compressed):\n%s", strings.Join(ins, "\n"), strings.Join(del, "\n"))
			}
			for _, want := range []string{"9999-12-31 23:59:59.999999", "-838:59:59", "99999999.99", "18446744073709551615"} {
				if !strings.Contains(ins[0]+ins[1], want) {
					t.Fatalf("rows lack %s:\n%s", want, ins[0])
				}
			}
			create := b.Tables[0].Create
			for _, want := range []string{"`tiu` tinyint unsigned DEFAULT NULL", "`b1` tinyint(1) DEFAULT NULL", "`chl` char(10) CHARACTER SET latin1 DEFAULT NULL",
				"`pt` point DEFAULT NULL", "`tx` text,", "`inv` int DEFAULT NULL /*!80023 INVISIBLE */"} {
				if !strings.Contains(create, want) {
					t.Fatalf("SHOW CREATE TABLE lacks %q:\n%s", want, create)
				}
			}
		})
	}
}

func beforeOf(rows []Row) []Row {
	out := make([]Row, len(rows))
	for i, r := range rows {
		out[i] = Row{Before: r.After}
	}
	return out
}
