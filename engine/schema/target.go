package schema

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
)

// A shard's DDL as a target runs it: TargetDDLs parses the statement
// under the sql_mode it ran with, refuses what a target must not run for
// whoever wrote to a shard, renames every table to the target's, and
// restores the statement from the parsed form. The text a target runs is
// never the shard's: the shard's writer is not an admin of the targets,
// and text re-read under another sql_mode (or by another lexer) can mean
// something else (`'x\'` is a whole string under NO_BACKSLASH_ESCAPES and
// the start of one otherwise).
//
// What a target runs:
//
//   - CREATE TABLE (not … SELECT; … LIKE a table of the destination),
//     ALTER TABLE, CREATE/DROP INDEX, DROP TABLE, RENAME TABLE, each
//     naming only tables of the destination (rename says which);
//   - expressions (defaults, ON UPDATE, generated columns) of
//     literals, columns, operators and the built-in functions of
//     targetFuncs: pure functions of their arguments and the clock, none
//     that reads a file, a table, a variable or the server's state;
//   - table options that shape storage (ENGINE among targetEngines,
//     charset, collation, comment, row format...); others (DATA
//     DIRECTORY, CONNECTION, UNION, partitioning, encryption...) are left
//     out, and so are CHECK constraints (the source checked the rows).
//
// Anything else — a subquery, CREATE … SELECT, a function outside the
// list, a variable, DROP DATABASE, an ALTER TABLE of partitions or
// tablespaces, a table the destination does not have — is ErrUnsafeDDL.

// ErrUnsafeDDL is wrapped by every error about a statement TargetDDLs
// does not rebuild for a target.
var ErrUnsafeDDL = errors.New("schema: DDL not rebuilt for a target")

// TargetRename maps a table a DDL names (schema as resolved against the
// default database) to the target's table; ok is false for a table that
// is not one of the destination's.
type TargetRename func(schema, table string) (targetSchema, targetTable string, ok bool)

// TargetDDL is one statement rebuilt for a target.
type TargetDDL struct {
	// Text is the statement restored from its parsed form: names in
	// backquotes, strings in single quotes with ' and \ escaped. It means
	// what it says under any sql_mode without NO_BACKSLASH_ESCAPES and
	// ANSI_QUOTES (the MySQL sink's sessions pin one). A column declared
	// INVISIBLE keeps the attribute, as MySQL 8.0.23+ and MariaDB 10.3.3+
	// take it; Node has no trace of it.
	Text string
	// VisibleText is Text without the INVISIBLE attributes, for a target
	// that has no invisible columns (PostgreSQL), whose parser (TiDB's)
	// does not know the word either; Invisible names those columns.
	VisibleText string
	Invisible   []string
	// Node is the parsed statement, its tables renamed (Text restores
	// it, but for CREATE OR REPLACE and the types the parser lacks).
	Node ast.StmtNode
	// Kind is what it does to its table.
	Kind DDLKind
	// Tables are the target tables it names, "schema.table", in order.
	Tables []string
}

// TargetFlags are the restore flags of TargetDDL.Text.
const TargetFlags = format.RestoreStringSingleQuotes | format.RestoreStringEscapeBackslash | format.RestoreStringWithoutDefaultCharset |
	format.RestoreNameBackQuotes | format.RestoreKeyWordUppercase

// TargetDDLs rebuilds the table DDL statements of sql, run with default
// database db under mode, for a target (see the file comment).
// Statements about databases that touch no table are left out. SQL it
// cannot parse is ErrDDLParse, a statement it does not rebuild
// ErrUnsafeDDL; both errors name the statement.
func TargetDDLs(db, sql string, mode SQLMode, rename TargetRename) ([]TargetDDL, error) {
	stmts, perr := ddlParse(sql, mode)
	if perr != nil {
		return nil, perr.wrap(fmt.Sprintf("(db %q)", db))
	}
	var out []TargetDDL
	for _, st := range stmts {
		switch st.node.(type) {
		case *ast.CreateDatabaseStmt, *ast.AlterDatabaseStmt:
			continue // no table: nothing of the destination's
		}
		chk := targetCheck{db: db, rename: rename}
		st.node.Accept(&chk)
		if chk.err == nil {
			chk.err = checkStatement(st.node)
		}
		if chk.err != nil {
			return nil, fmt.Errorf("%w: %v; statement: %q", ErrUnsafeDDL, chk.err, ddlClip(st.text))
		}
		st.node.Accept(checkDropper{})
		if n, ok := st.node.(*ast.CreateTableStmt); ok {
			n.Partition = nil // partitions are the target's own business
			n.Options = targetOptions(n.Options, st.tableCharset)
			n.Constraints = slices.DeleteFunc(n.Constraints, func(c *ast.Constraint) bool { return c.Tp == ast.ConstraintCheck })
		}
		if n, ok := st.node.(*ast.AlterTableStmt); ok {
			n.Specs = slices.DeleteFunc(n.Specs, func(sp *ast.AlterTableSpec) bool {
				return sp.Tp == ast.AlterTableAlterCheck || sp.Tp == ast.AlterTableDropCheck ||
					sp.Tp == ast.AlterTableAddConstraint && sp.Constraint != nil && sp.Constraint.Tp == ast.ConstraintCheck
			})
			// ALTER COLUMN c SET [IN]VISIBLE changes no row, and MariaDB
			// has no such statement (it takes MODIFY with the whole
			// column); a target keeps the visibility the column was
			// made with.
			n.Specs = slices.DeleteFunc(n.Specs, visibilityChange)
			if len(n.Specs) == 0 {
				continue // it only changed CHECK constraints or visibility
			}
			for _, sp := range n.Specs {
				if sp.Tp == ast.AlterTableOption {
					sp.Options = targetOptions(sp.Options, "")
				}
			}
		}
		var b strings.Builder
		if err := st.node.Restore(format.NewRestoreCtx(TargetFlags, &b)); err != nil {
			return nil, fmt.Errorf("%w: cannot restore it: %v; statement: %q", ErrUnsafeDDL, err, ddlClip(st.text))
		}
		text := restoreExtTypes(b.String())
		if st.orReplace {
			text = "CREATE OR REPLACE " + strings.TrimPrefix(text, "CREATE ")
		}
		inv := invisibleColumns{}
		st.node.Accept(&inv)
		d := TargetDDL{Text: text, VisibleText: text, Node: st.node, Tables: chk.tables, Invisible: inv.names}
		if len(inv.names) > 0 {
			// The marker is a string literal as Restore writes it; a
			// restored literal of the user's cannot hold it, since the
			// marker's control character is ddlRewrite's own.
			mark := " COMMENT '" + ddlInvisibleMarker + "'"
			d.Text = strings.ReplaceAll(text, mark, " INVISIBLE")
			d.VisibleText = strings.ReplaceAll(text, mark, "")
		}
		var ld LogicalDDL
		classify(&ld, st.node)
		d.Kind = ld.Kind
		out = append(out, d)
	}
	return out, nil
}

// visibilityChange reports an ALTER COLUMN c SET [IN]VISIBLE, which
// ddlRewrite marked.
func visibilityChange(sp *ast.AlterTableSpec) bool {
	if sp.Tp != ast.AlterTableAlterColumn || len(sp.NewColumns) != 1 || len(sp.NewColumns[0].Options) != 1 {
		return false
	}
	v, ok := sp.NewColumns[0].Options[0].Expr.(ast.ValueExpr)
	if !ok {
		return false
	}
	s, ok := v.GetValue().(string)
	return ok && strings.HasPrefix(s, ddlVisibilityMarker)
}

// invisibleColumns collects the columns a statement declares INVISIBLE
// (ddlRewrite's marker comment) and takes the marker out of their
// options, so that Node holds only what the statement's text says.
type invisibleColumns struct{ names []string }

func (v *invisibleColumns) Enter(n ast.Node) (ast.Node, bool) {
	if c, ok := n.(*ast.ColumnDef); ok {
		c.Options = slices.DeleteFunc(c.Options, func(o *ast.ColumnOption) bool {
			if o.Tp != ast.ColumnOptionComment {
				return false
			}
			e, ok := o.Expr.(ast.ValueExpr)
			if !ok {
				return false
			}
			if s, ok := e.GetValue().(string); ok && s == ddlInvisibleMarker {
				v.names = append(v.names, c.Name.Name.O)
				return true
			}
			return false
		})
	}
	return n, false
}

func (v *invisibleColumns) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// checkDropper leaves CHECK constraints out of column definitions: a
// target holds rows the source checked already, and the parser restores
// them with MySQL 8's [NOT] ENFORCED, which MariaDB rejects. (Their
// expressions were checked as any other: a CHECK with a subquery stops
// the sink all the same.)
type checkDropper struct{}

func (checkDropper) Enter(n ast.Node) (ast.Node, bool) {
	if c, ok := n.(*ast.ColumnDef); ok {
		c.Options = slices.DeleteFunc(c.Options, func(o *ast.ColumnOption) bool { return o.Tp == ast.ColumnOptionCheck })
	}
	return n, false
}

func (checkDropper) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// restoreExtTypes puts back the types the parser lacks, which ddlRewrite
// declared as a marked ENUM. A restored string literal cannot hold the
// pattern: its quotes inside are doubled, so no ' in it is both after a
// ( and before a letter.
func restoreExtTypes(s string) string {
	if !strings.Contains(s, ddlExtMarker) {
		return s
	}
	for name := range ddlExtTypes {
		s = strings.ReplaceAll(s, "ENUM('"+ddlExtMarker+name+"')", strings.ToUpper(name))
	}
	return s
}

// targetCheck walks a statement: it renames each table (recording the
// target's names) and stops at the first thing a target must not run.
type targetCheck struct {
	db     string
	rename TargetRename
	tables []string
	err    error
}

func (c *targetCheck) Enter(n ast.Node) (ast.Node, bool) {
	if c.err != nil {
		return n, true
	}
	switch n := n.(type) {
	case *ast.TableName:
		from := ddlName(c.db, n)
		s, t, ok := c.rename(from.schema, from.name)
		if !ok {
			c.err = fmt.Errorf("it names table %s, which is not one of the destination's tables", from)
			return n, true
		}
		n.Schema, n.Name = ast.NewCIStr(s), ast.NewCIStr(t)
		c.tables = append(c.tables, s+"."+t)
		return n, true
	case *ast.SelectStmt, *ast.SetOprStmt, *ast.SubqueryExpr, *ast.ExistsSubqueryExpr, *ast.CompareSubqueryExpr:
		c.err = errors.New("it holds a query (a SELECT or a subquery)")
	case *ast.VariableExpr:
		c.err = errors.New("it reads a variable")
	case ast.ParamMarkerExpr, *ast.ValuesExpr, *ast.MatchAgainst, *ast.TableNameExpr:
		c.err = fmt.Errorf("it holds an expression of a kind braid does not rebuild (%T)", n)
	case *ast.AggregateFuncExpr, *ast.WindowFuncExpr:
		c.err = errors.New("it calls an aggregate or window function")
	case *ast.FuncCallExpr:
		if !targetFuncs[n.FnName.L] {
			c.err = fmt.Errorf("it calls function %s, which is not among the built-in functions braid lets a DDL run on a target", n.FnName.O)
		}
	}
	return n, c.err != nil
}

func (c *targetCheck) Leave(n ast.Node) (ast.Node, bool) { return n, c.err == nil }

// checkStatement refuses statements and clauses a target must not run
// whatever their expressions.
func checkStatement(n ast.StmtNode) error {
	switch n := n.(type) {
	case *ast.CreateTableStmt:
		if n.Select != nil {
			return errors.New("CREATE TABLE … SELECT copies rows of the target's tables")
		}
	case *ast.DropTableStmt:
		if n.IsView {
			return errors.New("DROP VIEW")
		}
	case *ast.AlterTableStmt:
		for _, sp := range n.Specs {
			if !slices.Contains(targetAlters, sp.Tp) {
				return fmt.Errorf("ALTER TABLE of a kind braid does not rebuild (%s)", alterName(sp))
			}
		}
	case *ast.CreateIndexStmt, *ast.DropIndexStmt, *ast.RenameTableStmt:
	case *ast.DropDatabaseStmt:
		return errors.New("DROP DATABASE: a target's database holds more than the destination's tables")
	default:
		return fmt.Errorf("a statement of a kind braid does not rebuild (%T)", n)
	}
	return nil
}

// alterName names an ALTER TABLE part for an error.
func alterName(sp *ast.AlterTableSpec) string {
	var b strings.Builder
	if err := sp.Restore(format.NewRestoreCtx(format.DefaultRestoreFlags, &b)); err != nil || b.Len() == 0 {
		return fmt.Sprintf("type %d", sp.Tp)
	}
	return ddlClip(b.String())
}

// targetAlters are the parts of ALTER TABLE a target runs: columns,
// keys, checks, renames and table options; not partitions, tablespaces
// (IMPORT TABLESPACE reads files) or anything TiDB's own.
var targetAlters = []ast.AlterTableType{
	ast.AlterTableOption, ast.AlterTableAddColumns, ast.AlterTableAddConstraint, ast.AlterTableDropColumn,
	ast.AlterTableDropPrimaryKey, ast.AlterTableDropIndex, ast.AlterTableDropForeignKey, ast.AlterTableModifyColumn,
	ast.AlterTableChangeColumn, ast.AlterTableRenameColumn, ast.AlterTableRenameTable, ast.AlterTableAlterColumn,
	ast.AlterTableLock, ast.AlterTableAlgorithm, ast.AlterTableRenameIndex, ast.AlterTableForce,
	ast.AlterTableEnableKeys, ast.AlterTableDisableKeys, ast.AlterTableAlterCheck, ast.AlterTableDropCheck,
	ast.AlterTableIndexInvisible,
}

// targetFuncs are the functions a rebuilt DDL may call, in defaults, ON
// UPDATE, generated columns and CHECK constraints: the clock, and pure
// functions of their arguments (strings, numbers, dates, JSON, hashes).
// None reads a file, a table, a variable, the server's state or a stored
// function, and none sleeps.
var targetFuncs = map[string]bool{}

func init() {
	for _, f := range strings.Fields(`
		current_timestamp now localtimestamp localtime curdate current_date curtime current_time
		utc_timestamp utc_date utc_time sysdate unix_timestamp from_unixtime uuid
		concat concat_ws lower lcase upper ucase substring substr mid left right length char_length
		character_length octet_length bit_length trim ltrim rtrim lpad rpad replace reverse locate instr
		position strcmp field elt find_in_set insert quote ascii ord char hex unhex
		coalesce ifnull if nullif isnull greatest least interval
		abs round truncate floor ceil ceiling mod sign sqrt pow power exp ln log log2 log10 pi
		conv bin oct crc32 md5 sha sha1 sha2
		date time year month day dayofmonth dayofweek dayofyear weekday week weekofyear yearweek
		hour minute second microsecond quarter monthname dayname last_day to_days to_seconds
		from_days makedate maketime date_format time_format date_add date_sub adddate subdate
		addtime subtime datediff timediff timestampdiff timestampadd str_to_date extract
		sec_to_time time_to_sec period_add period_diff convert_tz
		json_extract json_unquote json_value json_valid json_type json_length json_contains
		json_contains_path json_keys json_object json_array json_quote json_depth
		inet_aton inet_ntoa inet6_aton inet6_ntoa is_ipv4 is_ipv6
		regexp_like regexp_replace regexp_substr regexp_instr
	`) {
		targetFuncs[f] = true
	}
}

// targetEngines are the storage engines a rebuilt CREATE or ALTER keeps
// (lower case); another ENGINE= is left out, and the target's default
// engine makes the table (CONNECT, FEDERATED, MERGE, SPIDER... read files
// or other servers and tables).
var targetEngines = map[string]bool{"innodb": true, "myisam": true, "aria": true, "memory": true, "heap": true, "rocksdb": true}

// targetOptions keeps the table options that shape a table's storage;
// tableCharset, if a valid name, is the table's default charset of
// options the parse cut (see ddlCutTableOptions).
func targetOptions(opts []*ast.TableOption, tableCharset string) []*ast.TableOption {
	out := opts[:0]
	for _, o := range opts {
		switch o.Tp {
		case ast.TableOptionEngine:
			if !targetEngines[strings.ToLower(o.StrValue)] {
				continue
			}
		case ast.TableOptionCharset, ast.TableOptionCollate, ast.TableOptionAutoIncrement, ast.TableOptionComment,
			ast.TableOptionAvgRowLength, ast.TableOptionCheckSum, ast.TableOptionKeyBlockSize, ast.TableOptionMaxRows,
			ast.TableOptionMinRows, ast.TableOptionDelayKeyWrite, ast.TableOptionRowFormat, ast.TableOptionStatsPersistent,
			ast.TableOptionStatsAutoRecalc, ast.TableOptionPackKeys, ast.TableOptionStatsSamplePages, ast.TableOptionTableCheckSum:
		default:
			continue
		}
		out = append(out, o)
	}
	if tableCharset != "" && plainName(tableCharset) && !slices.ContainsFunc(out, func(o *ast.TableOption) bool { return o.Tp == ast.TableOptionCharset }) {
		out = append(out, &ast.TableOption{Tp: ast.TableOptionCharset, StrValue: tableCharset, UintValue: ast.TableOptionCharsetWithoutConvertTo})
	}
	return out
}

// plainName reports whether s is a bare charset name: letters, digits
// and _ only.
func plainName(s string) bool {
	for i := range len(s) {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return s != ""
}
