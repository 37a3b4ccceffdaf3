package change

import "strings"

// Column is one column of a table as braid's schema model knows it.
//
// The binlog's table-map event gives each column's binary type; the model adds
// what the binlog leaves out unless binlog_row_metadata=FULL: the name, the
// declared SQL type, signedness, binary-ness, ENUM/SET members and the key.
type Column struct {
	// Name is the column name as declared.
	Name string `json:"name"`
	// Type is the declared base type in lower case, without length or
	// attributes: "int", "bigint", "varchar", "decimal", "enum", "json", ...
	Type string `json:"type"`
	// RawType is the full declared type as SHOW CREATE TABLE prints it
	// (lower case), e.g. "int(10) unsigned", "varchar(20)", "enum('a','b')".
	// It is what canal reports as mysqlType.
	RawType string `json:"rawType"`
	// Unsigned is set for UNSIGNED numeric columns.
	Unsigned bool `json:"unsigned,omitempty"`
	// Binary is set for columns whose bytes carry no character set: BINARY,
	// VARBINARY, the BLOB family, and CHAR/VARCHAR/TEXT declared with the
	// binary charset.
	Binary bool `json:"binary,omitempty"`
	// Charset is the charset of a character column (CHAR, VARCHAR, the TEXT
	// family) whose bytes braid converts to UTF-8: "latin1" (MySQL's is
	// Windows-1252) or one of charsets.go's (gbk, big5, sjis, cp1251,
	// utf16, ...); empty for the others, whose text (utf8, utf8mb4, ascii,
	// or a charset braid does not know) is emitted as it is.
	Charset string `json:"charset,omitempty"`
	// Elems are the ENUM or SET members in declaration order.
	Elems []string `json:"elems,omitempty"`
	// Nullable is false for NOT NULL columns.
	Nullable bool `json:"nullable,omitempty"`
	// Key is set for columns of the primary key.
	Key bool `json:"key,omitempty"`
}

// Table is one table's schema at one point in the binlog.
type Table struct {
	Schema  string   `json:"schema"`
	Name    string   `json:"name"`
	Columns []Column `json:"columns"`
	// Charset is the table's default character set where it changes what
	// a column added later holds: "binary" or a charset braid converts
	// (see Column.Charset); empty otherwise.
	Charset string `json:"charset,omitempty"`
	// Unique lists the column names of each unique key other than the one
	// whose columns are Key (a sink keeps changes of one unique value in
	// order); empty where the schema model has no indexes.
	Unique [][]string `json:"unique,omitempty"`
	// LogicalSchema and LogicalName are the logical table the destination
	// routes this one to (the spec's route:), stamped by package group once
	// per table version, before the version's first rows leave the merge,
	// and never changed after; empty until then (Logical then gives the
	// table's own names). A Clone starts unstamped.
	//
	// Package group stamps a copy of its own, which the rows it emits
	// carry: a version a reader's schema model handed out stays unstamped
	// and is never written by anyone (the model reads all of it, on its
	// reader's goroutine, to compare it with a DDL's result).
	LogicalSchema string `json:"-"`
	LogicalName   string `json:"-"`
}

// Logical returns the logical schema and table (see LogicalName).
func (t *Table) Logical() (schema, name string) {
	if t.LogicalName == "" {
		return t.Schema, t.Name
	}
	return t.LogicalSchema, t.LogicalName
}

// FullName is "schema.table", the string table filters match against.
func (t *Table) FullName() string { return t.Schema + "." + t.Name }

// KeyNames lists the primary-key column names in column order.
func (t *Table) KeyNames() []string {
	var names []string
	for _, c := range t.Columns {
		if c.Key {
			names = append(names, c.Name)
		}
	}
	return names
}

// ColumnIndex returns the index of the named column (case-insensitive, as
// MySQL compares column names), or -1.
func (t *Table) ColumnIndex(name string) int {
	for i, c := range t.Columns {
		if strings.EqualFold(c.Name, name) {
			return i
		}
	}
	return -1
}

// Clone returns a deep copy, so history versions never share slices.
func (t *Table) Clone() *Table {
	c := &Table{Schema: t.Schema, Name: t.Name, Columns: make([]Column, len(t.Columns)), Charset: t.Charset}
	for _, u := range t.Unique {
		c.Unique = append(c.Unique, append([]string(nil), u...))
	}
	copy(c.Columns, t.Columns)
	for i := range c.Columns {
		if c.Columns[i].Elems != nil {
			c.Columns[i].Elems = append([]string(nil), c.Columns[i].Elems...)
		}
	}
	return c
}
