package change

import (
	"strings"
	"testing"
)

// joe is the binary JSON MySQL 8.0.22 wrote for {"age": 25, "data":
// "xxxxxxxxxx", "name": "Joe"} (testdata of engine/binlog,
// json.binlog.000001): a small object, keys by length then bytes, the
// 16-bit age in its entry.
var joe = []byte{
	0x00,       // small object
	0x03, 0x00, // 3 members
	0x33, 0x00, // 51 bytes
	0x19, 0x00, 0x03, 0x00, // "age" at 25
	0x1c, 0x00, 0x04, 0x00, // "data" at 28
	0x20, 0x00, 0x04, 0x00, // "name" at 32
	0x05, 0x19, 0x00, // int16 25
	0x0c, 0x24, 0x00, // string at 36
	0x0c, 0x2f, 0x00, // string at 47
	'a', 'g', 'e', 'd', 'a', 't', 'a', 'n', 'a', 'm', 'e',
	0x0a, 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x',
	0x03, 'J', 'o', 'e',
}

func jsonText(t *testing.T, doc []byte) string {
	t.Helper()
	b, err := AppendMySQLJSON(nil, doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestMySQLJSONDoc(t *testing.T) {
	if got, want := jsonText(t, joe), `{"age": 25, "data": "xxxxxxxxxx", "name": "Joe"}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if got := jsonText(t, nil); got != "null" {
		t.Errorf("empty document: %s, want null (MySQL reads it so)", got)
	}
	if _, err := AppendMySQLJSON(nil, joe[:30]); err == nil {
		t.Error("a truncated document formats without error")
	}
	// A string with every escape MySQL's double_quote writes; 0x1f it
	// leaves as it is.
	s := "a\"\\\b\f\n\r\t\x01\x1f/é"
	doc := append([]byte{jsonString, byte(len(s))}, s...)
	if got, want := jsonText(t, doc), "\"a\\\"\\\\\\b\\f\\n\\r\\t\\u0001\x1f/é\""; got != want {
		t.Errorf("string: got %q, want %q", got, want)
	}
}

// TestJSONDouble checks doubles as MySQL prints them in JSON: my_gcvt's
// choice of plain or exponent notation, ".0" on whole numbers.
func TestJSONDouble(t *testing.T) {
	for _, tc := range []struct {
		d    float64
		want string
	}{
		{0, "0.0"}, {1, "1.0"}, {-2.5, "-2.5"}, {0.1, "0.1"}, {123.456, "123.456"},
		{1e14, "100000000000000.0"}, {1e15, "1e15"}, {1.5e15, "1.5e15"}, {1234567890123456.7, "1234567890123456.8"},
		{0.0001, "0.0001"}, {3e-5, "0.00003"}, {1e-15, "0.000000000000001"}, {1e-16, "1e-16"}, {1.5e-7, "0.00000015"},
		{1e100, "1e100"}, {-1.25e-300, "-1.25e-300"},
	} {
		if got := string(appendJSONDouble(nil, tc.d)); got != tc.want {
			t.Errorf("%g: got %s, want %s", tc.d, got, tc.want)
		}
	}
}

// diff encodes one JSON diff as MySQL's Json_diff_vector does.
func diff(op byte, path string, value []byte) []byte {
	b := []byte{op, byte(len(path))}
	b = append(b, path...)
	if op != jsonDiffRemove {
		b = append(b, byte(len(value)))
		b = append(b, value...)
	}
	return b
}

func TestApplyJSONDiffs(t *testing.T) {
	str := func(s string) []byte { return append([]byte{jsonString, byte(len(s))}, s...) }
	arr := []byte{jsonSmallArray, 0x02, 0x00, 0x0a, 0x00, jsonInt16, 0x01, 0x00, jsonLiteral, jsonTrue, 0x00}
	for _, tc := range []struct {
		name  string
		diffs []byte
		want  string
	}{
		// The diff MySQL 8.0.22 logged for UPDATE t SET json_col =
		// JSON_REPLACE(json_col, '$.age', 26).
		{"replace", []byte{0x00, 0x05, '$', '.', 'a', 'g', 'e', 0x03, 0x05, 0x1a, 0x00}, `{"age": 26, "data": "xxxxxxxxxx", "name": "Joe"}`},
		{"insert sorts the key", diff(jsonDiffInsert, "$.city", str("Oslo")), `{"age": 25, "city": "Oslo", "data": "xxxxxxxxxx", "name": "Joe"}`},
		{"quoted key sorts by bytes after length", diff(jsonDiffInsert, `$."a b"`, str("x")), `{"a b": "x", "age": 25, "data": "xxxxxxxxxx", "name": "Joe"}`},
		{"remove", diff(jsonDiffRemove, "$.data", nil), `{"age": 25, "name": "Joe"}`},
		{"several, nested", append(append(diff(jsonDiffReplace, "$.name", arr), diff(jsonDiffInsert, "$.name[1]", str("mid"))...), diff(jsonDiffRemove, "$.name[0]", nil)...),
			`{"age": 25, "data": "xxxxxxxxxx", "name": ["mid", true]}`},
		{"array append past the end", append(diff(jsonDiffReplace, "$.name", arr), diff(jsonDiffInsert, "$.name[9]", str("z"))...), `{"age": 25, "data": "xxxxxxxxxx", "name": [1, true, "z"]}`},
		{"whole document", diff(jsonDiffReplace, "$", str("s")), `"s"`},
		{"nothing", nil, `{"age": 25, "data": "xxxxxxxxxx", "name": "Joe"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := ApplyJSONDiffs(joe, tc.diffs)
			if err != nil {
				t.Fatal(err)
			}
			if got := jsonText(t, doc); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
	for _, bad := range [][]byte{
		diff(jsonDiffReplace, "$.nope", str("x")),
		diff(jsonDiffInsert, "$.age", str("x")), // exists
		diff(jsonDiffRemove, "$.data[0]", nil),
		diff(7, "$.age", nil),
		{0x00, 0x05, '$'},
	} {
		if _, err := ApplyJSONDiffs(joe, bad); err == nil {
			t.Errorf("diff %q applied without error", bad)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("error of more than one line: %v", err)
		}
	}
}

func TestVectorText(t *testing.T) {
	v := []byte{0xcd, 0xcc, 0x8c, 0x3f, 0x00, 0x00, 0x80, 0xbf, 0, 0, 0, 0}
	if got, want := string(appendVector(nil, v)), "[1.10000e+00,-1.00000e+00,0.00000e+00]"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
