package client

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// decodeBoth decodes line with lineDecoder and with encoding/json, the
// reference. lineDecoder may give up (fast is false), but what it gives
// must be exactly what json gives, as a Message and as a view.
func decodeBoth(t testing.TB, line []byte) (fast bool, jsonErr error) {
	t.Helper()
	var d lineDecoder
	var got, want envelope
	var v MessageView
	fast = d.decode(line, &v)
	jsonErr = json.Unmarshal(line, &want)
	if fast && jsonErr != nil {
		t.Fatalf("decoded a line json rejects (%v): %q", jsonErr, line)
	}
	if !fast {
		return false, jsonErr
	}
	got.Message, got.Checkpoint = v.Message(), v.checkpoint
	if string(got.Raw) != string(line) {
		t.Fatalf("raw %q, want the line %q", got.Raw, line)
	}
	got.Raw = nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded differently from json:\nline %q\n got %s\nwant %s", line, dump(got), dump(want))
	}
	checkView(t, &v, &want.Message, line)
	return fast, jsonErr
}

// decodeEnvelope decodes line with d as Stream does, into the envelope
// json would make (without Raw).
func decodeEnvelope(d *lineDecoder, line []byte, env *envelope) bool {
	var v MessageView
	if !d.decode(line, &v) {
		return false
	}
	env.Message, env.Checkpoint = v.Message(), v.checkpoint
	env.Raw = nil
	return true
}

// checkView checks every value the view gives against json's message m:
// each column of m's maps is one of the view's, and each row's value,
// NULL, absence and change are m's.
func checkView(t testing.TB, v *MessageView, m *Message, line []byte) {
	t.Helper()
	names := map[string]bool{}
	for i := range v.Columns() {
		n := v.Column(i)
		if names[n] {
			t.Fatalf("column %q twice in the view of %q", n, line)
		}
		names[n] = true
		if got := v.ColumnIndex(n); got != i {
			t.Fatalf("ColumnIndex(%q) = %d, want %d: %q", n, got, i, line)
		}
		if v.SQLType(i) != m.SQLType[n] || v.MySQLType(i) != m.MysqlType[n] {
			t.Fatalf("column %q: types %d %q, want %d %q: %q", n, v.SQLType(i), v.MySQLType(i), m.SQLType[n], m.MysqlType[n], line)
		}
	}
	for _, tm := range []map[string]string{m.MysqlType} {
		for k := range tm {
			if !names[k] {
				t.Fatalf("column %q missing from the view of %q", k, line)
			}
		}
	}
	if v.Rows() != len(m.Data) || v.OldRows() != len(m.Old) {
		t.Fatalf("%d rows and %d old, want %d and %d: %q", v.Rows(), v.OldRows(), len(m.Data), len(m.Old), line)
	}
	check := func(what string, rows []map[string]*string, value func(r, c int) ([]byte, bool), present func(r, c int) bool) {
		for r, row := range rows {
			for k := range row {
				if !names[k] {
					t.Fatalf("%s row %d: column %q missing from the view of %q", what, r, k, line)
				}
			}
			for c := range v.Columns() {
				p, in := row[v.Column(c)]
				val, ok := value(r, c)
				if present != nil && present(r, c) != in {
					t.Fatalf("%s row %d column %q: changed %v, want %v: %q", what, r, v.Column(c), !in, in, line)
				}
				if ok != (p != nil) || ok && string(val) != *p {
					t.Fatalf("%s row %d column %q: %q %v, want %v: %q", what, r, v.Column(c), val, ok, p, line)
				}
			}
		}
	}
	check("data", m.Data, v.Value, nil)
	check("old", m.Old, v.Old, v.Changed)
}

// dump shows an envelope with its pointers followed and nil told from empty.
func dump(env envelope) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%+v", env.Message)
	rows := func(name string, rs []map[string]*string) {
		fmt.Fprintf(&b, "\n  %s nil=%v:", name, rs == nil)
		for _, r := range rs {
			fmt.Fprintf(&b, " {nil=%v", r == nil)
			for _, k := range slices.Sorted(func(yield func(string) bool) {
				for k := range r {
					if !yield(k) {
						return
					}
				}
			}) {
				if v := r[k]; v != nil {
					fmt.Fprintf(&b, " %q:%q", k, *v)
				} else {
					fmt.Fprintf(&b, " %q:null", k)
				}
			}
			b.WriteString("}")
		}
	}
	rows("data", env.Data)
	rows("old", env.Old)
	fmt.Fprintf(&b, "\n  pkNames nil=%v sqlType nil=%v mysqlType nil=%v", env.PkNames == nil, env.SQLType == nil, env.MysqlType == nil)
	if env.Checkpoint != nil {
		fmt.Fprintf(&b, "\n  checkpoint %d", *env.Checkpoint)
	}
	return b.String()
}

// TestDecodeLines: lines of every shape the server writes, and the odd ones
// JSON allows, decode as json decodes them; what the decoder does not know
// to decode the same goes to json.
func TestDecodeLines(t *testing.T) {
	const (
		fast     = iota // decoded without json, as json does
		fallback        // left to json
	)
	cases := []struct {
		why  string
		want int
		line string
	}{
		{"an insert as FlatWriter writes it", fast, string(benchLine(3))},
		{"a DDL", fast, `{"id":7,"database":"shop","table":"orders","pkNames":null,"isDdl":true,"type":"ALTER","es":1767225600000,"ts":1767225600001,"sql":"ALTER TABLE orders ADD COLUMN \"x\" INT -- \u00e9\n","sqlType":null,"mysqlType":null,"data":null,"old":null,"seq":7,"source":"s0","originDatabase":"shop_0","originTable":"orders","position":"bin.000001:4","gtid":"0-1-9"}`},
		{"a checkpoint", fast, `{"checkpoint":18446744073709551615}`},
		{"a checkpoint of null", fast, `{"checkpoint":null}`},
		{"an update with old", fast, `{"id":1,"type":"UPDATE","data":[{"id":"1","n":"b"},{"id":"2","n":null}],"old":[{"n":"a"},{}],"seq":1}`},
		{"empty arrays and maps are not nil", fast, `{"pkNames":[],"sqlType":{},"mysqlType":{},"data":[],"old":[{}]}`},
		{"null rows and elements", fast, `{"pkNames":["id",null],"sqlType":{"a":null},"mysqlType":{"a":null},"data":[null,{"a":null}],"old":null}`},
		{"null leaves scalars zero", fast, `{"id":null,"database":null,"isDdl":null,"es":null,"seq":null,"gtid":null}`},
		{"any key order, white space", fast, " \t{ \"seq\" : 5 ,\r\n\"data\":[ { \"b\" : \"2\" , \"a\" : \"1\" } ] , \"id\" : 4 , \"isDdl\" : false }\n "},
		{"unknown keys of every kind", fast, `{"x":{"a":[1,-2.5e+3,0.0,true,false,null,"s\"\\",{}],"b":{"c":[[]]}},"id":1,"y":[],"z":"\u00e9\ud83d\udce6","w":-0,"v":1E-7}`},
		{"escapes", fast, `{"sql":"\"\\\/\b\f\n\r\t\u0000\u001f\u00e9\u20ac\ud83d\udce6","data":[{"\u0069d":"\u0031","k\"ey":"v\\al"}]}`},
		{"lone and broken surrogates become U+FFFD", fast, `{"sql":"\ud800 \udc00 \ud800\u0041 \ud83d\ud83d\udce6 \udbff\udfff"}`},
		{"invalid UTF-8 becomes U+FFFD", fast, "{\"sql\":\"a\xffb\xc3\xed\xa0\x80\",\"data\":[{\"k\xfe\":\"\xc3(\"}]}"},
		{"valid UTF-8 as is", fast, `{"database":"ünïcode 📦","data":[{"ключ":"значение"}]}`},
		{"negative and extreme numbers", fast, `{"es":-9223372036854775808,"ts":9223372036854775807,"id":18446744073709551615,"seq":0,"sqlType":{"a":-7,"b":2005,"c":-0}}`},
		{"repeated keys in a row: the last wins", fallback, `{"data":[{"a":"1","a":null,"b":"2","b":"3"}],"sqlType":{"a":1,"a":2}}`},
		{"an empty object", fast, `{}`},

		{"a field twice", fallback, `{"id":1,"id":2}`},
		{"rows twice: json merges them", fallback, `{"data":[{"a":"1"}],"data":[{"b":"2"}]}`},
		{"a field in other case", fallback, `{"ID":1}`},
		{"a field matched by Unicode folding (KELVIN SIGN)", fallback, "{\"chec\u212apoint\":1}"},
		{"a field matched by Unicode folding (LONG S)", fallback, "{\"\u017feq\":1}"},
		{"null line", fallback, `null`},
		{"not an object", fallback, `[1]`},
		{"a fraction for an integer", fallback, `{"id":1.0}`},
		{"an exponent for an integer", fallback, `{"es":1e3}`},
		{"a negative unsigned", fallback, `{"seq":-1}`},
		{"a negative zero unsigned", fallback, `{"seq":-0}`},
		{"overflow", fallback, `{"id":18446744073709551616}`},
		{"int64 overflow", fallback, `{"es":9223372036854775808}`},
		{"int64 underflow", fallback, `{"es":-9223372036854775809}`},
		{"a string for a number", fallback, `{"id":"1"}`},
		{"a number for a string", fallback, `{"data":[{"a":1}]}`},
		{"a bool for a string", fallback, `{"type":true}`},
		{"an object for rows", fallback, `{"data":{}}`},
		{"a row that is an array", fallback, `{"data":[[]]}`},
		{"leading zero", fallback, `{"id":01}`},
		{"an unknown value that is not JSON", fallback, `{"x":[1,]}`},
		{"an invalid escape", fallback, `{"sql":"\x"}`},
		{"an escaped apostrophe (json's unquote takes it, its scanner does not)", fallback, `{"sql":"\'"}`},
		{"a short \\u", fallback, `{"sql":"\u12"}`},
		{"a control character", fallback, "{\"sql\":\"a\nb\"}"},
		{"a trailing comma", fallback, `{"id":1,}`},
		{"garbage after the object", fallback, `{"id":1} x`},
		{"two objects", fallback, `{"id":1}{"id":2}`},
		{"unterminated", fallback, `{"id":1`},
		{"a truncated literal", fallback, `{"isDdl":tru}`},
		{"a literal run on", fallback, `{"isDdl":truex}`},
		{"an empty line", fallback, ``},
		{"deep nesting", fallback, `{"x":` + strings.Repeat("[", maxDepth+2) + strings.Repeat("]", maxDepth+2) + `}`},
	}
	for _, c := range cases {
		fast, _ := decodeBoth(t, []byte(c.line))
		if fast != (c.want == 0) {
			t.Errorf("%s: decoded without json: %v, want %v", c.why, fast, c.want == 0)
		}
	}
}

// TestDecodeRandom decodes random messages written as flat.Writer writes
// them, then the same with their members shuffled, unknown members added and
// white space everywhere, then with bytes broken: every line decodes as json
// decodes it, and the well-formed ones without json.
func TestDecodeRandom(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	var d lineDecoder // one for all lines, as in Stream
	for range 1000 {
		m := randomMsg(r)
		line := appendFlat(nil, m)
		if fast, _ := decodeBoth(t, line); !fast {
			t.Fatalf("a line as FlatWriter writes it went to json: %q", line)
		}
		reordered := reorder(t, r, line)
		if fast, _ := decodeBoth(t, reordered); !fast {
			t.Fatalf("a reordered line went to json: %q", reordered)
		}
		// The decoder keeps state between lines: decode with the shared one.
		var got, want envelope
		if decodeEnvelope(&d, line, &got) {
			_ = json.Unmarshal(line, &want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("the shared decoder decoded differently: %q", line)
			}
		}
		for range 5 {
			decodeBoth(t, corrupt(r, line))
		}
	}
}

// reorder rewrites a line's members in random order with random white
// space, inner values indented, and unknown members mixed in.
func reorder(t testing.TB, r *rand.Rand, line []byte) []byte {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(line, &members); err != nil {
		t.Fatal(err)
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range members {
			if !yield(k) {
				return
			}
		}
	})
	r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	ws := func() string { return [...]string{"", "", " ", "\n", "\t", "\r\n  "}[r.IntN(6)] }
	var b bytes.Buffer
	b.WriteString(ws() + "{")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(ws() + ",")
		}
		if r.IntN(3) == 0 {
			u, _ := json.Marshal(randomJSON(r, 3))
			fmt.Fprintf(&b, "%s\"unknown%d\"%s:%s%s%s,", ws(), i, ws(), ws(), u, ws())
		}
		kb, _ := json.Marshal(k)
		b.WriteString(ws())
		b.Write(kb)
		b.WriteString(ws() + ":" + ws())
		if r.IntN(2) == 0 {
			json.Indent(&b, members[k], ws(), ws())
		} else {
			b.Write(members[k])
		}
	}
	b.WriteString(ws() + "}" + ws())
	return b.Bytes()
}

// randomJSON is a random JSON value of up to depth levels.
func randomJSON(r *rand.Rand, depth int) any {
	switch n := r.IntN(7); {
	case n == 0 && depth > 0:
		m := map[string]any{}
		for range r.IntN(4) {
			m[randText(r, 5)] = randomJSON(r, depth-1)
		}
		return m
	case n == 1 && depth > 0:
		var a []any
		for range r.IntN(4) {
			a = append(a, randomJSON(r, depth-1))
		}
		return a
	case n == 2:
		return r.NormFloat64() * 1e6
	case n == 3:
		return r.IntN(2) == 0
	case n == 4:
		return nil
	}
	return randText(r, 10)
}

// corrupt changes a few bytes of line: deleted, repeated, replaced by a
// JSON character.
func corrupt(r *rand.Rand, line []byte) []byte {
	b := slices.Clone(line)
	for range 1 + r.IntN(3) {
		if len(b) == 0 {
			break
		}
		i := r.IntN(len(b))
		switch r.IntN(3) {
		case 0:
			b = slices.Delete(b, i, i+1)
		case 1:
			b = slices.Insert(b, i, b[i])
		default:
			b[i] = `{}[]:,"\ 0-.eE9ntfu`[r.IntN(19)]
		}
	}
	return b
}

// FuzzDecodeLine: whatever the line, the decoder does not panic, and what it
// decodes json decodes the same. Run it by hand (go test -fuzz
// FuzzDecodeLine ./client/); CI runs only the seeds.
func FuzzDecodeLine(f *testing.F) {
	f.Add(benchLine(2))
	f.Add([]byte(`{"checkpoint":12}`))
	f.Add([]byte(`{"id":1,"type":"UPDATE","data":[{"id":"1","n":"b"}],"old":[{"n":"a"}],"seq":1,"x":[1.5e3,{"y":null}]}`))
	f.Add([]byte(`{"sql":"\ud83d\udce6\ud800\u00e9\n\"","pkNames":["a",null],"sqlType":{"a":-5},"mysqlType":{"a":"int"}}`))
	r := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		f.Add(appendFlat(nil, randomMsg(r)))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		decodeBoth(t, line)
	})
}

// TestDecodeCopies: a message shares no memory with its line, which is the
// message's Raw, the receiver's to change; the rows share their column
// names.
func TestDecodeCopies(t *testing.T) {
	line := []byte(`{"database":"d","sql":"s\n","pkNames":["id"],"sqlType":{"id":4,"n":12},"mysqlType":{"id":"int","n":"text"},` +
		`"data":[{"id":"1","n":"a\"b"},{"id":"2","n":null}],"old":[{"n":"x"},{"n":"y"}],"gtid":"g"}`)
	var want envelope
	if err := json.Unmarshal(line, &want); err != nil {
		t.Fatal(err)
	}
	var d lineDecoder
	var got envelope
	if !decodeEnvelope(&d, line, &got) {
		t.Fatal("the decoder gave up")
	}
	for i := range line {
		line[i] = 'x'
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after the line changed:\n got %s\nwant %s", dump(got), dump(want))
	}
	keyData := func(m map[string]*string, key string) *byte {
		for k := range m {
			if k == key {
				return unsafe.StringData(k)
			}
		}
		return nil
	}
	first := keyData(got.Data[0], "n")
	for _, row := range [][]map[string]*string{got.Data, got.Old} {
		for i, r := range row {
			if p := keyData(r, "n"); p != first {
				t.Errorf("row %d has a copy of its column name of its own", i)
			}
		}
	}
}

// TestLineReader reads lines longer than the reader's buffer, and a last
// line without its newline, as they came.
func TestLineReader(t *testing.T) {
	lines := []string{"a\n", strings.Repeat("b", 100) + "\n", "\n", strings.Repeat("c", 16) + "\n", strings.Repeat("d", 40) + "\n", "cut"}
	lr := &lineReader{r: bufio.NewReaderSize(strings.NewReader(strings.Join(lines, "")), 16)}
	for i, want := range lines {
		got, err := lr.next()
		if string(got) != want {
			t.Fatalf("line %d: %q, want %q", i, got, want)
		}
		if (err != nil) != (i == len(lines)-1) || err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("line %d: %v", i, err)
		}
	}
}

// TestLineFallback: Stream's handling of a line takes what the decoder
// gives, lets json decode what the decoder gives up on, fails on what json
// rejects, and hands handle a Raw of its own.
func TestLineFallback(t *testing.T) {
	c, err := New("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	d := &dedupe{}
	ak := &acker{c: c, kick: make(chan struct{}, 1)}
	var dec lineDecoder
	var view MessageView
	var got []Message
	handle := func(v *MessageView) error {
		got = append(got, v.Message())
		return nil
	}
	lines := []string{
		`{"seq":1,"type":"INSERT","data":[{"id":"1"}]}`,
		`{"Seq":2,"type":"INSERT","data":[{"id":"2"}]}`, // json's case-insensitive match
		`{"checkpoint":2}`,
		`{"seq":2,"type":"INSERT","data":[{"id":"2"}]}`, // checkpointed: dropped
	}
	for _, l := range lines {
		b := []byte(l)
		if err := c.line(b, d, ak, &dec, &view, handle); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		clear(b) // the reader's buffer is reused
	}
	if len(got) != 2 || got[0].Seq != 1 || got[1].Seq != 2 || *got[1].Data[0]["id"] != "2" {
		t.Fatalf("handled %+v", got)
	}
	for i, m := range got {
		if string(m.Raw) != lines[i] {
			t.Errorf("message %d: raw %q, want %q", i, m.Raw, lines[i])
		}
	}
	if d.done != 2 {
		t.Errorf("done %d, want 2", d.done)
	}
	if err := c.line([]byte(`{"seq":3,`), d, ak, &dec, &view, handle); err == nil || !strings.Contains(err.Error(), "not a flat message") {
		t.Errorf("a cut line: %v", err)
	}
}
