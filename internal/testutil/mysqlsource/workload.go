package mysqlsource

import (
	"fmt"
	"strings"

	"github.com/braid-cdc/braid/internal/testutil/mysqlsource/mysqlbinlog"
)

// Feed keeps a Server in step with a workload's mysqlbinlog.Writer: each
// Sync serves what the writer wrote since the last one, as the server
// would have written it. Bytes appended to the last file reach the dumps
// waiting at its end; a rotation adds the next file; the catalog follows
// the DDL (tables created, altered, dropped).
//
//	w, _ := mysqlbinlog.NewWriter(mysqlbinlog.Server{Version: src.Version()})
//	feed := src.Feed(w)
//	w.Write(mysqlbinlog.Txn{DDL: &mysqlbinlog.DDL{Schema: "shop", Table: orders}})
//	feed.Sync()
//
// A Feed is not safe for concurrent use; the Server is.
type Feed struct {
	s      *Server
	w      *mysqlbinlog.Writer
	served map[string]int  // bytes of each file the server has
	tables map[string]bool // "schema.table" in the catalog from this feed
}

// Feed returns a Feed of w into s; nothing is served before Sync.
func (s *Server) Feed(w *mysqlbinlog.Writer) *Feed {
	return &Feed{s: s, w: w, served: map[string]int{}, tables: map[string]bool{}}
}

// Sync serves what the writer wrote since the last Sync.
func (f *Feed) Sync() error {
	b, err := f.w.Binlog()
	if err != nil {
		return err
	}
	// The catalog first: a reader that sees a DDL may ask for the table
	// at once.
	for _, name := range b.Schemas {
		f.s.PutSchema(Schema{Name: name})
	}
	now := map[string]bool{}
	for _, ts := range b.Tables {
		f.s.PutTable(ts.Def.Schema, catalogTable(ts))
		now[ts.Def.QualifiedName()] = true
	}
	for name := range f.tables {
		if !now[name] {
			schema, table, _ := strings.Cut(name, ".")
			f.s.DropTable(schema, table)
		}
	}
	f.tables = now
	for _, file := range b.Files {
		have, known := f.served[file.Name]
		switch {
		case !known:
			if err := f.s.AddFile(file.Name, file.Data); err != nil {
				return fmt.Errorf("mysqlsource: serve %s: %w", file.Name, err)
			}
		case len(file.Data) > have:
			if err := f.s.Append(file.Data[have:]); err != nil {
				return fmt.Errorf("mysqlsource: serve %s: %w", file.Name, err)
			}
		}
		f.served[file.Name] = len(file.Data)
	}
	return nil
}

// Serve serves a written workload: its schemas and tables in the
// catalog, its files after the server's.
func (s *Server) Serve(w mysqlbinlog.Workload) (*mysqlbinlog.Binlog, error) {
	wr, err := mysqlbinlog.NewWriter(w.Server)
	if err != nil {
		return nil, err
	}
	if err := wr.WriteAll(w.Txns); err != nil {
		return nil, err
	}
	if err := s.Feed(wr).Sync(); err != nil {
		return nil, err
	}
	return wr.Binlog()
}

// catalogTable is the catalog's view of a workload's table: its SHOW
// CREATE TABLE, its information_schema rows and its rows as the workload
// printed them (none when the workload cannot know them: after a partial
// JSON update).
func catalogTable(ts mysqlbinlog.TableState) Table {
	t := Table{Name: ts.Def.Name, Create: ts.Create, Collation: ts.Def.Collation, Rows: ts.Rows}
	if t.Collation == "" {
		t.Collation = "utf8mb4_0900_ai_ci"
	}
	for _, c := range ts.Columns {
		col := Column{Name: c.ColumnName, Type: c.ColumnType, Nullable: c.IsNullable == "YES", Default: c.ColumnDefault,
			Extra: c.Extra, Generation: c.GenerationExpression}
		if c.CharacterSetName != nil {
			col.Charset = *c.CharacterSetName
		}
		if c.CollationName != nil {
			col.Collation = *c.CollationName
		}
		t.Columns = append(t.Columns, col)
	}
	index := map[string]int{}
	for _, st := range ts.Statistics {
		i, ok := index[st.IndexName]
		if !ok {
			i = len(t.Indexes)
			index[st.IndexName] = i
			t.Indexes = append(t.Indexes, Index{Name: st.IndexName, Unique: st.NonUnique == 0})
		}
		part := IndexPart{Column: st.ColumnName}
		if st.SubPart != nil {
			part.Prefix = int(*st.SubPart)
		}
		t.Indexes[i].Columns = append(t.Indexes[i].Columns, part)
	}
	return t
}
