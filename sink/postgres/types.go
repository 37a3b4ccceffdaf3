package postgres

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/sink"
)

// columnName is a column's name in the target, quoted: lower case, as
// PostgreSQL folds the unquoted names of a table made by hand (MySQL
// compares column names without case, so no two columns of a table
// become one).
func columnName(name string) string { return quoteIdent(strings.ToLower(name)) }

// typeArgs reads "(n)" or "(p,s)" after a MySQL type's name.
var typeArgs = regexp.MustCompile(`^[a-z ]+\((\d+)(?:\s*,\s*(\d+))?\)`)

// pgType is the PostgreSQL type of a MySQL column (the mapping in the
// package doc).
func pgType(c *change.Column) string {
	var n, s = -1, -1
	if m := typeArgs.FindStringSubmatch(c.RawType); m != nil {
		n, _ = strconv.Atoi(m[1])
		if m[2] != "" {
			s, _ = strconv.Atoi(m[2])
		}
	}
	frac := func(base string) string {
		if n > 0 {
			return fmt.Sprintf("%s(%d)", base, n)
		}
		return base + "(0)"
	}
	switch c.Type {
	case "tinyint", "bool", "boolean":
		return "smallint"
	case "smallint":
		if c.Unsigned {
			return "integer"
		}
		return "smallint"
	case "mediumint":
		return "integer"
	case "int", "integer":
		if c.Unsigned {
			return "bigint"
		}
		return "integer"
	case "bigint":
		if c.Unsigned {
			return "numeric(20)"
		}
		return "bigint"
	case "decimal", "numeric", "fixed", "dec":
		switch {
		case n > 0 && s >= 0:
			return fmt.Sprintf("numeric(%d,%d)", n, s)
		case n > 0:
			return fmt.Sprintf("numeric(%d)", n)
		}
		return "numeric(10)"
	case "float":
		return "real"
	case "double", "real", "double precision":
		return "double precision"
	case "bit":
		if n < 1 {
			n = 1
		}
		return fmt.Sprintf("bit(%d)", n)
	case "year":
		return "smallint"
	case "date":
		return "date"
	case "datetime", "timestamp":
		return frac("timestamp")
	case "time":
		return "interval"
	case "char", "varchar":
		if c.Binary {
			return "bytea"
		}
		if n > 0 {
			return fmt.Sprintf("varchar(%d)", n)
		}
		return "text"
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "geometry":
		return "bytea"
	case "json":
		return "jsonb"
	case "vector":
		// pgvector's type, which reads MySQL's VECTOR_TO_STRING text
		// ("[1.00000e+00,...]"); without the extension the sink refuses
		// the column (vectorRefused).
		if n > 0 {
			return fmt.Sprintf("vector(%d)", n)
		}
		return "vector"
	}
	if c.Binary {
		return "bytea"
	}
	return "text" // the text family, enum, set, and what MariaDB adds (uuid, inet4, inet6)
}

// pgValue converts a change value of column c to what pgx sends for the
// column's PostgreSQL type (strings go as text, which the server parses
// for the column's type).
func pgValue(c *change.Column, v change.Value) any {
	switch x := v.(type) {
	case uint64:
		if c.Type == "bit" {
			n := 1
			if m := typeArgs.FindStringSubmatch(c.RawType); m != nil {
				n, _ = strconv.Atoi(m[1])
			}
			s := strconv.FormatUint(x, 2)
			if len(s) < n {
				s = strings.Repeat("0", n-len(s)) + s
			}
			return s
		}
		if x > math.MaxInt64 {
			return strconv.FormatUint(x, 10)
		}
		return int64(x)
	case string:
		switch c.Type {
		case "date", "datetime", "timestamp":
			if zeroDate(x) {
				// MySQL's zero dates ('0000-00-00', or a zero month or
				// day) have no PostgreSQL value.
				if c.Nullable {
					return nil
				}
				return "-infinity"
			}
		}
		return x
	}
	return v
}

// zeroDate reports whether a MySQL DATE or DATETIME text has a zero year,
// month or day.
func zeroDate(s string) bool {
	return len(s) >= 10 && (s[:4] == "0000" || s[5:7] == "00" || s[8:10] == "00")
}

// ensureTable makes sure the target table of logical exists, creating it
// from tv when the spec says so.
func (t *Target) ensureTable(ctx context.Context, c *pgx.Conn, tv *change.Table, logical string) error {
	table := t.target(logical)
	if _, ok := t.tables.Load(table); ok {
		return nil
	}
	var reg *string
	if err := c.QueryRow(ctx, "SELECT to_regclass($1)::text", table).Scan(&reg); err != nil {
		return fmt.Errorf("sink %s: look up target table %s: %w", t.spec.Name, t.spec.Target(logical), err)
	}
	if reg == nil {
		if !t.spec.CreateTables {
			return fmt.Errorf("sink %s: target table %s (of %s) does not exist in database %s: create it, or set create_tables: true",
				t.spec.Name, t.spec.Target(logical), logical, t.spec.Database)
		}
		if err := t.createTable(ctx, c, table, tv, nil); err != nil {
			return fmt.Errorf("sink %s: create target table %s (of %s): %w", t.spec.Name, t.spec.Target(logical), logical, err)
		}
	}
	t.tables.Store(table, struct{}{})
	return nil
}

// createTable creates table from tv (its schema too), one creation at a
// time, doing nothing when it exists. uniqueNames names tv's unique keys
// as MySQL does (nil: after their first column, MySQL's default).
func (t *Target) createTable(ctx context.Context, c *pgx.Conn, table string, tv *change.Table, uniqueNames []string) error {
	if err := t.vectorRefused(ctx, c, vectorColumns(table, tv)); err != nil {
		return err
	}
	t.create.Lock()
	defer t.create.Unlock()
	return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('braid sink setup'))"); err != nil {
			return err
		}
		schemaName, _ := splitQuoted(table)
		if err := ensureSchema(ctx, tx, schemaName); err != nil {
			return fmt.Errorf("create schema %s: %w", schemaName, err)
		}
		for _, q := range t.createSQL(table, tv, uniqueNames) {
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	})
}

// createSQL are the statements that create table from tv, once its
// schema exists (ensureSchema): the table (the origin column first, and
// first in the primary key), and its unique keys (with the origin column
// first).
func (t *Target) createSQL(table string, tv *change.Table, uniqueNames []string) []string {
	_, tableName := splitQuoted(table)
	var cols, key []string
	oc := ""
	if t.spec.OriginColumn != "" {
		oc = columnName(t.spec.OriginColumn)
		cols = append(cols, oc+" text NOT NULL")
	}
	for i := range tv.Columns {
		c := &tv.Columns[i]
		def := columnName(c.Name) + " " + pgType(c)
		if !c.Nullable {
			def += " NOT NULL"
		}
		cols = append(cols, def)
		if c.Key {
			key = append(key, columnName(c.Name))
		}
	}
	if len(key) > 0 {
		if oc != "" {
			key = append([]string{oc}, key...)
		}
		cols = append(cols, "PRIMARY KEY ("+strings.Join(key, ", ")+")")
	}
	out := []string{"CREATE TABLE IF NOT EXISTS " + table + " (" + strings.Join(cols, ", ") + ")"}
	for u, ucols := range tv.Unique {
		var q []string
		if oc != "" {
			q = append(q, oc)
		}
		for _, c := range ucols {
			q = append(q, columnName(c))
		}
		name := ucols[0]
		if u < len(uniqueNames) {
			name = uniqueNames[u]
		}
		out = append(out, fmt.Sprintf("CREATE UNIQUE INDEX IF NOT EXISTS %s ON %s (%s)", indexName(tableName, name), table, strings.Join(q, ", ")))
	}
	return out
}

// indexName is the PostgreSQL name of table's MySQL index name (index
// names are per schema in PostgreSQL, per table in MySQL): "table_name",
// cut to 63 bytes, quoted.
func indexName(quotedTable, name string) string {
	tbl := strings.ReplaceAll(quotedTable[1:len(quotedTable)-1], `""`, `"`)
	n := strings.ToLower(tbl + "_" + name)
	if len(n) > 63 {
		n = n[:63]
	}
	return quoteIdent(n)
}

// splitQuoted splits `"schema"."table"` into its two quoted names.
func splitQuoted(table string) (schema, name string) {
	for i := 1; i < len(table); i++ {
		if table[i] == '"' {
			if i+1 < len(table) && table[i+1] == '"' {
				i++
				continue
			}
			return table[:i+1], table[i+2:]
		}
	}
	return table, ""
}

// vectorColumns are tv's VECTOR columns as vectorRefused takes them:
// "table.column TYPE", table quoted.
func vectorColumns(table string, tv *change.Table) []string {
	var out []string
	for _, col := range tv.Columns {
		if col.Type == "vector" {
			out = append(out, table+"."+quoteIdent(col.Name)+" "+strings.ToUpper(col.RawType))
		}
	}
	return out
}

// vectorRefused is, when columns (each "table.column TYPE", quoted)
// holds a VECTOR column and the target has no vector type (the pgvector
// extension), an error wrapping sink.ErrDDLRefused that names the
// column and what to do; nil otherwise. Without it, PostgreSQL would
// refuse the type by name, and a text column instead would take values
// no vector operation reads.
func (t *Target) vectorRefused(ctx context.Context, c *pgx.Conn, columns []string) error {
	if len(columns) == 0 {
		return nil
	}
	var ok bool
	if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_type WHERE typname = 'vector')").Scan(&ok); err != nil {
		return fmt.Errorf("sink %s: look for the vector type: %w", t.spec.Name, err)
	}
	if ok {
		return nil
	}
	col, typ, _ := strings.Cut(columns[0], " ")
	return fmt.Errorf("sink %s: %w: column %s is %s, and the target has no vector type: install pgvector there (CREATE EXTENSION vector), or make the table by hand without the column and set the sink's ddl: ignore",
		t.spec.Name, sink.ErrDDLRefused, col, typ)
}
