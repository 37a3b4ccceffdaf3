package mysqlbinlog

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"
)

// The value samples below are go-mysql's (row_event_test.go), captured
// from MySQL servers: TestDecodeDatetime2, TestDecodeTime2, TestDecimal,
// TestParseJson, TestJsonCompatibility.

func TestDatetimeMatchesServers(t *testing.T) {
	for _, tc := range []struct {
		want  string
		fsp   int
		value string
	}{
		{"\xfe\xf3\xff\x7e\xfb", 0, "9999-12-31 23:59:59"},
		{"\x99\x9a\xb8\xf7\xaa", 0, "2016-10-28 15:30:42"},
		{"\x99\x02\xc2\x00\x00", 0, "1970-01-01 00:00:00"},
		{"\x80\x00\x00\x00\x00", 0, "0000-00-00 00:00:00"},
		{"\x80\x00\x02\xf1\x05", 0, "0000-00-01 15:04:05"},
		{"\x80\x03\x82\x00\x00", 0, "0001-01-01 00:00:00"},
		{"\x80\x03\x82\x00\x00\x0c", 2, "0001-01-01 00:00:00.12"},
		{"\x80\x03\x82\x00\x00\x04\xd3", 4, "0001-01-01 00:00:00.1235"},
		{"\x80\x03\x82\x00\x00\x01\xe2\x40", 6, "0001-01-01 00:00:00.123456"},
	} {
		got, err := appendValue(nil, Column{Name: "dt", Kind: KindDatetime, FSP: tc.fsp}, tc.value)
		if err != nil {
			t.Fatal(err)
		}
		requireBytes(t, tc.value, []byte(tc.want), got)
	}
}

func TestTimeMatchesServers(t *testing.T) {
	for _, tc := range []struct {
		want  string
		fsp   int
		value string
	}{
		{"\xb4\x6e\xfb", 0, "838:59:59"},
		{"\x80\xf1\x05", 0, "15:04:05"},
		{"\x80\x00\x00", 0, "00:00:00"},
		{"\x7f\xff\xff", 0, "-00:00:01"},
		{"\x7f\x0e\xfb", 0, "-15:04:05"},
		{"\x4b\x91\x05", 0, "-838:59:59"},
		{"\x7f\xff\xff\xff", 2, "-00:00:00.01"},
		{"\x7f\x0e\xfa\xf4", 2, "-15:04:05.12"},
		{"\x4b\x91\x05\xf4", 2, "-838:59:58.12"},
		{"\x7f\xff\xff\xff\xff", 4, "-00:00:00.0001"},
		{"\x7f\x0e\xfa\xfb\x2d", 4, "-15:04:05.1235"},
		{"\x4b\x91\x05\xfb\x2d", 4, "-838:59:58.1235"},
		{"\x7f\xff\xff\xff\xff\xff", 6, "-00:00:00.000001"},
		{"\x7f\x0e\xfa\xfe\x1d\xc0", 6, "-15:04:05.123456"},
		{"\x4b\x91\x05\xfe\x1d\xc0", 6, "-838:59:58.123456"},
	} {
		got, err := appendValue(nil, Column{Name: "t", Kind: KindTime, FSP: tc.fsp}, tc.value)
		if err != nil {
			t.Fatal(err)
		}
		requireBytes(t, tc.value, []byte(tc.want), got)
	}
}

func TestDecimalMatchesServers(t *testing.T) {
	for _, tc := range []struct {
		value            string
		precision, scale int
		want             []byte
	}{
		{"123.4560000000000000", 40, 16, []byte{128, 0, 0, 0, 0, 0, 0, 0, 0, 0, 123, 27, 46, 2, 0, 0, 0, 0, 0}},
		{"0.0000010000000000", 40, 16, []byte{128, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 232, 0, 0, 0, 0}},
		{"100000000.0000000000000000", 40, 16, []byte{128, 0, 0, 0, 0, 0, 0, 5, 245, 225, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"100000000.0000000200000000", 40, 16, []byte{128, 0, 0, 0, 0, 0, 0, 5, 245, 225, 0, 0, 0, 0, 20, 0, 0, 0, 0}},
		{"123456.1234567890000000", 40, 16, []byte{128, 0, 0, 0, 0, 0, 0, 0, 1, 226, 64, 7, 91, 205, 21, 0, 0, 0, 0}},
		{"123456234234234757655.1234567890123456", 40, 16, []byte{128, 0, 123, 27, 49, 148, 250, 13, 254, 30, 23, 7, 91, 205, 21, 0, 1, 226, 64}},
		{"-123456234234234757655.1234567890123456", 40, 16, []byte{127, 255, 132, 228, 206, 107, 5, 242, 1, 225, 232, 248, 164, 50, 234, 255, 254, 29, 191}},
		{"0.0000000000000000", 40, 16, []byte{128, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"1000000000000000000000000000000", 60, 0, []byte{128, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 232, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"1", 60, 0, []byte{128, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}},
		{"0.100000000000000000000000000000", 30, 30, []byte{133, 245, 225, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"0.000000000000001000000000000000", 30, 30, []byte{128, 0, 0, 0, 0, 0, 3, 232, 0, 0, 0, 0, 0, 0}},
		{"250.00", 10, 2, []byte{0x80, 0, 0, 0xfa, 0}}, // the 9.6.0 sample's DECIMAL(10,2)
	} {
		got, err := appendValue(nil, Column{Name: "d", Kind: KindDecimal, Precision: tc.precision, Scale: tc.scale}, tc.value)
		if err != nil {
			t.Fatal(err)
		}
		requireBytes(t, tc.value, tc.want, got)
	}
}

func TestJSONMatchesServers(t *testing.T) {
	lorem := strings.Repeat("x", 2750)
	for _, tc := range []struct {
		name, json, want string
	}{
		{"object of strings", `{"key1":"value1","key2":"value2"}`,
			"\x00\x02\x00(\x00\x12\x00\x04\x00\x16\x00\x04\x00\f\x1a\x00\f!\x00key1key2\x06value1\x06value2"},
		{"inlined int16", `{"a":1234}`, "\x00\x01\x00\x0c\x00\x0b\x00\x01\x00\x05\xd2\x04a"},
		{"empty object", `{}`, "\x00\x00\x00\x04\x00"},
		// a string longer than 127 bytes: its length in two bytes
		{"long string", `{"text":"` + lorem + `"}`, "\x00\x01\x00\xcf\n\v\x00\x04\x00\f\x0f\x00text\xbe\x15" + lorem},
		// 8.0.22 json.binlog: keys by length then bytes
		{"sorted keys", `{"name": "Joe", "age": 24, "data": "xxxxxxxxxx"}`,
			"\x00\x03\x00\x33\x00\x19\x00\x03\x00\x1c\x00\x04\x00\x20\x00\x04\x00\x05\x18\x00\x0c\x24\x00\x0c\x2f\x00agedataname\x0axxxxxxxxxx\x03Joe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EncodeJSON(tc.json)
			if err != nil {
				t.Fatal(err)
			}
			requireBytes(t, tc.name, []byte(tc.want), got)
		})
	}
}

// TestValuesRoundTrip covers the types no capture above holds a value
// of, through go-mysql's decoder: what it decodes must be what was
// written.
func TestValuesRoundTrip(t *testing.T) {
	table := &Table{ID: 200, Schema: "s", Name: "all", Columns: []Column{
		{Name: "ts", Kind: KindTimestamp, FSP: 3},
		{Name: "ts0", Kind: KindTimestamp},
		{Name: "d", Kind: KindDate},
		{Name: "y", Kind: KindYear},
		{Name: "f", Kind: KindFloat},
		{Name: "db", Kind: KindDouble},
		{Name: "bin", Kind: KindBinary, Length: 4},
		{Name: "vb", Kind: KindVarbinary, Length: 300},
		{Name: "ch", Kind: KindChar, Length: 5, Collation: CollationLatin1SwedishCI},
		{Name: "st", Kind: KindSet, Elements: []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}},
		{Name: "g", Kind: KindGeometry, Geometry: Point},
		{Name: "ti", Kind: KindTinyInt, Unsigned: true},
		{Name: "si", Kind: KindSmallInt},
		{Name: "mi", Kind: KindMediumInt},
		{Name: "mu", Kind: KindMediumInt, Unsigned: true},
		{Name: "bu", Kind: KindBigInt, Unsigned: true},
		{Name: "t0", Kind: KindTime},
		{Name: "lt", Kind: KindLongText},
	}}
	point := []byte{0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0x40}
	row := []any{"2026-03-01 10:00:00.125", "1970-01-01 00:00:01", "2024-02-29", 2155, float32(1.5), -2.25, []byte{1, 2}, "v", "ab  ",
		"a,c,i", point, uint8(255), -32768, -8388608, 16777215, uint64(18446744073709551615), "-12:34:56", "long"}
	// go-mysql decodes integers as signed whatever the table map says
	// (0xff is -1) and BINARY/VARBINARY as strings.
	want := []string{"2026-03-01 10:00:00.125", "1970-01-01 00:00:01", "2024-02-29", "2155", "1.5", "-2.25", `\x01\x02\x00\x00`, "v", "ab",
		"261", fmt.Sprint(point), "-1", "-32768", "-8388608", "-1", "-1", "-12:34:56", "[108 111 110 103]"}
	body, err := Rows{Type: replication.WRITE_ROWS_EVENTv2, Table: table, Flags: StmtEndFlag, Rows: []Row{{After: row}}}.Body()
	if err != nil {
		t.Fatal(err)
	}
	tm, err := TableMap{Table: table, Flags: 1, Metadata: MetadataFull, Version: Version{8, 4, 3}}.Body()
	if err != nil {
		t.Fatal(err)
	}
	f := fileAt(1, 4)
	f.Append(Event{Type: replication.TABLE_MAP_EVENT, Body: tm})
	f.Append(Event{Type: replication.WRITE_ROWS_EVENTv2, Body: body})
	fde, _ := FormatDescription{ServerVersion: "8.4.3", Checksum: true}.Body()
	events := decodeEvents(t, Frame(Header{Type: replication.FORMAT_DESCRIPTION_EVENT, LogPos: 4}, fde, true), f.Bytes()[4:])
	rows := events[1].Event.(*replication.RowsEvent)
	time.Local = time.UTC // go-mysql prints TIMESTAMP in the local zone
	for i, v := range rows.Rows[0] {
		got := fmt.Sprint(v)
		if s, ok := v.(string); ok {
			got = strings.Trim(fmt.Sprintf("%q", s), `"`)
		}
		if got != want[i] {
			t.Errorf("column %s decodes as %s, want %s", table.Columns[i].Name, got, want[i])
		}
	}
}

func TestValuesRefuseWhatTheColumnCannotHold(t *testing.T) {
	for _, tc := range []struct {
		col Column
		v   any
	}{
		{Column{Name: "c", Kind: KindVarchar, Length: 2}, "abcdefghi"},
		{Column{Name: "e", Kind: KindEnum, Elements: []string{"a"}}, "b"},
		{Column{Name: "s", Kind: KindSet, Elements: []string{"a"}}, "a,z"},
		{Column{Name: "i", Kind: KindTinyInt}, 128},
		{Column{Name: "u", Kind: KindInt, Unsigned: true}, -1},
		{Column{Name: "d", Kind: KindDecimal, Precision: 4, Scale: 2}, "123.4"},
		{Column{Name: "d", Kind: KindDecimal, Precision: 4, Scale: 2}, "1.234"},
		{Column{Name: "t", Kind: KindDatetime, FSP: 2}, "2024-01-01 00:00:00.123"},
		{Column{Name: "b", Kind: KindBit, Length: 3}, uint64(8)},
		{Column{Name: "v", Kind: KindVector, Length: 2}, []float32{1, 2, 3}},
		{Column{Name: "j", Kind: KindJSON}, `{"a":`},
		{Column{Name: "ts", Kind: KindTimestamp}, "2038-01-19 03:14:08"},
		{Column{Name: "ts", Kind: KindTimestamp}, "1969-12-31 23:59:59"},
	} {
		if _, err := appendValue(nil, tc.col, tc.v); err == nil {
			t.Errorf("column %s (kind %d) took %v", tc.col.Name, tc.col.Kind, tc.v)
		}
	}
}

// TestJSONLargeFormat: a document past 64 KiB takes the large object and
// array formats (4-byte counts, sizes and offsets, 32-bit integers
// inlined); go-mysql decodes it back.
func TestJSONLargeFormat(t *testing.T) {
	big := strings.Repeat("z", 70000)
	doc := `{"big": "` + big + `", "n": [70000, -1, true], "o": {"k": 2147483647}}`
	b, err := EncodeJSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	if b[0] != jsonbLargeObject {
		t.Fatalf("type %#x, want the large object", b[0])
	}
	table := &Table{ID: 1, Schema: "s", Name: "j", Columns: []Column{{Name: "j", Kind: KindJSON}}}
	body, err := Rows{Type: replication.WRITE_ROWS_EVENTv2, Table: table, Flags: StmtEndFlag, Rows: []Row{{After: []any{doc}}}}.Body()
	if err != nil {
		t.Fatal(err)
	}
	tm, _ := TableMap{Table: table, Flags: 1, Version: Version{8, 4, 3}}.Body()
	f := fileAt(1, 4)
	f.Append(Event{Type: replication.TABLE_MAP_EVENT, Body: tm})
	f.Append(Event{Type: replication.WRITE_ROWS_EVENTv2, Body: body})
	fde, _ := FormatDescription{ServerVersion: "8.4.3", Checksum: true}.Body()
	events := decodeEvents(t, Frame(Header{Type: replication.FORMAT_DESCRIPTION_EVENT, LogPos: 4}, fde, true), f.Bytes()[4:])
	got := fmt.Sprint(events[1].Event.(*replication.RowsEvent).Rows[0][0])
	want := `{"big":"` + big + `","n":[70000,-1,true],"o":{"k":2147483647}}`
	if got != want {
		t.Fatalf("go-mysql decodes %.80s..., want %.80s...", got, want)
	}
}

// TestFileWithoutChecksums: with binlog_checksum=NONE the
// FORMAT_DESCRIPTION still ends with a checksum, its algorithm byte 0,
// and the other events have none; go-mysql reads such a file.
func TestFileWithoutChecksums(t *testing.T) {
	f, err := NewFile(FormatDescription{ServerVersion: "8.4.3"}, 1, 1700000000, PreviousGTIDs{})
	if err != nil {
		t.Fatal(err)
	}
	f.Rotate(1700000001, "binlog.000002")
	p := replication.NewBinlogParser()
	var types []replication.EventType
	var sizes []uint32
	if err := p.ParseReader(bytes.NewReader(f.Bytes()[4:]), func(e *replication.BinlogEvent) error {
		types = append(types, e.Header.EventType)
		sizes = append(sizes, e.Header.EventSize)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(types) != 3 || types[2] != replication.ROTATE_EVENT || sizes[1] != HeaderSize+8 || sizes[2] != HeaderSize+8+13 {
		t.Fatalf("events %v of sizes %v", types, sizes)
	}
}
