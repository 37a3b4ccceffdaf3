package schema

import (
	"strings"
)

// The column types a table's RawType holds are spelled as its server's
// SHOW CREATE TABLE prints them (canal's mysqlType). MariaDB and MySQL
// before 8.0.19 print every integer's display width, the declared one or
// the type's default ("int(11)"); MySQL 8.0.19 and later dropped display
// widths: "int", "bigint unsigned", "year", except tinyint(1) (kept for
// connectors that read it as a boolean) and a ZEROFILL column's, whose
// width pads its values.

// SpellWithoutIntWidths makes the tracker spell the types of the tables it
// builds from now on as MySQL 8.0.19 and later print them (on), or with
// display widths as MariaDB and older MySQL (off, the default). A reader
// sets it from its server's version, before loading any table.
func (s *Tracker) SpellWithoutIntWidths(on bool) { s.noIntWidths = on }

// spelled is v with its table's types spelled as the tracker's server
// prints them: v itself when nothing changes, else a version of its own.
func (s *Tracker) spelled(v schemaVersion) schemaVersion {
	if !s.noIntWidths || v.state == nil {
		return v
	}
	var st *schemaState
	for i, c := range v.state.table.Columns {
		raw := withoutIntWidth(c.Type, c.RawType)
		if raw == c.RawType {
			continue
		}
		if st == nil {
			st = v.state.clone()
		}
		st.table.Columns[i].RawType = raw
	}
	if st != nil {
		v.state = st
	}
	return v
}

// intTypes are the types whose display width MySQL 8.0.19 dropped.
var intTypes = map[string]bool{"tinyint": true, "smallint": true, "mediumint": true, "int": true, "bigint": true, "year": true}

// withoutIntWidth is raw (a type as ddlColumn spells it, with a width)
// as MySQL 8.0.19 and later print it.
func withoutIntWidth(typ, raw string) string {
	if !intTypes[typ] || strings.Contains(raw, "zerofill") {
		return raw
	}
	open := strings.IndexByte(raw, '(')
	end := strings.IndexByte(raw, ')')
	if open < 0 || end < open {
		return raw
	}
	if typ == "tinyint" && raw[open:end+1] == "(1)" {
		return raw
	}
	return raw[:open] + raw[end+1:]
}
