package mysqlsource

import (
	"fmt"
	"slices"
	"strings"
)

// Catalog is what the server's databases hold, as a test describes it:
// the schemas, their tables' SHOW CREATE TABLE text, the rows
// information_schema lists for them, and the rows a SELECT of a table
// returns (for braid's initial snapshot). The server derives nothing from
// the binlog: a test (or the workload layer) that writes a DDL event
// updates the catalog too, with PutTable or DropTable.
type Catalog struct {
	Schemas []Schema
}

// Schema is a database.
type Schema struct {
	Name string
	// Charset and Collation are the database's defaults. Default:
	// utf8mb4, utf8mb4_0900_ai_ci.
	Charset, Collation string
	Tables             []Table
}

// Table is a base table.
type Table struct {
	Name string
	// Create is SHOW CREATE TABLE's text, in MySQL's own spelling
	// (`int`, not `int(11)`; COLLATE=utf8mb4_0900_ai_ci; /*!80023
	// INVISIBLE */). Default: written from Columns and Indexes
	// (CreateText).
	Create string
	// Collation is TABLE_COLLATION. Default: the schema's.
	Collation string
	// Engine is ENGINE. Default: InnoDB.
	Engine string
	// Columns are information_schema.COLUMNS' rows, in order.
	Columns []Column
	// Indexes are information_schema.STATISTICS' rows (and
	// KEY_COLUMN_USAGE's for the unique ones).
	Indexes []Index
	// Checks are information_schema.CHECK_CONSTRAINTS' rows.
	Checks []Check
	// Rows are what SELECT returns: one value per column of Columns, in
	// order: nil (NULL), string, []byte, int64, uint64 or float64, each
	// printed as MySQL prints the column (a DATETIME as "2024-01-02
	// 03:04:05", a JSON as its text).
	Rows [][]any
	// EstimatedRows is TABLE_ROWS; nil: len(Rows).
	EstimatedRows *int64
}

// Column is a column as information_schema.COLUMNS lists it.
type Column struct {
	Name string
	// Type is COLUMN_TYPE as MySQL 8 prints it: "int", "int unsigned",
	// "varchar(20)", "decimal(10,2)", "json", "vector(3)",
	// "enum('a','b')".
	Type     string
	Nullable bool
	// Default is COLUMN_DEFAULT; nil: none (NULL).
	Default *string
	// Charset and Collation of a text column; other columns have none.
	// Default for a char, varchar, text or enum column: the table's.
	Charset, Collation string
	// Extra is EXTRA: "auto_increment", "VIRTUAL GENERATED",
	// "STORED GENERATED", "INVISIBLE", "DEFAULT_GENERATED on update
	// CURRENT_TIMESTAMP" ...
	Extra string
	// Generation is GENERATION_EXPRESSION, for a generated column.
	Generation string
	Comment    string
}

// Index is an index as information_schema.STATISTICS lists it.
type Index struct {
	// Name is "PRIMARY" for the primary key.
	Name    string
	Unique  bool
	Columns []IndexPart
	// Invisible is IS_VISIBLE = NO.
	Invisible bool
}

// IndexPart is one key part.
type IndexPart struct {
	Column string
	// Prefix is SUB_PART: the length of a prefix key part; 0: whole.
	Prefix int
}

// Check is a CHECK constraint.
type Check struct {
	Name, Clause string
}

// SetCatalog replaces the server's catalog.
func (s *Server) SetCatalog(c Catalog) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.catalog = cloneCatalog(c)
}

// PutSchema adds a schema or replaces its defaults (its tables stay).
func (s *Server) PutSchema(sc Schema) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.catalog.Schemas {
		if s.catalog.Schemas[i].Name == sc.Name {
			tables := s.catalog.Schemas[i].Tables
			s.catalog.Schemas[i] = cloneCatalog(Catalog{Schemas: []Schema{sc}}).Schemas[0]
			s.catalog.Schemas[i].Tables = append(tables, s.catalog.Schemas[i].Tables...)
			return
		}
	}
	s.catalog.Schemas = append(s.catalog.Schemas, cloneCatalog(Catalog{Schemas: []Schema{sc}}).Schemas[0])
}

// PutTable adds a table to a schema (created if missing) or replaces it.
func (s *Server) PutTable(schema string, t Table) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t = cloneTable(t)
	for i := range s.catalog.Schemas {
		sc := &s.catalog.Schemas[i]
		if sc.Name != schema {
			continue
		}
		for j := range sc.Tables {
			if sc.Tables[j].Name == t.Name {
				sc.Tables[j] = t
				return
			}
		}
		sc.Tables = append(sc.Tables, t)
		return
	}
	s.catalog.Schemas = append(s.catalog.Schemas, Schema{Name: schema, Tables: []Table{t}})
}

// DropTable removes a table; a missing one is no error.
func (s *Server) DropTable(schema, table string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.catalog.Schemas {
		sc := &s.catalog.Schemas[i]
		if sc.Name == schema {
			sc.Tables = slices.DeleteFunc(sc.Tables, func(t Table) bool { return t.Name == table })
		}
	}
}

// Catalog returns a copy of the server's catalog.
func (s *Server) Catalog() Catalog {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cloneCatalog(s.catalog)
}

func cloneCatalog(c Catalog) Catalog {
	out := Catalog{Schemas: make([]Schema, len(c.Schemas))}
	for i, sc := range c.Schemas {
		sc.Tables = slices.Clone(sc.Tables)
		for j := range sc.Tables {
			sc.Tables[j] = cloneTable(sc.Tables[j])
		}
		out.Schemas[i] = sc
	}
	return out
}

func cloneTable(t Table) Table {
	t.Columns = slices.Clone(t.Columns)
	t.Indexes = slices.Clone(t.Indexes)
	for i := range t.Indexes {
		t.Indexes[i].Columns = slices.Clone(t.Indexes[i].Columns)
	}
	t.Checks = slices.Clone(t.Checks)
	t.Rows = slices.Clone(t.Rows)
	for i := range t.Rows {
		t.Rows[i] = slices.Clone(t.Rows[i])
	}
	return t
}

// systemSchemas are the schemas every MySQL 8 has; SCHEMATA lists them,
// their tables are not modelled.
var systemSchemas = []string{"information_schema", "mysql", "performance_schema", "sys"}

// hasSchema tells whether db exists.
func (s *Server) hasSchema(db string) bool {
	if slices.Contains(systemSchemas, strings.ToLower(db)) {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.schemaLocked(db)
	return ok
}

func (s *Server) schemaLocked(db string) (*Schema, bool) {
	for i := range s.catalog.Schemas {
		if s.catalog.Schemas[i].Name == db {
			return &s.catalog.Schemas[i], true
		}
	}
	return nil, false
}

// tableLocked finds db.table.
func (s *Server) tableLocked(db, table string) (*Schema, *Table, bool) {
	sc, ok := s.schemaLocked(db)
	if !ok {
		return nil, nil, false
	}
	for i := range sc.Tables {
		if sc.Tables[i].Name == table {
			return sc, &sc.Tables[i], true
		}
	}
	return sc, nil, false
}

// defaults fill a schema's defaults.
func (sc Schema) charset() string {
	if sc.Charset != "" {
		return sc.Charset
	}
	if sc.Collation != "" {
		cs, _, _ := strings.Cut(sc.Collation, "_")
		return cs
	}
	return "utf8mb4"
}

func (sc Schema) collation() string {
	if sc.Collation != "" {
		return sc.Collation
	}
	if sc.charset() == "utf8mb4" {
		return "utf8mb4_0900_ai_ci"
	}
	return defaultCollation(sc.charset())
}

// defaultCollation is a character set's default collation in MySQL 8.
func defaultCollation(cs string) string {
	switch cs {
	case "utf8mb4":
		return "utf8mb4_0900_ai_ci"
	case "utf8mb3", "utf8":
		return "utf8mb3_general_ci"
	case "latin1":
		return "latin1_swedish_ci"
	case "binary":
		return "binary"
	case "ascii":
		return "ascii_general_ci"
	}
	return cs + "_general_ci"
}

func (t Table) collation(sc Schema) string {
	if t.Collation != "" {
		return t.Collation
	}
	return sc.collation()
}

func (t Table) engine() string {
	if t.Engine != "" {
		return t.Engine
	}
	return "InnoDB"
}

// textual tells whether a column type holds text (has a charset).
func textual(typ string) bool {
	base := dataType(typ)
	switch base {
	case "char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set":
		return !strings.Contains(strings.ToLower(typ), " binary") // char(3) binary is not text
	}
	return false
}

// dataType is DATA_TYPE: COLUMN_TYPE's first word.
func dataType(typ string) string {
	t := strings.ToLower(typ)
	if i := strings.IndexAny(t, "( "); i >= 0 {
		t = t[:i]
	}
	return t
}

// columnCharset and columnCollation give a column's, defaults filled.
func (col Column) charsetIn(t Table, sc Schema) (cs, coll string) {
	if !textual(col.Type) {
		return "", ""
	}
	cs, coll = col.Charset, col.Collation
	switch {
	case cs == "" && coll == "":
		coll = t.collation(sc)
		cs, _, _ = strings.Cut(coll, "_")
	case cs == "":
		cs, _, _ = strings.Cut(coll, "_")
	case coll == "":
		coll = defaultCollation(cs)
	}
	return cs, coll
}

// CreateText is SHOW CREATE TABLE's text for t in schema sc: t.Create if
// set, else written from its columns and indexes as MySQL 8 prints them.
func (t Table) CreateText(sc Schema) string {
	if t.Create != "" {
		return t.Create
	}
	var defs []string
	tableColl := t.collation(sc)
	for _, col := range t.Columns {
		d := quoteIdent(col.Name) + " " + col.Type
		if cs, coll := col.charsetIn(t, sc); cs != "" && coll != tableColl {
			if tableCS, _, _ := strings.Cut(tableColl, "_"); cs != tableCS {
				d += " CHARACTER SET " + cs
			}
			d += " COLLATE " + coll
		}
		if col.Generation != "" {
			kind := "VIRTUAL"
			if strings.Contains(strings.ToUpper(col.Extra), "STORED") {
				kind = "STORED"
			}
			d += " GENERATED ALWAYS AS (" + col.Generation + ") " + kind
		}
		if !col.Nullable {
			d += " NOT NULL"
		}
		if col.Default != nil {
			d += " DEFAULT " + quoteString(*col.Default)
		} else if col.Nullable && col.Generation == "" && !blobLike(col.Type) {
			d += " DEFAULT NULL"
		}
		if strings.Contains(strings.ToLower(col.Extra), "auto_increment") {
			d += " AUTO_INCREMENT"
		}
		if strings.Contains(strings.ToUpper(col.Extra), "INVISIBLE") {
			d += " /*!80023 INVISIBLE */"
		}
		if col.Comment != "" {
			d += " COMMENT " + quoteString(col.Comment)
		}
		defs = append(defs, d)
	}
	for _, ix := range t.Indexes {
		parts := make([]string, len(ix.Columns))
		for i, p := range ix.Columns {
			parts[i] = quoteIdent(p.Column)
			if p.Prefix > 0 {
				parts[i] += fmt.Sprintf("(%d)", p.Prefix)
			}
		}
		var d string
		switch {
		case ix.Name == "PRIMARY":
			d = "PRIMARY KEY (" + strings.Join(parts, ",") + ")"
		case ix.Unique:
			d = "UNIQUE KEY " + quoteIdent(ix.Name) + " (" + strings.Join(parts, ",") + ")"
		default:
			d = "KEY " + quoteIdent(ix.Name) + " (" + strings.Join(parts, ",") + ")"
		}
		if ix.Invisible {
			d += " /*!80000 INVISIBLE */"
		}
		defs = append(defs, d)
	}
	for _, ch := range t.Checks {
		defs = append(defs, "CONSTRAINT "+quoteIdent(ch.Name)+" CHECK ("+ch.Clause+")")
	}
	cs, _, _ := strings.Cut(tableColl, "_")
	return "CREATE TABLE " + quoteIdent(t.Name) + " (\n  " + strings.Join(defs, ",\n  ") + "\n) ENGINE=" + t.engine() +
		" DEFAULT CHARSET=" + cs + " COLLATE=" + tableColl
}

// blobLike: BLOB, TEXT, JSON and GEOMETRY columns print no DEFAULT NULL.
func blobLike(typ string) bool {
	switch dataType(typ) {
	case "tinyblob", "blob", "mediumblob", "longblob", "tinytext", "text", "mediumtext", "longtext", "json", "geometry":
		return true
	}
	return false
}

func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// indexRow is one key part of one of a table's indexes as both SHOW
// INDEX and information_schema.STATISTICS print it.
type indexRow struct {
	index     string
	nonUnique int64
	seq       int64 // the part's place in the index, from 1
	column    string
	subPart   any    // the prefix length, nil for the whole column
	nullable  string // "YES" or ""
	visible   string // "YES" or "NO"
}

// indexRows are t's indexes, a row a key part, in index order.
func indexRows(t *Table) []indexRow {
	var rows []indexRow
	for _, ix := range t.Indexes {
		r := indexRow{index: ix.Name, nonUnique: 1, visible: "YES"}
		if ix.Unique || ix.Name == "PRIMARY" {
			r.nonUnique = 0
		}
		if ix.Invisible {
			r.visible = "NO"
		}
		for k, p := range ix.Columns {
			r.seq, r.column, r.subPart, r.nullable = int64(k+1), p.Column, nil, ""
			if p.Prefix > 0 {
				r.subPart = int64(p.Prefix)
			}
			for _, col := range t.Columns {
				if col.Name == p.Column && col.Nullable {
					r.nullable = "YES"
				}
			}
			rows = append(rows, r)
		}
	}
	return rows
}
