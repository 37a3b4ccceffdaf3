package client

import (
	"strings"
	"unsafe"
)

// lineDecoder decodes stream lines into envelopes without reflection: the
// line's bytes are walked once and each row's map is made with its size.
// It gives exactly what json.Unmarshal gives, or gives up (decode returns
// false) on whatever it does not know to give the same for: JSON that is
// not valid, a value of the wrong type for its field (json reports an error
// there), a field given twice, a key that matches a field only ignoring
// case, nesting deeper than maxDepth. The caller then lets encoding/json
// decide, so a line is never decoded differently, only sometimes slower.
//
// The strings it returns are copies, as json's are, never views of the line
// (the line is the message's Raw, which its receiver may change): a column
// name is copied once per line and shared by the maps of all the rows; a
// row's values share one allocation and its *string values another, so
// that holding on to a value keeps no more than its row alive.
//
// A lineDecoder is not safe for concurrent use; Stream owns one.
type lineDecoder struct {
	// s is the line being decoded: a view of the caller's bytes, read-only
	// and only during decode, so nothing that is returned may point into
	// it.
	s   string
	pos int // where in s the decoding is

	// cols interns the keys of the line's column maps (sqlType,
	// mysqlType, each row of data and old), which repeat in column order,
	// by their raw text; colAt is where the next key of a map is expected.
	// Reset for each line.
	cols  []internedKey
	colAt int
	// index finds the position of a raw key among the first indexed of
	// cols, for the keys that are not where expected.
	index   map[string]int
	indexed int

	// pairs holds a map's members until the map is made with their count;
	// its values are views (of s or of unescaped), copied when the map is
	// made.
	pairs []rowPair
	// unescaped holds the text of escaped strings that str unescaped; reset
	// where no view of it is still to be copied.
	unescaped []byte
}

type internedKey struct{ raw, key string }

type rowPair struct {
	key  string
	val  string // a view, until copied
	null bool
}

// maxCols bounds the interned keys of a line (a table has at most 4096
// columns); the keys after are copied each time.
const maxCols = 4096

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
)

// fieldNames are the JSON names of envelope's fields; json.Unmarshal also
// matches them ignoring case.
var fieldNames = [...]string{"id", "database", "table", "pkNames", "isDdl", "type", "es", "ts", "sql", "sqlType",
	"mysqlType", "data", "old", "seq", "source", "originDatabase", "originTable", "position", "gtid", "checkpoint"}

// decode decodes line into env, which must be zero, and reports whether it
// could; if not, env is partly written and should be discarded.
func (d *lineDecoder) decode(line []byte, env *envelope) bool {
	d.s = unsafe.String(unsafe.SliceData(line), len(line))
	d.pos = 0
	ok := d.envelope(env) && d.end()
	// Let go of the line and of what the message holds.
	d.s = ""
	clear(d.cols)
	d.cols = d.cols[:0]
	clear(d.index)
	d.indexed = 0
	clear(d.pairs[:cap(d.pairs)])
	d.unescaped = d.unescaped[:0]
	return ok
}

// end skips trailing space and reports whether the line ends there.
func (d *lineDecoder) end() bool {
	d.ws()
	return d.pos == len(d.s)
}

// envelope reads the line's object, each member into its field; members
// of no field are skipped.
func (d *lineDecoder) envelope(env *envelope) bool {
	d.ws()
	if !d.eat('{') {
		return false
	}
	d.ws()
	if d.eat('}') {
		return true
	}
	m := &env.Message
	var seen uint32
	for {
		d.ws()
		d.unescaped = d.unescaped[:0] // the last member's values are copied
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
			bit, ok = fID, d.uint(&m.ID)
		case "database":
			bit, ok = fDatabase, d.strField(&m.Database)
		case "table":
			bit, ok = fTable, d.strField(&m.Table)
		case "pkNames":
			bit, ok = fPkNames, d.strings(&m.PkNames)
		case "isDdl":
			bit, ok = fIsDdl, d.bool(&m.IsDdl)
		case "type":
			bit, ok = fType, d.strField(&m.Type)
		case "es":
			bit, ok = fEs, d.int(&m.Es)
		case "ts":
			bit, ok = fTs, d.int(&m.Ts)
		case "sql":
			bit, ok = fSQL, d.strField(&m.SQL)
		case "sqlType":
			bit, ok = fSQLType, d.sqlTypes(&m.SQLType)
		case "mysqlType":
			bit, ok = fMysqlType, d.mysqlTypes(&m.MysqlType)
		case "data":
			bit, ok = fData, d.rows(&m.Data)
		case "old":
			bit, ok = fOld, d.rows(&m.Old)
		case "seq":
			bit, ok = fSeq, d.uint(&m.Seq)
		case "source":
			bit, ok = fSource, d.strField(&m.Source)
		case "originDatabase":
			bit, ok = fOriginDatabase, d.strField(&m.OriginDatabase)
		case "originTable":
			bit, ok = fOriginTable, d.strField(&m.OriginTable)
		case "position":
			bit, ok = fPosition, d.strField(&m.Position)
		case "gtid":
			bit, ok = fGTID, d.strField(&m.GTID)
		case "checkpoint":
			bit, ok = fCheckpoint, d.checkpoint(&env.Checkpoint)
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

// strField reads a string or null (which json leaves the field alone for).
func (d *lineDecoder) strField(dst *string) bool {
	if d.lit("null") {
		return true
	}
	v, ok := d.str()
	*dst = strings.Clone(v)
	return ok
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

// strings reads an array of strings (null elements are "") or null.
func (d *lineDecoder) strings(dst *[]string) bool {
	if d.lit("null") {
		*dst = nil
		return true
	}
	if !d.eat('[') {
		return false
	}
	out := []string{} // json makes [] an empty slice, not nil
	d.ws()
	if d.eat(']') {
		*dst = out
		return true
	}
	for {
		d.ws()
		var v string
		if !d.strField(&v) {
			return false
		}
		out = append(out, v)
		d.ws()
		if d.eat(',') {
			continue
		}
		*dst = out
		return d.eat(']')
	}
}

// sqlTypes reads sqlType: column → integer (null is 0), or null.
func (d *lineDecoder) sqlTypes(dst *map[string]int) bool {
	if d.lit("null") {
		*dst = nil
		return true
	}
	var keys [64]string // most tables have fewer columns
	var vals [64]int
	ks, vs := keys[:0], vals[:0]
	ok := d.members(func(key string) bool {
		var n int64
		ok := d.int(&n) && int64(int(n)) == n // json's range check where int is 32 bits
		ks, vs = append(ks, key), append(vs, int(n))
		return ok
	})
	if !ok {
		return false
	}
	m := make(map[string]int, len(ks))
	for i, k := range ks {
		m[k] = vs[i]
	}
	*dst = m
	return true
}

// mysqlTypes reads mysqlType: column → string (null is ""), or null.
func (d *lineDecoder) mysqlTypes(dst *map[string]string) bool {
	if d.lit("null") {
		*dst = nil
		return true
	}
	pairs := d.pairs[:0]
	ok := d.members(func(key string) bool {
		var v string
		ok := d.lit("null")
		if !ok {
			v, ok = d.str()
		}
		pairs = append(pairs, rowPair{key: key, val: v})
		return ok
	})
	d.pairs = pairs[:0]
	if !ok {
		return false
	}
	all := concat(pairs)
	m := make(map[string]string, len(pairs))
	for _, p := range pairs {
		m[p.key] = all[:len(p.val)]
		all = all[len(p.val):]
	}
	*dst = m
	return true
}

// concat copies the values of pairs into one string, in order.
func concat(pairs []rowPair) string {
	n := 0
	for _, p := range pairs {
		n += len(p.val)
	}
	var b strings.Builder
	b.Grow(n)
	for _, p := range pairs {
		b.WriteString(p.val)
	}
	return b.String()
}

// members reads an object of column keys, calling value at each value.
func (d *lineDecoder) members(value func(key string) bool) bool {
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
		key, ok := d.column()
		if !ok {
			return false
		}
		d.ws()
		if !d.eat(':') {
			return false
		}
		d.ws()
		if !value(key) {
			return false
		}
		d.ws()
		if d.eat(',') {
			continue
		}
		return d.eat('}')
	}
}

// rows reads data or old: an array of rows (null elements are nil maps),
// or null.
func (d *lineDecoder) rows(dst *[]map[string]*string) bool {
	if d.lit("null") {
		*dst = nil
		return true
	}
	if !d.eat('[') {
		return false
	}
	out := []map[string]*string{} // json makes [] an empty slice, not nil
	d.ws()
	if d.eat(']') {
		*dst = out
		return true
	}
	for {
		d.ws()
		start := d.pos
		var row map[string]*string
		if !d.lit("null") {
			var ok bool
			if row, ok = d.row(); !ok {
				return false
			}
		}
		if len(out) == 0 {
			// Guess the row count from the first row's length and what
			// is left of the line, rather than grow the slice row by row.
			out = make([]map[string]*string, 0, 1+(len(d.s)-d.pos)/max(d.pos-start, 16))
		}
		out = append(out, row)
		d.ws()
		if d.eat(',') {
			continue
		}
		*dst = out
		return d.eat(']')
	}
}

// row reads one row: column → string or null.
func (d *lineDecoder) row() (map[string]*string, bool) {
	if !d.eat('{') {
		return nil, false
	}
	pairs := d.pairs[:0]
	d.unescaped = d.unescaped[:0]
	d.colAt = 0
	d.ws()
	if !d.eat('}') {
		for {
			d.ws()
			key, ok := d.column()
			if !ok {
				return nil, false
			}
			d.ws()
			if !d.eat(':') {
				return nil, false
			}
			d.ws()
			p := rowPair{key: key, null: d.lit("null")}
			if !p.null {
				if p.val, ok = d.str(); !ok {
					return nil, false
				}
			}
			pairs = append(pairs, p)
			d.ws()
			if d.eat(',') {
				continue
			}
			if !d.eat('}') {
				return nil, false
			}
			break
		}
	}
	d.pairs = pairs[:0]
	all := concat(pairs)
	vals := make([]string, len(pairs))
	m := make(map[string]*string, len(pairs))
	for i, p := range pairs {
		if p.null {
			m[p.key] = nil
			continue
		}
		vals[i] = all[:len(p.val)]
		all = all[len(p.val):]
		m[p.key] = &vals[i]
	}
	return m, true
}

// column reads a column name: the interned string if an earlier key of
// the line had the same text.
func (d *lineDecoder) column() (string, bool) {
	start := d.pos + 1
	end, plain := d.scanStr()
	if end < 0 {
		return "", false
	}
	raw := d.s[start:end]
	d.pos = end + 1
	n := len(d.cols)
	// Rows repeat the columns in one order: the key is most often the one
	// after the last. A key after the last of the table is new, as long as
	// maps do not repeat keys or change their order; if they do, it is
	// interned twice, which costs a copy. Only the rows of old, which skip
	// the unchanged columns, need to look further.
	j := d.colAt
	if j < n && d.cols[j].raw != raw {
		j = d.lookup(raw)
	}
	if j < n {
		d.colAt = j + 1
		return d.cols[j].key, true
	}
	var key string
	if plain {
		key = strings.Clone(raw)
	} else {
		b, ok := unquote(nil, raw)
		if !ok {
			return "", false
		}
		key = string(b)
	}
	if n < maxCols {
		d.cols = append(d.cols, internedKey{raw, key})
		d.colAt = n + 1
	}
	return key, true
}

// lookup finds the interned key of text raw, len(d.cols) if there is none.
func (d *lineDecoder) lookup(raw string) int {
	if d.index == nil {
		d.index = make(map[string]int, len(d.cols))
	}
	for ; d.indexed < len(d.cols); d.indexed++ {
		d.index[d.cols[d.indexed].raw] = d.indexed
	}
	if j, ok := d.index[raw]; ok {
		return j
	}
	return len(d.cols)
}
