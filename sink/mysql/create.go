package mysql

import (
	"context"
	"fmt"
	"strings"

	"github.com/braid-cdc/braid/change"
	"github.com/braid-cdc/braid/sink"
)

// ensureTables checks, once per target table (again after a DDL), that
// the target tables of changes exist; one that does not is created from
// its logical table's columns with create_tables, and is otherwise an
// error that names it and says what to do.
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
		t.tables.Store(target, true)
	}
	return nil
}

// createTable creates table (quoted, in database db) with tv's columns,
// their declared types, its primary and unique keys, and the origin
// column first in the primary key.
func (t *Target) createTable(ctx context.Context, tv *change.Table, db, table string) error {
	if _, err := t.db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+quote(db)); err != nil {
		return err
	}
	_, err := t.db.ExecContext(ctx, createStatement(tv, table, t.spec.OriginColumn))
	return err
}

// createStatement is the CREATE TABLE of tv as table, with origin (if
// set) as a column leading the primary key.
func createStatement(tv *change.Table, table, origin string) string {
	var defs, key []string
	if origin != "" {
		defs = append(defs, quote(origin)+" VARCHAR(255) NOT NULL DEFAULT ''")
		key = append(key, quote(origin))
	}
	for _, c := range tv.Columns {
		d := quote(c.Name) + " " + c.RawType
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
	return "CREATE TABLE IF NOT EXISTS " + table + " (" + strings.Join(defs, ", ") + ")"
}
