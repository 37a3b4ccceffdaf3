package binlog_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/flat"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
)

const allTypesDDL = `CREATE TABLE shop.all_types (
	id INT PRIMARY KEY,
	ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
	mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED,
	bi BIGINT, biu BIGINT UNSIGNED,
	d DECIMAL(30,10), dn DECIMAL(5,2),
	f FLOAT, db DOUBLE,
	b1 BIT(1), b64 BIT(64),
	dt DATE, tm TIME, tm6 TIME(6), dtm DATETIME, dtm6 DATETIME(6),
	ts TIMESTAMP NULL DEFAULT NULL, ts3 TIMESTAMP(3) NULL DEFAULT NULL,
	y YEAR,
	c CHAR(10), vc VARCHAR(100), tx TEXT, emo VARCHAR(20),
	bn BINARY(4), vb VARBINARY(10), bl BLOB,
	e ENUM('small','medium','large'), s SET('red','green','blue'),
	j JSON,
	n INT NULL
) DEFAULT CHARSET=utf8mb4`

const insertMax = `INSERT INTO shop.all_types VALUES (1,
	127, 255, 32767, 65535,
	8388607, 16777215, 2147483647, 4294967295,
	9223372036854775807, 18446744073709551615,
	'12345678901234567890.0123456789', -999.99,
	3.5, 2.718281828459045,
	b'1', b'1111111111111111111111111111111111111111111111111111111111111111',
	'2026-11-29', '-838:59:59', '12:34:56.789012', '9999-12-31 23:59:59', '2026-11-29 10:11:12.123456',
	'2038-01-19 03:14:07', '2026-11-29 10:11:12.345',
	2155,
	'abc', 'héllo wörld', 'line1\nline2 "q"', '😀🚀',
	0x00FF1020, 0x68656c6c6f, 0xDEADBEEF,
	'large', 'red,blue',
	'{"a": [1, 2.5, "x"], "b": null}',
	NULL)`

const insertMin = `INSERT INTO shop.all_types VALUES (2,
	-128, 0, -32768, 0,
	-8388608, 0, -2147483648, 0,
	-9223372036854775808, 0,
	'-0.0000000001', 0.00,
	-0.25, -1e-300,
	b'0', b'0',
	'0000-00-00', '00:00:00', '-00:00:01.500000', '0000-00-00 00:00:00', '0000-00-00 00:00:00.000000',
	'0000-00-00 00:00:00', NULL,
	1901,
	'', '', '', '',
	'', '', '',
	'small', '',
	'[]',
	NULL)`

// The expected values are written by hand from the INSERTs above.
var wantMax = map[string]change.Value{
	"id": int64(1),
	"ti": int64(127), "tiu": uint64(255), "si": int64(32767), "siu": uint64(65535),
	"mi": int64(8388607), "miu": uint64(16777215), "i": int64(2147483647), "iu": uint64(4294967295),
	"bi": int64(9223372036854775807), "biu": uint64(18446744073709551615),
	"d": "12345678901234567890.0123456789", "dn": "-999.99",
	"f": float32(3.5), "db": 2.718281828459045,
	"b1": uint64(1), "b64": uint64(18446744073709551615),
	"dt": "2026-11-29", "tm": "-838:59:59", "tm6": "12:34:56.789012",
	"dtm": "9999-12-31 23:59:59", "dtm6": "2026-11-29 10:11:12.123456",
	"ts": "2038-01-19 03:14:07", "ts3": "2026-11-29 10:11:12.345",
	"y": int64(2155),
	"c": "abc", "vc": "héllo wörld", "tx": "line1\nline2 \"q\"", "emo": "😀🚀",
	"bn": []byte{0x00, 0xff, 0x10, 0x20}, "vb": []byte("hello"), "bl": []byte{0xde, 0xad, 0xbe, 0xef},
	"e": "large", "s": "red,blue",
	"j": `{"a": [1, 2.5, "x"], "b": null}`,
	"n": nil,
}

var wantMin = map[string]change.Value{
	"id": int64(2),
	"ti": int64(-128), "tiu": uint64(0), "si": int64(-32768), "siu": uint64(0),
	"mi": int64(-8388608), "miu": uint64(0), "i": int64(-2147483648), "iu": uint64(0),
	"bi": int64(-9223372036854775808), "biu": uint64(0),
	"d": "-0.0000000001", "dn": "0.00",
	"f": float32(-0.25), "db": -1e-300,
	"b1": uint64(0), "b64": uint64(0),
	"dt": "0000-00-00", "tm": "00:00:00", "tm6": "-00:00:01.500000",
	"dtm": "0000-00-00 00:00:00", "dtm6": "0000-00-00 00:00:00.000000",
	"ts": "0000-00-00 00:00:00", "ts3": nil,
	"y": int64(1901),
	"c": "", "vc": "", "tx": "", "emo": "",
	"bn": []byte{0, 0, 0, 0}, "vb": []byte{}, "bl": []byte{},
	"e": "small", "s": "",
	"j": "[]",
	"n": nil,
}

// TestAllTypes decodes one row at each type's limits and one at its zero
// values, then an UPDATE and a DELETE, against values written by hand. The
// server runs in +03:00 so TIMESTAMP must come back in the server's zone.
func TestAllTypes(t *testing.T) {
	eachRowMetadata(t, func(t *testing.T, srv *mysqltest.Server) {
		srv.Exec(t, "SET NAMES utf8mb4", "SET sql_mode=''",
			"CREATE DATABASE shop DEFAULT CHARSET utf8mb4", allTypesDDL, insertMax, insertMin,
			"UPDATE shop.all_types SET vc='changed', n=5 WHERE id=1",
			"DELETE FROM shop.all_types WHERE id=2")
		r := startReader(t, binlog.Config{Source: source(srv, earliest)}, nil)
		evs := r.waitFor(30*time.Second, "4 row changes", rowsAtLeast(4))
		rc := rows(evs)
		if len(rc) != 4 {
			t.Fatalf("got %d row changes, want 4", len(rc))
		}
		checkRow(t, "insert max", rc[0], change.Insert, nil, wantMax)
		checkRow(t, "insert min", rc[1], change.Insert, nil, wantMin)
		after := clone(wantMax)
		after["vc"], after["n"] = "changed", int64(5)
		checkRow(t, "update", rc[2], change.Update, wantMax, after)
		checkRow(t, "delete", rc[3], change.Delete, wantMin, nil)

		if got := rc[0].Table.KeyNames(); !reflect.DeepEqual(got, []string{"id"}) {
			t.Errorf("primary key = %v, want [id]", got)
		}
		checkFlat(t, evs)
	}, "--default-time-zone=+03:00")
}

func clone(m map[string]change.Value) map[string]change.Value {
	c := make(map[string]change.Value, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func checkRow(t *testing.T, what string, rc *change.RowChange, kind change.ChangeKind, before, after map[string]change.Value) {
	t.Helper()
	if rc.Kind != kind {
		t.Errorf("%s: kind %v, want %v", what, rc.Kind, kind)
	}
	check := func(img []change.Value, want map[string]change.Value, which string) {
		if want == nil {
			if img != nil {
				t.Errorf("%s: unexpected %s image", what, which)
			}
			return
		}
		got := named(rc, img)
		if len(got) != len(want) {
			t.Errorf("%s %s: %d columns, want %d", what, which, len(got), len(want))
		}
		for col, w := range want {
			if g, ok := got[col]; !ok || !reflect.DeepEqual(g, w) {
				t.Errorf("%s %s: column %s = %#v, want %#v", what, which, col, g, w)
			}
		}
	}
	check(rc.Before(), before, "before")
	check(rc.After(), after, "after")
}

// checkFlat renders the events as flat messages and checks the canal string
// forms of the first insert.
func checkFlat(t *testing.T, evs []*change.Event) {
	t.Helper()
	w := &flat.Writer{}
	var lines [][]byte
	for _, ev := range evs {
		if err := w.Write(ev, func(b []byte) error { lines = append(lines, append([]byte(nil), b...)); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	type flatMsg struct {
		Database, Table, Type string
		PkNames               []string
		IsDdl                 bool
		Seq                   uint64
		Data, Old             []map[string]*string
		MysqlType             map[string]string
		SQLType               map[string]int
		Source, Position      string
	}
	var msgs []flatMsg
	for _, l := range lines {
		var m flatMsg
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	var ins, upd int = -1, -1
	for i, m := range msgs {
		if m.Type == "INSERT" && ins < 0 {
			ins = i
		}
		if m.Type == "UPDATE" && upd < 0 {
			upd = i
		}
	}
	if ins < 0 || upd < 0 {
		t.Fatalf("flat messages lack an INSERT or UPDATE: %s", lines)
	}
	m := msgs[ins]
	if m.Database != "shop" || m.Table != "all_types" || m.IsDdl || !reflect.DeepEqual(m.PkNames, []string{"id"}) || m.Source != "a" || m.Position == "" {
		t.Errorf("insert message header wrong: %+v", m)
	}
	if len(m.Data) != 1 {
		t.Fatalf("insert message has %d rows, want 1", len(m.Data))
	}
	want := map[string]string{
		"biu": "18446744073709551615", "bi": "9223372036854775807", "d": "12345678901234567890.0123456789",
		"f": "3.5", "db": "2.718281828459045", "b64": "18446744073709551615", "e": "large", "s": "red,blue",
		"bn": "\x00\u00ff\x10 ", "emo": "😀🚀", "ts": "2038-01-19 03:14:07", "y": "2155",
	}
	for col, w := range want {
		if g := m.Data[0][col]; g == nil || *g != w {
			t.Errorf("flat insert %s = %v, want %q", col, g, w)
		}
	}
	// The flat writer formats straight from the wire values; every column
	// must read as the typed Value's string form.
	typed := map[string]map[string]change.Value{}
	for _, rc := range rows(evs) {
		if rc.Kind == change.Insert {
			row := named(rc, rc.After())
			typed[change.FormatValue(row["id"])] = row
		}
		// AppendText (canal's protobuf entries) formats from the wire
		// values too: every column of every image must match.
		for _, img := range []struct {
			after bool
			vals  []change.Value
		}{{false, rc.Before()}, {true, rc.After()}} {
			for i, v := range img.vals {
				got, isNull := rc.AppendText([]byte("x"), img.after, i)
				if isNull != (v == nil) || string(got) != "x"+change.FormatValue(v) {
					t.Errorf("%s column %s (after %v): AppendText %q (null %v), typed %#v", rc.Kind, rc.Table.Columns[i].Name, img.after, got, isNull, v)
				}
				// Value decodes the one column as the image does.
				if one := rc.Value(img.after, i); !reflect.DeepEqual(one, v) {
					t.Errorf("%s column %s (after %v): Value %#v, the image's %#v", rc.Kind, rc.Table.Columns[i].Name, img.after, one, v)
				}
			}
		}
	}
	for _, msg := range msgs {
		if msg.Type != "INSERT" {
			continue
		}
		for _, d := range msg.Data {
			want := typed[*d["id"]]
			for col, v := range want {
				got := d[col]
				switch {
				case v == nil && got != nil:
					t.Errorf("row %s column %s: flat %q, typed NULL", *d["id"], col, *got)
				case v != nil && (got == nil || *got != change.FormatValue(v)):
					t.Errorf("row %s column %s: flat %v, typed %q", *d["id"], col, got, change.FormatValue(v))
				}
			}
		}
	}
	if m.Data[0]["n"] != nil {
		t.Errorf("flat NULL rendered as %q, want null", *m.Data[0]["n"])
	}
	if m.SQLType["biu"] != -5 || m.SQLType["d"] != 3 || m.SQLType["dtm"] != 93 {
		t.Errorf("sqlType wrong: %v", m.SQLType)
	}
	if mt := m.MysqlType["e"]; mt == "" {
		t.Errorf("mysqlType of e is empty")
	}
	u := msgs[upd]
	if len(u.Old) != 1 || len(u.Old[0]) != 2 || u.Old[0]["vc"] == nil || *u.Old[0]["vc"] != "héllo wörld" || u.Old[0]["n"] != nil {
		t.Errorf("update old = %v, want only vc and n", u.Old)
	}
	if u.Seq != m.Seq+2 {
		t.Errorf("update seq %d, want insert seq %d + 2 (one per transaction)", u.Seq, m.Seq)
	}
}
