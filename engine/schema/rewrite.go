package schema

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/charset"
)

// Token-level rewrites that make MariaDB and MySQL syntax the TiDB parser
// rejects acceptable to it (ddlRewrite), and the cut of CREATE TABLE
// options tried when the parser still fails (ddlCutTableOptions).

// ddlCutTableOptions finds the end of a CREATE TABLE's column list, and
// the default charset the options after it name (lower case, "" if none).
func ddlCutTableOptions(st ddlToks) (cut int, tableCharset string, ok bool) {
	i := 2
	for i < len(st.toks) && !st.is(i, "(") {
		i++
	}
	depth := 0
	for ; i < len(st.toks); i++ {
		switch {
		case st.is(i, "("):
			depth++
		case st.is(i, ")"):
			depth--
			if depth == 0 {
				for j := i + 1; j < len(st.toks); j++ {
					if st.is(j, "VERSIONING") {
						// WITH SYSTEM VERSIONING adds hidden columns that
						// binlog rows carry: never cut it away.
						return 0, "", false
					}
					if st.is(j, "CHARSET") || st.is(j, "SET") && st.is(j-1, "CHARACTER") {
						k := j + 1
						if st.is(k, "=") {
							k++
						}
						tableCharset = strings.ToLower(ddlUnquote(st.text(k)))
					}
				}
				return st.toks[i].end, tableCharset, true
			}
		}
	}
	return 0, "", false
}

func ddlUnquote(s string) string {
	if len(s) >= 2 && (s[0] == '`' || s[0] == '\'' || s[0] == '"') {
		return s[1 : len(s)-1]
	}
	return s
}

// ddlExtMarker stands in for column types the TiDB parser lacks: the
// rewrite declares such a column ENUM('<marker><type>') and ddlColumn turns
// it back.
const ddlExtMarker = "braid\x1etype:"

// ddlInvisibleMarker stands in for a column's INVISIBLE attribute (MySQL
// 8.0.23+, MariaDB 10.3.3+), which the TiDB parser lacks: the rewrite
// makes it a COMMENT holding the marker, which the model ignores, and
// TargetDDLs turns it back into INVISIBLE (or leaves it out, in
// VisibleText).
const ddlInvisibleMarker = "braid\x1einvisible"

// ddlVisibilityMarker stands in for MySQL 8's ALTER COLUMN c SET
// [IN]VISIBLE: the rewrite makes it SET DEFAULT '<marker>[IN]VISIBLE',
// which the model takes as the no-op it is for it, and TargetDDLs
// leaves out (MariaDB has no such statement; PostgreSQL no invisible
// columns).
const ddlVisibilityMarker = "braid\x1evisibility:"

// ddlExtTypes are the column types MySQL or MariaDB have and the TiDB
// parser does not; the value is the base type the model reports.
var ddlExtTypes = map[string]string{
	"geometry": "geometry", "point": "geometry", "linestring": "geometry", "polygon": "geometry",
	"multipoint": "geometry", "multilinestring": "geometry", "multipolygon": "geometry",
	"geometrycollection": "geometry", "geomcollection": "geometry",
	"inet4": "inet4", "inet6": "inet6", "uuid": "uuid",
}

// ddlNameIntro are keywords a name follows; a word after one of them is a
// name, never a type or attribute.
var ddlNameIntro = map[string]bool{
	"TABLE": true, "TABLES": true, "COLUMN": true, "ADD": true, "MODIFY": true, "CHANGE": true,
	"DROP": true, "AFTER": true, "TO": true, "EXISTS": true, "KEY": true, "INDEX": true, "BY": true,
	"AS": true, "RENAME": true, "ON": true, "LIKE": true, "CONSTRAINT": true, "SET": true,
	"ALTER": true, "REFERENCES": true, "FIRST": true, "NOT": true, "IF": true, "REPLACE": true,
}

// ddlAttrStart are the words that may follow a column's type.
var ddlAttrStart = map[string]bool{
	"NOT": true, "NULL": true, "DEFAULT": true, "COMMENT": true, "SRID": true, "REF_SYSTEM_ID": true,
	"PRIMARY": true, "UNIQUE": true, "KEY": true, "CHECK": true, "INVISIBLE": true, "VISIBLE": true,
	"AFTER": true, "FIRST": true, "COLLATE": true, "CHARACTER": true, "CHARSET": true, "GENERATED": true,
	"AS": true, "REFERENCES": true, "CONSTRAINT": true, "AUTO_INCREMENT": true, "COLUMN_FORMAT": true,
	"STORAGE": true, "COMPRESSED": true, "WITH": true, "WITHOUT": true, "ON": true,
}

// ddlWordIn reports whether token i is a bare word in set (keys upper case).
func (t ddlToks) wordIn(i int, set map[string]bool) bool {
	return t.kind(i) == ddlWord && set[strings.ToUpper(t.text(i))]
}

// columnName reports whether token i can be a column name just declared.
func (t ddlToks) columnName(i int) bool {
	return t.kind(i) == ddlQuoted || t.kind(i) == ddlWord && !t.wordIn(i, ddlNameIntro)
}

// attrPos reports whether token i follows a column type: it is not a
// name-introducing keyword or the punctuation a name follows.
func (t ddlToks) attrPos(i int) bool {
	if i < 0 || t.is(i, "(") || t.is(i, ",") || t.is(i, ".") || t.is(i, "=") {
		return false
	}
	return !t.wordIn(i, ddlNameIntro)
}

// attrEnd reports whether token i may follow a complete column type.
func (t ddlToks) attrEnd(i int) bool {
	return i >= len(t.toks) || t.is(i, ",") || t.is(i, ")") || t.wordIn(i, ddlAttrStart)
}

// ddlRewrite makes MariaDB and MySQL syntax the TiDB parser rejects
// acceptable to it, where the meaning for the model is plain:
//
//   - CREATE OR REPLACE TABLE (reported as orReplace), ALTER ONLINE TABLE,
//     ALTER TABLE IF EXISTS, RENAME TABLE IF EXISTS, WAIT n / NOWAIT;
//   - character sets and collations the parser does not know (armscii8,
//     utf8mb4_uca1400_ai_ci...) become utf8mb4 / utf8mb4_bin: the model
//     keeps only the binary charset and those braid converts, which
//     charsets.go registers with the parser; a literal's charset
//     introducer the parser cannot encode (_big5'...', _cp1251 0x41) is
//     dropped;
//   - spatial types, INET4, INET6 and UUID become a marked ENUM;
//   - SPATIAL KEY, SRID n, REF_SYSTEM_ID=n and COMPRESSED columns lose
//     the word; PERSISTENT becomes STORED; a column's INVISIBLE becomes a
//     COMMENT of ddlInvisibleMarker and ALTER COLUMN c SET [IN]VISIBLE a
//     SET DEFAULT of ddlVisibilityMarker (both leave the model as it is;
//     TargetDDLs reads the markers).
func ddlRewrite(st ddlToks, kind ddlKind) (edits []ddlEdit, orReplace bool) {
	del := func(i int) { edits = append(edits, ddlEdit{st.toks[i].start, st.toks[i].end, " "}) }
	set := func(i int, s string) { edits = append(edits, ddlEdit{st.toks[i].start, st.toks[i].end, s}) }
	switch kind {
	case ddlCreateTable, ddlCreateIndex:
		if st.is(1, "OR") && st.is(2, "REPLACE") {
			del(1)
			del(2)
			orReplace = true
		}
	case ddlAlterTable:
		i := 1
		if st.is(i, "ONLINE") {
			del(i)
			i++
		}
		if st.is(i, "IGNORE") {
			i++
		}
		i++ // TABLE
		if st.is(i, "IF") && st.is(i+1, "EXISTS") {
			del(i)
			del(i + 1)
			i += 2
		}
		i = st.skipName(i)
		st.dropWait(i, del)
	case ddlRenameTable:
		if st.is(2, "IF") && st.is(3, "EXISTS") {
			del(2)
			del(3)
		}
		for i := 2; i < len(st.toks); i++ {
			switch {
			case !st.is(i, "TO"):
			case st.is(i-1, "NOWAIT") && st.columnName(i-2):
				del(i - 1)
			case st.is(i-2, "WAIT") && st.kind(i-1) == ddlNumber && st.columnName(i-3):
				del(i - 2)
				del(i - 1)
			}
		}
	case ddlDatabase:
		// MariaDB's COMMENT [=] 'text' database option, which the TiDB
		// parser rejects and the model does not need.
		for i := 2; i < len(st.toks); i++ {
			if st.is(i, "COMMENT") && st.kind(i) == ddlWord {
				j := i + 1
				if st.is(j, "=") {
					j++
				}
				if st.kind(j) == ddlString {
					for ; i <= j; i++ {
						del(i)
					}
				}
			}
		}
	case ddlDropTable:
		for i := 3; i < len(st.toks); i++ {
			if st.columnName(i-1) && (i+1 == len(st.toks) || st.is(i+1, "RESTRICT") || st.is(i+1, "CASCADE") || st.kind(i+1) == ddlNumber) {
				st.dropWait(i, del)
			}
		}
	}
	columns := kind == ddlCreateTable || kind == ddlAlterTable
	for i := range st.toks {
		if st.kind(i) != ddlWord {
			continue
		}
		w := strings.ToUpper(st.text(i))
		switch {
		case w == "CHARSET" && !st.is(i+1, "("), (w == "CHARACTER" || w == "CHAR") && st.is(i+1, "SET"):
			j := i + 1
			if w != "CHARSET" {
				j++
			}
			if st.is(j, "=") {
				j++
			}
			if name := ddlUnquote(st.text(j)); name != "" && !strings.EqualFold(name, "DEFAULT") {
				if _, err := charset.GetCharsetInfo(name); err != nil {
					set(j, "utf8mb4")
				}
			}
		case strings.HasPrefix(w, "_") && ddlDroppedIntroducer(strings.ToLower(w[1:])) && st.literalAt(i+1):
			del(i) // _big5'...': a literal's charset, which the model does not keep
		case w == "COLLATE":
			j := i + 1
			if st.is(j, "=") {
				j++
			}
			if name := ddlUnquote(st.text(j)); name != "" && !strings.EqualFold(name, "DEFAULT") {
				if _, err := charset.GetCollationByName(name); err != nil {
					set(j, "utf8mb4_bin")
				}
			}
		case !columns:
		case ddlExtTypes[strings.ToLower(w)] != "" && st.columnName(i-1) && st.attrEnd(i+1):
			set(i, "ENUM('"+ddlExtMarker+strings.ToLower(w)+"')")
		case w == "SPATIAL" && (st.is(i+1, "KEY") || st.is(i+1, "INDEX")):
			del(i)
		case w == "SRID" && st.attrPos(i-1) && st.kind(i+1) == ddlNumber:
			del(i)
			del(i + 1)
		case w == "REF_SYSTEM_ID" && st.attrPos(i-1) && st.is(i+1, "=") && st.kind(i+2) == ddlNumber:
			del(i)
			del(i + 1)
			del(i + 2)
		case w == "INVISIBLE" && st.attrPos(i-1) && !st.is(i-2, "INDEX") && !st.is(i-2, "KEY") && st.attrEnd(i+1):
			set(i, "COMMENT '"+ddlInvisibleMarker+"'")
		case w == "COMPRESSED" && st.attrPos(i-1) && st.is(i+1, "=") && st.kind(i+2) == ddlWord:
			del(i)
			del(i + 1)
			del(i + 2)
		case w == "COMPRESSED" && st.attrPos(i-1) && st.attrEnd(i+1):
			del(i)
		case w == "PERSISTENT" && st.is(i-1, ")"):
			set(i, "STORED")
		case w == "SET" && (st.is(i+1, "VISIBLE") || st.is(i+1, "INVISIBLE")) && (st.is(i-2, "ALTER") || st.is(i-2, "COLUMN")):
			// ALTER COLUMN c SET [IN]VISIBLE (MySQL 8): a no-op for the
			// model, marked for TargetDDLs.
			set(i+1, "DEFAULT '"+ddlVisibilityMarker+strings.ToUpper(st.text(i+1))+"'")
		}
	}
	return edits, orReplace
}

// skipName returns the index after a possibly qualified name at i.
func (t ddlToks) skipName(i int) int {
	i++
	if t.is(i, ".") {
		i += 2
	}
	return i
}

// dropWait deletes MariaDB's WAIT n or NOWAIT at i.
func (t ddlToks) dropWait(i int, del func(int)) {
	switch {
	case t.is(i, "NOWAIT"):
		del(i)
	case t.is(i, "WAIT") && t.kind(i+1) == ddlNumber:
		del(i)
		del(i + 1)
	}
}

// ddlDroppedIntroducer reports whether ddlRewrite drops a literal's charset
// introducer: a charset MySQL knows whose literals the TiDB parser cannot
// encode (it encodes these).
func ddlDroppedIntroducer(cs string) bool {
	switch cs {
	case "utf8", "utf8mb3", "utf8mb4", "ascii", "latin1", "binary", "gbk", "gb18030":
		return false
	}
	c, _ := charset.GetCharsetInfo(cs)
	return c != nil
}

// literalAt reports whether token i starts a string, hexadecimal or bit
// literal: '...', 0x41, X'41', 0b1, B'1'.
func (t ddlToks) literalAt(i int) bool {
	switch t.kind(i) {
	case ddlString:
		return true
	case ddlWord:
		w := strings.ToLower(t.text(i))
		return strings.HasPrefix(w, "0x") || strings.HasPrefix(w, "0b") || (w == "x" || w == "b") && t.kind(i+1) == ddlString
	}
	return false
}
