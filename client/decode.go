package client

import (
	"strings"
	"unsafe"
)

// lineDecoder decodes stream lines into MessageViews without reflection
// and without a map per row: the line's bytes are walked once, each row's
// values are kept as views of the line (or of the unescaped text of the
// ones with escapes), and MessageView.Message builds json's maps from them
// when asked.
//
// It gives exactly what json.Unmarshal gives, or gives up (decode returns
// false) on whatever it does not know to give the same for: JSON that is
// not valid, a value of the wrong type for its field (json reports an error
// there), a field or a row's column given twice, two column keys of
// different text that unescape to one name, a key that matches a field only
// ignoring case, nesting deeper than maxDepth. The caller then lets
// encoding/json decide, so a line is never decoded differently, only
// sometimes slower.
//
// A lineDecoder is not safe for concurrent use; a stream owns one.
type lineDecoder struct {
	// s is the line being decoded, line the same bytes: views of the
	// caller's buffer, only during decode.
	s    string
	line []byte
	pos  int // where in s the decoding is
	v    *MessageView

	// raws are the raw texts of the line's column keys, by column index
	// (views of s); colAt is where the next key of a row is expected.
	raws  []string
	colAt int
	// escapedCol is set once a column key of the line had escapes or
	// invalid UTF-8: only then can two keys of different text name one
	// column.
	escapedCol bool
	// byRaw finds a raw key among the first indexed of raws, for keys that
	// are not where expected.
	byRaw   map[string]int
	indexed int
	// seen[col] == gen when the row being read named col already.
	seen []uint32
	gen  uint32

	// names (raw key text → column name) and texts (the header's repeated
	// strings: database, table, type, source, ...) are kept across lines,
	// so that the same names cost no allocation each line.
	names map[string]string
	texts map[string]string

	// unescaped holds the text of escaped strings, for the line's views.
	unescaped []byte
}

// maxInterned bounds names and texts: past it they start again empty.
const maxInterned = 4096

// Bits of the fields decode has seen in a line.
const (
	fID uint32 = 1 << iota
	fDatabase
	fTable
	fPkNames
	fIsDdl
	fType
	fEs
	fTs
	fSQL
	fSQLType
	fMysqlType
	fData
	fOld
	fSeq
	fSource
	fOriginDatabase
	fOriginTable
	fPosition
	fGTID
	fCheckpoint
	fSnapshot
)

// fieldNames are the JSON names of envelope's fields; json.Unmarshal also
// matches them ignoring case.
var fieldNames = [...]string{"id", "database", "table", "pkNames", "isDdl", "type", "es", "ts", "sql", "sqlType",
	"mysqlType", "data", "old", "seq", "source", "originDatabase", "originTable", "position", "gtid", "checkpoint", "snapshot"}

// decode decodes line into v, reusing v's arrays, and reports whether it
// could; if not, v is partly written and should be discarded. v's values
// are views of line and of d, valid until d decodes the next line.
func (d *lineDecoder) decode(line []byte, v *MessageView) bool {
	v.reset()
	d.s = unsafe.String(unsafe.SliceData(line), len(line))
	d.line, d.pos, d.v = line, 0, v
	d.unescaped = d.unescaped[:0]
	ok := d.envelope() && d.end()
	// Let go of the line.
	d.s, d.line, d.v = "", nil, nil
	clear(d.raws)
	d.raws = d.raws[:0]
	clear(d.byRaw)
	d.indexed, d.escapedCol = 0, false
	v.raw = line
	return ok
}

// end skips trailing space and reports whether the line ends there.
func (d *lineDecoder) end() bool {
	d.ws()
	return d.pos == len(d.s)
}

// envelope reads the line's object, each member into its field; members
// of no field are skipped.
func (d *lineDecoder) envelope() bool {
	d.ws()
	if !d.eat('{') {
		return false
	}
	d.ws()
	if d.eat('}') {
		return true
	}
	v := d.v
	var seen uint32
	for {
		d.ws()
		key, ok := d.str()
		if !ok {
			return false
		}
		d.ws()
		if !d.eat(':') {
			return false
		}
		d.ws()
		var bit uint32
		switch key {
		case "id":
			bit, ok = fID, d.uint(&v.ID)
		case "database":
			bit, ok = fDatabase, d.text(&v.Database, true)
		case "table":
			bit, ok = fTable, d.text(&v.Table, true)
		case "pkNames":
			bit, ok = fPkNames, d.pkNames()
		case "isDdl":
			bit, ok = fIsDdl, d.bool(&v.IsDdl)
		case "type":
			bit, ok = fType, d.text(&v.Type, true)
		case "es":
			bit, ok = fEs, d.int(&v.Es)
		case "ts":
			bit, ok = fTs, d.int(&v.Ts)
		case "sql":
			bit, ok = fSQL, d.text(&v.SQL, false)
		case "sqlType":
			bit, ok = fSQLType, d.sqlTypes()
		case "mysqlType":
			bit, ok = fMysqlType, d.mysqlTypes()
		case "data":
			bit, ok = fData, d.rows(&v.data)
		case "old":
			bit, ok = fOld, d.rows(&v.old)
		case "seq":
			bit, ok = fSeq, d.uint(&v.Seq)
		case "source":
			bit, ok = fSource, d.text(&v.Source, true)
		case "originDatabase":
			bit, ok = fOriginDatabase, d.text(&v.OriginDatabase, true)
		case "originTable":
			bit, ok = fOriginTable, d.text(&v.OriginTable, true)
		case "position":
			bit, ok = fPosition, d.text(&v.Position, false)
		case "gtid":
			bit, ok = fGTID, d.text(&v.GTID, false)
		case "checkpoint":
			bit, ok = fCheckpoint, d.checkpoint(&v.checkpoint)
		case "snapshot":
			bit, ok = fSnapshot, d.bool(&v.Snapshot)
		default:
			for _, f := range fieldNames {
				if strings.EqualFold(key, f) {
					return false // json's case-insensitive match
				}
			}
			ok = d.skip(0)
		}
		// A field given twice: json decodes the second into what the first
		// left, which for maps and slices is more than overwriting.
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		d.ws()
		if d.eat(',') {
			continue
		}
		return d.eat('}')
	}
}

// text reads a string or null (which json leaves the field alone for) into
// a string of its own; intern keeps it for the next lines that have it.
func (d *lineDecoder) text(dst *string, intern bool) bool {
	if d.lit("null") {
		return true
	}
	v, ok := d.str()
	if !ok {
		return false
	}
	if intern {
		*dst = d.intern(v)
	} else {
		*dst = strings.Clone(v)
	}
	return true
}

// intern returns a string of its own with v's text, the same one each time.
func (d *lineDecoder) intern(v string) string {
	if s, ok := d.texts[v]; ok {
		return s
	}
	if d.texts == nil || len(d.texts) >= maxInterned {
		d.texts = make(map[string]string)
	}
	s := strings.Clone(v)
	d.texts[s] = s
	return s
}

func (d *lineDecoder) bool(dst *bool) bool {
	switch {
	case d.lit("true"):
		*dst = true
	case d.lit("false"):
		*dst = false
	case d.lit("null"):
	default:
		return false
	}
	return true
}

// uint reads an unsigned integer or null.
func (d *lineDecoder) uint(dst *uint64) bool {
	if d.lit("null") {
		return true
	}
	n, ok := d.digits()
	*dst = n
	return ok
}

// int reads a signed integer or null.
func (d *lineDecoder) int(dst *int64) bool {
	if d.lit("null") {
		return true
	}
	n, ok := d.signed()
	*dst = n
	return ok
}

// checkpoint reads a checkpoint's seq or null.
func (d *lineDecoder) checkpoint(dst **uint64) bool {
	if d.lit("null") {
		*dst = nil
		return true
	}
	n, ok := d.digits()
	*dst = &n
	return ok
}

// pkNames reads an array of strings (null elements are "") or null.
func (d *lineDecoder) pkNames() bool {
	v := d.v
	if d.lit("null") {
		return true
	}
	v.hasPkNames = true // json makes [] an empty slice, not nil
	return d.array(func() bool {
		var s string
		ok := d.text(&s, true)
		v.PkNames = append(v.PkNames, s)
		return ok
	})
}

// array reads a JSON array, calling elem at each element.
func (d *lineDecoder) array(elem func() bool) bool {
	if !d.eat('[') {
		return false
	}
	d.ws()
	if d.eat(']') {
		return true
	}
	for {
		d.ws()
		if !elem() {
			return false
		}
		d.ws()
		if d.eat(',') {
			continue
		}
		return d.eat(']')
	}
}

// sqlTypes reads sqlType: column → integer (null is 0), or null.
func (d *lineDecoder) sqlTypes() bool {
	if d.lit("null") {
		return true
	}
	d.v.hasSQLType = true
	return d.members(sqlTypeMembers, nil)
}

// mysqlTypes reads mysqlType: column → string (null is ""), or null.
func (d *lineDecoder) mysqlTypes() bool {
	if d.lit("null") {
		return true
	}
	d.v.hasMysqlType = true
	return d.members(mysqlTypeMembers, nil)
}

// What an object of column keys holds.
type memberKind uint8

const (
	sqlTypeMembers   memberKind = iota // integers (null is 0)
	mysqlTypeMembers                   // strings (null is "")
	rowMembers                         // a row's values: strings or null
)

// members reads an object of column keys whose values are of kind; a
// row's go into rs's cells. (One loop with a switch, not a callback per
// value: every value of the stream goes through it.)
func (d *lineDecoder) members(kind memberKind, rs *viewRows) bool {
	if !d.eat('{') {
		return false
	}
	d.ws()
	if d.eat('}') {
		return true
	}
	d.colAt = 0
	for {
		d.ws()
		col, ok := d.column()
		if !ok {
			return false
		}
		d.ws()
		if !d.eat(':') {
			return false
		}
		d.ws()
		c := &d.v.cols[col]
		switch kind {
		case rowMembers:
			if d.seen[col] == d.gen {
				return false // a column twice: json's last wins
			}
			d.seen[col] = d.gen
			cell := viewCell{col: int32(col)}
			if d.peek() == '"' {
				cell.v, ok = d.value()
			} else {
				cell.null = d.lit("null")
				ok = cell.null
			}
			rs.cells = append(rs.cells, cell)
		case sqlTypeMembers:
			var n int64
			ok = d.int(&n) && int64(int(n)) == n && !c.inSQLType // json's range check where int is 32 bits; a key twice: json's last wins
			c.sqlType, c.inSQLType = int(n), true
		case mysqlTypeMembers:
			ok = !c.inMysqlType && d.text(&c.mysqlType, true)
			c.inMysqlType = true
		}
		if !ok {
			return false
		}
		d.ws()
		if d.eat(',') {
			continue
		}
		return d.eat('}')
	}
}

// rows reads data or old: an array of rows (null elements are null rows),
// or null.
func (d *lineDecoder) rows(rs *viewRows) bool {
	if d.lit("null") {
		return true
	}
	rs.set = true // json makes [] an empty slice, not nil
	return d.array(func() bool {
		r := viewRow{first: int32(len(rs.cells))}
		if d.lit("null") {
			r.null = true
		} else if !d.row(rs) {
			return false
		}
		r.n = int32(len(rs.cells)) - r.first
		rs.rows = append(rs.rows, r)
		return true
	})
}

// row reads one row, column → string or null, into rs's cells.
func (d *lineDecoder) row(rs *viewRows) bool {
	d.gen++
	if d.gen == 0 {
		clear(d.seen)
		d.gen = 1
	}
	return d.members(rowMembers, rs)
}

// value reads a JSON string as a view: of the line if it has no escapes,
// else of unescaped. Its capacity ends with it.
func (d *lineDecoder) value() ([]byte, bool) {
	start := d.pos + 1
	end, plain := d.scanStr()
	if end < 0 {
		return nil, false
	}
	d.pos = end + 1
	if plain {
		return d.line[start:end:end], true
	}
	from := len(d.unescaped)
	b, ok := unquote(d.unescaped, d.s[start:end])
	// Bytes once appended are not written again until the next line; a
	// reallocation leaves the old array to the views of it.
	d.unescaped = b
	return b[from:len(b):len(b)], ok
}

// column reads a column key and returns the column's index, adding a
// column to the view for a key the line did not name before.
func (d *lineDecoder) column() (int, bool) {
	// Rows repeat the columns in one order: the key is most often the one
	// after the last, and then its text needs no scan. (The expected raw
	// text came from a scan, so it holds no unescaped quote and cannot end
	// in a lone backslash: followed by a quote, it is the whole key.)
	if j := d.colAt; j < len(d.raws) {
		raw := d.raws[j]
		if end := d.pos + 1 + len(raw); end < len(d.s) && d.s[end] == '"' && d.s[d.pos] == '"' && d.s[d.pos+1:end] == raw {
			d.pos = end + 1
			d.colAt = j + 1
			return j, true
		}
	}
	start := d.pos + 1
	end, plain := d.scanStr()
	if end < 0 {
		return 0, false
	}
	raw := d.s[start:end]
	d.pos = end + 1
	// Only old's rows, which skip the unchanged columns, and lines not
	// written by braid need to look further.
	if j := d.lookup(raw); j < len(d.raws) {
		d.colAt = j + 1
		return j, true
	}
	name, ok := d.names[raw]
	if !ok {
		if plain {
			name = strings.Clone(raw)
		} else {
			b, ok := unquote(nil, raw)
			if !ok {
				return 0, false
			}
			name = string(b)
		}
		if d.names == nil || len(d.names) >= maxInterned {
			d.names = make(map[string]string)
		}
		d.names[strings.Clone(raw)] = name
	}
	if !plain {
		d.escapedCol = true
	}
	if d.escapedCol && d.v.ColumnIndex(name) >= 0 {
		return 0, false // two texts of one name: json's maps would merge them
	}
	d.v.cols = append(d.v.cols, viewColumn{name: name})
	d.raws = append(d.raws, raw)
	if len(d.seen) < len(d.raws) {
		d.seen = append(d.seen, 0)
	}
	d.colAt = len(d.raws)
	return len(d.raws) - 1, true
}

// lookup finds the column of raw key text raw, len(d.raws) if there is
// none.
func (d *lineDecoder) lookup(raw string) int {
	if d.byRaw == nil {
		d.byRaw = make(map[string]int, len(d.raws))
	}
	for ; d.indexed < len(d.raws); d.indexed++ {
		d.byRaw[d.raws[d.indexed]] = d.indexed
	}
	if j, ok := d.byRaw[raw]; ok {
		return j
	}
	return len(d.raws)
}
