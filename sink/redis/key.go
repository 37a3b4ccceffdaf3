package redis

import (
	"bytes"
	"slices"
	"strconv"
	"strings"

	"github.com/braid-cdc/braid/sink"
)

// keyTemplate is a key template (spec key:) cut into its pieces once: a
// literal, or one of the placeholders {database}, {table} and {pk}. Any
// other text in braces is literal.
type keyTemplate []keyPiece

type keyPiece struct {
	lit string
	ph  byte // 0: lit; 'd' {database}, 't' {table}, 'p' {pk}
}

var placeholders = map[string]byte{"{database}": 'd', "{table}": 't', "{pk}": 'p'}

func compileKey(tmpl string) keyTemplate {
	var out keyTemplate
	lit := func(s string) {
		if s == "" {
			return
		}
		if n := len(out); n > 0 && out[n-1].ph == 0 {
			out[n-1].lit += s
			return
		}
		out = append(out, keyPiece{lit: s})
	}
	for len(tmpl) > 0 {
		i := strings.IndexByte(tmpl, '{')
		if i < 0 {
			lit(tmpl)
			break
		}
		lit(tmpl[:i])
		tmpl = tmpl[i:]
		j := strings.IndexByte(tmpl, '}')
		if ph, ok := placeholders[tmpl[:j+1]]; j > 0 && ok {
			out = append(out, keyPiece{ph: ph})
			tmpl = tmpl[j+1:]
			continue
		}
		lit(tmpl[:1])
		tmpl = tmpl[1:]
	}
	return out
}

// append appends the key of a row of table database.table whose primary
// key's text pk appends (the values joined by ":"), escaped (escape).
func (k keyTemplate) append(b []byte, database, table string, pk func([]byte) []byte) []byte {
	start := len(b)
	for _, p := range k {
		switch p.ph {
		case 0:
			b = append(b, p.lit...)
		case 'd':
			b = append(b, database...)
		case 't':
			b = append(b, table...)
		case 'p':
			b = pk(b)
		}
	}
	return k.escape(b, start)
}

// The keys the sink keeps for itself are its checkpoints, its worker
// count and its tables' column names, all under {prefix}braid:sink:
// (ownPrefix), and each row key's version key, {key}:seq
// (versionSuffix). A row key is made of names and values whoever writes
// to a shard chooses (a table routed to the logical name braid, a key
// sink:DEST.SINK:0), so escape keeps it out of both: a row key that
// would start, after the prefix, with ownPrefix or with escapeMark gets
// escapeMark in front of that part, and one that would end with
// versionSuffix or escapeMark gets escapeMark after it. Both are
// reversible, so two rows never share a key, and every other row key is
// as the template spells it.
const (
	ownPrefix  = "braid:sink:"
	escapeMark = '~'
)

// escape escapes the row key appended to b from start on (see ownPrefix).
func (k keyTemplate) escape(b []byte, start int) []byte {
	at := start + k.prefixLen()
	if r := b[at:]; bytes.HasPrefix(r, []byte(ownPrefix)) || len(r) > 0 && r[0] == escapeMark {
		b = slices.Insert(b, at, escapeMark)
	}
	if key := b[start:]; bytes.HasSuffix(key, []byte(versionSuffix)) || len(key) > 0 && key[len(key)-1] == escapeMark {
		b = append(b, escapeMark)
	}
	return b
}

// prefixLen is the length of the template's prefix (prefix), which every
// key it makes starts with.
func (k keyTemplate) prefixLen() int {
	if len(k) == 0 || k[0].ph != 0 {
		return 0
	}
	return len(prefix(k[0].lit))
}

// patterns are the SCAN MATCH patterns of every key of database.table,
// as escape escapes them: one, with the escape marks that the text before
// {pk} and after it (the template's and the names') decide; and, when
// whether a key starts with one depends on its {pk} text (table braid,
// keys sink:...), the other. (An end mark that depends on a {pk} text is
// matched by the pattern's "*" when {pk} ends the template.)
func (k keyTemplate) patterns(database, table string) []string {
	var b strings.Builder
	var fixed []string // the text between {pk}s
	cur := ""
	for _, p := range k {
		var s string
		switch p.ph {
		case 0:
			s = p.lit
		case 'd':
			s = database
		case 't':
			s = table
		case 'p':
			b.WriteByte('*')
			fixed, cur = append(fixed, cur), ""
			continue
		}
		b.WriteString(globEscape(s))
		cur += s
	}
	fixed = append(fixed, cur)
	out := b.String()
	head, tail := fixed[0], fixed[len(fixed)-1]
	if strings.HasSuffix(tail, versionSuffix) || len(tail) > 0 && tail[len(tail)-1] == escapeMark {
		out += string(escapeMark)
	}
	n := k.prefixLen()
	p := globEscape(head[:n])
	marked := p + string(escapeMark) + out[len(p):]
	switch r := head[n:]; {
	case strings.HasPrefix(r, ownPrefix) || len(r) > 0 && r[0] == escapeMark:
		return []string{marked}
	case len(fixed) > 1 && r != "" && strings.HasPrefix(ownPrefix, r):
		return []string{out, marked}
	}
	return []string{out}
}

// globEscape escapes what SCAN's MATCH takes for a glob.
func globEscape(s string) string {
	if !strings.ContainsAny(s, `*?[]\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// prefix is the template's text before its first "{": where a sink keeps
// its checkpoints too, so that a prefix holds all a sink writes.
func prefix(tmpl string) string {
	if i := strings.IndexByte(tmpl, '{'); i >= 0 {
		return tmpl[:i]
	}
	return tmpl
}

// KeyFor returns the key a sink of key template tmpl (spec key:, e.g.
// "{table}:{pk}") keeps the row of logical table database.table whose
// primary-key values, in the table's column order, are pk (each as the
// text MySQL returns for it: 42, 2026-01-02, abc); a cache reader uses it
// to find a row, and Backfill to write one.
func KeyFor(tmpl, database, table string, pk []string) string {
	return string(compileKey(tmpl).append(nil, database, table, func(b []byte) []byte {
		for i, v := range pk {
			if i > 0 {
				b = append(b, ':')
			}
			b = append(b, v...)
		}
		return b
	}))
}

// VersionKey is the companion key of key that holds its version: "seq:idx"
// of the change that wrote the value, or "dseq:idx" (a tombstone, which
// expires) of the one that deleted it.
func VersionKey(key string) string { return key + versionSuffix }

const versionSuffix = ":seq"

// checkpointKey is worker w's checkpoint key of sink id ("dest.sink")
// under prefix p.
func checkpointKey(p, id string, w int) string {
	return p + "braid:sink:" + id + ":" + strconv.Itoa(w)
}

// appendPoint appends p as "seq:idx".
func appendPoint(b []byte, p sink.Point) []byte {
	b = strconv.AppendUint(b, p.Seq, 10)
	b = append(b, ':')
	return strconv.AppendInt(b, int64(p.Idx), 10)
}

// parsePoint parses "seq:idx" (a tombstone's "d" first allowed).
func parsePoint(s string) (sink.Point, bool) {
	s = strings.TrimPrefix(s, "d")
	seq, idx, ok := strings.Cut(s, ":")
	if !ok {
		return sink.Point{}, false
	}
	q, err1 := strconv.ParseUint(seq, 10, 64)
	i, err2 := strconv.Atoi(idx)
	return sink.Point{Seq: q, Idx: i}, err1 == nil && err2 == nil
}
