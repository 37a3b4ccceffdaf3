package client

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"unicode/utf8"
)

// This file writes flat-message lines as flat.Writer does (same key
// order, escapes, nulls and numbers), from made-up tables and rows, for the
// decoder's tests and benchmark. flat.Writer itself needs events
// decoded from a binlog; TestDecodeServerLines feeds it those.

// flatTable is a table as the line shows it: column names, canal's
// java.sql.Types codes, MySQL types, and its key.
type flatTable struct {
	schema, name string
	cols         []string
	sqlTypes     []int
	mysqlTypes   []string
	pk           []string
}

// flatMsg is one message of rows of a flatTable; a nil *string is NULL.
type flatMsg struct {
	t        *flatTable
	seq      uint64
	kind     string
	data     [][]*string
	old      [][]*string // UPDATE only: the changed columns' old values, unchanged elsewhere
	source   string
	position string
	gtid     string
}

// appendFlat writes m as flat.Writer.flush does.
func appendFlat(b []byte, m *flatMsg) []byte {
	t := m.t
	b = append(b, `{"id":`...)
	b = strconv.AppendUint(b, m.seq, 10)
	b = append(b, `,"database":`...)
	b = appendQuoted(b, t.schema)
	b = append(b, `,"table":`...)
	b = appendQuoted(b, t.name)
	b = append(b, `,"pkNames":`...)
	if len(t.pk) > 0 {
		b = append(b, '[')
		for i, k := range t.pk {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendQuoted(b, k)
		}
		b = append(b, ']')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"isDdl":false,"type":"`...)
	b = append(b, m.kind...)
	b = append(b, `","es":1767225600123,"ts":1767225601456,"sql":"","sqlType":{`...)
	for i, c := range t.cols {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendQuoted(b, c)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(t.sqlTypes[i]), 10)
	}
	b = append(b, `},"mysqlType":{`...)
	for i, c := range t.cols {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendQuoted(b, c)
		b = append(b, ':')
		b = appendQuoted(b, t.mysqlTypes[i])
	}
	b = append(b, `},"data":[`...)
	for i, row := range m.data {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendFlatRow(b, t, row, false)
	}
	b = append(b, `],"old":`...)
	if m.old != nil {
		b = append(b, '[')
		for i, row := range m.old {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendFlatRow(b, t, row, true)
		}
		b = append(b, ']')
	} else {
		b = append(b, "null"...)
	}
	b = fmt.Appendf(b, `,"seq":%d,"source":`, m.seq)
	b = appendQuoted(b, m.source)
	b = append(b, `,"originDatabase":`...)
	b = appendQuoted(b, t.schema)
	b = append(b, `,"originTable":`...)
	b = appendQuoted(b, t.name)
	b = append(b, `,"position":`...)
	b = appendQuoted(b, m.position)
	if m.gtid != "" {
		b = append(b, `,"gtid":`...)
		b = appendQuoted(b, m.gtid)
	}
	return append(b, '}')
}

// unchanged marks the columns of an old row that are left out.
var unchanged = new(string)

// appendFlatRow writes a row in column order; with changed set, only the
// columns not unchanged (canal's old).
func appendFlatRow(b []byte, t *flatTable, row []*string, changed bool) []byte {
	b = append(b, '{')
	n := 0
	for i, v := range row {
		if changed && v == unchanged {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = appendQuoted(b, t.cols[i])
		b = append(b, ':')
		if v == nil {
			b = append(b, "null"...)
		} else {
			b = appendQuoted(b, *v)
		}
	}
	return append(b, '}')
}

// appendQuoted is change.AppendJSONString: the escapes flat.Writer uses.
func appendQuoted(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// ordersTable is the consumer benchmark's shop orders table (package bench).
var ordersTable = &flatTable{
	schema: "shop", name: "orders",
	cols:       []string{"id", "customer_id", "status", "total", "currency", "discount", "note", "created_at", "updated_at", "attrs", "flags"},
	sqlTypes:   []int{-5, 4, 1, 3, 1, 8, 12, 93, 93, 12, 1},
	mysqlTypes: []string{"bigint", "int unsigned", "enum('new','paid','shipped','cancelled')", "decimal(12,2)", "char(3)", "double", "varchar(255)", "datetime(6)", "timestamp(3)", "json", "set('gift','express','fragile')"},
	pk:         []string{"id"},
}

// ordersRow is row n of ordersTable, with the workload's values.
func ordersRow(n int) []*string {
	s := func(f string, a ...any) *string { v := fmt.Sprintf(f, a...); return &v }
	row := []*string{
		s("%d", 1000+n), s("%d", (1000+n)*7919%1000003), s("%s", []string{"new", "paid", "shipped", "cancelled"}[n%4]),
		s("%d.%02d", (1000+n)*37%1000000/100, (1000+n)*37%100), s("%s", []string{"EUR", "USD", "GBP"}[n%3]),
		nil, s("order %d %0*d", 1000+n, n%40, 0),
		s("2026-01-01 00:%02d:%02d.%06d", n/60%60, n%60, n), s("2026-01-01 %02d:%02d:00.000", n/60%24, n%60),
		s(`{"n": %d, "tags": ["a", "b"], "gift": %v}`, n, n%2 == 0), s("%s", []string{"", "gift", "express", "gift,express"}[n%4]),
	}
	if n%5 != 0 {
		row[5] = s("%g", float64(n)/7)
	}
	return row
}

// benchLine is an INSERT of rows rows of ordersTable.
func benchLine(rows int) []byte {
	m := &flatMsg{t: ordersTable, seq: 123456, kind: "INSERT", source: "s0", position: "mysql-bin.000042:123456789"}
	for n := range rows {
		m.data = append(m.data, ordersRow(n))
	}
	return appendFlat(nil, m)
}

// randomMsg makes a message of a random table, with odd names and values:
// escapes, control characters, multi-byte and invalid UTF-8, NULLs.
func randomMsg(r *rand.Rand) *flatMsg {
	ncols := 1 + r.IntN(12)
	t := &flatTable{schema: randText(r, 8), name: randText(r, 8)}
	for i := range ncols {
		t.cols = append(t.cols, fmt.Sprintf("%s%d", randText(r, 6), i)) // distinct
		t.sqlTypes = append(t.sqlTypes, []int{-5, 4, 12, 93, 2005, -2, 0}[r.IntN(7)])
		t.mysqlTypes = append(t.mysqlTypes, randText(r, 10))
	}
	if r.IntN(3) > 0 {
		t.pk = t.cols[:1+r.IntN(ncols)]
	}
	m := &flatMsg{t: t, seq: r.Uint64() >> r.IntN(64), kind: []string{"INSERT", "UPDATE", "DELETE"}[r.IntN(3)],
		source: randText(r, 4), position: fmt.Sprintf("bin.%06d:%d", r.IntN(1000), r.Uint32())}
	if r.IntN(2) == 0 {
		m.gtid = fmt.Sprintf("0-1-%d", r.Uint32())
	}
	value := func() *string {
		if r.IntN(6) == 0 {
			return nil
		}
		v := randText(r, 20)
		return &v
	}
	for range r.IntN(8) {
		row := make([]*string, ncols)
		for i := range row {
			row[i] = value()
		}
		m.data = append(m.data, row)
		if m.kind == "UPDATE" {
			old := make([]*string, ncols)
			for i := range old {
				old[i] = unchanged
				if r.IntN(3) == 0 {
					old[i] = value()
				}
			}
			m.old = append(m.old, old)
		}
	}
	if m.kind == "UPDATE" && m.old == nil {
		m.old = [][]*string{}
	}
	return m
}

// randText is up to n characters of a mix that exercises string decoding.
func randText(r *rand.Rand, n int) string {
	pieces := []string{"a", "Z", "0", " ", `"`, `\`, "/", "\n", "\t", "\r", "\x00", "\x1f", "\x7f",
		"é", "ß", "€", "📦", "\u2028", "\ufffd", "\xff", "\xc3", "\xed\xa0\x80", "\u212a", "ſ", "<", "&"}
	var b []byte
	for range r.IntN(n + 1) {
		if r.IntN(3) == 0 {
			b = append(b, pieces[r.IntN(len(pieces))]...)
		} else {
			b = append(b, byte('a'+r.IntN(26)))
		}
	}
	return string(b)
}
