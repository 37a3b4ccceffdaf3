package binlog

import (
	"fmt"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/braid-cdc/braid/engine/schema"
)

// A live table whose SHOW CREATE TABLE the schema model cannot parse
// (MariaDB's PERIOD FOR, WITHOUT OVERLAPS, ROW START columns, and
// whatever a server adds next) is not a table to skip: its rows are in the
// binlog like any other's. The model needs only its columns (name, type,
// charset, nullability) and its unique keys, which information_schema
// lists in a form the model reads: columnsCreate writes them as a plain
// CREATE TABLE. What even that cannot give is recorded as unparsed, and
// the table's first row says so (decoder.table), unless the server's
// table maps name the columns (binlog_row_metadata=FULL).

// columnsCreate returns a CREATE TABLE of db.table built from
// information_schema: its columns in order with their declared types,
// character sets, nullability and JSON checks, its primary and unique
// keys, and its default charset. why is set instead when information_schema cannot
// stand in for the table's definition; err is a failed query.
func columnsCreate(c *client.Conn, db, table string) (create, why string, err error) {
	where := fmt.Sprintf("TABLE_SCHEMA = %s AND TABLE_NAME = %s", schema.QuoteString(db), schema.QuoteString(table))
	r, err := c.Execute("SELECT t.TABLE_TYPE, COALESCE(cs.CHARACTER_SET_NAME, '') FROM information_schema.TABLES t " +
		"LEFT JOIN information_schema.COLLATIONS cs ON cs.COLLATION_NAME = t.TABLE_COLLATION WHERE t." +
		strings.ReplaceAll(where, "AND ", "AND t."))
	if err != nil {
		return "", "", err
	}
	if r.RowNumber() != 1 {
		return "", "the table is gone from information_schema.TABLES", nil
	}
	kind, _ := r.GetString(0, 0)
	charset, _ := r.GetString(0, 1)

	r, err = c.Execute("SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COALESCE(CHARACTER_SET_NAME, ''), COALESCE(GENERATION_EXPRESSION, '') " +
		"FROM information_schema.COLUMNS WHERE " + where + " ORDER BY ORDINAL_POSITION")
	if err != nil {
		return "", "", err
	}
	if r.RowNumber() == 0 {
		return "", "information_schema.COLUMNS lists no column", nil
	}
	checks := jsonChecks(c, where)
	var defs []string
	rowTime := false
	for i := range r.RowNumber() {
		name, _ := r.GetString(i, 0)
		typ, _ := r.GetString(i, 1)
		nullable, _ := r.GetString(i, 2)
		cs, _ := r.GetString(i, 3)
		gen, _ := r.GetString(i, 4)
		if strings.HasPrefix(strings.ToUpper(gen), "ROW ") {
			rowTime = true // ROW START, ROW END: an ordinary column in the rows
		}
		def := quoteName(name) + " " + typ
		if cs != "" {
			def += " CHARACTER SET " + cs
		}
		if nullable == "NO" {
			def += " NOT NULL"
		}
		if checks[name] {
			def += " CHECK (json_valid(" + quoteName(name) + "))"
		}
		defs = append(defs, def)
	}
	if strings.EqualFold(kind, "SYSTEM VERSIONED") && !rowTime {
		// Implicit row_start and row_end: in every binlog row, in no
		// information_schema view.
		return "", "its system versioning columns are implicit, and information_schema does not list them", nil
	}

	keys, err := uniqueKeys(c, where)
	if err != nil {
		return "", "", err
	}
	defs = append(defs, keys...)
	create = "CREATE TABLE " + quoteName(table) + " (\n  " + strings.Join(defs, ",\n  ") + "\n)"
	if charset != "" {
		create += " DEFAULT CHARSET=" + charset
	}
	return create, "", nil
}

// jsonChecks returns the columns of the table under where that are
// MariaDB's JSON: a column CHECK (json_valid(column)), which SHOW CREATE
// TABLE prints and the model reads as the type json. A server without
// column-level checks in information_schema (MySQL, whose JSON is a type
// of its own) has none.
func jsonChecks(c *client.Conn, where string) map[string]bool {
	out := map[string]bool{}
	r, err := c.Execute("SELECT CONSTRAINT_NAME, CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS WHERE " +
		strings.Replace(where, "TABLE_SCHEMA", "CONSTRAINT_SCHEMA", 1) + " AND LEVEL = 'Column'")
	if err != nil {
		return out
	}
	for i := range r.RowNumber() {
		name, _ := r.GetString(i, 0)
		clause, _ := r.GetString(i, 1)
		if strings.EqualFold(strings.ReplaceAll(clause, " ", ""), "json_valid("+quoteName(name)+")") {
			out[name] = true
		}
	}
	return out
}

// uniqueKeys returns the PRIMARY KEY and UNIQUE KEY clauses of the table
// information_schema.STATISTICS lists under where, in the server's key
// order (the order SHOW CREATE TABLE prints them in).
func uniqueKeys(c *client.Conn, where string) ([]string, error) {
	r, err := c.Execute("SELECT INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME, COALESCE(SUB_PART, 0) FROM information_schema.STATISTICS WHERE " +
		where + " AND NON_UNIQUE = 0")
	if err != nil {
		return nil, err
	}
	var order []string
	parts := map[string][]string{}
	for i := range r.RowNumber() {
		index, _ := r.GetString(i, 0)
		seq, _ := r.GetInt(i, 1)
		column, _ := r.GetString(i, 2)
		prefix, _ := r.GetInt(i, 3)
		if _, ok := parts[index]; !ok {
			order = append(order, index)
		}
		part := quoteName(column)
		if prefix > 0 {
			part += fmt.Sprintf("(%d)", prefix)
		}
		ps := parts[index]
		for int64(len(ps)) < seq {
			ps = append(ps, "")
		}
		if seq >= 1 {
			ps[seq-1] = part
		} else {
			ps = append(ps, part)
		}
		parts[index] = ps
	}
	var keys []string
	for _, index := range order {
		cols := strings.Join(parts[index], ", ")
		if index == "PRIMARY" {
			keys = append(keys, "PRIMARY KEY ("+cols+")")
		} else {
			keys = append(keys, "UNIQUE KEY "+quoteName(index)+" ("+cols+")")
		}
	}
	return keys, nil
}

// oneLine is err's text on one line, for a message that must be one.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
