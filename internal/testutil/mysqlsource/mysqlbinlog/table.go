package mysqlbinlog

import (
	"encoding/binary"
	"fmt"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// Kind is a column type as MySQL 8.4 / 9.x declares it.
type Kind int

// The kinds, one per SQL type name.
const (
	KindTinyInt Kind = iota + 1
	KindSmallInt
	KindMediumInt
	KindInt
	KindBigInt
	KindDecimal
	KindFloat
	KindDouble
	KindBit
	KindDate
	KindTime
	KindDatetime
	KindTimestamp
	KindYear
	KindChar
	KindVarchar
	KindBinary
	KindVarbinary
	KindTinyBlob
	KindBlob
	KindMediumBlob
	KindLongBlob
	KindTinyText
	KindText
	KindMediumText
	KindLongText
	KindEnum
	KindSet
	KindJSON
	KindGeometry
	KindVector // MySQL 9.0+
)

// GeometryType is the subtype of a spatial column, as MySQL numbers it
// in the table map's GEOMETRY_TYPE metadata.
type GeometryType int

// Spatial subtypes.
const (
	Geometry GeometryType = iota
	Point
	LineString
	Polygon
	MultiPoint
	MultiLineString
	MultiPolygon
	GeometryCollection
)

// Column is one column of a table.
type Column struct {
	Name string
	Kind Kind
	// Unsigned applies to the integer kinds, DECIMAL, FLOAT and DOUBLE.
	Unsigned bool
	// Length is the declared length: characters for CHAR and VARCHAR,
	// bytes for BINARY and VARBINARY, bits for BIT, dimensions for VECTOR.
	Length int
	// Precision and Scale of a DECIMAL.
	Precision, Scale int
	// FSP is the fractional seconds precision (0..6) of TIME, DATETIME and
	// TIMESTAMP.
	FSP int
	// Collation of a character column (CHAR, VARCHAR, TEXT, ENUM, SET);
	// 0 is utf8mb4_0900_ai_ci, MySQL 8's default.
	Collation uint16
	// Elements of an ENUM or SET, in declaration order.
	Elements []string
	// Geometry is the subtype of a GEOMETRY column.
	Geometry  GeometryType
	Nullable  bool
	Invisible bool // MySQL 8.0.23+
}

// Table is a table as a TABLE_MAP describes it.
type Table struct {
	ID      uint64 // the table id the server assigned (6 bytes)
	Schema  string
	Name    string
	Columns []Column
	// PrimaryKey holds the indexes of the primary key's columns, in key
	// order.
	PrimaryKey []int
	// PrimaryKeyPrefix holds, when some key part is a prefix ("id2(10)"),
	// the prefix length in characters of each key part, 0 for a whole
	// column; nil when none is.
	PrimaryKeyPrefix []int
}

// RowMetadata is binlog_row_metadata.
type RowMetadata int

// The two values of binlog_row_metadata.
const (
	MetadataMinimal RowMetadata = iota
	MetadataFull
)

// collationMaxLen is the bytes per character of the collations tests use.
func collationMaxLen(id uint16) (int, error) {
	switch id {
	case CollationBinary, CollationLatin1SwedishCI, 47 /* latin1_bin */, 11 /* ascii_general_ci */ :
		return 1, nil
	case CollationUTF8MB3GeneralCI, 83 /* utf8mb3_bin */, 192 /* utf8mb3_unicode_ci */ :
		return 3, nil
	}
	if id == 45 || id == 46 || (id >= 224 && id <= 247) || (id >= 255 && id <= 323) {
		return 4, nil
	}
	return 0, fmt.Errorf("mysqlbinlog: collation id %d is not one this encoder knows (add its bytes per character)", id)
}

func (c Column) collation() uint16 {
	switch c.Kind {
	case KindBinary, KindVarbinary, KindTinyBlob, KindBlob, KindMediumBlob, KindLongBlob, KindVector, KindGeometry:
		return CollationBinary
	}
	if c.Collation == 0 {
		return CollationUTF8MB4_0900AICI
	}
	return c.Collation
}

// binlogType is the type byte the table map carries.
func (c Column) binlogType() byte {
	switch c.Kind {
	case KindTinyInt:
		return mysql.MYSQL_TYPE_TINY
	case KindSmallInt:
		return mysql.MYSQL_TYPE_SHORT
	case KindMediumInt:
		return mysql.MYSQL_TYPE_INT24
	case KindInt:
		return mysql.MYSQL_TYPE_LONG
	case KindBigInt:
		return mysql.MYSQL_TYPE_LONGLONG
	case KindDecimal:
		return mysql.MYSQL_TYPE_NEWDECIMAL
	case KindFloat:
		return mysql.MYSQL_TYPE_FLOAT
	case KindDouble:
		return mysql.MYSQL_TYPE_DOUBLE
	case KindBit:
		return mysql.MYSQL_TYPE_BIT
	case KindDate:
		return mysql.MYSQL_TYPE_DATE
	case KindTime:
		return mysql.MYSQL_TYPE_TIME2
	case KindDatetime:
		return mysql.MYSQL_TYPE_DATETIME2
	case KindTimestamp:
		return mysql.MYSQL_TYPE_TIMESTAMP2
	case KindYear:
		return mysql.MYSQL_TYPE_YEAR
	case KindChar, KindBinary, KindEnum, KindSet:
		return mysql.MYSQL_TYPE_STRING
	case KindVarchar, KindVarbinary:
		return mysql.MYSQL_TYPE_VARCHAR
	case KindTinyBlob, KindBlob, KindMediumBlob, KindLongBlob, KindTinyText, KindText, KindMediumText, KindLongText:
		return mysql.MYSQL_TYPE_BLOB
	case KindJSON:
		return mysql.MYSQL_TYPE_JSON
	case KindGeometry:
		return mysql.MYSQL_TYPE_GEOMETRY
	case KindVector:
		return mysql.MYSQL_TYPE_VECTOR
	}
	return 0
}

// maxBytes is the most bytes a CHAR/VARCHAR/BINARY/VARBINARY value holds.
func (c Column) maxBytes() (int, error) {
	switch c.Kind {
	case KindBinary, KindVarbinary:
		return c.Length, nil
	case KindChar, KindVarchar:
		n, err := collationMaxLen(c.collation())
		return c.Length * n, err
	}
	return 0, fmt.Errorf("mysqlbinlog: column %s has no byte length", c.Name)
}

// blobPackLength is the size of the length prefix of a BLOB-like value.
func (c Column) blobPackLength() int {
	switch c.Kind {
	case KindTinyBlob, KindTinyText:
		return 1
	case KindBlob, KindText:
		return 2
	case KindMediumBlob, KindMediumText:
		return 3
	}
	return 4 // LONGBLOB, LONGTEXT, JSON, GEOMETRY, VECTOR
}

// setPackLength is the bytes of a SET value's bitmask.
func (c Column) setPackLength() int {
	n := (len(c.Elements) + 7) / 8
	if n > 4 {
		return 8
	}
	return n
}

// enumPackLength is the bytes of an ENUM value's index.
func (c Column) enumPackLength() int {
	if len(c.Elements) > 255 {
		return 2
	}
	return 1
}

// metadata is the column's entry in the table map's metadata block.
func (c Column) metadata() ([]byte, error) {
	switch c.Kind {
	case KindFloat:
		return []byte{4}, nil
	case KindDouble:
		return []byte{8}, nil
	case KindDecimal:
		if c.Precision < 1 || c.Precision > 65 || c.Scale < 0 || c.Scale > 30 || c.Scale > c.Precision {
			return nil, fmt.Errorf("mysqlbinlog: column %s: DECIMAL(%d,%d) is not a valid MySQL decimal", c.Name, c.Precision, c.Scale)
		}
		return []byte{byte(c.Precision), byte(c.Scale)}, nil
	case KindBit:
		if c.Length < 1 || c.Length > 64 {
			return nil, fmt.Errorf("mysqlbinlog: column %s: BIT(%d) is not 1..64 bits", c.Name, c.Length)
		}
		return []byte{byte(c.Length % 8), byte(c.Length / 8)}, nil
	case KindTime, KindDatetime, KindTimestamp:
		if c.FSP < 0 || c.FSP > 6 {
			return nil, fmt.Errorf("mysqlbinlog: column %s: fractional seconds precision %d is not 0..6", c.Name, c.FSP)
		}
		return []byte{byte(c.FSP)}, nil
	case KindVarchar, KindVarbinary:
		n, err := c.maxBytes()
		if err != nil {
			return nil, err
		}
		if n > 65535 {
			return nil, fmt.Errorf("mysqlbinlog: column %s holds %d bytes, more than a VARCHAR can", c.Name, n)
		}
		return binary.LittleEndian.AppendUint16(nil, uint16(n)), nil
	case KindChar, KindBinary:
		n, err := c.maxBytes()
		if err != nil {
			return nil, err
		}
		if n > 1020 {
			return nil, fmt.Errorf("mysqlbinlog: column %s holds %d bytes, more than a CHAR can", c.Name, n)
		}
		// The real type shares its byte with the two high bits of the
		// length, inverted (Field_string::do_save_field_metadata).
		return []byte{mysql.MYSQL_TYPE_STRING ^ byte((n&0x300)>>4), byte(n)}, nil
	case KindEnum:
		return []byte{mysql.MYSQL_TYPE_ENUM, byte(c.enumPackLength())}, nil
	case KindSet:
		return []byte{mysql.MYSQL_TYPE_SET, byte(c.setPackLength())}, nil
	case KindTinyBlob, KindBlob, KindMediumBlob, KindLongBlob, KindTinyText, KindText, KindMediumText, KindLongText,
		KindJSON, KindGeometry, KindVector:
		return []byte{byte(c.blobPackLength())}, nil
	}
	return nil, nil
}

func (c Column) isNumeric() bool {
	switch c.Kind {
	case KindTinyInt, KindSmallInt, KindMediumInt, KindInt, KindBigInt, KindDecimal, KindFloat, KindDouble:
		return true
	}
	return false
}

// isCharacter is MySQL's is_character_type on the binlog type: CHAR,
// BINARY, VARCHAR, VARBINARY, the BLOBs and TEXTs, and VECTOR (whose
// charset is binary).
func (c Column) isCharacter() bool {
	switch c.binlogType() {
	case mysql.MYSQL_TYPE_STRING:
		return c.Kind != KindEnum && c.Kind != KindSet
	case mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_BLOB, mysql.MYSQL_TYPE_VECTOR:
		return true
	}
	return false
}

func (c Column) isEnumOrSet() bool { return c.Kind == KindEnum || c.Kind == KindSet }

// TableMap is a TABLE_MAP_EVENT.
type TableMap struct {
	Table    *Table
	Metadata RowMetadata
	// Flags of the event; MySQL 8 writes 1 (TM_BIT_LEN_EXACT_F).
	Flags uint16
	// Version decides the optional metadata a server writes: column
	// visibility from 8.0.23, vector dimensions from 9.0.
	Version Version
}

// Optional metadata field types (Table_map_log_event::Optional_metadata_field_type).
const (
	optSignedness            = 1
	optDefaultCharset        = 2
	optColumnCharset         = 3
	optColumnName            = 4
	optSetStrValue           = 5
	optEnumStrValue          = 6
	optGeometryType          = 7
	optSimplePrimaryKey      = 8
	optPrimaryKeyWithPrefix  = 9
	optEnumSetDefaultCharset = 10
	optEnumSetColumnCharset  = 11
	optColumnVisibility      = 12
	optVectorDimensionality  = 13
)

// Body returns the event body.
func (m TableMap) Body() ([]byte, error) {
	t := m.Table
	if len(t.Schema) > 255 || len(t.Name) > 255 {
		return nil, fmt.Errorf("mysqlbinlog: table %s.%s: a name is longer than 255 bytes", t.Schema, t.Name)
	}
	b := appendTableID(nil, t.ID)
	b = binary.LittleEndian.AppendUint16(b, m.Flags)
	b = append(b, byte(len(t.Schema)))
	b = append(append(b, t.Schema...), 0)
	b = append(b, byte(len(t.Name)))
	b = append(append(b, t.Name...), 0)
	b = appendPackedInt(b, uint64(len(t.Columns)))
	var meta []byte
	for _, c := range t.Columns {
		if c.binlogType() == 0 {
			return nil, fmt.Errorf("mysqlbinlog: table %s.%s column %s has no kind", t.Schema, t.Name, c.Name)
		}
		b = append(b, c.binlogType())
		cm, err := c.metadata()
		if err != nil {
			return nil, err
		}
		meta = append(meta, cm...)
	}
	b = appendPackedInt(b, uint64(len(meta)))
	b = append(b, meta...)
	nulls := make([]byte, (len(t.Columns)+7)/8)
	for i, c := range t.Columns {
		if c.Nullable {
			nulls[i/8] |= 1 << (i % 8)
		}
	}
	b = append(b, nulls...)
	opt, err := m.optionalMetadata()
	if err != nil {
		return nil, err
	}
	return append(b, opt...), nil
}

func appendTableID(b []byte, id uint64) []byte {
	var t [8]byte
	binary.LittleEndian.PutUint64(t[:], id)
	return append(b, t[:6]...)
}

// appendTLV appends one optional metadata field: type, packed length,
// value.
func appendTLV(b []byte, typ byte, v []byte) []byte {
	b = append(b, typ)
	b = appendPackedInt(b, uint64(len(v)))
	return append(b, v...)
}

// msbBitmap packs bits most significant first, as the signedness and
// visibility fields are.
func msbBitmap(bits []bool) []byte {
	out := make([]byte, (len(bits)+7)/8)
	for i, set := range bits {
		if set {
			out[i/8] |= 0x80 >> (i % 8)
		}
	}
	return out
}

// optionalMetadata follows Table_map_log_event::init_metadata_fields: a
// field is written only when some column needs it.
func (m TableMap) optionalMetadata() ([]byte, error) {
	cols := m.Table.Columns
	var b []byte

	var signedness []bool
	for _, c := range cols {
		if c.isNumeric() {
			signedness = append(signedness, c.Unsigned)
		}
	}
	if len(signedness) > 0 {
		b = appendTLV(b, optSignedness, msbBitmap(signedness))
	}

	var chars []uint16
	for _, c := range cols {
		if c.isCharacter() {
			chars = append(chars, c.collation())
		}
	}
	b = appendCharsets(b, chars, optDefaultCharset, optColumnCharset)

	var geoms []byte
	for _, c := range cols {
		if c.Kind == KindGeometry {
			geoms = appendPackedInt(geoms, uint64(c.Geometry))
		}
	}
	if len(geoms) > 0 {
		b = appendTLV(b, optGeometryType, geoms)
	}

	if m.Version.AtLeast(9, 0, 0) {
		var dims []byte
		for _, c := range cols {
			if c.Kind == KindVector {
				dims = appendPackedInt(dims, uint64(c.Length))
			}
		}
		if len(dims) > 0 {
			b = appendTLV(b, optVectorDimensionality, dims)
		}
	}

	if m.Metadata != MetadataFull {
		return b, nil
	}

	var names []byte
	for _, c := range cols {
		names = appendPackedInt(names, uint64(len(c.Name)))
		names = append(names, c.Name...)
	}
	b = appendTLV(b, optColumnName, names)

	var enumSet []uint16
	for _, c := range cols {
		if c.isEnumOrSet() {
			enumSet = append(enumSet, c.collation())
		}
	}
	b = appendCharsets(b, enumSet, optEnumSetDefaultCharset, optEnumSetColumnCharset)

	for _, field := range []struct {
		kind Kind
		typ  byte
	}{{KindSet, optSetStrValue}, {KindEnum, optEnumStrValue}} {
		var v []byte
		for _, c := range cols {
			if c.Kind != field.kind {
				continue
			}
			v = appendPackedInt(v, uint64(len(c.Elements)))
			for _, e := range c.Elements {
				v = appendPackedInt(v, uint64(len(e)))
				v = append(v, e...)
			}
		}
		if len(v) > 0 {
			b = appendTLV(b, field.typ, v)
		}
	}

	if pkCols := m.Table.PrimaryKey; len(pkCols) > 0 {
		prefixes := m.Table.PrimaryKeyPrefix
		if prefixes != nil && len(prefixes) != len(pkCols) {
			return nil, fmt.Errorf("mysqlbinlog: table %s.%s: %d primary key prefixes for %d key parts", m.Table.Schema, m.Table.Name, len(prefixes), len(pkCols))
		}
		var pk []byte
		for k, i := range pkCols {
			if i < 0 || i >= len(cols) {
				return nil, fmt.Errorf("mysqlbinlog: table %s.%s: primary key column %d does not exist", m.Table.Schema, m.Table.Name, i)
			}
			pk = appendPackedInt(pk, uint64(i))
			if prefixes != nil {
				pk = appendPackedInt(pk, uint64(prefixes[k]))
			}
		}
		if prefixes != nil {
			b = appendTLV(b, optPrimaryKeyWithPrefix, pk)
		} else {
			b = appendTLV(b, optSimplePrimaryKey, pk)
		}
	}

	if m.Version.AtLeast(8, 0, 23) {
		visible := make([]bool, len(cols))
		for i, c := range cols {
			visible[i] = !c.Invisible
		}
		b = appendTLV(b, optColumnVisibility, msbBitmap(visible))
	}
	return b, nil
}

// appendCharsets writes the collations of a list of columns the shorter
// of MySQL's two ways: a default (the most used collation, the lowest id
// on a tie) with the exceptions as (index, collation) pairs, or one
// collation per column; the default way when both are as long.
func appendCharsets(b []byte, collations []uint16, defaultType, columnType byte) []byte {
	if len(collations) == 0 {
		return b
	}
	count := map[uint16]int{}
	for _, c := range collations {
		count[c]++
	}
	var def uint16
	best := -1
	for c, n := range count {
		if n > best || (n == best && c < def) {
			def, best = c, n
		}
	}
	defaultForm := appendPackedInt(nil, uint64(def))
	var columnForm []byte
	for i, c := range collations {
		columnForm = appendPackedInt(columnForm, uint64(c))
		if c != def {
			defaultForm = appendPackedInt(defaultForm, uint64(i))
			defaultForm = appendPackedInt(defaultForm, uint64(c))
		}
	}
	if len(defaultForm) <= len(columnForm) {
		return appendTLV(b, defaultType, defaultForm)
	}
	return appendTLV(b, columnType, columnForm)
}
