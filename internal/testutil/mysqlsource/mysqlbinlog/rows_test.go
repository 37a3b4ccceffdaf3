package mysqlbinlog

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/replication"
)

// The tables of the captured binlogs, described as their CREATE TABLE
// says.
var (
	// 8.0.26: CREATE TABLE t1 (f1 INT UNSIGNED INVISIBLE, f2 INT UNSIGNED
	// INVISIBLE, f3 INT, f4 TEXT, f5 BLOB, f6 BIGINT UNSIGNED INVISIBLE)
	invisibleT1 = &Table{ID: 124, Schema: "mysql", Name: "t1", Columns: []Column{
		{Name: "f1", Kind: KindInt, Unsigned: true, Nullable: true, Invisible: true},
		{Name: "f2", Kind: KindInt, Unsigned: true, Nullable: true, Invisible: true},
		{Name: "f3", Kind: KindInt, Nullable: true},
		{Name: "f4", Kind: KindText, Nullable: true},
		{Name: "f5", Kind: KindBlob, Nullable: true},
		{Name: "f6", Kind: KindBigInt, Unsigned: true, Nullable: true, Invisible: true},
	}}
	// 8.0.28: CREATE TABLE t(f1 CHAR(128), f2 VARCHAR(300), f3 ENUM('var1',
	// 'variant2', 'foo'), f4 SET('one', 'two', 'three', 'four'), f5 TEXT)
	enumSetT = &Table{ID: 124, Schema: "mysql", Name: "t", Columns: []Column{
		{Name: "f1", Kind: KindChar, Length: 128, Nullable: true},
		{Name: "f2", Kind: KindVarchar, Length: 300, Nullable: true},
		{Name: "f3", Kind: KindEnum, Elements: []string{"var1", "variant2", "foo"}, Nullable: true},
		{Name: "f4", Kind: KindSet, Elements: []string{"one", "two", "three", "four"}, Nullable: true},
		{Name: "f5", Kind: KindText, Nullable: true},
	}}
	// 8.0.26: CREATE TABLE foo (a BIT(3), b TEXT, c BIT(8))
	bitFoo = &Table{ID: 124, Schema: "mysql", Name: "foo", Columns: []Column{
		{Name: "a", Kind: KindBit, Length: 3, Nullable: true},
		{Name: "b", Kind: KindText, Nullable: true},
		{Name: "c", Kind: KindBit, Length: 8, Nullable: true},
	}}
	// 8.0.22, binlog_row_metadata=MINIMAL: CREATE TABLE t(id INT PRIMARY KEY
	// AUTO_INCREMENT, json_col JSON, name VARCHAR(100) AS
	// (json_col->>'$.name'), age INT AS (json_col->'$.age'))
	jsonT = &Table{ID: 119, Schema: "mysql", Name: "t", PrimaryKey: []int{0}, Columns: []Column{
		{Name: "id", Kind: KindInt},
		{Name: "json_col", Kind: KindJSON, Nullable: true},
		{Name: "name", Kind: KindVarchar, Length: 100, Nullable: true},
		{Name: "age", Kind: KindInt, Nullable: true},
	}}
	// 9.0.1: CREATE TABLE foo(id SERIAL, vector_column VECTOR(3) NOT NULL)
	vectorFoo = &Table{ID: 85, Schema: "dtb", Name: "foo", PrimaryKey: []int{0}, Columns: []Column{
		{Name: "id", Kind: KindBigInt, Unsigned: true},
		{Name: "vector_column", Kind: KindVector, Length: 3},
	}}
	// 9.0.1: CREATE TABLE bar(id SERIAL, vector_column VECTOR(2) NOT NULL,
	// foo TEXT, vector_column2 VECTOR(4) NOT NULL)
	vectorBar = &Table{ID: 87, Schema: "dtb", Name: "bar", PrimaryKey: []int{0}, Columns: []Column{
		{Name: "id", Kind: KindBigInt, Unsigned: true},
		{Name: "vector_column", Kind: KindVector, Length: 2},
		{Name: "foo", Kind: KindText, Nullable: true},
		{Name: "vector_column2", Kind: KindVector, Length: 4},
	}}
	// 9.6.0, MINIMAL: test.orders (INT, INT, DECIMAL(10,2)); names unknown
	taggedOrders = &Table{ID: 90, Schema: "test", Name: "orders", Columns: []Column{
		{Name: "id", Kind: KindInt},
		{Name: "qty", Kind: KindInt, Nullable: true},
		{Name: "amount", Kind: KindDecimal, Precision: 10, Scale: 2, Nullable: true},
	}}
	// 8.0.40, MINIMAL: noria.t1 (INT NOT NULL, BLOB, CHAR(2), INT, INT UNSIGNED)
	minimalT1 = &Table{ID: 111, Schema: "noria", Name: "t1", Columns: []Column{
		{Name: "c0", Kind: KindInt},
		{Name: "c1", Kind: KindBlob, Nullable: true},
		{Name: "c2", Kind: KindChar, Length: 2, Nullable: true},
		{Name: "c3", Kind: KindInt, Nullable: true},
		{Name: "c4", Kind: KindInt, Unsigned: true, Nullable: true},
	}}
)

// long298 is the 298-character value of the 8.0.28 capture.
var long298 = strings.Repeat(strings.Repeat("0123456789", 12)+"012345678", 2) + strings.Repeat("0123456789", 4)

func withID(t *Table, id uint64) *Table {
	c := *t
	c.ID = id
	return &c
}

func version(t *testing.T, s string) Version {
	t.Helper()
	v, err := ParseVersion(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestTableMapMatchesServers(t *testing.T) {
	for _, tc := range []struct {
		key     string
		table   *Table
		meta    RowMetadata
		version string
		flags   uint16
	}{
		{"my8026_invisible@942", invisibleT1, MetadataFull, "8.0.26", 1},
		{"my8026_bit@857", bitFoo, MetadataFull, "8.0.26", 1},
		{"my8028_enumset@946", enumSetT, MetadataFull, "8.0.28", 1},
		{"my8022_json@1000", jsonT, MetadataMinimal, "8.0.22", 1},
		{"my8040_minimal@312", minimalT1, MetadataMinimal, "8.0.40", 1},
		{"my901_vector@1004", vectorFoo, MetadataFull, "9.0.1", 1},
		{"my901_vector@1170", vectorBar, MetadataFull, "9.0.1", 1},
		{"my960_tagged@405", taggedOrders, MetadataMinimal, "9.6.0", 3},
	} {
		t.Run(tc.key, func(t *testing.T) {
			real := realEvent(t, tc.key)
			body := mustBody(t)(TableMap{Table: tc.table, Metadata: tc.meta, Flags: tc.flags, Version: version(t, tc.version)}.Body())
			requireBytes(t, tc.key, real, frameLike(real, replication.TABLE_MAP_EVENT, 0, body))
		})
	}
}

// TestTableMapMatchesGoMySQLSamples encodes the MySQL 8.0 table maps of
// go-mysql's TestTableMapOptMetaNames and TestTableMapOptMetaPrimaryKey:
// every column type of 8.0 with FULL metadata (utf8mb4_unicode_ci, 224,
// was that server's default), and primary keys with and without a
// prefix.
func TestTableMapMatchesGoMySQLSamples(t *testing.T) {
	const unicodeCI = 224
	types := &Table{ID: 'j', Schema: "test", Name: "_types", Columns: []Column{
		{Name: "b_bit", Kind: KindBit, Length: 64},
		{Name: "n_boolean", Kind: KindTinyInt},
		{Name: "n_tinyint", Kind: KindTinyInt},
		{Name: "n_smallint", Kind: KindSmallInt},
		{Name: "n_mediumint", Kind: KindMediumInt},
		{Name: "n_int", Kind: KindInt},
		{Name: "n_bigint", Kind: KindBigInt},
		{Name: "n_decimal", Kind: KindDecimal, Precision: 65, Scale: 30},
		{Name: "n_float", Kind: KindFloat},
		{Name: "n_double", Kind: KindDouble},
		{Name: "nu_tinyint", Kind: KindTinyInt, Unsigned: true},
		{Name: "nu_smallint", Kind: KindSmallInt, Unsigned: true},
		{Name: "nu_mediumint", Kind: KindMediumInt, Unsigned: true},
		{Name: "nu_int", Kind: KindInt, Unsigned: true},
		{Name: "nu_bigint", Kind: KindBigInt, Unsigned: true},
		{Name: "nu_decimal", Kind: KindDecimal, Precision: 65, Scale: 30, Unsigned: true},
		{Name: "nu_float", Kind: KindFloat, Unsigned: true},
		{Name: "nu_double", Kind: KindDouble, Unsigned: true},
		{Name: "t_year", Kind: KindYear, Nullable: true},
		{Name: "t_date", Kind: KindDate, Nullable: true},
		{Name: "t_time", Kind: KindTime, Nullable: true},
		{Name: "t_ftime", Kind: KindTime, FSP: 6, Nullable: true},
		{Name: "t_datetime", Kind: KindDatetime, Nullable: true},
		{Name: "t_fdatetime", Kind: KindDatetime, FSP: 6, Nullable: true},
		{Name: "t_timestamp", Kind: KindTimestamp, Nullable: true},
		{Name: "t_ftimestamp", Kind: KindTimestamp, FSP: 6, Nullable: true},
		{Name: "c_char", Kind: KindChar, Length: 255, Collation: unicodeCI},
		{Name: "c_varchar", Kind: KindVarchar, Length: 255, Collation: unicodeCI},
		{Name: "c_binary", Kind: KindBinary, Length: 64},
		{Name: "c_varbinary", Kind: KindVarbinary, Length: 64},
		{Name: "c_tinyblob", Kind: KindTinyBlob, Nullable: true},
		{Name: "c_blob", Kind: KindBlob, Nullable: true},
		{Name: "c_mediumblob", Kind: KindMediumBlob, Nullable: true},
		{Name: "c_longblob", Kind: KindLongBlob, Nullable: true},
		{Name: "c_tinytext", Kind: KindTinyText, Collation: unicodeCI, Nullable: true},
		{Name: "c_text", Kind: KindText, Collation: unicodeCI, Nullable: true},
		{Name: "c_mediumtext", Kind: KindMediumText, Collation: unicodeCI, Nullable: true},
		{Name: "c_longtext", Kind: KindLongText, Collation: unicodeCI, Nullable: true},
		{Name: "e_enum", Kind: KindEnum, Elements: []string{"a", "b"}, Collation: unicodeCI, Nullable: true},
		{Name: "s_set", Kind: KindSet, Elements: []string{"1", "2"}, Collation: unicodeCI, Nullable: true},
		{Name: "g_geometry", Kind: KindGeometry, Nullable: true},
		{Name: "j_json", Kind: KindJSON, Nullable: true},
	}}
	prim := &Table{ID: 'l', Schema: "test", Name: "_prim", PrimaryKey: []int{2, 0}, Columns: []Column{
		{Name: "id2", Kind: KindInt},
		{Name: "col", Kind: KindVarchar, Length: 30, Collation: unicodeCI, Nullable: true},
		{Name: "id1", Kind: KindBigInt},
	}}
	prim2 := &Table{ID: 'm', Schema: "test", Name: "_prim2", PrimaryKey: []int{1, 3}, PrimaryKeyPrefix: []int{0, 10}, Columns: []Column{
		{Name: "col1", Kind: KindInt, Nullable: true},
		{Name: "id1", Kind: KindChar, Length: 10, Collation: unicodeCI},
		{Name: "col2", Kind: KindInt, Nullable: true},
		{Name: "id2", Kind: KindVarchar, Length: 20, Collation: unicodeCI},
	}}
	v8019 := version(t, "8.0.19")
	for _, tc := range []struct {
		name  string
		want  string
		table *Table
	}{
		{"_types", "j\x00\x00\x00\x00\x00\x01\x00\x04test\x00\x06_types\x00*\x10\x01\x01\x02\t\x03\b\xf6\x04\x05\x01\x02\t\x03\b\xf6\x04\x05\r\n\x13\x13\x12\x12\x11\x11\xfe\x0f\xfe\x0f\xfc\xfc\xfc\xfc\xfc\xfc\xfc\xfc\xfe\xfe\xff\xf5&\x00\bA\x1e\x04\bA\x1e\x04\b\x00\x06\x00\x06\x00\x06\xce\xfc\xfc\x03\xfe@@\x00\x01\x02\x03\x04\x01\x02\x03\x04\xf7\x01\xf8\x01\x04\x04\x00\x00\xfc\xc3\xff\x03\x01\x03\x00\u007f\x80\x03\f\xe0\xe0??????\xe0\xe0\xe0\xe0\a\x01\x00\x04\xfc\x94\x01\x05b_bit\tn_boolean\tn_tinyint\nn_smallint\vn_mediumint\x05n_int\bn_bigint\tn_decimal\an_float\bn_double\nnu_tinyint\vnu_smallint\fnu_mediumint\x06nu_int\tnu_bigint\nnu_decimal\bnu_float\tnu_double\x06t_year\x06t_date\x06t_time\at_ftime\nt_datetime\vt_fdatetime\vt_timestamp\ft_ftimestamp\x06c_char\tc_varchar\bc_binary\vc_varbinary\nc_tinyblob\x06c_blob\fc_mediumblob\nc_longblob\nc_tinytext\x06c_text\fc_mediumtext\nc_longtext\x06e_enum\x05s_set\ng_geometry\x06j_json\n\x01\xe0\x05\x05\x02\x011\x012\x06\x05\x02\x01a\x01b", types},
		{"_prim", "l\x00\x00\x00\x00\x00\x01\x00\x04test\x00\x05_prim\x00\x03\x03\x0f\b\x02x\x00\x02\x01\x01\x00\x02\x01\xe0\x04\f\x03id2\x03col\x03id1\b\x02\x02\x00", prim},
		{"_prim2", "m\x00\x00\x00\x00\x00\x01\x00\x04test\x00\x06_prim2\x00\x04\x03\xfe\x03\x0f\x04\xfe(P\x00\x05\x01\x01\x00\x02\x01\xe0\x04\x12\x04col1\x03id1\x04col2\x03id2\t\x04\x01\x00\x03\n", prim2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := mustBody(t)(TableMap{Table: tc.table, Metadata: MetadataFull, Flags: 1, Version: v8019}.Body())
			requireBytes(t, tc.name, []byte(tc.want), body)
		})
	}
}

func TestRowsMatchServers(t *testing.T) {
	for _, tc := range []struct {
		key  string
		rows Rows
	}{
		{"my8026_invisible@1027", Rows{Type: replication.WRITE_ROWS_EVENTv2, Table: invisibleT1, Flags: StmtEndFlag, Rows: []Row{
			{After: []any{1, 2, -3, "4", []byte{5}, uint64(6000000000)}},
		}}},
		{"my8026_invisible@1360", Rows{Type: replication.WRITE_ROWS_EVENTv2, Table: invisibleT1, Flags: StmtEndFlag, Rows: []Row{
			{After: []any{nil, nil, -33, "44", "U", nil}},
		}}},
		{"my8026_invisible@1687", Rows{Type: replication.UPDATE_ROWS_EVENTv2, Table: invisibleT1, Flags: StmtEndFlag, Rows: []Row{
			{Before: []any{nil, nil, -33, "44", "U", nil}, After: []any{111, 222, -333, "444", "U", nil}},
		}}},
		{"my8028_enumset@1077", Rows{Type: replication.WRITE_ROWS_EVENTv2, Table: enumSetT, Flags: StmtEndFlag, Rows: []Row{
			{After: []any{strings.Repeat("0123456789", 10), long298, "var1", "one,three", "0123456789"}},
		}}},
		{"my8028_enumset@2945", Rows{Type: replication.DELETE_ROWS_EVENTv2, Table: enumSetT, Flags: StmtEndFlag, Rows: []Row{
			{Before: []any{"field1", "field_2", 2, uint64(0x0a), long298}},
		}}},
		{"my8026_bit@927", Rows{Type: replication.WRITE_ROWS_EVENTv2, Table: bitFoo, Flags: StmtEndFlag, Rows: []Row{
			{After: []any{uint64(4), "foo", uint64(0x20)}},
		}}},
		{"my8022_json@1059", Rows{Type: replication.WRITE_ROWS_EVENTv2, Table: jsonT, Flags: StmtEndFlag, Rows: []Row{
			{After: []any{1, `{"name": "Joe", "age": 24, "data": "xxxxxxxxxx"}`, "Joe", 24}},
		}}},
		{"my8022_json@2111", Rows{Type: replication.WRITE_ROWS_EVENTv2, Table: jsonT, Flags: StmtEndFlag, Rows: []Row{
			{After: []any{4, `{"age": 24, "data": "xxxxxxxxxx", "name": "Joe"}`, "Joe", 24}},
			{After: []any{5, `{"age": 32, "data": "yyyyyyyyyy", "name": "Sue"}`, "Sue", 32}},
			{After: []any{6, `{"age": 40, "data": "zzzzzzzzzz", "name": "Pete"}`, "Pete", 40}},
		}}},
		// binlog_row_image=MINIMAL, binlog_row_value_options=PARTIAL_JSON:
		// UPDATE t SET json_col = JSON_REPLACE(json_col, '$.age', age + 2)
		{"my8022_json@3750", Rows{Type: replication.PARTIAL_UPDATE_ROWS_EVENT, Table: jsonT, Flags: StmtEndFlag,
			BeforeColumns: []bool{true, false, false, false}, AfterColumns: []bool{false, true, true, true},
			Rows: []Row{
				{Before: []any{1, nil, nil, nil}, After: []any{nil, JSONDiffs{{JSONReplace, "$.age", "26"}}, "Joe", 26}},
				{Before: []any{2, nil, nil, nil}, After: []any{nil, JSONDiffs{{JSONReplace, "$.age", "34"}}, "Sue", 34}},
				{Before: []any{3, nil, nil, nil}, After: []any{nil, JSONDiffs{{JSONReplace, "$.age", "42"}}, "Pete", 42}},
				{Before: []any{4, nil, nil, nil}, After: []any{nil, JSONDiffs{{JSONReplace, "$.age", "26"}}, "Joe", 26}},
				{Before: []any{5, nil, nil, nil}, After: []any{nil, JSONDiffs{{JSONReplace, "$.age", "34"}}, "Sue", 34}},
				{Before: []any{6, nil, nil, nil}, After: []any{nil, JSONDiffs{{JSONReplace, "$.age", "42"}}, "Pete", 42}},
			}}},
		{"my8040_minimal@374", Rows{Type: replication.WRITE_ROWS_EVENTv2, Table: minimalT1, Flags: StmtEndFlag,
			AfterColumns: []bool{true, false, true, false, true},
			Rows:         []Row{{After: []any{1, nil, "a", nil, uint32(3230202323)}}}}},
		{"my901_vector@1085", Rows{Type: replication.WRITE_ROWS_EVENTv2, Table: vectorFoo, Flags: StmtEndFlag, Rows: []Row{
			{After: []any{1, []float32{1.1, 2.2, 3.3}}},
			{After: []any{2, []float32{1, -1, 0}}},
		}}},
		// the same table after DROP DATABASE and CREATE again: a new table id
		{"my901_vector@3146", Rows{Type: replication.DELETE_ROWS_EVENTv2, Table: withID(vectorBar, 92), Flags: StmtEndFlag, Rows: []Row{
			{Before: []any{2, []float32{1.01, -1.01}, "bar", []float32{42, 43, 44, 45}}},
		}}},
		{"my960_tagged@461", Rows{Type: replication.WRITE_ROWS_EVENTv2, Table: taggedOrders, Flags: StmtEndFlag | 0x10, Rows: []Row{
			{After: []any{3, 100, "250.00"}},
		}}},
	} {
		t.Run(tc.key, func(t *testing.T) {
			real := realEvent(t, tc.key)
			body := mustBody(t)(tc.rows.Body())
			requireBytes(t, tc.key, real, frameLike(real, tc.rows.Type, 0, body))
		})
	}
}

// TestTransactionsMatchServers writes whole transactions as File does
// (positions, transaction length, checksums) and compares them with what
// the servers wrote from the same position.
func TestTransactionsMatchServers(t *testing.T) {
	ts := func(key string) uint32 { return binary.LittleEndian.Uint32(realEvent(t, key)) }
	over := BeginStatus(CollationUTF8MB4_0900AICI)
	over.WriteUpdatedDBs, over.UpdatedDBsOverMax = true, true
	for _, tc := range []struct {
		name   string
		keys   []string
		gtid   GTID
		events func(t *testing.T) []Event
	}{
		{
			name: "8.0.26 insert",
			keys: []string{"my8026_invisible@1120", "my8026_invisible@1199", "my8026_invisible@1275", "my8026_invisible@1360", "my8026_invisible@1407"},
			gtid: GTID{SID: MustUUID("97c7af02-4c50-11ec-acd8-681842034964"), GNO: 4, LastCommitted: 3, SequenceNumber: 4,
				ImmediateCommitTimestamp: 1637667198947737, OriginalCommitTimestamp: 1637667198947737,
				ImmediateServerVersion: 80026, OriginalServerVersion: 80026},
			events: func(t *testing.T) []Event {
				v := version(t, "8.0.26")
				begin := Query{ThreadID: 9, Schema: "mysql", SQL: "BEGIN", SuppressedUse: true, Status: BeginStatus(CollationUTF8MB4_0900AICI)}
				rows := Rows{Type: replication.WRITE_ROWS_EVENTv2, Table: invisibleT1, Flags: StmtEndFlag, Rows: []Row{{After: []any{nil, nil, -33, "44", "U", nil}}}}
				return []Event{
					{Type: replication.QUERY_EVENT, Timestamp: ts("my8026_invisible@1199"), Flags: begin.HeaderFlags(), Body: mustBody(t)(begin.Body())},
					{Type: replication.TABLE_MAP_EVENT, Timestamp: ts("my8026_invisible@1275"), Body: mustBody(t)(TableMap{Table: invisibleT1, Metadata: MetadataFull, Flags: 1, Version: v}.Body())},
					{Type: replication.WRITE_ROWS_EVENTv2, Timestamp: ts("my8026_invisible@1360"), Body: mustBody(t)(rows.Body())},
					{Type: replication.XID_EVENT, Timestamp: ts("my8026_invisible@1407"), Body: XIDBody(0x36)},
				}
			},
		},
		{
			name: "9.0.1 two inserts",
			keys: []string{"my901_vector@851", "my901_vector@930", "my901_vector@1004", "my901_vector@1085", "my901_vector@1170", "my901_vector@1279", "my901_vector@1401"},
			gtid: GTID{LastCommitted: 3, SequenceNumber: 4, ImmediateCommitTimestamp: 1723018995834455, OriginalCommitTimestamp: 1723018995834455,
				ImmediateServerVersion: 90001, OriginalServerVersion: 90001},
			events: func(t *testing.T) []Event {
				v := version(t, "9.0.1")
				begin := Query{ThreadID: 10, Schema: "dtb", SQL: "BEGIN", SuppressedUse: true, Status: BeginStatus(CollationLatin1SwedishCI)}
				foo := Rows{Type: replication.WRITE_ROWS_EVENTv2, Table: vectorFoo, Flags: StmtEndFlag, Rows: []Row{
					{After: []any{1, []float32{1.1, 2.2, 3.3}}}, {After: []any{2, []float32{1, -1, 0}}}}}
				bar := Rows{Type: replication.WRITE_ROWS_EVENTv2, Table: vectorBar, Flags: StmtEndFlag, Rows: []Row{
					{After: []any{1, []float32{1.1, 2.2}, nil, []float32{1.1, 2.2, 3.3, 4.4}}},
					{After: []any{2, []float32{1.01, -1.01}, "bar", []float32{42, 43, 44, 45}}}}}
				return []Event{
					{Type: replication.QUERY_EVENT, Timestamp: ts("my901_vector@930"), Flags: begin.HeaderFlags(), Body: mustBody(t)(begin.Body())},
					{Type: replication.TABLE_MAP_EVENT, Timestamp: ts("my901_vector@1004"), Body: mustBody(t)(TableMap{Table: vectorFoo, Metadata: MetadataFull, Flags: 1, Version: v}.Body())},
					{Type: replication.WRITE_ROWS_EVENTv2, Timestamp: ts("my901_vector@1085"), Body: mustBody(t)(foo.Body())},
					{Type: replication.TABLE_MAP_EVENT, Timestamp: ts("my901_vector@1170"), Body: mustBody(t)(TableMap{Table: vectorBar, Metadata: MetadataFull, Flags: 1, Version: v}.Body())},
					{Type: replication.WRITE_ROWS_EVENTv2, Timestamp: ts("my901_vector@1279"), Body: mustBody(t)(bar.Body())},
					{Type: replication.XID_EVENT, Timestamp: ts("my901_vector@1401"), Body: XIDBody(14)},
				}
			},
		},
		{
			name: "9.6.0 tagged",
			keys: []string{"my960_tagged@245", "my960_tagged@328", "my960_tagged@405", "my960_tagged@461", "my960_tagged@510"},
			gtid: GTID{SID: MustUUID("55778904-0299-11f1-b1b8-4ef0c4956feb"), Tag: "mytag", GNO: 3, SequenceNumber: 1,
				ImmediateCommitTimestamp: 1770368687207196, OriginalCommitTimestamp: 1770368687207196,
				ImmediateServerVersion: 90600, OriginalServerVersion: 90600},
			events: func(t *testing.T) []Event {
				v := version(t, "9.6.0")
				begin := Query{ThreadID: 11, Schema: "test", SQL: "BEGIN", SuppressedUse: true, Status: over}
				rows := Rows{Type: replication.WRITE_ROWS_EVENTv2, Table: taggedOrders, Flags: StmtEndFlag | 0x10, Rows: []Row{{After: []any{3, 100, "250.00"}}}}
				return []Event{
					{Type: replication.QUERY_EVENT, Timestamp: ts("my960_tagged@328"), Flags: begin.HeaderFlags(), Body: mustBody(t)(begin.Body())},
					{Type: replication.TABLE_MAP_EVENT, Timestamp: ts("my960_tagged@405"), Body: mustBody(t)(TableMap{Table: taggedOrders, Metadata: MetadataMinimal, Flags: 3, Version: v}.Body())},
					{Type: replication.WRITE_ROWS_EVENTv2, Timestamp: ts("my960_tagged@461"), Body: mustBody(t)(rows.Body())},
					{Type: replication.XID_EVENT, Timestamp: ts("my960_tagged@510"), Body: XIDBody(40)},
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := realRange(t, tc.keys...)
			start := binary.LittleEndian.Uint32(want[13:]) - binary.LittleEndian.Uint32(want[9:])
			f := fileAt(binary.LittleEndian.Uint32(want[5:]), start)
			_, end, err := f.AppendTransaction(tc.gtid, ts(tc.keys[0]), tc.events(t), Uncompressed)
			if err != nil {
				t.Fatal(err)
			}
			requireBytes(t, tc.name, want, f.Bytes()[start:end])
		})
	}
}
