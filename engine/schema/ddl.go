package schema

import (
	"fmt"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/charset"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/types"

	"github.com/braid-cdc/braid/engine/change"
)

// Parsed DDL (schema_parse.go) to the model: the tables a query event
// touches (DDLTables), table names, columns and indexes.

// DDLTouch is one table a DDL statement touches.
type DDLTouch struct {
	// Table is "schema.table", names as written in the DDL (unqualified
	// names take the default database), the form Table.FullName gives.
	// For DROP and CREATE DATABASE it is "schema.*" and Database is set.
	Table string `json:"table"`
	// Creates is set when the statement brings the table into existence:
	// CREATE TABLE (also LIKE, IF NOT EXISTS, OR REPLACE), the new name of
	// a RENAME, CREATE DATABASE (the tables come after it).
	Creates bool `json:"creates,omitempty"`
	// Drops is set when the table ceases to exist under this name: DROP
	// TABLE, the old name of a RENAME, DROP DATABASE.
	Drops bool `json:"drops,omitempty"`
	// Database is set for DROP DATABASE, which drops every table of the
	// schema, and CREATE DATABASE without IF NOT EXISTS, before which the
	// schema held none.
	Database bool `json:"database,omitempty"`
}

// DDLTables parses the SQL of one query event run with default database db
// and returns the tables its statements touch, in statement order, each
// table once per statement. Statements Tracker ignores touch nothing.
// SQL it cannot parse returns an error wrapping ErrDDLParse.
func DDLTables(db, sql string, mode SQLMode) ([]DDLTouch, error) {
	stmts, perr := ddlParse(sql, mode)
	if perr != nil {
		return nil, perr.wrap(fmt.Sprintf("(db %q)", db))
	}
	var out []DDLTouch
	add := func(tn *ast.TableName, creates, drops bool) {
		out = append(out, DDLTouch{Table: ddlName(db, tn).String(), Creates: creates, Drops: drops})
	}
	for _, st := range stmts {
		switch n := st.node.(type) {
		case *ast.CreateTableStmt:
			add(n.Table, true, st.orReplace)
		case *ast.DropTableStmt:
			for _, tn := range n.Tables {
				add(tn, false, true)
			}
		case *ast.RenameTableStmt:
			for _, tt := range n.TableToTables {
				add(tt.OldTable, false, true)
				add(tt.NewTable, true, false)
			}
		case *ast.AlterTableStmt:
			var to *ast.TableName
			for _, spec := range n.Specs {
				if spec.Tp == ast.AlterTableRenameTable {
					to = spec.NewTable
				}
			}
			add(n.Table, false, to != nil)
			if to != nil {
				add(to, true, false)
			}
		case *ast.CreateIndexStmt:
			add(n.Table, false, false)
		case *ast.DropIndexStmt:
			add(n.Table, false, false)
		case *ast.DropDatabaseStmt:
			out = append(out, DDLTouch{Table: n.Name.O + ".*", Drops: true, Database: true})
		case *ast.CreateDatabaseStmt:
			// Without IF NOT EXISTS, no table of the schema existed just
			// before: each is created after it, if at all.
			if !n.IfNotExists {
				out = append(out, DDLTouch{Table: n.Name.O + ".*", Creates: true, Database: true})
			}
		}
	}
	return out, nil
}

// schemaKey names a table: schema and table compare case-sensitively, as
// MySQL on Linux does (lower_case_table_names=0).
type schemaKey struct{ schema, name string }

func (k schemaKey) String() string { return k.schema + "." + k.name }

func ddlName(db string, tn *ast.TableName) schemaKey {
	if tn.Schema.O != "" {
		db = tn.Schema.O
	}
	return schemaKey{db, tn.Name.O}
}

// ddlColumn converts a parsed column definition; tableCharset is the
// table's default charset (Table.Charset), which a character column
// declaring none takes.
func ddlColumn(def *ast.ColumnDef, tableCharset string) (col change.Column, primary, unique bool, err error) {
	col = change.Column{Name: def.Name.Name.O, Nullable: true}
	ft := def.Tp
	if ft == nil {
		return col, false, false, fmt.Errorf("column %q has no type", col.Name)
	}
	tp, cs := ft.GetType(), strings.ToLower(ft.GetCharset())
	if cs == "" {
		cs = ddlCollationCharset(ft.GetCollate())
	}
	for _, opt := range def.Options {
		if cs == "" && opt.Tp == ast.ColumnOptionCollate {
			cs = ddlCollationCharset(opt.StrValue)
		}
	}
	if cs == "" {
		cs = tableCharset
	}
	bin := cs == charset.CharsetBin
	flen, dec := ft.GetFlen(), ft.GetDecimal()
	numeric := false
	switch tp {
	case mysql.TypeTiny, mysql.TypeShort, mysql.TypeInt24, mysql.TypeLong, mysql.TypeLonglong:
		numeric = true
		col.Type = types.TypeStr(tp)
		col.Unsigned = mysql.HasUnsignedFlag(ft.GetFlag()) || mysql.HasZerofillFlag(ft.GetFlag())
		if flen <= 0 {
			flen = ddlIntWidth(tp, col.Unsigned)
		}
		col.RawType = fmt.Sprintf("%s(%d)", col.Type, flen)
	case mysql.TypeNewDecimal:
		numeric = true
		if flen <= 0 {
			flen = 10
		}
		col.Type, col.RawType = "decimal", fmt.Sprintf("decimal(%d,%d)", flen, max(dec, 0))
	case mysql.TypeFloat, mysql.TypeDouble:
		numeric = true
		col.Type = types.TypeStr(tp)
		col.RawType = col.Type
		if flen > 0 && dec >= 0 {
			col.RawType = fmt.Sprintf("%s(%d,%d)", col.Type, flen, dec)
		}
	case mysql.TypeBit:
		col.Type, col.RawType = "bit", fmt.Sprintf("bit(%d)", max(flen, 1))
	case mysql.TypeYear:
		if flen <= 0 {
			flen = 4
		}
		col.Type, col.RawType = "year", fmt.Sprintf("year(%d)", flen)
	case mysql.TypeDate, mysql.TypeDuration, mysql.TypeDatetime, mysql.TypeTimestamp:
		col.Type = types.TypeStr(tp)
		col.RawType = col.Type
		if dec > 0 {
			col.RawType = fmt.Sprintf("%s(%d)", col.Type, dec)
		}
	case mysql.TypeString, mysql.TypeVarchar, mysql.TypeVarString:
		base := "char"
		if tp != mysql.TypeString {
			base = "varchar"
		}
		if bin {
			base = strings.Replace(base, "char", "binary", 1)
		}
		if flen < 0 {
			flen = 1
		}
		col.Type, col.RawType, col.Binary = base, fmt.Sprintf("%s(%d)", base, flen), bin
	case mysql.TypeTinyBlob, mysql.TypeBlob, mysql.TypeMediumBlob, mysql.TypeLongBlob:
		if flen > 0 {
			tp = ddlBlobForLength(flen, cs)
		}
		col.Type = types.TypeToStr(tp, cs)
		col.RawType, col.Binary = col.Type, bin
		if tp == mysql.TypeLongBlob && !bin && ddlJSONCheck(def) {
			col.Type, col.RawType = "json", "json"
		}
	case mysql.TypeEnum, mysql.TypeSet:
		elems := ft.GetElems()
		if tp == mysql.TypeEnum && len(elems) == 1 && strings.HasPrefix(elems[0], ddlExtMarker) {
			name := strings.TrimPrefix(elems[0], ddlExtMarker)
			col.Type, col.RawType, col.Binary = ddlExtTypes[name], name, true
			break
		}
		col.Type = types.TypeStr(tp)
		col.Elems = append([]string(nil), elems...)
		col.RawType = col.Type + "(" + QuoteStrings(elems) + ")"
	case mysql.TypeJSON:
		col.Type, col.RawType = "json", "json"
	case mysql.TypeTiDBVectorFloat32:
		col.Type, col.RawType = "vector", "vector"
		if flen > 0 {
			col.RawType = fmt.Sprintf("vector(%d)", flen)
		}
	default:
		return col, false, false, fmt.Errorf("column %q: unsupported type %s", col.Name, ft.String())
	}
	if numeric {
		col.Unsigned = mysql.HasUnsignedFlag(ft.GetFlag()) || mysql.HasZerofillFlag(ft.GetFlag())
		if col.Unsigned {
			col.RawType += " unsigned"
		}
		if mysql.HasZerofillFlag(ft.GetFlag()) {
			col.RawType += " zerofill"
		}
	}
	for _, opt := range def.Options {
		switch opt.Tp {
		case ast.ColumnOptionNotNull:
			col.Nullable = false
		case ast.ColumnOptionNull:
			col.Nullable = true
		case ast.ColumnOptionPrimaryKey:
			primary = true
		case ast.ColumnOptionUniqKey:
			unique = true
		}
	}
	if primary {
		col.Nullable = false
	}
	if !col.Binary && TextTypes[col.Type] && change.ConvertedCharset(cs) {
		col.Charset = cs
	}
	return col, primary, unique, nil
}

// ddlTextTypes are the character column types whose bytes have a charset.
var TextTypes = map[string]bool{"char": true, "varchar": true, "tinytext": true, "text": true, "mediumtext": true, "longtext": true}

// ddlCollationCharset is the charset a collation name belongs to
// ("latin1_bin": "latin1"), "" for none.
func ddlCollationCharset(collation string) string {
	cs, _, _ := strings.Cut(strings.ToLower(collation), "_")
	return cs
}

// ddlOptionCharset is the charset a CREATE or ALTER TABLE option sets as
// the table's default (CHARSET or COLLATE), "" for other options.
func ddlOptionCharset(opt *ast.TableOption) string {
	switch opt.Tp {
	case ast.TableOptionCharset:
		return strings.ToLower(opt.StrValue)
	case ast.TableOptionCollate:
		return ddlCollationCharset(opt.StrValue)
	}
	return ""
}

// ddlKeptCharset is what Table.Charset keeps of a table's default charset:
// the ones that change what its columns hold (binary, and the charsets
// braid converts).
func ddlKeptCharset(cs string) string {
	if cs == charset.CharsetBin || change.ConvertedCharset(cs) {
		return cs
	}
	return ""
}

// ddlIntWidth is the display width MariaDB and MySQL 5.7 print for an
// integer type declared without one.
func ddlIntWidth(tp byte, unsigned bool) int {
	w := map[byte]int{mysql.TypeTiny: 4, mysql.TypeShort: 6, mysql.TypeInt24: 9, mysql.TypeLong: 11, mysql.TypeLonglong: 20}[tp]
	if unsigned && tp != mysql.TypeLonglong {
		w--
	}
	return w
}

// ddlBlobForLength is the smallest TEXT or BLOB type that holds n
// characters (TEXT(n), BLOB(n)), as MySQL picks it.
func ddlBlobForLength(n int, cs string) byte {
	bytes := n
	switch strings.ToLower(cs) {
	case "binary", "latin1", "ascii":
	case "utf8", "utf8mb3":
		bytes *= 3
	default: // utf8mb4 or not declared: assume the widest common charset
		bytes *= 4
	}
	switch {
	case bytes < 1<<8:
		return mysql.TypeTinyBlob
	case bytes < 1<<16:
		return mysql.TypeBlob
	case bytes < 1<<24:
		return mysql.TypeMediumBlob
	}
	return mysql.TypeLongBlob
}

// ddlJSONCheck reports MariaDB's JSON: a LONGTEXT column whose CHECK is
// json_valid(column). MariaDB's SHOW CREATE TABLE prints JSON that way, so
// both the DDL and the loaded table give the model the type "json".
func ddlJSONCheck(def *ast.ColumnDef) bool {
	for _, opt := range def.Options {
		if opt.Tp != ast.ColumnOptionCheck {
			continue
		}
		fn, ok := opt.Expr.(*ast.FuncCallExpr)
		if !ok || fn.FnName.L != "json_valid" || len(fn.Args) != 1 {
			continue
		}
		if c, ok := fn.Args[0].(*ast.ColumnNameExpr); ok && strings.EqualFold(c.Name.Name.O, def.Name.Name.O) {
			return true
		}
	}
	return false
}

// ddlIndex converts a PRIMARY KEY or UNIQUE constraint; ok is false for
// other constraints.
func ddlIndex(c *ast.Constraint) (ix change.SchemaIndex, ok bool) {
	switch c.Tp {
	case ast.ConstraintPrimaryKey:
		ix = change.SchemaIndex{Name: "PRIMARY", Primary: true}
	case ast.ConstraintUniq, ast.ConstraintUniqKey, ast.ConstraintUniqIndex:
		ix = change.SchemaIndex{Name: c.Name}
	default:
		return ix, false
	}
	for _, part := range c.Keys {
		if part.Column == nil {
			ix.Partial = true // an expression part
			continue
		}
		if part.Length > 0 {
			ix.Partial = true
		}
		ix.Columns = append(ix.Columns, part.Column.Name.O)
	}
	return ix, true
}
