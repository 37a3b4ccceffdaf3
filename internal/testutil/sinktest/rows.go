package sinktest

import (
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// Query returns the rows of q on db, their columns joined by spaces (a
// NULL written "NULL"), sorted; nil on an error, as when the table is
// not there yet, so that a test waiting for rows waits on.
func Query(db *sql.DB, q string) []string {
	rows, err := db.Query(q)
	if err != nil {
		return nil
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil
	}
	var out []string
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if rows.Scan(ptrs...) != nil {
			return nil
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = "NULL"
			if v.Valid {
				parts[i] = v.String
			}
		}
		out = append(out, strings.Join(parts, " "))
	}
	if rows.Err() != nil {
		return nil
	}
	slices.Sort(out)
	return out
}

// ValueRows is what Values reads of a driver's result: pgx.Rows has it.
type ValueRows interface {
	Next() bool
	Values() ([]any, error)
	Err() error
	Close()
}

// Values is Query for a driver that is not database/sql's, such as pgx:
// it returns the rows of a query's result, each value printed with
// fmt.Sprint and joined by spaces, sorted; nil if err is not, or on an
// error reading them. It closes rows.
//
//	got := sinktest.Values(conn.Query(ctx, "SELECT id, note FROM shop.orders"))
func Values(rows ValueRows, err error) []string {
	if err != nil {
		return nil
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = fmt.Sprint(v)
		}
		out = append(out, strings.Join(parts, " "))
	}
	if rows.Err() != nil {
		return nil
	}
	slices.Sort(out)
	return out
}

// SameRows fails t, naming up to ten rows, unless got (what a consumer or
// target holds, by key) equals want (the sources' rows, by the same keys).
func SameRows(t testing.TB, got, want map[string]string) {
	t.Helper()
	bad := 0
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			if bad++; bad <= 10 {
				t.Errorf("%s: got %q, the source %q", k, g, w)
			}
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			if bad++; bad <= 10 {
				t.Errorf("%s: got %q, not in the source", k, g)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d rows differ (of %d in the sources)", bad, len(want))
	}
}
