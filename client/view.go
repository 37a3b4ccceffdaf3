package client

import (
	"slices"
	"strings"
)

// MessageView is a flat message seen in place, for consumers that read
// every value of every row and cannot afford a map per row
// (Client.StreamViews). It holds Message's fields; the rows are read by
// index (Value, Old) instead of data and old's maps.
//
// A view and everything it returns are only valid until the handler it was
// given to returns: the values are views of the stream's buffer. Copy what
// you keep, or take Message().
type MessageView struct {
	ID       uint64
	Database string
	Table    string
	// PkNames are the key's columns.
	PkNames []string
	IsDdl   bool
	// Type is INSERT, UPDATE, DELETE or the DDL kind.
	Type string
	// Es is the event (commit) time and Ts the emit time, in ms.
	Es  int64
	Ts  int64
	SQL string
	// Seq is the merged transaction's sequence number.
	Seq            uint64
	Source         string
	OriginDatabase string
	OriginTable    string
	Position       string
	GTID           string
	// Snapshot marks a message of an initial snapshot's rows.
	Snapshot bool

	// cols are the columns in the order the line names them first
	// (sqlType's, then any a row adds).
	cols []viewColumn
	// data and old are the rows of data and old.
	data, old viewRows
	// hasSQLType, hasMysqlType and hasPkNames record whether the line held
	// sqlType, mysqlType, pkNames (json sets a nil map or slice otherwise).
	hasSQLType, hasMysqlType, hasPkNames bool
	// checkpoint is set for a checkpoint line, which is no message.
	checkpoint *uint64

	// raw is the line.
	raw []byte
	// fallback is the message json decoded, for a line the decoder left to
	// json; the view's columns are then its column names, sorted.
	fallback *Message
}

type viewColumn struct {
	name      string
	sqlType   int
	mysqlType string
	// inSQLType and inMysqlType record the column's presence in the line's
	// sqlType and mysqlType.
	inSQLType, inMysqlType bool
}

// viewRows are the rows of a line's data or old.
type viewRows struct {
	set   bool // the line held an array (not null, not missing)
	rows  []viewRow
	cells []viewCell
}

// viewRow is one row: its cells are cells[first:first+n]. A row that is
// JSON null has none.
type viewRow struct {
	first, n int32
	null     bool
}

// viewCell is one column's value in a row.
type viewCell struct {
	v    []byte
	col  int32
	null bool
}

// reset empties v for the next line, keeping its arrays.
func (v *MessageView) reset() {
	cols, pk := v.cols[:0], v.PkNames[:0]
	data, old := v.data, v.old
	data.reset()
	old.reset()
	*v = MessageView{cols: cols, PkNames: pk, data: data, old: old}
}

func (rs *viewRows) reset() {
	clear(rs.cells) // let go of the line
	*rs = viewRows{rows: rs.rows[:0], cells: rs.cells[:0]}
}

// Columns counts the message's columns.
func (v *MessageView) Columns() int { return len(v.cols) }

// Column is column i's name.
func (v *MessageView) Column(i int) string { return v.cols[i].name }

// ColumnIndex is the index of the column named name, or -1.
func (v *MessageView) ColumnIndex(name string) int {
	return slices.IndexFunc(v.cols, func(c viewColumn) bool { return c.name == name })
}

// SQLType is column i's java.sql.Types code (0 if the line gives none).
func (v *MessageView) SQLType(i int) int { return v.cols[i].sqlType }

// MySQLType is column i's MySQL type ("" if the line gives none).
func (v *MessageView) MySQLType(i int) string { return v.cols[i].mysqlType }

// Rows counts the rows of data: the rows after the change (before it for
// DELETE).
func (v *MessageView) Rows() int { return len(v.data.rows) }

// Value is column col of data's row row; ok is false when it is NULL or the
// row lacks it.
func (v *MessageView) Value(row, col int) (val []byte, ok bool) {
	return v.data.value(row, col)
}

// Holds reports whether data's row row holds column col, NULL or not: a
// row image of a source with binlog_row_image MINIMAL or NOBLOB leaves
// columns out, and the message then holds only the others.
func (v *MessageView) Holds(row, col int) bool {
	return v.data.cell(row, col) != nil
}

// OldRows counts the rows of old: for UPDATE, one per row of data.
func (v *MessageView) OldRows() int { return len(v.old.rows) }

// Changed reports whether old's row row holds column col: whether an
// UPDATE changed it.
func (v *MessageView) Changed(row, col int) bool {
	return v.old.cell(row, col) != nil
}

// Old is the value column col had before an UPDATE changed it (old's row
// row); ok is false when it was NULL or did not change (see Changed).
func (v *MessageView) Old(row, col int) (val []byte, ok bool) {
	return v.old.value(row, col)
}

// Raw is the line as the server sent it, without the newline, when the
// client asked for JSON lines (WithJSONLines); nil otherwise.
func (v *MessageView) Raw() []byte { return v.raw }

func (rs *viewRows) value(row, col int) ([]byte, bool) {
	c := rs.cell(row, col)
	if c == nil || c.null {
		return nil, false
	}
	return c.v, true
}

// cell finds column col in row row, nil if the row lacks it.
func (rs *viewRows) cell(row, col int) *viewCell {
	r := rs.rows[row]
	cells := rs.cells[r.first : r.first+r.n]
	// A row of data names every column in order; old's name the changed
	// ones.
	if col < len(cells) && int(cells[col].col) == col {
		return &cells[col]
	}
	for i := range cells {
		if int(cells[i].col) == col {
			return &cells[i]
		}
	}
	return nil
}

// Message is the view copied into a Message, sharing no memory with the
// stream's buffer: what Client.Stream hands its handler.
func (v *MessageView) Message() Message {
	if v.fallback != nil {
		m := *v.fallback
		m.Raw = slices.Clone(v.raw)
		return m
	}
	m := Message{ID: v.ID, Database: v.Database, Table: v.Table, IsDdl: v.IsDdl, Type: v.Type,
		Es: v.Es, Ts: v.Ts, SQL: v.SQL, Seq: v.Seq, Source: v.Source, OriginDatabase: v.OriginDatabase,
		OriginTable: v.OriginTable, Position: v.Position, GTID: v.GTID, Snapshot: v.Snapshot, Raw: slices.Clone(v.raw)}
	if v.hasPkNames {
		m.PkNames = append(make([]string, 0, len(v.PkNames)), v.PkNames...)
	}
	if v.hasSQLType {
		m.SQLType = make(map[string]int, len(v.cols))
		for _, c := range v.cols {
			if c.inSQLType {
				m.SQLType[c.name] = c.sqlType
			}
		}
	}
	if v.hasMysqlType {
		m.MysqlType = make(map[string]string, len(v.cols))
		for _, c := range v.cols {
			if c.inMysqlType {
				m.MysqlType[c.name] = c.mysqlType
			}
		}
	}
	m.Data = v.data.maps(v.cols)
	m.Old = v.old.maps(v.cols)
	return m
}

// maps turns rows into Message's maps: nil for no array, a nil map for a
// null row. A row's values share one string and its pointers one array,
// so that a value kept keeps no more than its row alive.
func (rs *viewRows) maps(cols []viewColumn) []map[string]*string {
	if !rs.set {
		return nil
	}
	out := make([]map[string]*string, len(rs.rows))
	for i, r := range rs.rows {
		if r.null {
			continue
		}
		cells := rs.cells[r.first : r.first+r.n]
		size := 0
		for _, c := range cells {
			size += len(c.v)
		}
		var all strings.Builder
		all.Grow(size)
		for _, c := range cells {
			all.Write(c.v)
		}
		rest := all.String()
		vals := make([]string, len(cells))
		m := make(map[string]*string, len(cells))
		for j, c := range cells {
			name := cols[c.col].name
			if c.null {
				m[name] = nil
				continue
			}
			vals[j], rest = rest[:len(c.v)], rest[len(c.v):]
			m[name] = &vals[j]
		}
		out[i] = m
	}
	return out
}

// viewOf makes a view of a message json decoded: its columns are the names
// its maps hold, sorted.
func viewOf(m *Message, raw []byte) *MessageView {
	v := &MessageView{ID: m.ID, Database: m.Database, Table: m.Table, PkNames: m.PkNames, IsDdl: m.IsDdl,
		Type: m.Type, Es: m.Es, Ts: m.Ts, SQL: m.SQL, Seq: m.Seq, Source: m.Source, OriginDatabase: m.OriginDatabase,
		OriginTable: m.OriginTable, Position: m.Position, GTID: m.GTID, Snapshot: m.Snapshot, raw: raw, fallback: m,
		hasPkNames: m.PkNames != nil, hasSQLType: m.SQLType != nil, hasMysqlType: m.MysqlType != nil}
	seen := map[string]bool{}
	add := func(k string) {
		if !seen[k] {
			seen[k] = true
			t, inSQL := m.SQLType[k]
			mt, inMy := m.MysqlType[k]
			v.cols = append(v.cols, viewColumn{name: k, sqlType: t, mysqlType: mt, inSQLType: inSQL, inMysqlType: inMy})
		}
	}
	for k := range m.SQLType {
		add(k)
	}
	for k := range m.MysqlType {
		add(k)
	}
	for _, rows := range [][]map[string]*string{m.Data, m.Old} {
		for _, r := range rows {
			for k := range r {
				add(k)
			}
		}
	}
	slices.SortFunc(v.cols, func(a, b viewColumn) int { return strings.Compare(a.name, b.name) })
	fill := func(rs *viewRows, rows []map[string]*string) {
		rs.set = rows != nil
		for _, r := range rows {
			row := viewRow{first: int32(len(rs.cells)), n: int32(len(r)), null: r == nil}
			for j := range v.cols {
				p, ok := r[v.cols[j].name]
				switch {
				case !ok:
				case p == nil:
					rs.cells = append(rs.cells, viewCell{col: int32(j), null: true})
				default:
					rs.cells = append(rs.cells, viewCell{col: int32(j), v: []byte(*p)})
				}
			}
			rs.rows = append(rs.rows, row)
		}
	}
	fill(&v.data, m.Data)
	fill(&v.old, m.Old)
	return v
}
