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
	// Server is the server whose binlog the versions' positions are in
	// (nil in a history saved before braid kept it): a reader resuming
	// on another server with it forgets its positions (schema.Tracker's
	// Rebase), which mean nothing there.
	Server *Server `json:"server,omitempty"`
	// Online are the online schema changes (gh-ost, pt-online-schema-change)
	// under way, and the last few that ended, sorted by schema and table.
	Online []OnlineMigration `json:"online,omitempty"`
}

// OnlineMigration is one online schema change of a table: a tool created
// a shadow copy of it at Since and has run DDL on the copy; at the swap
// (the copy renamed to the table's name) that DDL becomes the table's.
type OnlineMigration struct {
	// Schema and Table name the table changed, Shadow its copy (in the
	// same schema).
	Schema string `json:"schema"`
	Table  string `json:"table"`
	Shadow string `json:"shadow"`
	// Since is where the shadow was created.
	Since Position `json:"since"`
	// DDL are the statements run on the shadow, in binlog order.
	DDL []OnlineStatement `json:"ddl,omitempty"`
	// Swapped is where the copy took the table's name; zero while the
	// migration is under way. An ended migration is kept a while so that
	// a reader restored from before its swap (schema.SnapshotAt) has it.
	Swapped Position `json:"swapped,omitzero"`
}

// OnlineStatement is one DDL statement run on a shadow table, as the
// binlog has it.
type OnlineStatement struct {
	Pos     Position `json:"pos"`
	DB      string   `json:"db,omitempty"`
	SQL     string   `json:"sql"`
	SQLMode uint64   `json:"sqlMode,omitempty"`
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

// SnapshotState is one source's initial-snapshot progress at a point of
// the stream, saved with a cursor so that a restart or a new owner goes on
// at the next chunk. A state is never modified once made: the snapshot
// makes a new one per chunk.
type SnapshotState struct {
	// Chunks counts the chunks emitted so far: the index of the next one
	// in the destination's chunk log.
	Chunks int `json:"chunks"`
	// Tables are the tables the snapshot reads, in reading order.
	Tables []SnapshotTable `json:"tables"`
	// Done is set once every table has been read.
	Done bool `json:"done,omitempty"`
	// FreshAt is the newest Event.FreshAt of the chunks read again: until
	// the source's position passes it, its changes may find their rows
	// already so. FreshMark names it on any server of the source: the
	// chunk may have been read on another server than the changes that
	// follow (a failover), whose positions do not compare with it.
	FreshAt   Position `json:"freshAt,omitzero"`
	FreshMark Mark     `json:"freshMark,omitzero"`
}

// SnapshotTable is one table's part of a SnapshotState.
type SnapshotTable struct {
	// Name is "schema.table" as the source names it.
	Name string `json:"name"`
	// After is the key (its columns' values as decimal text) of the last
	// row read; the next chunk starts after it. Empty: from the first.
	After []string `json:"after,omitempty"`
	// Rows counts the rows emitted, Chunks the chunks.
	Rows   int64 `json:"rows"`
	Chunks int   `json:"chunks"`
	// Done is set once the table has been read to its end.
	Done bool `json:"done,omitempty"`
}

// Next returns the index of the first table not done, or len(Tables).
func (s *SnapshotState) Next() int {
	for i := range s.Tables {
		if !s.Tables[i].Done {
			return i
		}
	}
	return len(s.Tables)
}

// Clone returns a copy to be changed into the next state.
func (s *SnapshotState) Clone() *SnapshotState {
	c := *s
	c.Tables = append([]SnapshotTable(nil), s.Tables...)
	return &c
}
