package group

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/braid-cdc/braid/engine/change"
)

// tableKey is how a table version's rows are keyed: its key columns, and
// whether they are all integers (then it is read in chunks).
type tableKey struct {
	cols []int
	ints bool
}

// keyPart is one integer key value, comparable across signedness.
type keyPart struct {
	neg bool
	mag uint64 // |v|
}

func (a keyPart) compare(b keyPart) int {
	switch {
	case a.neg && !b.neg:
		return -1
	case !a.neg && b.neg:
		return 1
	case a.neg:
		return cmp.Compare(b.mag, a.mag)
	}
	return cmp.Compare(a.mag, b.mag)
}

func (a keyPart) String() string {
	if a.neg {
		return "-" + strconv.FormatUint(a.mag, 10)
	}
	return strconv.FormatUint(a.mag, 10)
}

// partOf is an integer Value's keyPart.
func partOf(v change.Value) (keyPart, bool) {
	switch x := v.(type) {
	case int64:
		if x < 0 {
			return keyPart{neg: true, mag: uint64(-(x + 1)) + 1}, true
		}
		return keyPart{mag: uint64(x)}, true
	case uint64:
		return keyPart{mag: x}, true
	}
	return keyPart{}, false
}

// parseKey parses a key saved as decimal text.
func parseKey(text []string) ([]keyPart, error) {
	out := make([]keyPart, len(text))
	for i, s := range text {
		neg := strings.HasPrefix(s, "-")
		m, err := strconv.ParseUint(strings.TrimPrefix(s, "-"), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("snapshot key %q: %w", s, err)
		}
		out[i] = keyPart{neg: neg && m != 0, mag: m}
	}
	return out, nil
}

func keyText(k []keyPart) []string {
	out := make([]string, len(k))
	for i, p := range k {
		out[i] = p.String()
	}
	return out
}

func compareKeys(a, b []keyPart) int {
	for i := range a {
		if c := a[i].compare(b[i]); c != 0 {
			return c
		}
	}
	return 0
}

var intTypes = map[string]bool{"tinyint": true, "smallint": true, "mediumint": true, "int": true, "integer": true, "bigint": true}

// keyOf returns t's key columns (the primary key, or the unique key the
// schema model keys it by).
func keyOf(t *change.Table) tableKey {
	k := tableKey{ints: true}
	for i, c := range t.Columns {
		if c.Key {
			k.cols = append(k.cols, i)
			k.ints = k.ints && intTypes[c.Type]
		}
	}
	k.ints = k.ints && len(k.cols) > 0
	return k
}

// rowKey is an integer-keyed row's key.
func rowKey(tk tableKey, row []change.Value) ([]keyPart, bool) {
	k := make([]keyPart, len(tk.cols))
	for i, c := range tk.cols {
		p, ok := partOf(row[c])
		if !ok {
			return nil, false
		}
		k[i] = p
	}
	return k, true
}
