package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/schema"
	"github.com/braid-cdc/braid/sink"
)

// ensureTables checks, once per target table (again after a DDL), that
// the target tables of changes exist; one that does not is created from
// its logical table's columns with create_tables, and is otherwise an
// error that names it and says what to do. With an origin column, each
// unique key of the table must hold the column (see originKeys), or the
// error gives the ALTER TABLE that makes it so.
func (t *Target) ensureTables(ctx context.Context, changes []sink.Change) error {
	var seen *change.Table
	for _, c := range changes {
		if c.Row.Table == seen {
			continue
		}
		seen = c.Row.Table
		target := t.spec.Target(c.Logical)
		if _, ok := t.tables.Load(target); ok {
			continue
		}
		if err := t.ensureTable(ctx, c, target); err != nil {
			return err
		}
	}
	return nil
}

// ensureTable is ensureTables' look at one target table: workers that
// meet it at once leave it to one of them (as replayState.looking).
func (t *Target) ensureTable(ctx context.Context, c sink.Change, target string) error {
	t.ensuring.Lock()
	defer t.ensuring.Unlock()
	if _, ok := t.tables.Load(target); ok {
		return nil
	}
	db, tbl, _ := strings.Cut(target, ".")
	var n int
	if err := t.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", db, tbl).Scan(&n); err != nil {
		return fmt.Errorf("sink %s: look for target table %s: %w", t.spec.Name, target, err)
	}
	if n == 0 {
		if !t.spec.CreateTables {
			return fmt.Errorf("sink %s: target table %s of %s does not exist: create it, or set create_tables: true to have the sink create it from %s's columns",
				t.spec.Name, target, c.Logical, c.Logical)
		}
		if err := t.createTable(ctx, c.Row.Table, db, t.target(c.Logical)); err != nil {
			return fmt.Errorf("sink %s: create target table %s: %w", t.spec.Name, target, err)
		}
	}
	if oc := t.spec.OriginColumn; oc != "" {
		keys, err := t.uniqueKeys(ctx, target)
		if err != nil {
			return fmt.Errorf("sink %s: read the keys of target table %s: %w", t.spec.Name, target, err)
		}
		for _, k := range keys {
			if !k.holds(oc) {
				return fmt.Errorf("sink %s: target table %s: its unique key %s (%s) does not hold the origin column %s, so a row of one shard table would overwrite another's of the same %s: add %s to the key (ALTER TABLE %s %s)",
					t.spec.Name, target, k.name, strings.Join(k.names, ", "), oc, strings.Join(k.names, ", "), oc, t.target(c.Logical), k.originClause(oc))
			}
		}
		if err := t.originCollation(ctx, target, t.target(c.Logical)); err != nil {
			return fmt.Errorf("sink %s: read the origin column of target table %s: %w", t.spec.Name, target, err)
		}
	}
	t.tables.Store(target, true)
	return nil
}

// originCollation warns, once per target table, when the table's origin
// column (made beforehand, or by a braid before originType) compares
// under a collation other than a binary one: there a/shop_0.orders and
// a/Shop_0.orders, two tables on a case-sensitive source, are one
// origin, so one's row overwrites the other's of the same key and one's
// TRUNCATE deletes both's. A warning and not an error: the sources'
// names may never differ so; the fix is the user's ALTER, not the
// sink's, as the table is theirs. Held under ensuring.
func (t *Target) originCollation(ctx context.Context, target, table string) error {
	if t.caseWarned[target] {
		return nil
	}
	db, tbl, _ := strings.Cut(target, ".")
	var name, typ string
	var coll sql.NullString
	err := t.db.QueryRowContext(ctx, "SELECT COLUMN_NAME, COLUMN_TYPE, COLLATION_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND COLUMN_NAME = ?", db, tbl, t.spec.OriginColumn).Scan(&name, &typ, &coll)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // no column: the keys' check above, or the rows, stop the sink
	}
	if err != nil {
		return err
	}
	if !coll.Valid || coll.String == "binary" || strings.HasSuffix(coll.String, "_bin") {
		return nil // compared byte for byte
	}
	if t.caseWarned == nil {
		t.caseWarned = map[string]bool{}
	}
	t.caseWarned[target] = true
	// The column's own type (its length), with originType's collation.
	alter := "ALTER TABLE " + table + " MODIFY " + quote(name) + " " + strings.ToUpper(typ) + " CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT ''"
	t.log.Warn("sink's origin column compares case-insensitively: rows of two shard tables whose names differ only in case would overwrite each other, and a TRUNCATE of one would delete both's rows; run the ALTER TABLE given to compare it byte for byte",
		"dest", t.dest, "sink", t.spec.Name, "table", target, "column", name, "collation", coll.String, "alter", alter)
	return nil
}

// uniqueKey is a unique key of a target table (its primary key too).
type uniqueKey struct {
	name    string
	columns []string // as they are in the key: quoted, with a prefix length
	names   []string // the columns' names
	hash    bool     // MariaDB's long unique key (USING HASH)
}

// holds reports whether the key has column oc.
func (k uniqueKey) holds(oc string) bool {
	return slices.ContainsFunc(k.names, func(n string) bool { return strings.EqualFold(n, oc) })
}

// originClause is the ALTER TABLE clause that puts origin column oc
// first in k.
func (k uniqueKey) originClause(oc string) string {
	cols := quote(oc) + ", " + strings.Join(k.columns, ", ")
	if k.name == "PRIMARY" {
		return "DROP PRIMARY KEY, ADD PRIMARY KEY (" + cols + ")"
	}
	q := "DROP KEY " + quote(k.name) + ", ADD UNIQUE KEY " + quote(k.name) + " (" + cols + ")"
	if k.hash {
		q += " USING HASH"
	}
	return q
}

// uniqueKeys reads the unique keys of target ("db.table").
func (t *Target) uniqueKeys(ctx context.Context, target string) ([]uniqueKey, error) {
	db, tbl, _ := strings.Cut(target, ".")
	rows, err := t.db.QueryContext(ctx, "SELECT INDEX_NAME, COLUMN_NAME, SUB_PART, INDEX_TYPE FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND NON_UNIQUE = 0 ORDER BY INDEX_NAME, SEQ_IN_INDEX", db, tbl)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var keys []uniqueKey
	for rows.Next() {
		var name, column, typ string
		var prefix sql.NullInt64
		if err := rows.Scan(&name, &column, &prefix, &typ); err != nil {
			return nil, err
		}
		if len(keys) == 0 || keys[len(keys)-1].name != name {
			keys = append(keys, uniqueKey{name: name, hash: typ == "HASH"})
		}
		k := &keys[len(keys)-1]
		col := quote(column)
		if prefix.Valid {
			col += fmt.Sprintf("(%d)", prefix.Int64)
		}
		k.columns, k.names = append(k.columns, col), append(k.names, column)
	}
	return keys, rows.Err()
}

// originKeys gives the target table of logical, if it exists, the sink's
// origin column (last) when it has none, and puts the column first in
// every unique key that lacks it: MariaDB's INSERT ... ON DUPLICATE KEY
// UPDATE updates the row any unique key finds (and REPLACE, at least
// once, deletes it), so a key without the column lets a row of one shard
// table overwrite another's. It runs
// after each DDL the sink applies: a table the stream created has only
// the source's keys, and an ALTER may add one.
func (t *Target) originKeys(ctx context.Context, logical string) error {
	target, table, oc := t.spec.Target(logical), t.target(logical), t.spec.OriginColumn
	db, tbl, _ := strings.Cut(target, ".")
	var columns, origins int
	if err := t.db.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(COLUMN_NAME = ?), 0) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", oc, db, tbl).Scan(&columns, &origins); err != nil {
		return err
	}
	if columns == 0 {
		return nil // dropped, or renamed away
	}
	keys, err := t.uniqueKeys(ctx, target)
	if err != nil {
		return err
	}
	var clauses []string
	if origins == 0 {
		clauses = append(clauses, "ADD COLUMN "+quote(oc)+" "+originType)
	}
	for _, k := range keys {
		if !k.holds(oc) {
			clauses = append(clauses, k.originClause(oc))
		}
	}
	if len(clauses) == 0 {
		return nil
	}
	return t.exec(ctx, "ALTER TABLE "+table+" "+strings.Join(clauses, ", "))
}

// originType is the origin column's type in a table the sink makes or
// gives the column: its text (source/schema.table, names as the source
// has them) compared byte for byte, so that two shard tables whose names
// differ only in case or accents (distinct tables on a case-sensitive
// source) keep their rows apart, and the keys it leads are compared by
// bytes, not through a collation's tables. utf8mb4 whatever the table's
// default, so any name fits.
const originType = "VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT ''"

// createTable creates table (quoted, in database db) with tv's columns,
// their declared types, its primary and unique keys, and the origin
// column first in the primary key.
func (t *Target) createTable(ctx context.Context, tv *change.Table, db, table string) error {
	if err := t.vectorRefused(ctx, tv, table); err != nil {
		return err
	}
	if _, err := t.db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+quote(db)); err != nil {
		return err
	}
	_, err := t.db.ExecContext(ctx, createStatement(tv, table, t.spec.OriginColumn))
	return err
}

// createStatement is the CREATE TABLE of tv as table, with origin (if
// set) as a column leading the primary key, its text in utf8mb4.
func createStatement(tv *change.Table, table, origin string) string {
	var defs, key []string
	if origin != "" {
		defs = append(defs, quote(origin)+" "+originType)
		key = append(key, quote(origin))
	}
	for _, c := range tv.Columns {
		d := quote(c.Name) + " " + columnType(&c)
		if c.Charset != "" && !c.Binary {
			d += " CHARACTER SET " + c.Charset
		}
		if !c.Nullable {
			d += " NOT NULL"
		} else if c.Type == "timestamp" {
			d += " NULL" // MariaDB would make it NOT NULL DEFAULT now()
		}
		defs = append(defs, d)
		if c.Key {
			key = append(key, quote(c.Name))
		}
	}
	if len(key) > 0 && (origin == "" || len(key) > 1) {
		defs = append(defs, "PRIMARY KEY ("+strings.Join(key, ", ")+")")
	}
	for _, u := range tv.Unique {
		cols := make([]string, 0, len(u)+1)
		if origin != "" {
			cols = append(cols, quote(origin))
		}
		for _, c := range u {
			cols = append(cols, quote(c))
		}
		defs = append(defs, "UNIQUE KEY ("+strings.Join(cols, ", ")+")")
	}
	// utf8mb4 whatever the target database's default: braid's text is
	// UTF-8, and a latin1 default refused every value beyond it (a
	// column with a converted charset keeps its own, above).
	return "CREATE TABLE IF NOT EXISTS " + table + " (" + strings.Join(defs, ", ") + ") DEFAULT CHARSET=utf8mb4"
}

// columnType is c's type as a CREATE TABLE declares it: RawType, but
// for ENUM and SET, whose members (any text a shard's DDL gave them) are
// quoted here, by the one quoting function, never taken as written.
func columnType(c *change.Column) string {
	switch c.Type {
	case "enum", "set":
		return c.Type + "(" + schema.QuoteStrings(c.Elems) + ")"
	}
	return c.RawType
}
