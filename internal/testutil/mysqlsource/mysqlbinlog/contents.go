package mysqlbinlog

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// contents are a table's rows as the workload leaves them, for the
// SELECTs of an initial snapshot.
type contents struct {
	keys []string         // insertion order
	rows map[string][]any // by primary key, values as the workload gave them
	// unknown says why the rows cannot be known (a partial JSON update,
	// whose diff this package does not apply); "" when they can.
	unknown string
}

func newContents() *contents { return &contents{rows: map[string][]any{}} }

// key is the row's primary key (the whole row without one) as a map key.
func rowKey(t *Table, row []any) string {
	cols := t.PrimaryKey
	if len(cols) == 0 {
		cols = make([]int, len(row))
		for i := range cols {
			cols[i] = i
		}
	}
	var b strings.Builder
	for _, i := range cols {
		fmt.Fprintf(&b, "%T:%v\x00", row[i], row[i])
	}
	return b.String()
}

// apply changes the contents by one statement's rows.
func (c *contents) apply(t *Table, kind StatementKind, rows []Row) {
	if c.unknown != "" {
		return
	}
	for _, r := range rows {
		if r.Before != nil {
			k := rowKey(t, r.Before)
			if _, ok := c.rows[k]; ok {
				delete(c.rows, k)
				for i, have := range c.keys {
					if have == k {
						c.keys = append(c.keys[:i], c.keys[i+1:]...)
						break
					}
				}
			}
		}
		if r.After == nil {
			continue
		}
		for _, v := range r.After {
			if _, partial := v.(JSONDiffs); partial {
				c.unknown = "a partial JSON update changed it (its diffs are not applied here)"
				return
			}
		}
		k := rowKey(t, r.After)
		if _, ok := c.rows[k]; !ok {
			c.keys = append(c.keys, k)
		}
		c.rows[k] = r.After
	}
}

// alter carries the rows over to a new definition of the table: columns
// kept by name, new ones NULL.
func (c *contents) alter(from, to *Table) {
	if c.unknown != "" {
		return
	}
	index := map[string]int{}
	for i, col := range from.Columns {
		index[col.Name] = i
	}
	rows := map[string][]any{}
	var keys []string
	for _, k := range c.keys {
		old := c.rows[k]
		row := make([]any, len(to.Columns))
		for i, col := range to.Columns {
			if j, ok := index[col.Name]; ok {
				row[i] = old[j]
			}
		}
		nk := rowKey(to, row)
		if _, dup := rows[nk]; !dup {
			keys = append(keys, nk)
		}
		rows[nk] = row
	}
	c.keys, c.rows = keys, rows
}

// selected returns the rows as SELECT returns them, ordered by primary
// key as InnoDB returns a table scan.
func (c *contents) selected(t *Table) ([][]any, error) {
	out := make([][]any, 0, len(c.keys))
	for _, k := range c.keys {
		row := c.rows[k]
		printed := make([]any, len(row))
		for i, v := range row {
			p, err := SelectValue(t.Columns[i], v)
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", t.Schema, t.Name, err)
			}
			printed[i] = p
		}
		out = append(out, printed)
	}
	if len(t.PrimaryKey) > 0 {
		sort.SliceStable(out, func(a, b int) bool {
			for _, i := range t.PrimaryKey {
				if c := compareSelected(out[a][i], out[b][i]); c != 0 {
					return c < 0
				}
			}
			return false
		})
	}
	return out, nil
}

func compareSelected(a, b any) int {
	switch x := a.(type) {
	case int64:
		if y, ok := b.(int64); ok {
			return cmpInt(x, y)
		}
	case uint64:
		if y, ok := b.(uint64); ok {
			switch {
			case x < y:
				return -1
			case x > y:
				return 1
			}
			return 0
		}
	}
	return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// SelectValue is v, a value of column c as the workload takes it, as a
// SELECT of the column returns it in the text protocol: nil (NULL),
// int64, uint64, float64, string or []byte, printed as MySQL prints the
// type (DECIMAL to its scale, temporal values to their precision, ENUM
// and SET as members, JSON normalized, BIT and binary types as bytes).
func SelectValue(c Column, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	wrap := func(err error) error { return fmt.Errorf("column %s: %w", c.Name, err) }
	switch c.Kind {
	case KindTinyInt, KindSmallInt, KindMediumInt, KindInt, KindBigInt, KindYear:
		if c.Unsigned {
			u, err := toUint64(v)
			return u, wrapNil(wrap, err)
		}
		i, err := toInt64(v)
		return i, wrapNil(wrap, err)
	case KindDecimal:
		s, _ := v.(string)
		if _, err := decimalBinary(s, c.Precision, c.Scale); err != nil {
			return nil, wrap(err)
		}
		return normalizeDecimal(s, c.Scale), nil
	case KindFloat:
		f, ok := v.(float32)
		if !ok {
			f64, _ := v.(float64)
			f = float32(f64)
		}
		return strings.Replace(strconv.FormatFloat(float64(f), 'g', -1, 32), "e+", "e", 1), nil
	case KindDouble:
		f, _ := v.(float64)
		return f, nil
	case KindBit:
		raw, err := appendValue(nil, c, v)
		return raw, wrapNil(wrap, err)
	case KindDate:
		s, _ := v.(string)
		return s, nil
	case KindTime:
		s, _ := v.(string)
		return normalizeTime(s, c.FSP), nil
	case KindDatetime, KindTimestamp:
		d, err := parseDatetimeValue(v, c.FSP)
		if err != nil {
			return nil, wrap(err)
		}
		s := fmt.Sprintf("%04d-%02d-%02d %02d:%02d:%02d", d.year, d.month, d.day, d.hour, d.minute, d.second)
		if c.FSP > 0 {
			s += "." + fmt.Sprintf("%06d", d.micro)[:c.FSP]
		}
		return s, nil
	case KindChar:
		s, err := toBytes(v)
		return strings.TrimRight(string(s), " "), wrapNil(wrap, err)
	case KindVarchar, KindTinyText, KindText, KindMediumText, KindLongText:
		s, err := toBytes(v)
		return string(s), wrapNil(wrap, err)
	case KindBinary:
		s, err := toBytes(v)
		if err != nil {
			return nil, wrap(err)
		}
		out := make([]byte, c.Length)
		copy(out, s)
		return out, nil
	case KindVarbinary, KindTinyBlob, KindBlob, KindMediumBlob, KindLongBlob, KindGeometry:
		s, err := toBytes(v)
		return append([]byte(nil), s...), wrapNil(wrap, err)
	case KindVector:
		f, _ := v.([]float32)
		raw := make([]byte, 0, 4*len(f))
		for _, x := range f {
			raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(x))
		}
		return raw, nil
	case KindEnum:
		i, err := enumIndex(c, v)
		if err != nil {
			return nil, wrap(err)
		}
		if i == 0 {
			return "", nil
		}
		return c.Elements[i-1], nil
	case KindSet:
		mask, err := setMask(c, v)
		if err != nil {
			return nil, wrap(err)
		}
		var members []string
		for i, e := range c.Elements {
			if mask&(1<<uint(i)) != 0 {
				members = append(members, e)
			}
		}
		return strings.Join(members, ","), nil
	case KindJSON:
		s, ok := v.(string)
		if !ok {
			return nil, wrap(fmt.Errorf("the text of a JSON value given as %T is not known", v))
		}
		text, err := JSONText(s)
		return text, wrapNil(wrap, err)
	}
	return nil, wrap(fmt.Errorf("kind %d has no text", c.Kind))
}

func wrapNil(wrap func(error) error, err error) error {
	if err == nil {
		return nil
	}
	return wrap(err)
}

// normalizeDecimal prints s with exactly scale fractional digits and no
// leading zeros, as MySQL prints a DECIMAL.
func normalizeDecimal(s string, scale int) string {
	neg := strings.HasPrefix(s, "-")
	intPart, frac, _ := strings.Cut(strings.TrimPrefix(s, "-"), ".")
	intPart = strings.TrimLeft(intPart, "0")
	if intPart == "" {
		intPart = "0"
	}
	frac += strings.Repeat("0", scale-len(frac))
	out := intPart
	if scale > 0 {
		out += "." + frac
	}
	if neg && strings.Trim(intPart+frac, "0") != "" {
		out = "-" + out
	}
	return out
}

// normalizeTime prints "[-]H:MM:SS[.f]" as MySQL prints a TIME of
// precision fsp: at least two hour digits, the fraction to fsp digits.
func normalizeTime(s string, fsp int) string {
	neg := strings.HasPrefix(s, "-")
	whole, frac, _ := strings.Cut(strings.TrimPrefix(s, "-"), ".")
	h, rest, _ := strings.Cut(whole, ":")
	if len(h) < 2 {
		h = "0" + h
	}
	out := h + ":" + rest
	if fsp > 0 {
		out += "." + (frac + strings.Repeat("0", fsp))[:fsp]
	}
	if neg {
		out = "-" + out
	}
	return out
}

// JSONText is the JSON text s as MySQL prints the stored value: members
// in the binary format's order (by key length, then bytes), ", " and ": "
// between, doubles as MySQL writes them.
func JSONText(s string) (string, error) {
	raw, err := EncodeJSON(s)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if err := printJSONB(&b, raw[0], raw[1:]); err != nil {
		return "", err
	}
	return b.String(), nil
}

// printJSONB prints a binary JSON value of type typ.
func printJSONB(b *strings.Builder, typ byte, v []byte) error {
	switch typ {
	case jsonbSmallObject, jsonbLargeObject, jsonbSmallArray, jsonbLargeArray:
		large := typ == jsonbLargeObject || typ == jsonbLargeArray
		object := typ == jsonbSmallObject || typ == jsonbLargeObject
		off := 2
		if large {
			off = 4
		}
		get := func(at int) int {
			if large {
				return int(binary.LittleEndian.Uint32(v[at:]))
			}
			return int(binary.LittleEndian.Uint16(v[at:]))
		}
		count := get(0)
		keyEntries := 2 * off
		valueEntries := keyEntries
		if object {
			valueEntries += count * (off + 2)
			b.WriteByte('{')
		} else {
			b.WriteByte('[')
		}
		for i := range count {
			if i > 0 {
				b.WriteString(", ")
			}
			if object {
				ko := get(keyEntries + i*(off+2))
				kl := int(binary.LittleEndian.Uint16(v[keyEntries+i*(off+2)+off:]))
				jsonQuote(b, string(v[ko:ko+kl]))
				b.WriteString(": ")
			}
			entry := valueEntries + i*(1+off)
			et := v[entry]
			if inlined(&jsonNode{kind: et}, large) {
				if err := printJSONB(b, et, v[entry+1:entry+1+off]); err != nil {
					return err
				}
				continue
			}
			if err := printJSONB(b, et, v[get(entry+1):]); err != nil {
				return err
			}
		}
		if object {
			b.WriteByte('}')
		} else {
			b.WriteByte(']')
		}
	case jsonbLiteral:
		b.WriteString(map[byte]string{jsonbLiteralNull: "null", jsonbLiteralTrue: "true", jsonbLiteralFalse: "false"}[v[0]])
	case jsonbInt16:
		b.WriteString(strconv.Itoa(int(int16(binary.LittleEndian.Uint16(v)))))
	case jsonbUint16:
		b.WriteString(strconv.Itoa(int(binary.LittleEndian.Uint16(v))))
	case jsonbInt32:
		b.WriteString(strconv.Itoa(int(int32(binary.LittleEndian.Uint32(v)))))
	case jsonbUint32:
		b.WriteString(strconv.FormatUint(uint64(binary.LittleEndian.Uint32(v)), 10))
	case jsonbInt64:
		b.WriteString(strconv.FormatInt(int64(binary.LittleEndian.Uint64(v)), 10))
	case jsonbUint64:
		b.WriteString(strconv.FormatUint(binary.LittleEndian.Uint64(v), 10))
	case jsonbDouble:
		f := math.Float64frombits(binary.LittleEndian.Uint64(v))
		s := strings.Replace(strconv.FormatFloat(f, 'g', -1, 64), "e+", "e", 1)
		if !strings.ContainsAny(s, ".eIN") {
			s += ".0" // MySQL keeps a double a double: 3.0
		}
		b.WriteString(s)
	case jsonbString:
		n, size := 0, 0
		for shift := 0; ; shift += 7 {
			c := v[size]
			size++
			n |= int(c&0x7f) << shift
			if c&0x80 == 0 {
				break
			}
		}
		jsonQuote(b, string(v[size:size+n]))
	default:
		return fmt.Errorf("binary JSON type %#x has no text here", typ)
	}
	return nil
}

// jsonQuote quotes a JSON string as MySQL prints it: \" \\ \n \t \r
// \b \f escaped, other control characters as \u00XX, the rest as is.
func jsonQuote(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}
