package mysqlbinlog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"
)

var itemsDef = &TableDef{Schema: "shop", Name: "items", PrimaryKey: []string{"id"},
	UniqueKeys: []KeyDef{{Name: "sku", Columns: []string{"sku"}}},
	Columns: []ColumnDef{
		{Name: "id", Type: "bigint unsigned", NotNull: true, AutoIncrement: true},
		{Name: "sku", Type: "varchar(32)", NotNull: true, Collation: "utf8mb4_bin"},
		{Name: "price", Type: "decimal(10,2)"},
		{Name: "qty", Type: "int", NotNull: true, Default: "'0'"},
		{Name: "doc", Type: "json"},
		{Name: "note", Type: "text"},
		{Name: "kind", Type: "enum('a','b')"},
		{Name: "at", Type: "datetime(6)"},
		{Name: "secret", Type: "int", Invisible: true},
		{Name: "qty2", Type: "int", Generated: "(`qty` * 2)"},
	}}

func TestShowCreateTableAsMySQL84(t *testing.T) {
	got, err := itemsDef.ShowCreateTable()
	if err != nil {
		t.Fatal(err)
	}
	want := "CREATE TABLE `items` (\n" +
		"  `id` bigint unsigned NOT NULL AUTO_INCREMENT,\n" +
		"  `sku` varchar(32) COLLATE utf8mb4_bin NOT NULL,\n" +
		"  `price` decimal(10,2) DEFAULT NULL,\n" +
		"  `qty` int NOT NULL DEFAULT '0',\n" +
		"  `doc` json DEFAULT NULL,\n" +
		"  `note` text,\n" +
		"  `kind` enum('a','b') DEFAULT NULL,\n" +
		"  `at` datetime(6) DEFAULT NULL,\n" +
		"  `secret` int DEFAULT NULL /*!80023 INVISIBLE */,\n" +
		"  `qty2` int GENERATED ALWAYS AS ((`qty` * 2)) VIRTUAL,\n" +
		"  PRIMARY KEY (`id`),\n" +
		"  UNIQUE KEY `sku` (`sku`)\n" +
		") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci"
	if got != want {
		t.Fatalf("SHOW CREATE TABLE:\n%s\nwant:\n%s", got, want)
	}
	cols, stats, err := itemsDef.InformationSchema()
	if err != nil {
		t.Fatal(err)
	}
	if c := cols[1]; c.ColumnType != "varchar(32)" || *c.CollationName != "utf8mb4_bin" || c.IsNullable != "NO" || c.ColumnKey != "UNI" {
		t.Fatalf("sku's COLUMNS row: %+v", c)
	}
	if c := cols[8]; c.Extra != "INVISIBLE" || c.IsNullable != "YES" {
		t.Fatalf("secret's COLUMNS row: %+v", c)
	}
	if c := cols[9]; c.Extra != "VIRTUAL GENERATED" || c.GenerationExpression != "(`qty` * 2)" {
		t.Fatalf("qty2's COLUMNS row: %+v", c)
	}
	if len(stats) != 2 || stats[0].IndexName != "PRIMARY" || stats[1].IndexName != "sku" {
		t.Fatalf("STATISTICS: %+v", stats)
	}
}

func parseFile(t *testing.T, data []byte) []*replication.BinlogEvent {
	t.Helper()
	if !bytes.HasPrefix(data, Magic) {
		t.Fatal("the file does not start with the binlog magic")
	}
	// The FORMAT_DESCRIPTION of an open file is checksummed without its
	// in-use flag, which go-mysql does not know: check the checksums of
	// the file as a dump thread sends it.
	fdeSize := binary.LittleEndian.Uint32(data[4+9:])
	data = append(append(append([]byte(nil), data[:4]...), DumpFormatDescription(data[4:4+fdeSize], 4)...), data[4+fdeSize:]...)
	p := replication.NewBinlogParser()
	p.SetVerifyChecksum(true)
	var out []*replication.BinlogEvent
	if err := p.ParseReader(bytes.NewReader(data[4:]), func(e *replication.BinlogEvent) error {
		out = append(out, e)
		return nil
	}); err != nil {
		t.Fatalf("go-mysql cannot parse the file: %v", err)
	}
	return out
}

// TestWorkloadDecodesAsWritten writes a mixed workload as MySQL 8.4 and
// reads it back with go-mysql's parser: every transaction where the
// workload says, GTIDs tagged and untagged, compressed transactions
// unwrapped to the same rows, a rotation, a partial JSON update.
func TestWorkloadDecodesAsWritten(t *testing.T) {
	for _, v := range []string{"8.0.40", "8.4.3", "9.1.0"} {
		t.Run(v, func(t *testing.T) { testWorkloadDecodesAsWritten(t, v) })
	}
}

func testWorkloadDecodesAsWritten(t *testing.T, version string) {
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	v, err := ParseVersion(version)
	if err != nil {
		t.Fatal(err)
	}
	tagged := v.AtLeast(8, 3, 0)
	tag := ""
	if tagged {
		tag = "batch"
	}
	w := Workload{Server: Server{Version: version, RowMetadata: MetadataFull, Start: start}, Txns: []Txn{
		{DDL: &DDL{Schema: "shop", SQL: "CREATE DATABASE shop", CreatesDatabase: true}},
		{DDL: &DDL{Schema: "shop", Table: itemsDef}},
		{Statements: []Statement{{Kind: Insert, Table: "shop.items", Rows: []Row{
			{After: []any{1, "A-1", "9.99", 3, `{"color":"red","n":[1,2]}`, "hello", "a", "2026-03-01 10:00:00.250000", 7, 6}},
			{After: []any{2, "B-2", nil, 0, nil, nil, nil, nil, nil, 0}},
		}}}, CommitTime: start.Add(1500 * time.Microsecond)},
		{Compressed: true, Statements: []Statement{{Kind: Update, Table: "shop.items", Rows: []Row{
			{Before: []any{2, "B-2", nil, 0, nil, nil, nil, nil, nil, 0}, After: []any{2, "B-2", "1.50", 4, nil, nil, "b", nil, nil, 8}},
		}}}},
		{Tag: tag, RotateAfter: true, Statements: []Statement{{Kind: Delete, Table: "shop.items", Rows: []Row{
			{Before: []any{2, "B-2", "1.50", 4, nil, nil, "b", nil, nil, 8}},
		}}}},
		{Statements: []Statement{{Kind: PartialUpdate, Table: "shop.items", Rows: []Row{
			{Before: []any{1, "A-1", "9.99", 3, `{"color":"red","n":[1,2]}`, "hello", "a", "2026-03-01 10:00:00.250000", 7, 6},
				After: []any{1, "A-1", "9.99", 3, JSONDiffs{{JSONReplace, "$.color", `"blue"`}}, "hello", "a", "2026-03-01 10:00:00.250000", 7, 6}},
		}}}},
	}}
	b, err := Write(w)
	if err != nil {
		t.Fatal(err)
	}
	uuid := b.Server.UUID.String()
	wantGTIDs := []string{uuid + ":1", uuid + ":2", uuid + ":3", uuid + ":4", uuid + ":batch:1", uuid + ":5"}
	wantExecuted := uuid + ":1-5:batch:1"
	if !tagged {
		wantGTIDs[4], wantGTIDs[5], wantExecuted = uuid+":5", uuid+":6", uuid+":1-6"
	}
	if b.GTIDExecuted != wantExecuted {
		t.Fatalf("gtid_executed %q, want %q", b.GTIDExecuted, wantExecuted)
	}
	if len(b.Files) != 2 || b.Files[0].Name != "binlog.000001" || b.Files[1].Name != "binlog.000002" {
		t.Fatalf("files %v", b.Files)
	}
	// The closed file's FORMAT_DESCRIPTION no longer says in use; the
	// open one's does.
	if binary.LittleEndian.Uint16(b.Files[0].Data[4+17:])&FlagBinlogInUse != 0 || binary.LittleEndian.Uint16(b.Files[1].Data[4+17:])&FlagBinlogInUse == 0 {
		t.Fatal("in-use flags: want the first file closed and the second open")
	}

	byFile := map[string][]*replication.BinlogEvent{}
	for _, f := range b.Files {
		byFile[f.Name] = parseFile(t, f.Data)
	}
	// Each transaction starts with its GTID event where Txns says.
	if len(b.Txns) != len(wantGTIDs) {
		t.Fatalf("%d transactions written", len(b.Txns))
	}
	for i, tp := range b.Txns {
		if tp.GTID != wantGTIDs[i] {
			t.Fatalf("transaction %d: GTID %s, want %s", i, tp.GTID, wantGTIDs[i])
		}
		var found *replication.BinlogEvent
		for _, e := range byFile[tp.File] {
			if e.Header.LogPos-e.Header.EventSize == tp.Start {
				found = e
			}
		}
		if found == nil {
			t.Fatalf("transaction %d: no event at %s:%d", i, tp.File, tp.Start)
		}
		var g *replication.GTIDEvent
		switch ev := found.Event.(type) {
		case *replication.GTIDEvent:
			g = ev
		case *replication.GtidTaggedLogEvent:
			g = &ev.GTIDEvent
		default:
			t.Fatalf("transaction %d starts with a %s", i, found.Header.EventType)
		}
		if g.TransactionLength != uint64(tp.End-tp.Start) {
			t.Fatalf("transaction %d: length %d in its GTID, %d written", i, g.TransactionLength, tp.End-tp.Start)
		}
		if g.OriginalCommitTimestamp != uint64(tp.CommitTime.UnixMicro()) {
			t.Fatalf("transaction %d: original commit %d, want %d", i, g.OriginalCommitTimestamp, tp.CommitTime.UnixMicro())
		}
	}
	if b.Txns[2].CommitTime.UnixMicro()%1000 != 500 {
		t.Fatal("commit timestamps lost their microseconds")
	}

	// Rows, compressed or not, decode to what was written.
	var rows []string
	collect := func(e *replication.BinlogEvent) {
		if re, ok := e.Event.(*replication.RowsEvent); ok {
			for _, r := range re.Rows {
				rows = append(rows, fmt.Sprintf("%s %v", e.Header.EventType, r))
			}
		}
	}
	for _, f := range b.Files {
		for _, e := range byFile[f.Name] {
			collect(e)
			if p, ok := e.Event.(*replication.TransactionPayloadEvent); ok {
				for _, inner := range p.Events {
					collect(inner)
				}
			}
		}
	}
	got := strings.Join(rows, "\n")
	for _, want := range []string{
		// go-mysql prints JSON objects with sorted keys
		`WriteRowsEventV2 [1 A-1 9.99 3 {"color":"red","n":[1,2]} [104 101 108 108 111] 1 2026-03-01 10:00:00.250000 7 6]`,
		`UpdateRowsEventV2 [2 B-2 1.50 4 <nil> <nil> 2 <nil> <nil> 8]`,
		`DeleteRowsEventV2 [2 B-2 1.50 4 <nil> <nil> 2 <nil> <nil> 8]`,
		`PartialUpdateRowsEvent [1 A-1 9.99 3 json_diff(op:Replace path:$.color value:"blue")`,
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("decoded rows:\n%s\nlack %s", got, want)
		}
	}

	// SHOW BINLOG EVENTS rows chain: each starts where the last ended.
	var last EventInfo
	for _, e := range b.Events {
		if e.LogName == last.LogName && e.Pos != last.EndLogPos {
			t.Fatalf("event %+v does not start where %+v ended", e, last)
		}
		last = e
	}
	if len(b.Tables) != 1 || !strings.Contains(b.Tables[0].Create, "/*!80023 INVISIBLE */") {
		t.Fatalf("tables %+v", b.Tables)
	}
}

// TestWorkloadSplitsLargeStatements checks that a statement's rows are
// split into events of about binlog_row_event_max_size, the last one
// alone ending the statement.
func TestWorkloadSplitsLargeStatements(t *testing.T) {
	def := &TableDef{Schema: "s", Name: "big", PrimaryKey: []string{"id"}, Columns: []ColumnDef{
		{Name: "id", Type: "int", NotNull: true}, {Name: "v", Type: "varchar(300)"}}}
	var rs []Row
	for i := range 100 {
		rs = append(rs, Row{After: []any{i, strings.Repeat("x", 250)}})
	}
	b, err := Write(Workload{Txns: []Txn{
		{DDL: &DDL{Schema: "s", Table: def}},
		{Statements: []Statement{{Kind: Insert, Table: "s.big", Rows: rs}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var events, ends, total int
	for _, e := range parseFile(t, b.Files[0].Data) {
		if re, ok := e.Event.(*replication.RowsEvent); ok {
			events++
			total += len(re.Rows)
			if re.Flags&StmtEndFlag != 0 {
				ends++
			}
			if e.Header.EventSize > rowsEventMaxSize+512 {
				t.Fatalf("a rows event of %d bytes", e.Header.EventSize)
			}
		}
	}
	if events < 3 || ends != 1 || total != 100 {
		t.Fatalf("%d rows events, %d with STMT_END_F, %d rows", events, ends, total)
	}
}

// TestWorkloadRefusesWhatTheVersionLacks: a workload cannot hold what its
// server version could not have written.
func TestWorkloadRefusesWhatTheVersionLacks(t *testing.T) {
	vec := &TableDef{Schema: "s", Name: "v", Columns: []ColumnDef{{Name: "v", Type: "vector(3)"}}}
	inv := &TableDef{Schema: "s", Name: "i", Columns: []ColumnDef{{Name: "i", Type: "int", Invisible: true}}}
	plain := &TableDef{Schema: "s", Name: "p", Columns: []ColumnDef{{Name: "i", Type: "int"}}}
	for _, tc := range []struct {
		version string
		txns    []Txn
		want    string
	}{
		{"8.4.3", []Txn{{DDL: &DDL{Schema: "s", Table: vec}}}, "VECTOR needs MySQL 9.0+"},
		{"8.0.22", []Txn{{DDL: &DDL{Schema: "s", Table: inv}}}, "INVISIBLE needs MySQL 8.0.23+"},
		{"8.0.40", []Txn{{DDL: &DDL{Schema: "s", Table: plain}}, {Tag: "t", Statements: []Statement{{Kind: Insert, Table: "s.p", Rows: []Row{{After: []any{1}}}}}}}, "tagged GTIDs need MySQL 8.3+"},
	} {
		_, err := Write(Workload{Server: Server{Version: tc.version}, Txns: tc.txns})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.version, err, tc.want)
		}
	}
	if _, err := Write(Workload{Server: Server{Version: "9.1.0"}, Txns: []Txn{{DDL: &DDL{Schema: "s", Table: vec}}}}); err != nil {
		t.Fatalf("9.1.0 refused a VECTOR column: %v", err)
	}
}

// TestWriterAppends: a running source is fed transaction by transaction;
// each Binlog is the earlier one plus the new transaction's bytes, and a
// rotation closes the file.
func TestWriterAppends(t *testing.T) {
	def := &TableDef{Schema: "s", Name: "t", PrimaryKey: []string{"id"}, Columns: []ColumnDef{{Name: "id", Type: "int", NotNull: true}}}
	w, err := NewWriter(Server{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(Txn{DDL: &DDL{Schema: "s", Table: def}}); err != nil {
		t.Fatal(err)
	}
	before, err := w.Binlog()
	if err != nil {
		t.Fatal(err)
	}
	pos, err := w.Write(Txn{Compressed: true, Statements: []Statement{{Kind: Insert, Table: "s.t", Rows: []Row{{After: []any{1}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	after, err := w.Binlog()
	if err != nil {
		t.Fatal(err)
	}
	old, cur := before.Files[0].Data, after.Files[0].Data
	if pos.Start != uint32(len(old)) || pos.End != uint32(len(cur)) || !bytes.Equal(old, cur[:len(old)]) {
		t.Fatalf("the second transaction is not appended: file of %d then %d bytes, transaction at %d..%d", len(old), len(cur), pos.Start, pos.End)
	}
	if err := w.Rotate(); err != nil {
		t.Fatal(err)
	}
	rotated, err := w.Binlog()
	if err != nil {
		t.Fatal(err)
	}
	if len(rotated.Files) != 2 || binary.LittleEndian.Uint16(rotated.Files[0].Data[4+17:])&FlagBinlogInUse != 0 {
		t.Fatal("Rotate did not close the first file")
	}
	if _, err := w.Write(Txn{Statements: []Statement{{Kind: Insert, Table: "s.missing", Rows: []Row{{After: []any{1}}}}}}); err == nil {
		t.Fatal("a statement on a table no DDL created was written")
	}
	if _, err := w.Write(Txn{Statements: []Statement{{Kind: Insert, Table: "s.t", Rows: []Row{{After: []any{2}}}}}}); err == nil {
		t.Fatal("the writer went on after an error")
	}
}

// TestWorkloadTableRows: the rows a table holds after the workload, as
// SELECT prints them, follow inserts, updates (of the key too), deletes
// and an ALTER; a partial JSON update makes them unknown, said out loud.
func TestWorkloadTableRows(t *testing.T) {
	def := &TableDef{Schema: "s", Name: "t", PrimaryKey: []string{"id"}, Columns: []ColumnDef{
		{Name: "id", Type: "int", NotNull: true}, {Name: "d", Type: "decimal(6,2)"}, {Name: "j", Type: "json"},
		{Name: "e", Type: "enum('x','y')"}, {Name: "s", Type: "set('p','q','r')"}, {Name: "at", Type: "datetime(3)"}, {Name: "tm", Type: "time(2)"}}}
	altered := *def
	altered.Columns = append(append([]ColumnDef(nil), def.Columns...), ColumnDef{Name: "added", Type: "int"})
	ins := func(rows ...[]any) Txn {
		var rs []Row
		for _, r := range rows {
			rs = append(rs, Row{After: r})
		}
		return Txn{Statements: []Statement{{Kind: Insert, Table: "s.t", Rows: rs}}}
	}
	w := Workload{Txns: []Txn{
		{DDL: &DDL{Schema: "s", Table: def}},
		ins([]any{3, "1.5", `{"b": [1, 2.5, 3.0], "a": {"x": null, "long key": "\n"}}`, "y", "r,p", "2026-01-01 00:00:00", "1:02:03"},
			[]any{1, "-0.5", `1e300`, 1, uint64(2), "2026-01-01 00:00:00.5", "-0:00:01.5"},
			[]any{2, nil, nil, nil, nil, nil, nil}),
		{Statements: []Statement{{Kind: Update, Table: "s.t", Rows: []Row{
			{Before: []any{2, nil, nil, nil, nil, nil, nil}, After: []any{20, "7", `"s"`, "x", "", nil, nil}}}}}},
		{Statements: []Statement{{Kind: Delete, Table: "s.t", Rows: []Row{{Before: []any{3, "1.5", `{}`, "y", "r,p", "2026-01-01 00:00:00", "1:02:03"}}}}}},
		{DDL: &DDL{Schema: "s", SQL: "ALTER TABLE t ADD COLUMN added int", Table: &altered}},
	}}
	b, err := Write(w)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%q", b.Tables[0].Rows)
	want := fmt.Sprintf("%q", [][]any{
		{int64(1), "-0.50", "1e300", "x", "q", "2026-01-01 00:00:00.500", "-00:00:01.50", nil},
		{int64(20), "7.00", `"s"`, "x", "", nil, nil, nil},
	})
	if got != want {
		t.Fatalf("rows %s\nwant %s", got, want)
	}
	text, err := JSONText(`{"b": [1, 2.5, 3.0], "a": {"x": null, "long key": "\n"}}`)
	if err != nil || text != `{"a": {"x": null, "long key": "\n"}, "b": [1, 2.5, 3.0]}` {
		t.Fatalf("JSON text %s (%v)", text, err)
	}

	w.Txns = append(w.Txns, Txn{Statements: []Statement{{Kind: PartialUpdate, Table: "s.t", Rows: []Row{
		{Before: []any{1, "-0.5", `1e300`, 1, uint64(2), "2026-01-01 00:00:00.5", "-0:00:01.5", nil},
			After: []any{1, "-0.5", JSONDiffs{{JSONReplace, "$", "1"}}, 1, uint64(2), "2026-01-01 00:00:00.5", "-0:00:01.5", nil}}}}}})
	b, err = Write(w)
	if err != nil {
		t.Fatal(err)
	}
	if b.Tables[0].Rows != nil || !strings.Contains(b.Tables[0].RowsUnknown, "partial JSON") {
		t.Fatalf("after a partial JSON update: rows %v, unknown %q", b.Tables[0].Rows, b.Tables[0].RowsUnknown)
	}
}
