package mysql

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/pingcap/tidb/pkg/parser/ast"
	tidbmysql "github.com/pingcap/tidb/pkg/parser/mysql"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/schema"
	"github.com/braid-cdc/braid/sink"
)

// What a MySQL 8 or 9 source's DDL holds that a MariaDB target lacks,
// mapped or refused before the target sees it:
//
//   - the _0900 collations (MySQL 8's default, utf8mb4_0900_ai_ci, and
//     the others of UCA 9.0.0): a target that does not know one gets
//     the nearest it has (mappedCollation); one that does (MySQL 8) gets
//     it as it is;
//   - VECTOR columns (MySQL 9.0+), which MariaDB has from 11.7 only: on
//     an older target the sink stops, naming the column;
//   - INVISIBLE columns stay invisible (schema.TargetDDL.Text keeps the
//     attribute, which MariaDB has from 10.3.3).

// targetServer is what the sink knows of its target server, read once.
type targetServer struct {
	once       sync.Once
	err        error
	version    string // SELECT VERSION()
	mariadb    bool
	major      int
	minor      int
	collations map[string]bool // lower case
}

// server reads the target's version and collations, once.
func (t *Target) server(ctx context.Context) (*targetServer, error) {
	s := &t.srv
	s.once.Do(func() {
		if s.err = t.db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&s.version); s.err != nil {
			return
		}
		s.mariadb = strings.Contains(strings.ToLower(s.version), "mariadb")
		parts := strings.SplitN(s.version, ".", 3)
		if len(parts) >= 2 {
			s.major, _ = strconv.Atoi(parts[0])
			s.minor, _ = strconv.Atoi(strings.TrimLeftFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
		}
		s.collations = map[string]bool{}
		queries := []string{"SELECT COLLATION_NAME FROM information_schema.COLLATIONS"}
		if s.mariadb {
			// MariaDB 10.10+ lists its UCA 14.0.0 collations by their
			// charset-less names (uca1400_ai_ci) in COLLATIONS, and by
			// their full names only here.
			queries = append(queries, "SELECT FULL_COLLATION_NAME FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY")
		}
		for i, q := range queries {
			rows, err := t.db.QueryContext(ctx, q)
			if err != nil {
				if i > 0 {
					continue // before 10.10: no FULL_COLLATION_NAME, and no UCA 14.0.0
				}
				s.err = err
				return
			}
			for rows.Next() {
				var name string
				if err := rows.Scan(&name); err != nil {
					rows.Close()
					s.err = err
					return
				}
				s.collations[strings.ToLower(name)] = true
			}
			rows.Close()
			if s.err = rows.Err(); s.err != nil {
				return
			}
		}
	})
	if s.err != nil {
		return nil, fmt.Errorf("sink %s: read the target's version and collations: %w", t.spec.Name, s.err)
	}
	return s, nil
}

// hasVector reports whether the server has the VECTOR type: MariaDB
// 11.7+, MySQL 9.0+.
func (s *targetServer) hasVector() bool {
	if s.mariadb {
		return s.major > 11 || s.major == 11 && s.minor >= 7
	}
	return s.major >= 9
}

// name is the server as an error names it.
func (s *targetServer) name() string {
	if s.mariadb {
		return "MariaDB " + strings.SplitN(s.version, "-", 2)[0]
	}
	return "MySQL " + strings.SplitN(s.version, "-", 2)[0]
}

// collation0900 matches MySQL 8's UCA 9.0.0 collations: utf8mb4_0900_x
// and utf8mb4_<locale>_0900_x.
var collation0900 = regexp.MustCompile(`^utf8mb4_(?:([a-z]{2}(?:_[a-z]+)?)_)?0900_(ai_ci|as_ci|as_cs|bin)$`)

// mariadbLocales names MariaDB's UCA 14.0.0 tailorings by MySQL's
// locale codes. MySQL's other locales (bs, gl, ja, mn, nb, nn, ru,
// sr_latn, zh) have no MariaDB tailoring: their collations map to the
// root collation of the same strength.
var mariadbLocales = map[string]string{
	"cs": "czech", "da": "danish", "de_pb": "german2", "eo": "esperanto", "es": "spanish", "es_trad": "spanish2",
	"et": "estonian", "hr": "croatian", "hu": "hungarian", "is": "icelandic", "la": "roman", "lt": "lithuanian",
	"lv": "latvian", "pl": "polish", "ro": "romanian", "sk": "slovak", "sl": "slovenian", "sv": "swedish",
	"tr": "turkish", "vi": "vietnamese",
}

// mappedCollation is the collation a target that lacks name gets: the
// first of its candidates the target has. A _0900 collation (UCA 9.0.0,
// NO PAD) becomes MariaDB's UCA 14.0.0 NO PAD collation of the same
// locale and strength (10.10+); on a target without those, an
// accent-insensitive one becomes utf8mb4_unicode_520 (UCA 5.2.0, the
// newest such a target has) and the others a binary collation, which
// tells apart every pair of strings the source's does, so a unique key
// holds on the target whatever it held on the source. ok is false when
// name is no _0900 collation or the target has none of the candidates.
func mappedCollation(name string, has func(string) bool) (string, bool) {
	m := collation0900.FindStringSubmatch(strings.ToLower(name))
	if m == nil {
		return "", false
	}
	locale, strength := m[1], m[2]
	var candidates []string
	if strength != "bin" {
		if l, ok := mariadbLocales[locale]; ok {
			candidates = append(candidates, "utf8mb4_uca1400_"+l+"_nopad_"+strength)
		}
		candidates = append(candidates, "utf8mb4_uca1400_nopad_"+strength)
	}
	if strength == "ai_ci" {
		candidates = append(candidates, "utf8mb4_unicode_520_nopad_ci", "utf8mb4_unicode_520_ci")
	}
	candidates = append(candidates, "utf8mb4_nopad_bin", "utf8mb4_bin")
	for _, c := range candidates {
		if has(c) {
			return c, true
		}
	}
	return "", false
}

// mysql8Text is st's text for the target: each collation the target
// lacks replaced by mappedCollation's, and an error wrapping
// sink.ErrDDLRefused, naming the column, for a VECTOR column the target
// cannot hold.
func (t *Target) mysql8Text(ctx context.Context, ev *change.Event, st schema.TargetDDL) (string, error) {
	var vec vectorColumns
	st.Node.Accept(&vec)
	if !strings.Contains(strings.ToLower(st.Text), "0900_") && len(vec.names) == 0 {
		return st.Text, nil
	}
	srv, err := t.server(ctx)
	if err != nil {
		return "", err
	}
	if len(vec.names) > 0 && !srv.hasVector() {
		table := ""
		if len(st.Tables) > 0 {
			table = st.Tables[0] + "."
		}
		return "", fmt.Errorf("sink %s: %w at seq %d from %s: column %s%s is %s, and the target, %s, has no VECTOR type (MariaDB has it from 11.7): upgrade the target, or make the table by hand without the column and set the sink's ddl: ignore until it is past seq %d",
			t.spec.Name, sink.ErrDDLRefused, ev.Seq, ev.Source, table, vec.names[0], vec.types[0], srv.name(), ev.Seq)
	}
	has := func(c string) bool { return srv.collations[c] }
	return replaceWords(st.Text, func(w string) (string, bool) {
		if has(strings.ToLower(w)) {
			return "", false
		}
		return mappedCollation(w, has)
	}), nil
}

// replaceWords replaces the bare words of restored SQL text (not in
// quotes or backquotes) for which repl says so. In schema.TargetDDL's
// text a name is always in backquotes and a string in single quotes, so
// a bare word is a keyword, a number, a type, a charset or a collation.
func replaceWords(text string, repl func(string) (string, bool)) string {
	var b strings.Builder
	word := func(c byte) bool {
		return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$'
	}
	for i := 0; i < len(text); {
		switch c := text[i]; {
		case c == '\'' || c == '`':
			j := i + 1
			for j < len(text) {
				if text[j] == '\\' && c == '\'' {
					j += 2
					continue
				}
				if text[j] == c {
					if j+1 < len(text) && text[j+1] == c {
						j += 2
						continue
					}
					break
				}
				j++
			}
			j = min(j+1, len(text))
			b.WriteString(text[i:j])
			i = j
		case word(c):
			j := i
			for j < len(text) && word(text[j]) {
				j++
			}
			if r, ok := repl(text[i:j]); ok {
				b.WriteString(r)
			} else {
				b.WriteString(text[i:j])
			}
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// vectorColumns collects the VECTOR columns a statement declares.
type vectorColumns struct{ names, types []string }

func (v *vectorColumns) Enter(n ast.Node) (ast.Node, bool) {
	if c, ok := n.(*ast.ColumnDef); ok && c.Tp != nil && c.Tp.GetType() == tidbmysql.TypeTiDBVectorFloat32 {
		typ := "VECTOR"
		if c.Tp.GetFlen() > 0 {
			typ = fmt.Sprintf("VECTOR(%d)", c.Tp.GetFlen())
		}
		v.names, v.types = append(v.names, c.Name.Name.O), append(v.types, typ)
	}
	return n, false
}

func (v *vectorColumns) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// vectorRefused is the error for a table the sink would create (with
// create_tables) with a VECTOR column on a target that has no VECTOR
// type; nil when it has none or the target has the type.
func (t *Target) vectorRefused(ctx context.Context, tv *change.Table, table string) error {
	for _, c := range tv.Columns {
		if c.Type != "vector" {
			continue
		}
		srv, err := t.server(ctx)
		if err != nil {
			return err
		}
		if srv.hasVector() {
			return nil
		}
		return fmt.Errorf("sink %s: %w: column %s.%s is %s, and the target, %s, has no VECTOR type (MariaDB has it from 11.7): upgrade the target, or make the table by hand without the column",
			t.spec.Name, sink.ErrDDLRefused, table, c.Name, strings.ToUpper(c.RawType), srv.name())
	}
	return nil
}
