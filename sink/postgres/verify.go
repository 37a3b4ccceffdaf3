package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// What braid sink verify reads of a PostgreSQL target (package
// sink/verify's Target): rows as PostgreSQL's own text of each value,
// read over the simple protocol (NULL is nil), keyed by the source's
// column names where the sink has applied rows of the table (else their
// lower-case target names) and the origin column by the spec's name.

// verifyConn is the idle map's key of the connection Lookup and Sample
// use, apart from the workers' and ApplyDDL's.
const verifyConn = -2

// Lookup returns the row of logical's target table whose key columns
// hold key (text; nil is NULL) and, when the sink has an origin column
// and origin is not "", whose origin column holds origin; found is false
// when there is none.
func (t *Target) Lookup(ctx context.Context, logical string, keyCols []string, key []*string, origin string) (map[string]*string, bool, error) {
	table := t.target(logical)
	var where []string
	var args []any
	for i, c := range keyCols {
		if key[i] == nil {
			where = append(where, columnName(c)+" IS NULL")
			continue
		}
		args = append(args, *key[i])
		where = append(where, fmt.Sprintf("%s = $%d", columnName(c), len(args)))
	}
	if t.spec.OriginColumn != "" && origin != "" {
		args = append(args, origin)
		where = append(where, fmt.Sprintf("%s = $%d", columnName(t.spec.OriginColumn), len(args)))
	}
	rows, err := t.readRows(ctx, table, "SELECT * FROM "+table+" WHERE "+strings.Join(where, " AND ")+" LIMIT 1", args...)
	if err != nil || len(rows) == 0 {
		return nil, false, err
	}
	return rows[0], true, nil
}

// Sample returns up to n rows of logical's target table drawn at random:
// a TABLESAMPLE SYSTEM of the fraction of the table's pages that should
// hold about 3n rows (from the planner's row estimate), ORDER BY random()
// within it; the whole table ORDER BY random() when that draws too few.
func (t *Target) Sample(ctx context.Context, logical string, n int) ([]map[string]*string, error) {
	if n <= 0 {
		return nil, nil
	}
	table := t.target(logical)
	c, err := t.conn(ctx, verifyConn)
	if err != nil {
		return nil, err
	}
	var est float64
	err = c.QueryRow(ctx, "SELECT reltuples::float8 FROM pg_class WHERE oid = $1::regclass", table).Scan(&est)
	t.release(verifyConn, c)
	if err != nil {
		return nil, err
	}
	if pct := 300 * float64(n) / est; est > 0 && pct < 50 {
		rows, err := t.readRows(ctx, table, fmt.Sprintf("SELECT * FROM %s TABLESAMPLE SYSTEM (%f) ORDER BY random() LIMIT %d", table, pct, n))
		if err != nil || len(rows) == n {
			return rows, err
		}
	}
	return t.readRows(ctx, table, fmt.Sprintf("SELECT * FROM %s ORDER BY random() LIMIT %d", table, n))
}

// readRows runs q on the verify connection and returns its rows as
// column → text (nil: NULL), the columns named as the source names them.
func (t *Target) readRows(ctx context.Context, table, q string, args ...any) ([]map[string]*string, error) {
	c, err := t.conn(ctx, verifyConn)
	if err != nil {
		return nil, err
	}
	defer t.release(verifyConn, c)
	rows, err := c.Query(ctx, q, append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	names := t.sourceNames(table)
	var cols []string
	for _, f := range rows.FieldDescriptions() {
		name := f.Name
		if src, ok := names[name]; ok {
			name = src
		}
		cols = append(cols, name)
	}
	var out []map[string]*string
	for rows.Next() {
		row := make(map[string]*string, len(cols))
		for i, raw := range rows.RawValues() {
			if raw == nil {
				row[cols[i]] = nil
				continue
			}
			s := string(raw)
			row[cols[i]] = &s
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// sourceNames maps the target's column names of table to the source's,
// from the table versions the sink has applied rows of, and the origin
// column's to the spec's.
func (t *Target) sourceNames(table string) map[string]string {
	out := map[string]string{}
	if oc := t.spec.OriginColumn; oc != "" {
		out[strings.ToLower(oc)] = oc
	}
	t.stmts.Range(func(k, _ any) bool {
		if sk := k.(stmtKey); sk.table == table {
			for _, c := range sk.tv.Columns {
				out[strings.ToLower(c.Name)] = c.Name
			}
		}
		return true
	})
	return out
}
