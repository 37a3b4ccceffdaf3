package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// What braid sink verify reads of MySQL and MariaDB tables, as text: the
// target's tables (Target.Lookup, Target.Sample) and, through package
// sink/verify, the sources' shard tables, which are MySQL or MariaDB too.
// Values are read over the text protocol (no server-side prepared
// statements), so each is the server's own text of it: NULL is nil.

// Lookup returns the row of logical's target table whose key columns hold
// key (text; nil is NULL) and, when the sink has an origin column and
// origin is not "", whose origin column holds origin; found is false
// when there is none. It implements sink/verify's Target.
func (t *Target) Lookup(ctx context.Context, logical string, keyCols []string, key []*string, origin string) (map[string]*string, bool, error) {
	schema, table, _ := strings.Cut(t.spec.Target(logical), ".")
	cols := keyCols
	args := make([]any, len(key), len(key)+1)
	for i, v := range key {
		args[i] = arg(v)
	}
	if t.spec.OriginColumn != "" && origin != "" {
		cols = append(cols[:len(cols):len(cols)], t.spec.OriginColumn)
		args = append(args, origin)
	}
	return LookupRow(ctx, t.db, schema, table, cols, args)
}

// Sample returns up to n random rows of logical's target table, with
// the origin column when the sink has one (see SampleRows for how they
// are drawn). It implements sink/verify's Target.
func (t *Target) Sample(ctx context.Context, logical string, n int) ([]map[string]*string, error) {
	schema, table, _ := strings.Cut(t.spec.Target(logical), ".")
	info, err := Describe(ctx, t.db, schema, table)
	if err != nil {
		return nil, err
	}
	return SampleRows(ctx, t.db, info, n, rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())))
}

// TableInfo is what sampling needs to know of a table.
type TableInfo struct {
	Schema, Name string
	// Columns are its columns in their order.
	Columns []string
	// Key is its primary key's columns, or every column when it has none
	// (as sink.KeyColumns); PrimaryKey says which.
	Key        []string
	PrimaryKey bool
	// integer marks its integer columns.
	integer map[string]bool
}

// Describe reads a table's columns and primary key from
// information_schema; an error when the table does not exist.
func Describe(ctx context.Context, db *sql.DB, schema, table string) (*TableInfo, error) {
	info := &TableInfo{Schema: schema, Name: table, integer: map[string]bool{}}
	rows, err := db.QueryContext(ctx, "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_KEY FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION", schema, table)
	if err != nil {
		return nil, fmt.Errorf("describe %s.%s: %w", schema, table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, typ, key string
		if err := rows.Scan(&name, &typ, &key); err != nil {
			return nil, err
		}
		info.Columns = append(info.Columns, name)
		switch strings.ToLower(typ) {
		case "tinyint", "smallint", "mediumint", "int", "integer", "bigint":
			info.integer[name] = true
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(info.Columns) == 0 {
		return nil, fmt.Errorf("table %s.%s does not exist", schema, table)
	}
	krows, err := db.QueryContext(ctx, "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX", schema, table)
	if err != nil {
		return nil, fmt.Errorf("describe %s.%s: %w", schema, table, err)
	}
	defer krows.Close()
	for krows.Next() {
		var name string
		if err := krows.Scan(&name); err != nil {
			return nil, err
		}
		info.Key = append(info.Key, name)
	}
	if err := krows.Err(); err != nil {
		return nil, err
	}
	info.PrimaryKey = len(info.Key) > 0
	if !info.PrimaryKey {
		info.Key = info.Columns
	}
	return info, nil
}

// LookupRow returns the row of schema.table whose columns cols hold args
// (nil is NULL, compared with <=>), found false when there is none.
func LookupRow(ctx context.Context, db *sql.DB, schema, table string, cols []string, args []any) (map[string]*string, bool, error) {
	where := make([]string, len(cols))
	for i, c := range cols {
		where[i] = quote(c) + " <=> ?"
	}
	rows, err := readRows(ctx, db, "SELECT * FROM "+quote(schema)+"."+quote(table)+" WHERE "+strings.Join(where, " AND ")+" LIMIT 1", args...)
	if err != nil || len(rows) == 0 {
		return nil, false, err
	}
	return rows[0], true, nil
}

// maxPrefixValues bounds the distinct values of a leading key column
// SampleRows draws among (an origin column's shard tables).
const maxPrefixValues = 1000

// SampleRows returns up to n rows of a table drawn at random, without
// reading the whole table where its primary key allows:
//
//   - a table of at most n rows: all of them;
//   - a primary key whose first column is an integer: n random values
//     between the column's MIN and MAX (both read from the index), and
//     for each the first row at or after it (an index seek); rows after
//     a gap in the keys are more likely, and a row drawn twice is drawn
//     again, up to 3n tries;
//   - a primary key whose first column has at most maxPrefixValues
//     values (an origin column) and whose second is an integer: the same
//     within a value of the first drawn at random (the distinct values
//     are read from the index, a loose scan);
//   - otherwise ORDER BY RAND() LIMIT n, which reads the whole table.
func SampleRows(ctx context.Context, db *sql.DB, info *TableInfo, n int, rng *rand.Rand) ([]map[string]*string, error) {
	if n <= 0 {
		return nil, nil
	}
	table := quote(info.Schema) + "." + quote(info.Name)
	// A table of at most n rows is read whole (counting stops at n+1).
	var size int
	if err := db.QueryRowContext(ctx, fmt.Sprintf("SELECT COUNT(*) FROM (SELECT 1 FROM %s LIMIT %d) AS head", table, n+1)).Scan(&size); err != nil {
		return nil, err
	}
	if size <= n {
		return readRows(ctx, db, "SELECT * FROM "+table)
	}
	if info.PrimaryKey && info.integer[info.Key[0]] {
		return probe(ctx, db, table, info, nil, n, rng)
	}
	if info.PrimaryKey && len(info.Key) > 1 && info.integer[info.Key[1]] {
		prefixes, err := readRows(ctx, db, fmt.Sprintf("SELECT DISTINCT %s FROM %s LIMIT %d", quote(info.Key[0]), table, maxPrefixValues+1))
		if err != nil {
			return nil, err
		}
		if len(prefixes) <= maxPrefixValues {
			var vals []*string
			for _, p := range prefixes {
				vals = append(vals, p[info.Key[0]])
			}
			return probe(ctx, db, table, info, vals, n, rng)
		}
	}
	return readRows(ctx, db, fmt.Sprintf("SELECT * FROM %s ORDER BY RAND() LIMIT %d", table, n))
}

// probe draws n rows by random values of an integer key column: the
// first key column, or (prefixes given) the second within a random value
// of the first.
func probe(ctx context.Context, db *sql.DB, table string, info *TableInfo, prefixes []*string, n int, rng *rand.Rand) ([]map[string]*string, error) {
	col := info.Key[0]
	var where string
	if prefixes != nil {
		if len(prefixes) == 0 {
			return nil, nil
		}
		col = info.Key[1]
		where = quote(info.Key[0]) + " <=> ? AND "
	}
	type span struct {
		lo, hi int64
		empty  bool
	}
	spans := map[int]span{}
	spanOf := func(p int) (span, error) {
		if s, ok := spans[p]; ok {
			return s, nil
		}
		var args []any
		if prefixes != nil {
			args = append(args, arg(prefixes[p]))
		}
		var lo, hi sql.NullString
		q := fmt.Sprintf("SELECT MIN(%[1]s), MAX(%[1]s) FROM %[2]s", quote(col), table)
		if where != "" {
			q += " WHERE " + strings.TrimSuffix(where, " AND ")
		}
		if err := db.QueryRowContext(ctx, q, args...).Scan(&lo, &hi); err != nil {
			return span{}, err
		}
		s := span{empty: !lo.Valid}
		if lo.Valid {
			l, errLo := strconv.ParseInt(lo.String, 10, 64)
			h, errHi := strconv.ParseInt(hi.String, 10, 64)
			if errLo != nil || errHi != nil {
				// BIGINT UNSIGNED past int64: draw within the int64 part.
				l, h = max(l, 0), int64(^uint64(0)>>1)
			}
			s.lo, s.hi = l, h
		}
		spans[p] = s
		return s, nil
	}
	seen := map[string]bool{}
	var out []map[string]*string
	for try := 0; try < 3*n && len(out) < n; try++ {
		p := 0
		var args []any
		if prefixes != nil {
			p = rng.IntN(len(prefixes))
			args = append(args, arg(prefixes[p]))
		}
		s, err := spanOf(p)
		if err != nil {
			return nil, err
		}
		if s.empty {
			if prefixes == nil {
				return nil, nil
			}
			continue
		}
		v := s.lo
		if width := uint64(s.hi - s.lo); width < ^uint64(0) {
			v += int64(rng.Uint64N(width + 1))
		}
		args = append(args, v)
		rows, err := readRows(ctx, db, fmt.Sprintf("SELECT * FROM %s WHERE %s%s >= ? ORDER BY %s LIMIT 1", table, where, quote(col), quote(col)), args...)
		if err != nil {
			return nil, err
		}
		if len(rows) == 0 {
			continue
		}
		var k strings.Builder
		for _, c := range info.Key {
			k.WriteString(text(rows[0][c]))
			k.WriteByte(0)
		}
		if seen[k.String()] {
			continue
		}
		seen[k.String()] = true
		out = append(out, rows[0])
	}
	return out, nil
}

// readRows runs q and returns its rows as column → text (nil: NULL).
func readRows(ctx context.Context, db *sql.DB, q string, args ...any) ([]map[string]*string, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []map[string]*string
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make(map[string]*string, len(cols))
		for i, c := range cols {
			if vals[i].Valid {
				s := vals[i].String
				row[c] = &s
			} else {
				row[c] = nil
			}
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// text is a value's text, "\x00NULL" for NULL (for the keys of rows
// drawn).
func text(s *string) string {
	if s == nil {
		return "\x00NULL"
	}
	return *s
}

// arg is a value as a query argument.
func arg(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}
