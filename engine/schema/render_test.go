package schema_test

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/schema"
)

// How the datadriven scripts print what the tracker holds.

// fmtPos writes a position as the scripts do: a bare offset in
// defaultFile, "start" for the zero position, else file:offset.
func fmtPos(p change.Position) string {
	switch {
	case p.IsZero():
		return "start"
	case p.File == defaultFile:
		return strconv.FormatUint(uint64(p.Pos), 10)
	}
	return p.String()
}

// errText names the sentinel an error wraps, then gives its whole text.
func errText(err error) string {
	for _, s := range []struct {
		name string
		err  error
	}{{"ErrDDLParse", schema.ErrDDLParse}, {"ErrDDLMismatch", schema.ErrDDLMismatch}} {
		if errors.Is(err, s.err) {
			return "error (" + s.name + "): " + err.Error()
		}
	}
	return "error: " + err.Error()
}

// tableText is head and the table's columns on one line, then, each on a
// line of its own after indent, the table's default charset and its
// indexes.
func tableText(head string, tbl *change.Table, indexes []change.SchemaIndex, indent string) string {
	cols := make([]string, len(tbl.Columns))
	for i, c := range tbl.Columns {
		cols[i] = columnShort(c)
	}
	lines := []string{head + strings.Join(cols, ", ")}
	if tbl.Charset != "" {
		lines = append(lines, indent+"default charset "+tbl.Charset)
	}
	if len(indexes) > 0 {
		lines = append(lines, indent+"indexes: "+indexesText(indexes))
	}
	return strings.Join(lines, "\n")
}

// columnShort is "name rawtype [key] [null] [charset=cs]".
func columnShort(c change.Column) string {
	s := c.Name + " " + c.RawType
	if c.Key {
		s += " key"
	}
	if c.Nullable {
		s += " null"
	}
	if c.Charset != "" {
		s += " charset=" + c.Charset
	}
	return s
}

// columnFull prints every field of a column: "name: type, raw "rawtype",
// then the flags set.
func columnFull(t *testing.T, c change.Column) string {
	t.Helper()
	if n := reflect.TypeFor[change.Column]().NumField(); n != 9 {
		t.Fatalf("change.Column has %d fields: print the new ones in columnFull", n)
	}
	parts := []string{c.Name + ": " + c.Type, fmt.Sprintf("raw %q", c.RawType)}
	if c.Unsigned {
		parts = append(parts, "unsigned")
	}
	if c.Binary {
		parts = append(parts, "binary")
	}
	if c.Charset != "" {
		parts = append(parts, "charset "+c.Charset)
	}
	if c.Elems != nil {
		parts = append(parts, fmt.Sprintf("elems %q", c.Elems))
	}
	if c.Nullable {
		parts = append(parts, "null")
	}
	if c.Key {
		parts = append(parts, "key")
	}
	return strings.Join(parts, ", ")
}

// indexesText is "PRIMARY KEY (a, b); UNIQUE name (c) partial".
func indexesText(indexes []change.SchemaIndex) string {
	parts := make([]string, len(indexes))
	for i, ix := range indexes {
		s := "UNIQUE " + ix.Name
		if ix.Primary {
			s = "PRIMARY KEY"
			if ix.Name != "PRIMARY" {
				s += " " + ix.Name
			}
		}
		s += " (" + strings.Join(ix.Columns, ", ") + ")"
		if ix.Partial {
			s += " partial"
		}
		parts[i] = s
	}
	return strings.Join(parts, "; ")
}

// snapshotText prints a snapshot: the position applied, the charsets, then
// each table's versions, oldest first, and its pending state.
func snapshotText(snap change.SchemaSnapshot) string {
	var lines []string
	if !snap.Applied.IsZero() {
		lines = append(lines, "applied "+fmtPos(snap.Applied))
	}
	if snap.ServerCharset != "" {
		lines = append(lines, "server charset "+snap.ServerCharset)
	}
	if snap.Databases != nil {
		var dbs []string
		for _, name := range slices.Sorted(maps.Keys(snap.Databases)) {
			cs := snap.Databases[name]
			if cs == "" {
				cs = `""`
			}
			dbs = append(dbs, name+"="+cs)
		}
		lines = append(lines, "databases "+strings.Join(dbs, " "))
	}
	for _, th := range snap.Tables {
		lines = append(lines, th.Schema+"."+th.Name+":")
		for _, v := range th.Versions {
			head := "  " + fmtPos(v.Pos) + ": "
			switch {
			case v.Unknown:
				lines = append(lines, head+"unknown")
			case v.Table == nil:
				lines = append(lines, head+"absent")
			default:
				if full := th.Schema + "." + th.Name; v.Table.FullName() != full {
					head += "(named " + v.Table.FullName() + ") "
				}
				lines = append(lines, tableText(head, v.Table, v.Indexes, "    "))
			}
		}
		if p := th.Pending; p != nil {
			head := "  pending until " + fmtPos(p.Until) + ": "
			if p.After == nil {
				lines = append(lines, head+"absent")
			} else {
				lines = append(lines, tableText(head, p.After, nil, "    "))
			}
		}
	}
	if len(lines) == 0 {
		return "empty"
	}
	return strings.Join(lines, "\n")
}
