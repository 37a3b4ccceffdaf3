package mysqlbinlog

import (
	"fmt"
	"strconv"
	"strings"
)

// Collation is one collation MySQL 8.4 has, as information_schema
// names it.
type Collation struct {
	ID      uint16
	Name    string
	Charset string
	// Primary is the charset's default collation (SHOW CREATE TABLE
	// prints no COLLATE for it).
	Primary bool
}

// collations are the collations tests use; MySQL 8's defaults first.
var collations = []Collation{
	{255, "utf8mb4_0900_ai_ci", "utf8mb4", true},
	{46, "utf8mb4_bin", "utf8mb4", false},
	{45, "utf8mb4_general_ci", "utf8mb4", false},
	{224, "utf8mb4_unicode_ci", "utf8mb4", false},
	{278, "utf8mb4_0900_as_cs", "utf8mb4", false},
	{309, "utf8mb4_0900_bin", "utf8mb4", false},
	{305, "utf8mb4_0900_as_ci", "utf8mb4", false},
	{264, "utf8mb4_sv_0900_ai_ci", "utf8mb4", false},
	{303, "utf8mb4_ja_0900_as_cs", "utf8mb4", false},
	{33, "utf8mb3_general_ci", "utf8mb3", true},
	{83, "utf8mb3_bin", "utf8mb3", false},
	{8, "latin1_swedish_ci", "latin1", true},
	{47, "latin1_bin", "latin1", false},
	{11, "ascii_general_ci", "ascii", true},
	{63, "binary", "binary", true},
}

// CollationByName returns the collation named name, or the primary
// collation of the charset named name.
func CollationByName(name string) (Collation, error) {
	for _, c := range collations {
		if strings.EqualFold(c.Name, name) {
			return c, nil
		}
	}
	for _, c := range collations {
		if c.Primary && strings.EqualFold(c.Charset, name) {
			return c, nil
		}
	}
	return Collation{}, fmt.Errorf("mysqlbinlog: collation or charset %q is not one this encoder knows", name)
}

// CollationByID returns the collation with id.
func CollationByID(id uint16) (Collation, error) {
	for _, c := range collations {
		if c.ID == id {
			return c, nil
		}
	}
	return Collation{}, fmt.Errorf("mysqlbinlog: collation id %d is not one this encoder knows", id)
}

var kindNames = map[string]Kind{
	"tinyint": KindTinyInt, "bool": KindTinyInt, "boolean": KindTinyInt, "smallint": KindSmallInt,
	"mediumint": KindMediumInt, "int": KindInt, "integer": KindInt, "bigint": KindBigInt,
	"decimal": KindDecimal, "numeric": KindDecimal, "float": KindFloat, "double": KindDouble, "real": KindDouble,
	"bit": KindBit, "date": KindDate, "time": KindTime, "datetime": KindDatetime, "timestamp": KindTimestamp,
	"year": KindYear, "char": KindChar, "varchar": KindVarchar, "binary": KindBinary, "varbinary": KindVarbinary,
	"tinyblob": KindTinyBlob, "blob": KindBlob, "mediumblob": KindMediumBlob, "longblob": KindLongBlob,
	"tinytext": KindTinyText, "text": KindText, "mediumtext": KindMediumText, "longtext": KindLongText,
	"enum": KindEnum, "set": KindSet, "json": KindJSON, "vector": KindVector,
	"geometry": KindGeometry, "point": KindGeometry, "linestring": KindGeometry, "polygon": KindGeometry,
	"multipoint": KindGeometry, "multilinestring": KindGeometry, "multipolygon": KindGeometry,
	"geometrycollection": KindGeometry, "geomcollection": KindGeometry,
}

var geometryNames = map[string]GeometryType{
	"geometry": Geometry, "point": Point, "linestring": LineString, "polygon": Polygon,
	"multipoint": MultiPoint, "multilinestring": MultiLineString, "multipolygon": MultiPolygon,
	"geometrycollection": GeometryCollection, "geomcollection": GeometryCollection,
}

// ParseColumnType reads a column type as CREATE TABLE writes it: "int
// unsigned", "varchar(32)", "decimal(10,2)", "enum('a','b')",
// "datetime(6)", "bit(3)", "vector(3)", "point". Name, nullability,
// visibility and collation are the caller's.
func ParseColumnType(s string) (Column, error) {
	bad := func(why string) (Column, error) {
		return Column{}, fmt.Errorf("mysqlbinlog: column type %q: %s", s, why)
	}
	t := strings.TrimSpace(s)
	name := t
	args := ""
	rest := ""
	if i := strings.IndexByte(t, '('); i >= 0 {
		j := closingParen(t, i)
		if j < 0 {
			return bad("no closing parenthesis")
		}
		name, args, rest = t[:i], t[i+1:j], t[j+1:]
	} else if i := strings.IndexByte(t, ' '); i >= 0 {
		name, rest = t[:i], t[i:]
	}
	name = strings.ToLower(strings.TrimSpace(name))
	kind, ok := kindNames[name]
	if !ok {
		return bad("unknown type")
	}
	c := Column{Kind: kind}
	for _, word := range strings.Fields(strings.ToLower(rest)) {
		switch word {
		case "unsigned":
			c.Unsigned = true
		case "signed", "zerofill":
		default:
			return bad("unknown attribute " + word)
		}
	}
	nums := func() ([]int, error) {
		if args == "" {
			return nil, nil
		}
		var out []int
		for _, a := range strings.Split(args, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(a))
			if err != nil {
				return nil, fmt.Errorf("argument %q is not a number", a)
			}
			out = append(out, n)
		}
		return out, nil
	}
	switch kind {
	case KindEnum, KindSet:
		elems, err := parseElements(args)
		if err != nil {
			return bad(err.Error())
		}
		c.Elements = elems
		return c, nil
	case KindGeometry:
		c.Geometry = geometryNames[name]
		return c, nil
	}
	n, err := nums()
	if err != nil {
		return bad(err.Error())
	}
	switch kind {
	case KindDecimal:
		c.Precision, c.Scale = 10, 0
		if len(n) >= 1 {
			c.Precision = n[0]
		}
		if len(n) == 2 {
			c.Scale = n[1]
		}
	case KindChar, KindBinary, KindBit:
		c.Length = 1
		if len(n) == 1 {
			c.Length = n[0]
		}
	case KindVarchar, KindVarbinary, KindVector:
		if len(n) != 1 {
			return bad("needs a length")
		}
		c.Length = n[0]
	case KindTime, KindDatetime, KindTimestamp:
		if len(n) == 1 {
			c.FSP = n[0]
		}
	case KindTinyInt:
		if name == "bool" || name == "boolean" {
			c.Length = 1
		} else if len(n) == 1 && n[0] == 1 {
			c.Length = 1 // tinyint(1) keeps its width in 8.0.19+
		}
	}
	return c, nil
}

func closingParen(s string, open int) int {
	inQuote := false
	for i := open + 1; i < len(s); i++ {
		switch {
		case s[i] == '\'' && inQuote && i+1 < len(s) && s[i+1] == '\'':
			i++
		case s[i] == '\'':
			inQuote = !inQuote
		case s[i] == ')' && !inQuote:
			return i
		}
	}
	return -1
}

// parseElements reads 'a','b”s' into its members.
func parseElements(args string) ([]string, error) {
	var out []string
	s := strings.TrimSpace(args)
	for s != "" {
		if s[0] != '\'' {
			return nil, fmt.Errorf("member list %q is not quoted strings", args)
		}
		var b strings.Builder
		i := 1
		for ; i < len(s); i++ {
			if s[i] == '\'' {
				if i+1 < len(s) && s[i+1] == '\'' {
					b.WriteByte('\'')
					i++
					continue
				}
				break
			}
			b.WriteByte(s[i])
		}
		if i >= len(s) {
			return nil, fmt.Errorf("member list %q has an unclosed quote", args)
		}
		out = append(out, b.String())
		s = strings.TrimSpace(s[i+1:])
		if strings.HasPrefix(s, ",") {
			s = strings.TrimSpace(s[1:])
		}
	}
	return out, nil
}

// quoteString quotes s as MySQL prints a string literal.
func quoteString(s string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", "''") + "'"
}

// TypeSQL is the column's type as MySQL 8.0.19+ prints it in SHOW CREATE
// TABLE and information_schema.COLUMNS.COLUMN_TYPE: no display width on
// integers (but tinyint(1)), lower case.
func (c Column) TypeSQL() string {
	unsigned := ""
	if c.Unsigned {
		unsigned = " unsigned"
	}
	fsp := func(base string) string {
		if c.FSP > 0 {
			return fmt.Sprintf("%s(%d)", base, c.FSP)
		}
		return base
	}
	elems := func(base string) string {
		q := make([]string, len(c.Elements))
		for i, e := range c.Elements {
			q[i] = quoteString(e)
		}
		return base + "(" + strings.Join(q, ",") + ")"
	}
	switch c.Kind {
	case KindTinyInt:
		if c.Length == 1 {
			return "tinyint(1)" + unsigned
		}
		return "tinyint" + unsigned
	case KindSmallInt:
		return "smallint" + unsigned
	case KindMediumInt:
		return "mediumint" + unsigned
	case KindInt:
		return "int" + unsigned
	case KindBigInt:
		return "bigint" + unsigned
	case KindDecimal:
		return fmt.Sprintf("decimal(%d,%d)%s", c.Precision, c.Scale, unsigned)
	case KindFloat:
		return "float" + unsigned
	case KindDouble:
		return "double" + unsigned
	case KindBit:
		return fmt.Sprintf("bit(%d)", c.Length)
	case KindDate:
		return "date"
	case KindTime:
		return fsp("time")
	case KindDatetime:
		return fsp("datetime")
	case KindTimestamp:
		return fsp("timestamp")
	case KindYear:
		return "year"
	case KindChar:
		return fmt.Sprintf("char(%d)", c.Length)
	case KindVarchar:
		return fmt.Sprintf("varchar(%d)", c.Length)
	case KindBinary:
		return fmt.Sprintf("binary(%d)", c.Length)
	case KindVarbinary:
		return fmt.Sprintf("varbinary(%d)", c.Length)
	case KindTinyBlob:
		return "tinyblob"
	case KindBlob:
		return "blob"
	case KindMediumBlob:
		return "mediumblob"
	case KindLongBlob:
		return "longblob"
	case KindTinyText:
		return "tinytext"
	case KindText:
		return "text"
	case KindMediumText:
		return "mediumtext"
	case KindLongText:
		return "longtext"
	case KindEnum:
		return elems("enum")
	case KindSet:
		return elems("set")
	case KindJSON:
		return "json"
	case KindVector:
		return fmt.Sprintf("vector(%d)", c.Length)
	case KindGeometry:
		for name, g := range geometryNames {
			if g == c.Geometry && name != "geomcollection" {
				return name
			}
		}
	}
	return ""
}

// DataType is information_schema.COLUMNS.DATA_TYPE: the type's name.
func (c Column) DataType() string {
	t := c.TypeSQL()
	if i := strings.IndexAny(t, "( "); i >= 0 {
		return t[:i]
	}
	return t
}

// hasCharset reports whether the column has a character set of its own
// (what SHOW CREATE TABLE may print CHARACTER SET / COLLATE for).
func (c Column) hasCharset() bool {
	switch c.Kind {
	case KindChar, KindVarchar, KindTinyText, KindText, KindMediumText, KindLongText, KindEnum, KindSet:
		return true
	}
	return false
}
