package conformance

import (
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
)

// The shard tables of a case: <case>_0.orders, <case>_1.orders on the
// suite's server, merged to the logical table <case>.orders. Their
// columns hold what targets most often get wrong: an exact DECIMAL, a
// DATETIME(6), Unicode text beyond the BMP, JSON, and a unique code that
// moves from one row to another.
const columns = "(id BIGINT PRIMARY KEY, code VARCHAR(20) NOT NULL UNIQUE, amount DECIMAL(12,2) NOT NULL, at DATETIME(6) NULL," +
	" note VARCHAR(60) NULL, doc JSON NULL) DEFAULT CHARSET=utf8mb4"

// cols are the columns the suite compares, c once a case has added it.
var cols = []string{"id", "code", "amount", "at", "note", "doc"}

// notes are the texts the rows carry: accents, CJK, an emoji (four
// bytes in UTF-8), quotes and a backslash.
var notes = []string{"naïve café", "日本語のテキスト", "emoji 😀 and ✓", "it's \"quoted\" \\ back", "Ελληνικά", "plain"}

// shards is how many shard tables a case has.
const shards = 2

// create makes the case's shard tables, empty.
func (e *env) create() {
	cs := columns
	for n := range shards {
		e.srv.Exec(e.t, fmt.Sprintf("CREATE DATABASE %s_%d", e.db, n), fmt.Sprintf("CREATE TABLE %s_%d.orders %s", e.db, n, cs))
	}
}

// id is the key of row k of round r of shard n: the shards' keys apart.
func id(n, r, k int) int64 { return int64(n)*1_000_000 + int64(r)*100 + int64(k) }

// write writes round r of the workload to shard n, each statement a
// transaction: 12 rows inserted, amounts and JSON changed with their
// before images, a unique code moved from one row to another, a key
// changed, two rows deleted, one row's note set NULL; from round 2 on,
// when added, column c set.
func (e *env) write(n, r int) {
	e.t.Helper()
	var vals []string
	for k := range 12 {
		i := id(n, r, k)
		vals = append(vals, fmt.Sprintf("(%d, 'c%d', %d.%02d, '2024-0%d-1%d 1%d:0%d:%02d.%06d', '%s', '%s')", i, i, k*7, k%100, 1+k%9, k%10, k%10, k%10, k, 100000*k+k,
			strings.ReplaceAll(strings.ReplaceAll(notes[k%len(notes)], `\`, `\\`), "'", "''"),
			fmt.Sprintf(`{"k": %d, "tags": ["a", "ü"], "nested": {"round": %d, "ok": true, "v": null}}`, k, r)))
	}
	base := id(n, r, 0)
	stmts := []string{
		fmt.Sprintf("INSERT INTO {t} (id, code, amount, at, note, doc) VALUES %s", strings.Join(vals, ", ")),
		fmt.Sprintf("UPDATE {t} SET amount = amount + 1.25, doc = JSON_SET(doc, '$.k', 'ünïcode') WHERE id BETWEEN %d AND %d AND MOD(id, 3) = 0", base, base+11),
		// A unique value moves from one row to another: the two changes
		// keep their order whatever workers their rows are on.
		fmt.Sprintf("UPDATE {t} SET code = 'moved%d' WHERE id = %d", base+5, base+5),
		fmt.Sprintf("UPDATE {t} SET code = 'c%d' WHERE id = %d", base+5, base+6),
		fmt.Sprintf("UPDATE {t} SET id = id + 50, at = NULL WHERE id = %d", base+1),
		fmt.Sprintf("DELETE FROM {t} WHERE id IN (%d, %d)", base+2, base+3),
		fmt.Sprintf("UPDATE {t} SET note = NULL, doc = NULL WHERE id = %d", base+4),
	}
	for _, q := range stmts {
		e.srv.Exec(e.t, strings.ReplaceAll(q, "{t}", e.shard(n)+".orders"))
	}
	if e.altered {
		e.srv.Exec(e.t, fmt.Sprintf("UPDATE %s.orders SET c = %d WHERE id = %d", e.shard(n), r, base+7))
	}
	e.changes += e.writes()
	e.keyChanges++
}

// writes is how many row changes one round of write makes: 12 inserted,
// 4 updated (ids 0, 3, 6, 9), 2 for the code moved, 1 key changed, 2
// deleted, 1 note set NULL, and with column c 1 more.
func (e *env) writes() int {
	n := 12 + 4 + 2 + 1 + 2 + 1
	if e.altered {
		n++
	}
	return n
}

// alter adds column c on every shard, as one shard DDL.
func (e *env) alter() {
	for n := range shards {
		e.srv.Exec(e.t, fmt.Sprintf("ALTER TABLE %s.orders ADD COLUMN c INT NULL", e.shard(n)))
	}
	e.altered = true
}

func (e *env) shard(n int) string { return fmt.Sprintf("%s_%d", e.db, n) }

// columns are the columns the case's rows have now.
func (e *env) columns() []string {
	if e.altered {
		return append(slices.Clone(cols), "c")
	}
	return cols
}

// sources returns the rows of every shard table, canonical (row).
func (e *env) sources() []string {
	e.t.Helper()
	return sourceRows(e.t, e.srv, e.db, e.columns())
}

func sourceRows(t testing.TB, srv *mysqltest.Server, db string, cs []string) []string {
	t.Helper()
	var out []string
	for n := range shards {
		for _, r := range srv.Query(t, fmt.Sprintf("SELECT %s FROM %s_%d.orders", strings.Join(cs, ", "), db, n)) {
			m := map[string]*string{}
			for i, c := range cs {
				if r[i] != "NULL" {
					m[c] = &r[i]
				}
			}
			out = append(out, row(m, cs))
		}
	}
	slices.Sort(out)
	return out
}

// canonical returns rows, each of cs (row), sorted.
func canonical(rows []map[string]*string, cs []string) []string {
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		out = append(out, row(r, cs))
	}
	slices.Sort(out)
	return out
}

// row is r's values of cs, each in a canonical form that a target's
// rendering of the same value gives too (a DECIMAL as an exact fraction,
// a DATETIME(6) with six digits, JSON re-encoded with sorted keys), NULL
// as ∅, separated by " | ".
func row(r map[string]*string, cs []string) string {
	vals := make([]string, len(cs))
	for i, c := range cs {
		v := r[c]
		if v == nil {
			vals[i] = "∅"
			continue
		}
		vals[i] = *v
		switch c {
		case "amount":
			if q, ok := new(big.Rat).SetString(*v); ok {
				vals[i] = q.RatString()
			}
		case "at":
			for _, layout := range []string{"2006-01-02 15:04:05.999999", "2006-01-02T15:04:05.999999", time.RFC3339Nano} {
				if ts, err := time.Parse(layout, *v); err == nil {
					vals[i] = ts.Format("2006-01-02 15:04:05.000000")
					break
				}
			}
		case "doc":
			var j any
			if json.Unmarshal([]byte(*v), &j) == nil {
				b, _ := json.Marshal(j)
				vals[i] = string(b)
			}
		}
	}
	return strings.Join(vals, " | ")
}

// diff names up to five rows where got and want differ.
func diff(got, want []string) string {
	var out []string
	for _, w := range want {
		if !slices.Contains(got, w) && len(out) < 3 {
			out = append(out, "missing: "+w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) && len(out) < 5 {
			out = append(out, "not in the sources: "+g)
		}
	}
	return strings.Join(out, "\n")
}
