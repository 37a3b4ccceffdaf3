package change

// SchemaSnapshot is a schema.Tracker's whole history as a JSON-encodable
// value, stored with a cursor so a new owner resumes with the schema of the
// cursor's time.
type SchemaSnapshot struct {
	// Applied is the newest position ApplyDDL applied.
	Applied Position `json:"applied"`
	// Tables are sorted by schema, then name.
	Tables []SchemaTableHistory `json:"tables"`
	// Databases are the known databases' default charsets where they
	// matter to a table created later ("" for the others), and
	// ServerCharset the server's (see schema.Tracker.SetCharsets).
	Databases     map[string]string `json:"databases,omitempty"`
	ServerCharset string            `json:"serverCharset,omitempty"`
}

// SchemaTableHistory is one table's versions, oldest first.
type SchemaTableHistory struct {
	Schema   string          `json:"schema"`
	Name     string          `json:"name"`
	Versions []SchemaVersion `json:"versions"`
	Pending  *SchemaPending  `json:"pending,omitempty"`
}

// SchemaVersion is the schema in force from Pos until the next version: a
// table when Table is set, unknown when Unknown is set, else no table.
type SchemaVersion struct {
	Pos     Position      `json:"pos"`
	Unknown bool          `json:"unknown,omitempty"`
	Table   *Table        `json:"table,omitempty"`
	Indexes []SchemaIndex `json:"indexes,omitempty"`
}

// SchemaIndex is a PRIMARY KEY or UNIQUE index: the indexes decide which
// columns are Key (the primary key, else the first unique index on NOT NULL
// whole columns, as MySQL picks).
type SchemaIndex struct {
	Name    string   `json:"name"`
	Primary bool     `json:"primary,omitempty"`
	Columns []string `json:"columns"`
	// Partial is set when a part is a prefix or an expression: such an index
	// cannot stand in for a primary key.
	Partial bool `json:"partial,omitempty"`
}

// SchemaPending is a MarkUnknownUntil that has not happened yet.
type SchemaPending struct {
	Until Position `json:"until"`
	After *Table   `json:"after,omitempty"`
}
