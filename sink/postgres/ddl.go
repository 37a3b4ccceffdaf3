package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // the parser's value expressions

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/schema"
	"github.com/braid-cdc/braid/sink"
)

// ApplyDDL implements sink.Target. PostgreSQL runs DDL in transactions:
// exactly once, the translated statements and every worker's checkpoint
// commit together (after the checkpoints, locked, show the DDL is not
// applied yet); at least once, each statement runs by itself and one
// that finds itself done (IF [NOT] EXISTS, or an error that says so) is
// taken as applied.
func (t *Target) ApplyDDL(ctx context.Context, ev *change.Event, workers int) error {
	var stmts []stmt
	var forget []string  // target tables a statement drops
	var missing []string // target tables an ALTER needs, made at their first row
	var vectors []string // VECTOR columns the statements make (vectorRefused)
	if shard, ok := schema.TruncatedTable(ev.DDL.Schema, ev.DDL.SQL, schema.SQLMode(ev.DDL.SQLMode)); ok {
		if t.spec.OriginColumn == "" {
			return fmt.Errorf("sink %s: seq %d: TRUNCATE of shard table %s/%s: the target holds every shard table's rows of %s together; set origin_column to delete only that shard table's",
				t.spec.Name, ev.Seq, ev.Source, shard, strings.Join(ev.DDL.Tables, ","))
		}
		ls, lt := ev.DDL.Logical()
		stmts = append(stmts, stmt{sql: "DELETE FROM " + t.target(ls+"."+lt) + " WHERE " + columnName(t.spec.OriginColumn) + " = $1", args: []any{ev.Source + "/" + shard}})
	} else if t.spec.DDL != "ignore" {
		// The statement as parsed under its session's sql_mode, checked
		// and renamed as every SQL target's (schema.TargetDDLs), then
		// translated from its restored text.
		lds, err := sink.TargetDDLs(t.spec.Name, ev, t.spec.Target)
		if err != nil {
			return err
		}
		for _, ld := range lds {
			// PostgreSQL has no invisible columns: they are made as
			// any other (docs/sinks.md).
			tr, err := t.translate(ld.VisibleText)
			if err != nil {
				return fmt.Errorf("sink %s: DDL at seq %d (%s): %w: PostgreSQL cannot run it as it is; set ddl: ignore and change the target by hand", t.spec.Name, ev.Seq, clip(ld.Text), err)
			}
			if tr.schema != "" {
				stmts = append(stmts, stmt{schema: tr.schema})
			}
			table := ""
			if t.spec.CreateTables && ld.Kind == schema.DDLAlter && len(ld.Tables) > 0 {
				table = t.quoteTarget(ld.Tables[0])
				missing = append(missing, table)
			}
			for _, q := range tr.sql {
				stmts = append(stmts, stmt{sql: q, table: table})
			}
			vectors = append(vectors, tr.vectors...)
			forget = append(forget, tr.drops...)
		}
	}
	c, err := t.conn(ctx, control)
	if err != nil {
		return fmt.Errorf("sink %s: connect: %w", t.spec.Name, err)
	}
	defer t.release(control, c)
	if err := t.vectorRefused(ctx, c, vectors); err != nil {
		return fmt.Errorf("%w (DDL at seq %d from %s)", err, ev.Seq, ev.Source)
	}
	if stmts, err = t.createAltered(ctx, c, ev, stmts, missing); err != nil {
		return fmt.Errorf("sink %s: DDL at seq %d: %w", t.spec.Name, ev.Seq, err)
	}
	if t.exactlyOnce {
		err = pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			if err := t.lockCheckpoints(ctx, tx, ev.Seq, workers); err != nil {
				return err
			}
			for _, s := range stmts {
				if s.schema != "" {
					if err := ensureSchema(ctx, tx, s.schema); err != nil {
						return fmt.Errorf("sink %s: DDL at seq %d: create schema %s: %w", t.spec.Name, ev.Seq, s.schema, err)
					}
					continue
				}
				if _, err := tx.Exec(ctx, s.sql, s.args...); err != nil {
					return fmt.Errorf("sink %s: DDL at seq %d (%s): %w", t.spec.Name, ev.Seq, s.sql, err)
				}
			}
			b := &pgx.Batch{}
			for w := range workers {
				b.Queue("INSERT INTO "+t.checkpointTable()+" (dest, sink, worker, seq, idx) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (dest, sink, worker) DO UPDATE SET seq = EXCLUDED.seq, idx = EXCLUDED.idx",
					t.dest, t.spec.Name, w, int64(ev.Seq), sink.MaxIdx)
			}
			return tx.SendBatch(ctx, b).Close()
		})
	} else {
		for _, s := range stmts {
			if s.schema != "" {
				if err = ensureSchema(ctx, c, s.schema); err != nil && pgCode(err) != "42P06" { // duplicate schema: made meanwhile
					err = fmt.Errorf("sink %s: DDL at seq %d: create schema %s: %w", t.spec.Name, ev.Seq, s.schema, err)
					break
				}
				err = nil
				continue
			}
			if _, err = c.Exec(ctx, s.sql, s.args...); err != nil && !alreadyApplied(err) {
				err = fmt.Errorf("sink %s: DDL at seq %d (%s): %w", t.spec.Name, ev.Seq, s.sql, err)
				break
			}
			err = nil
		}
	}
	for _, tbl := range forget {
		t.tables.Delete(tbl)
	}
	if len(stmts) > 0 {
		// A connection's prepared statements keep the parameter types of
		// their time, and their text does not change with a column's
		// type: the workers (idle: a DDL is a barrier) connect anew.
		t.dropIdle()
	}
	return err
}

// createAltered handles, with create_tables, the ALTERs of target
// tables that do not exist yet (made at their first row, which has not
// come): such a table is made now from the stream's version after the
// DDL, which holds what the ALTER changed, and the ALTER's statements
// are left out of stmts. Without a version (renamed away) they are left
// out all the same, and the first row makes the table.
func (t *Target) createAltered(ctx context.Context, c *pgx.Conn, ev *change.Event, stmts []stmt, missing []string) ([]stmt, error) {
	for _, table := range missing {
		var reg *string
		if err := c.QueryRow(ctx, "SELECT to_regclass($1)::text", table).Scan(&reg); err != nil {
			return nil, fmt.Errorf("look up target table %s: %w", table, err)
		}
		if reg != nil {
			continue
		}
		if len(ev.Versions) > 0 && ev.Versions[0] != nil {
			if err := t.createTable(ctx, c, table, ev.Versions[0], nil); err != nil {
				return nil, fmt.Errorf("create target table %s: %w", table, err)
			}
		}
		stmts = slices.DeleteFunc(stmts, func(s stmt) bool { return s.table == table })
	}
	return stmts, nil
}

// quoteTarget is a target table "schema.table" quoted for PostgreSQL.
func (t *Target) quoteTarget(target string) string {
	s, tbl, _ := strings.Cut(target, ".")
	return quoteIdent(s) + "." + quoteIdent(tbl)
}

// stmt is a statement and its arguments, or a schema (quoted) to make
// unless it exists (ensureSchema).
type stmt struct {
	sql    string
	args   []any
	schema string
	// table, when set, is the target table of an ALTER that create_tables
	// may make instead (createAltered).
	table string
}

// lockCheckpoints locks the sink's checkpoint rows; ErrBehind when every
// one of workers is at or past the DDL (another runner applied it).
func (t *Target) lockCheckpoints(ctx context.Context, tx pgx.Tx, seq uint64, workers int) error {
	rows, err := tx.Query(ctx, "SELECT worker, seq, idx FROM "+t.checkpointTable()+" WHERE dest = $1 AND sink = $2 ORDER BY worker FOR UPDATE", t.dest, t.spec.Name)
	if err != nil {
		return err
	}
	done := 0
	for rows.Next() {
		var w, idx int32
		var at int64
		if err := rows.Scan(&w, &at, &idx); err != nil {
			rows.Close()
			return err
		}
		if w >= 0 && int(w) < workers && !(sink.Point{Seq: uint64(at), Idx: int(idx)}).Before(sink.Point{Seq: seq, Idx: sink.MaxIdx}) {
			done++
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if done == workers {
		return fmt.Errorf("%w: every worker of sink %s is at or past the DDL at seq %d", sink.ErrBehind, t.spec.Name, seq)
	}
	return nil
}

// alreadyApplied reports the errors of a DDL run a second time.
func alreadyApplied(err error) bool {
	switch pgCode(err) {
	case "42701", "42P07", "42703", "42P01", "42704", "42710", "42P16": // duplicate column, table; undefined column, table, object; duplicate object; a second primary key
		return true
	}
	return false
}

// clip shortens a statement for an error.
func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// translation is a MySQL DDL statement as PostgreSQL statements, the
// target tables (quoted) it drops, and the schema (quoted) they need
// (ensureSchema), if any.
type translation struct {
	sql    []string
	drops  []string
	schema string
	// vectors are the VECTOR columns it makes, "table.column TYPE"
	// (vectorRefused).
	vectors []string
}

var (
	parserMu  sync.Mutex
	ddlParser = parser.New()
)

// ErrUnsupported: a DDL the PostgreSQL translation does not cover.
var ErrUnsupported = errors.New("no PostgreSQL translation")

// translate turns one logical DDL statement, its tables named as the
// target's, into PostgreSQL statements.
func (t *Target) translate(text string) (translation, error) {
	parserMu.Lock()
	nodes, _, err := ddlParser.Parse(text, "", "")
	parserMu.Unlock()
	if err != nil {
		return translation{}, err
	}
	if len(nodes) != 1 {
		return translation{}, fmt.Errorf("%w: want one statement, parsed %d", ErrUnsupported, len(nodes))
	}
	var out translation
	switch n := nodes[0].(type) {
	case *ast.CreateTableStmt:
		if n.ReferTable != nil || n.Select != nil {
			return out, fmt.Errorf("%w: CREATE TABLE ... LIKE or ... SELECT", ErrUnsupported)
		}
		tv, names, err := createdTable(n, text)
		if err != nil {
			return out, err
		}
		out.sql = t.createSQL(tableName(n.Table), tv, names)
		out.vectors = vectorColumns(tableName(n.Table), tv)
		out.schema, _ = splitQuoted(tableName(n.Table))
	case *ast.DropTableStmt:
		if n.IsView {
			return out, fmt.Errorf("%w: DROP VIEW", ErrUnsupported)
		}
		for _, tn := range n.Tables {
			out.sql = append(out.sql, "DROP TABLE IF EXISTS "+tableName(tn))
			out.drops = append(out.drops, tableName(tn))
		}
	case *ast.AlterTableStmt:
		table := tableName(n.Table)
		for _, sp := range n.Specs {
			for _, def := range sp.NewColumns {
				if def.Tp != nil && def.Tp.GetType() == mysql.TypeTiDBVectorFloat32 {
					col, err := columnOf(def)
					if err != nil {
						return out, err
					}
					out.vectors = append(out.vectors, table+"."+quoteIdent(col.Name)+" "+strings.ToUpper(col.RawType))
				}
			}
			qs, err := t.alterSpec(table, sp)
			if err != nil {
				return out, err
			}
			out.sql = append(out.sql, qs...)
		}
	case *ast.CreateIndexStmt:
		var unique bool
		switch n.KeyType {
		case ast.IndexKeyTypeNone:
		case ast.IndexKeyTypeUnique:
			unique = true
		default:
			return out, fmt.Errorf("%w: FULLTEXT, SPATIAL or VECTOR index", ErrUnsupported)
		}
		q, err := t.createIndex(tableName(n.Table), n.IndexName, unique, n.IndexPartSpecifications)
		if err != nil {
			return out, err
		}
		out.sql = append(out.sql, q)
	case *ast.DropIndexStmt:
		s, tbl := splitQuoted(tableName(n.Table))
		out.sql = append(out.sql, "DROP INDEX IF EXISTS "+s+"."+indexName(tbl, n.IndexName))
	default:
		return out, fmt.Errorf("%w: %T", ErrUnsupported, n)
	}
	return out, nil
}

// alterSpec translates one part of an ALTER TABLE of table.
func (t *Target) alterSpec(table string, sp *ast.AlterTableSpec) ([]string, error) {
	alter := "ALTER TABLE " + table + " "
	switch sp.Tp {
	case ast.AlterTableOption, ast.AlterTableLock, ast.AlterTableAlgorithm, ast.AlterTableForce,
		ast.AlterTableDisableKeys, ast.AlterTableEnableKeys:
		return nil, nil // engine, comment, charset, ALGORITHM=, LOCK=, mysqldump's DISABLE KEYS: nothing PostgreSQL keeps
	case ast.AlterTableAddColumns:
		var out, after []string
		for _, def := range sp.NewColumns {
			col, err := columnOf(def)
			if err != nil {
				return nil, err
			}
			q := alter + "ADD COLUMN IF NOT EXISTS " + columnName(def.Name.Name.O) + " " + pgType(&col)
			if !col.Nullable {
				q += " NOT NULL"
			}
			d, err := defaultOf(def)
			if err != nil {
				return nil, err
			}
			if d != "" {
				q += " DEFAULT " + d
			}
			out = append(out, q)
			for _, o := range def.Options {
				switch o.Tp {
				case ast.ColumnOptionPrimaryKey:
					return nil, fmt.Errorf("%w: a column added as the PRIMARY KEY", ErrUnsupported)
				case ast.ColumnOptionUniqKey:
					q, err := t.createIndex(table, def.Name.Name.O, true, []*ast.IndexPartSpecification{{Column: def.Name}})
					if err != nil {
						return nil, err
					}
					after = append(after, q)
				}
			}
		}
		return append(out, after...), nil
	case ast.AlterTableDropColumn:
		return []string{alter + "DROP COLUMN IF EXISTS " + columnName(sp.OldColumnName.Name.O)}, nil
	case ast.AlterTableModifyColumn, ast.AlterTableChangeColumn:
		def := sp.NewColumns[0]
		old := def.Name.Name.O
		if sp.OldColumnName != nil {
			old = sp.OldColumnName.Name.O
		}
		col, err := columnOf(def)
		if err != nil {
			return nil, err
		}
		d, err := defaultOf(def)
		if err != nil {
			return nil, err
		}
		typ, c := pgType(&col), columnName(old)
		out := []string{alter + "ALTER COLUMN " + c + " TYPE " + typ + " USING " + c + "::" + typ}
		if col.Nullable {
			out = append(out, alter+"ALTER COLUMN "+c+" DROP NOT NULL")
		} else {
			out = append(out, alter+"ALTER COLUMN "+c+" SET NOT NULL")
		}
		if d == "" {
			out = append(out, alter+"ALTER COLUMN "+c+" DROP DEFAULT")
		} else {
			out = append(out, alter+"ALTER COLUMN "+c+" SET DEFAULT "+d)
		}
		if !strings.EqualFold(old, def.Name.Name.O) {
			out = append(out, alter+"RENAME COLUMN "+c+" TO "+columnName(def.Name.Name.O))
		}
		return out, nil
	case ast.AlterTableRenameColumn:
		return []string{alter + "RENAME COLUMN " + columnName(sp.OldColumnName.Name.O) + " TO " + columnName(sp.NewColumnName.Name.O)}, nil
	case ast.AlterTableAlterColumn:
		def := sp.NewColumns[0]
		for _, o := range def.Options {
			if o.Tp == ast.ColumnOptionNoOption && o.Expr != nil {
				o.Tp = ast.ColumnOptionDefaultValue // the parser's SET DEFAULT
			}
		}
		d, err := defaultOf(def)
		if err != nil {
			return nil, err
		}
		if d == "" {
			return []string{alter + "ALTER COLUMN " + columnName(def.Name.Name.O) + " DROP DEFAULT"}, nil
		}
		return []string{alter + "ALTER COLUMN " + columnName(def.Name.Name.O) + " SET DEFAULT " + d}, nil
	case ast.AlterTableAddConstraint:
		cn := sp.Constraint
		switch cn.Tp {
		case ast.ConstraintPrimaryKey:
			cols, err := t.keyParts(cn.Keys, true)
			if err != nil {
				return nil, err
			}
			return []string{alter + "ADD PRIMARY KEY (" + cols + ")"}, nil
		case ast.ConstraintUniq, ast.ConstraintUniqKey, ast.ConstraintUniqIndex, ast.ConstraintKey, ast.ConstraintIndex:
			name := cn.Name
			if name == "" && len(cn.Keys) > 0 && cn.Keys[0].Column != nil {
				name = cn.Keys[0].Column.Name.O
			}
			unique := cn.Tp != ast.ConstraintKey && cn.Tp != ast.ConstraintIndex
			q, err := t.createIndex(table, name, unique, cn.Keys)
			if err != nil {
				return nil, err
			}
			return []string{q}, nil
		}
		what := map[ast.ConstraintType]string{ast.ConstraintForeignKey: "a FOREIGN KEY", ast.ConstraintFulltext: "a FULLTEXT index",
			ast.ConstraintCheck: "a CHECK constraint"}[cn.Tp]
		if what == "" {
			what = "an index of this kind"
		}
		return nil, fmt.Errorf("%w: ADD of %s", ErrUnsupported, what)
	case ast.AlterTableDropIndex:
		s, tbl := splitQuoted(table)
		return []string{"DROP INDEX IF EXISTS " + s + "." + indexName(tbl, sp.Name)}, nil
	case ast.AlterTableDropPrimaryKey:
		_, tbl := splitQuoted(table)
		return []string{alter + "DROP CONSTRAINT IF EXISTS " + indexName(tbl, "pkey")}, nil
	case ast.AlterTableRenameIndex:
		s, tbl := splitQuoted(table)
		return []string{"ALTER INDEX IF EXISTS " + s + "." + indexName(tbl, sp.FromKey.O) + " RENAME TO " + indexName(tbl, sp.ToKey.O)}, nil
	}
	return nil, fmt.Errorf("%w: ALTER TABLE of this kind (%d)", ErrUnsupported, sp.Tp)
}

// createIndex is the CREATE [UNIQUE] INDEX of MySQL index name on table
// (a unique one with the origin column first).
func (t *Target) createIndex(table, name string, unique bool, parts []*ast.IndexPartSpecification) (string, error) {
	cols, err := t.keyParts(parts, unique)
	if err != nil {
		return "", err
	}
	u := ""
	if unique {
		u = "UNIQUE "
	}
	_, tbl := splitQuoted(table)
	return fmt.Sprintf("CREATE %sINDEX IF NOT EXISTS %s ON %s (%s)", u, indexName(tbl, name), table, cols), nil
}

// keyParts are an index's columns (prefix lengths dropped: PostgreSQL
// indexes whole values), after the origin column when withOrigin is set
// and the target has one.
func (t *Target) keyParts(parts []*ast.IndexPartSpecification, withOrigin bool) (string, error) {
	var cols []string
	if withOrigin && t.spec.OriginColumn != "" {
		cols = append(cols, columnName(t.spec.OriginColumn))
	}
	for _, p := range parts {
		if p.Column == nil {
			return "", fmt.Errorf("%w: an index on an expression", ErrUnsupported)
		}
		cols = append(cols, columnName(p.Column.Name.O))
	}
	return strings.Join(cols, ", "), nil
}

// tableName is a TiDB table name, quoted for PostgreSQL.
func tableName(tn *ast.TableName) string {
	return quoteIdent(tn.Schema.O) + "." + quoteIdent(tn.Name.O)
}

// createdTable is the table a CREATE TABLE makes, as braid's schema model
// reads it, and the MySQL names of its unique keys in tv.Unique's order.
func createdTable(n *ast.CreateTableStmt, text string) (*change.Table, []string, error) {
	tr := schema.NewTracker()
	pos := change.Position{File: "ddl", Pos: 4}
	if err := tr.LoadCreate(pos, n.Table.Schema.O, text); err != nil {
		return nil, nil, err
	}
	tv, ok := tr.Table(n.Table.Schema.O, n.Table.Name.O)
	if !ok {
		return nil, nil, fmt.Errorf("%w: the schema model made no table of it", ErrUnsupported)
	}
	var indexes []change.SchemaIndex
	for _, h := range tr.Snapshot().Tables {
		if len(h.Versions) > 0 {
			indexes = h.Versions[len(h.Versions)-1].Indexes
		}
	}
	names := make([]string, len(tv.Unique))
	for u, cols := range tv.Unique {
		names[u] = cols[0]
		for _, ix := range indexes {
			if !ix.Primary && slices.EqualFunc(ix.Columns, cols, strings.EqualFold) {
				names[u] = ix.Name
			}
		}
	}
	return tv, names, nil
}

// columnOf is a column definition as braid's schema model reads it.
func columnOf(def *ast.ColumnDef) (change.Column, error) {
	var b strings.Builder
	d := &ast.ColumnDef{Name: def.Name, Tp: def.Tp}
	for _, o := range def.Options {
		switch o.Tp {
		case ast.ColumnOptionNotNull, ast.ColumnOptionNull, ast.ColumnOptionPrimaryKey, ast.ColumnOptionCollate:
			d.Options = append(d.Options, o)
		}
	}
	if err := d.Restore(format.NewRestoreCtx(format.DefaultRestoreFlags, &b)); err != nil {
		return change.Column{}, err
	}
	tr := schema.NewTracker()
	if err := tr.LoadCreate(change.Position{File: "ddl", Pos: 4}, "x", "CREATE TABLE `x`.`t` ("+b.String()+")"); err != nil {
		return change.Column{}, err
	}
	tv, ok := tr.Table("x", "t")
	if !ok || len(tv.Columns) != 1 {
		return change.Column{}, fmt.Errorf("%w: column %s", ErrUnsupported, def.Name.Name.O)
	}
	return tv.Columns[0], nil
}

// defaultOf is a column definition's DEFAULT in PostgreSQL ("" for none):
// a literal, or the current time.
func defaultOf(def *ast.ColumnDef) (string, error) {
	for _, o := range def.Options {
		if o.Tp != ast.ColumnOptionDefaultValue {
			continue
		}
		switch e := o.Expr.(type) {
		case *ast.FuncCallExpr:
			switch e.FnName.L {
			case "current_timestamp", "now", "localtimestamp", "localtime":
				return "LOCALTIMESTAMP", nil
			}
		case ast.ValueExpr:
			if e.GetValue() == nil {
				return "NULL", nil
			}
			switch v := e.GetValue().(type) {
			case string: // by the one quoting function
				return quoteLiteral(v), nil
			case []byte:
				return quoteLiteral(string(v)), nil
			}
			var b strings.Builder
			if err := e.Restore(format.NewRestoreCtx(format.RestoreStringSingleQuotes, &b)); err != nil {
				return "", err
			}
			s := b.String()
			if strings.HasPrefix(s, "_") { // a charset introducer: _UTF8MB4'x'
				if i := strings.IndexByte(s, '\''); i > 0 {
					s = s[i:]
				}
			}
			return s, nil
		}
		return "", fmt.Errorf("%w: the DEFAULT of column %s", ErrUnsupported, def.Name.Name.O)
	}
	return "", nil
}
