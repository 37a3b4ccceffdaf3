package binlog

import (
	"fmt"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/pingcap/tidb/pkg/parser/charset"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/schema"
)

// decoder turns go-mysql's row values into braid's Values, labelled with the
// schema in force where the row was written.
type decoder struct {
	p *Reader
	// full caches tables built from binlog_row_metadata=FULL table maps.
	full map[string]*change.Table
	// codecs caches each table version's codec; a DDL makes a new *Table.
	codecs map[*change.Table]*change.Codec
	// lastMap and lastCodec remember the codec of the last table map seen:
	// the rows events of a transaction share their table maps, and a DDL
	// always comes with new ones.
	lastMap   *replication.TableMapEvent
	lastCodec *change.Codec
	// zone is the server's time zone, shared by the codecs.
	zone *change.ZoneClock
}

func newDecoder(p *Reader) *decoder {
	return &decoder{p: p, full: map[string]*change.Table{}, codecs: map[*change.Table]*change.Codec{}, zone: change.NewZoneClock(p.info.location)}
}

// table finds the schema to label a rows event's rows with.
func (d *decoder) table(tm *replication.TableMapEvent, pos change.Position) (*change.Codec, error) {
	if tm == d.lastMap {
		return d.lastCodec, nil
	}
	db, name := string(tm.Schema), string(tm.Table)
	p := d.p
	var t *change.Table
	if len(tm.ColumnName) > 0 {
		t = d.fromFullMetadata(tm)
	} else if known, ok := p.schema.Table(db, name); ok {
		t = known
	} else if why, ok := p.unparsed[db+"."+name]; ok {
		return nil, fatal{fmt.Errorf("%w: source %s: %s.%s at %s: the table existed at the start and braid cannot build its columns: its CREATE TABLE cannot be parsed (%s): set binlog_row_metadata=FULL on the server (the table maps then name the columns) or leave the table out of the destination's tables",
			ErrSchemaUnknown, p.spec.Name, db, name, pos, why)}
	} else if until, ok := p.schema.Unknown(db, name); ok {
		return nil, fatal{fmt.Errorf("%w: source %s: %s.%s at %s: its column names before the DDL at %s are not known (the table predates the start position): set binlog_row_metadata=FULL on the server or start after that DDL",
			ErrSchemaUnknown, p.spec.Name, db, name, pos, until)}
	} else if b := p.badDDL; b.names(name) {
		return nil, fatal{fmt.Errorf("%w: source %s: %s.%s at %s: the table has no schema braid could read: the DDL at %s names it and cannot be parsed (%s): set binlog_row_metadata=FULL on the server (the table maps then name the columns) or leave the table out of the destination's tables",
			ErrSchemaUnknown, p.spec.Name, db, name, pos, b.pos, b.err)}
	} else {
		return nil, fatal{fmt.Errorf("%w: source %s: %s.%s at %s: the table is neither in the server's schema at the start nor created in the binlog read: start from a position before its CREATE TABLE or set binlog_row_metadata=FULL",
			ErrSchemaUnknown, p.spec.Name, db, name, pos)}
	}
	if len(t.Columns) != int(tm.ColumnCount) {
		why := "a DDL braid did not follow changed the table"
		if int(tm.ColumnCount) > len(t.Columns) && p.info.flavor == mysql.MySQLFlavor {
			// MySQL logs the hidden generated column of a functional
			// index (INDEX ((expr)), 8.0.13+), which no CREATE TABLE
			// text shows; a FULL table map names it.
			why += ", or it has a functional index whose hidden column braid cannot see: set binlog_row_metadata=FULL on the server"
		}
		return nil, fatal{fmt.Errorf("%w: source %s: %s.%s at %s: the row has %d columns but the schema known there has %d (%s): %s",
			ErrColumnCount, p.spec.Name, db, name, pos, tm.ColumnCount, len(t.Columns), columnNames(t), why)}
	}
	tc, ok := d.codecs[t]
	if !ok {
		tc = change.NewCodec(t, tm, d.zone)
		d.codecs[t] = tc
	}
	d.lastMap, d.lastCodec = tm, tc
	return tc, nil
}

// badDDL is a DDL statement the schema model could not parse.
type badDDL struct {
	pos change.Position
	sql string
	err string // one line
}

// names reports whether the statement's text names table name (a guess
// from the text, which did not parse).
func (b badDDL) names(name string) bool {
	return b.sql != "" && strings.Contains(strings.ToLower(b.sql), strings.ToLower(name))
}

func columnNames(t *change.Table) string {
	names := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}

// fromFullMetadata labels a table from the names and attributes the server
// logged with binlog_row_metadata=FULL. The tracked schema, when its names
// agree, is preferred because it knows the declared types.
func (d *decoder) fromFullMetadata(tm *replication.TableMapEvent) *change.Table {
	db, name := string(tm.Schema), string(tm.Table)
	names := tm.ColumnNameString()
	same := func(t *change.Table) bool {
		if len(t.Columns) != len(names) {
			return false
		}
		for i, c := range t.Columns {
			if !strings.EqualFold(c.Name, names[i]) {
				return false
			}
		}
		return true
	}
	if t, ok := d.p.schema.Table(db, name); ok && same(t) {
		return t
	}
	key := db + "." + name
	if t, ok := d.full[key]; ok && same(t) {
		return t
	}
	unsigned := tm.UnsignedMap()
	enums, sets := tm.EnumStrValueMap(), tm.SetStrValueMap()
	collations := tm.CollationMap()
	t := &change.Table{Schema: db, Name: name, Columns: make([]change.Column, len(names))}
	for i, n := range names {
		typ := binlogTypeName(tm, i)
		c := change.Column{Name: n, Type: typ, RawType: typ, Unsigned: unsigned[i], Nullable: true}
		if _, nullable := tm.Nullable(i); !nullable {
			c.Nullable = false
		}
		if e, ok := enums[i]; ok {
			c.Type, c.Elems = "enum", e
			c.RawType = "enum(" + schema.QuoteStrings(e) + ")"
		}
		if s, ok := sets[i]; ok {
			c.Type, c.Elems = "set", s
			c.RawType = "set(" + schema.QuoteStrings(s) + ")"
		}
		if coll, ok := collations[i]; ok && coll == 63 { // 63: the binary collation
			c.Binary = true
			switch c.Type {
			case "varchar":
				c.Type, c.RawType = "varbinary", "varbinary"
			case "char":
				c.Type, c.RawType = "binary", "binary"
			}
		} else if c.Type == "blob" && ok {
			c.Type, c.RawType = "text", "text"
		}
		if c.Type == "blob" || c.Type == "geometry" {
			c.Binary = true
		}
		if coll, ok := collations[i]; ok && schema.TextTypes[c.Type] {
			if cs := collationCharset(coll); change.ConvertedCharset(cs) {
				c.Charset = cs
			}
		}
		if c.Unsigned {
			c.RawType += " unsigned"
		}
		t.Columns[i] = c
	}
	for _, k := range tm.PrimaryKey {
		if int(k) < len(t.Columns) {
			t.Columns[k].Key = true
		}
	}
	d.full[key] = t
	return t
}

// collationCharset is the charset of a table map's collation id, as the
// TiDB parser knows MySQL's ids; MariaDB numbers a NO PAD collation 1024
// more than its PAD SPACE twin (latin1_nopad_bin 1071, latin1_bin 47). ""
// for an id it does not know.
func collationCharset(id uint64) string {
	if id >= 1024 && id < 2048 {
		id -= 1024
	}
	if c, err := charset.GetCollationByID(int(id)); err == nil {
		return c.CharsetName
	}
	return ""
}

// binlogTypeName names a column's type from its table-map type code.
func binlogTypeName(tm *replication.TableMapEvent, i int) string {
	tp, meta := tm.ColumnType[i], tm.ColumnMeta[i]
	if tp == mysql.MYSQL_TYPE_STRING && meta >= 256 {
		if real := byte(meta >> 8); real&0x30 != 0x30 {
			tp = real | 0x30
		} else {
			tp = real
		}
	}
	switch tp {
	case mysql.MYSQL_TYPE_TINY:
		return "tinyint"
	case mysql.MYSQL_TYPE_SHORT:
		return "smallint"
	case mysql.MYSQL_TYPE_INT24:
		return "mediumint"
	case mysql.MYSQL_TYPE_LONG:
		return "int"
	case mysql.MYSQL_TYPE_LONGLONG:
		return "bigint"
	case mysql.MYSQL_TYPE_NEWDECIMAL, mysql.MYSQL_TYPE_DECIMAL:
		return "decimal"
	case mysql.MYSQL_TYPE_FLOAT:
		return "float"
	case mysql.MYSQL_TYPE_DOUBLE:
		return "double"
	case mysql.MYSQL_TYPE_BIT:
		return "bit"
	case mysql.MYSQL_TYPE_TIMESTAMP, mysql.MYSQL_TYPE_TIMESTAMP2:
		return "timestamp"
	case mysql.MYSQL_TYPE_DATETIME, mysql.MYSQL_TYPE_DATETIME2:
		return "datetime"
	case mysql.MYSQL_TYPE_TIME, mysql.MYSQL_TYPE_TIME2:
		return "time"
	case mysql.MYSQL_TYPE_DATE, mysql.MYSQL_TYPE_NEWDATE:
		return "date"
	case mysql.MYSQL_TYPE_YEAR:
		return "year"
	case mysql.MYSQL_TYPE_ENUM:
		return "enum"
	case mysql.MYSQL_TYPE_SET:
		return "set"
	case mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING:
		return "varchar"
	case mysql.MYSQL_TYPE_STRING:
		return "char"
	case mysql.MYSQL_TYPE_BLOB, mysql.MYSQL_TYPE_TINY_BLOB, mysql.MYSQL_TYPE_MEDIUM_BLOB, mysql.MYSQL_TYPE_LONG_BLOB:
		return "blob"
	case mysql.MYSQL_TYPE_JSON:
		return "json"
	case mysql.MYSQL_TYPE_GEOMETRY:
		return "geometry"
	case mysql.MYSQL_TYPE_VECTOR:
		return "vector"
	}
	return "unknown"
}
