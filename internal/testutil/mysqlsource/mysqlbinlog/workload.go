package mysqlbinlog

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"
)

// DefaultVersion is the server a workload is written as when it names
// none: MySQL 8.4 LTS.
const DefaultVersion = "8.4.3"

// rowsEventMaxSize is binlog_row_event_max_size's default: a statement's
// rows are split into events of about this size.
const rowsEventMaxSize = 8192

// Server is the MySQL server a workload is written as.
type Server struct {
	Version  string // SELECT VERSION(); default DefaultVersion
	ServerID uint32 // default 1
	UUID     UUID   // server_uuid; default 3e11fa47-71ca-11e1-9e33-c80aa9429562
	// AnonymousGTIDs writes ANONYMOUS_GTID events (gtid_mode=OFF).
	AnonymousGTIDs bool
	// RowMetadata is binlog_row_metadata (MySQL's default is MINIMAL).
	RowMetadata RowMetadata
	// BaseName names the files: BaseName.000001, ...; default "binlog".
	BaseName string
	// Start is when the server started: the first file's time; default
	// 2026-01-02 03:04:05 UTC.
	Start time.Time
	// Collation is the sessions' collation_connection; default 255
	// (utf8mb4_0900_ai_ci).
	Collation uint16
	// ThreadID is the connection id the statements run on; default 8.
	ThreadID uint32
}

func (s Server) withDefaults() Server {
	if s.Version == "" {
		s.Version = DefaultVersion
	}
	if s.ServerID == 0 {
		s.ServerID = 1
	}
	if s.UUID == (UUID{}) {
		s.UUID = MustUUID("3e11fa47-71ca-11e1-9e33-c80aa9429562")
	}
	if s.BaseName == "" {
		s.BaseName = "binlog"
	}
	if s.Start.IsZero() {
		s.Start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	}
	if s.Collation == 0 {
		s.Collation = CollationUTF8MB4_0900AICI
	}
	if s.ThreadID == 0 {
		s.ThreadID = 8
	}
	return s
}

// Workload is what a test wants a MySQL source's binlog to hold.
type Workload struct {
	Server Server
	Txns   []Txn
}

// Txn is one transaction: a DDL statement, or row statements.
type Txn struct {
	DDL        *DDL
	Statements []Statement
	// Tag makes the GTID a tagged one (MySQL 8.3+): uuid:tag:n.
	Tag string
	// Compressed writes the transaction as one TRANSACTION_PAYLOAD
	// (binlog_transaction_compression=ON). DDL is never compressed.
	Compressed bool
	// CommitTime is the commit time (µs precision); zero is 1 ms after
	// the previous transaction's.
	CommitTime time.Time
	// OriginalCommitTime is the commit time on the source the
	// transaction came from; zero is CommitTime (this server is it).
	OriginalCommitTime time.Time
	// Origin, for a transaction this server applied as a replica, is
	// the server it was first committed on: the GTID is the origin's
	// (numbered per origin UUID) and its events carry the origin's
	// server_id, as a replica with log_replica_updates logs them. Zero:
	// this server.
	Origin Origin
	// RotateAfter ends the file after this transaction (Write; a Writer
	// rotates when told to).
	RotateAfter bool
}

// Origin is the server a replicated transaction was first committed on.
type Origin struct {
	UUID     UUID
	ServerID uint32
}

// DDL is a statement that changes the schema.
type DDL struct {
	Schema string // the session's current database
	// SQL is the statement as the client sent it; "" for a CREATE TABLE
	// of Table, written as SHOW CREATE TABLE prints it.
	SQL string
	// Table is the table as the statement leaves it (CREATE, ALTER,
	// RENAME); nil for statements that leave no table.
	Table *TableDef
	// Drops names the "schema.table" the statement removes (DROP TABLE,
	// or the old name of a RENAME).
	Drops string
	// CreatesDatabase is set for CREATE DATABASE Schema.
	CreatesDatabase bool
}

// StatementKind is the kind of a row statement.
type StatementKind int

// The row statements. PartialUpdate is an UPDATE under
// binlog_row_value_options=PARTIAL_JSON: its rows may hold JSONDiffs.
const (
	Insert StatementKind = iota
	Update
	Delete
	PartialUpdate
)

// Statement is one row statement on one table ("schema.name").
type Statement struct {
	Kind  StatementKind
	Table string
	Rows  []Row
}

// BinlogFile is one file as SHOW BINARY LOGS lists it.
type BinlogFile struct {
	Name string
	Data []byte
}

// TxnPos is where a transaction went.
type TxnPos struct {
	File       string
	Start, End uint32
	GTID       string // "uuid:n", "uuid:tag:n", or "" for an anonymous one
	CommitTime time.Time
}

// EventInfo is one row of SHOW BINLOG EVENTS.
type EventInfo struct {
	LogName   string
	Pos       uint32
	EventType string
	ServerID  uint32
	EndLogPos uint32
	Info      string
}

// TableState is a table as the workload leaves it.
type TableState struct {
	Def        *TableDef
	Create     string // SHOW CREATE TABLE
	Columns    []ColumnInfo
	Statistics []StatisticsInfo
	// Rows are the table's rows as the workload leaves them, as SELECT
	// returns them (SelectValue), in primary key order; nil with
	// RowsUnknown set when the workload cannot know them.
	Rows        [][]any
	RowsUnknown string
}

// Binlog is a written workload: what a MySQL source serving it has.
type Binlog struct {
	Server       Server
	Files        []BinlogFile
	Txns         []TxnPos
	Events       []EventInfo
	Tables       []TableState // sorted by schema, name
	Schemas      []string     // sorted
	GTIDExecuted string       // @@gtid_executed
}

// Write writes the workload as its server would.
func Write(w Workload) (*Binlog, error) {
	wr, err := NewWriter(w.Server)
	if err != nil {
		return nil, err
	}
	if err := wr.WriteAll(w.Txns); err != nil {
		return nil, err
	}
	return wr.Binlog()
}

// WriteAll writes txns in order, rotating after those that say so (but
// the last: a server rotates when the next transaction comes).
func (st *Writer) WriteAll(txns []Txn) error {
	for i, txn := range txns {
		if _, err := st.Write(txn); err != nil {
			return fmt.Errorf("transaction %d: %w", i, err)
		}
		if txn.RotateAfter && i < len(txns)-1 {
			if err := st.Rotate(); err != nil {
				return err
			}
		}
	}
	return nil
}

type liveTable struct {
	def      *TableDef
	table    *Table
	contents *contents
}

// Writer writes a workload one transaction at a time, for tests that
// feed a running source: after each Write, Binlog shows the files as
// they are. After an error it writes nothing more (its state may be half
// changed), and says so.
type Writer struct {
	server    Server
	version   Version
	files     []BinlogFile // closed files
	file      *File        // the open one
	fileName  string
	fileIndex int
	seq       int64 // sequence_number of the last transaction in the file
	clock     time.Time
	tables    map[string]*liveTable
	schemas   map[string]bool
	gnos      map[gnoKey]int64 // last GNO per UUID and tag ("" untagged)
	// eventServerID is the server_id SHOW BINLOG EVENTS shows for the
	// events being noted: the transaction's origin's.
	eventServerID uint32
	nextTableID   uint64
	xid           uint64
	out           Binlog
	err           error
}

// NewWriter starts the first file of server s.
func NewWriter(s Server) (*Writer, error) {
	s = s.withDefaults()
	v, err := ParseVersion(s.Version)
	if err != nil {
		return nil, err
	}
	st := &Writer{server: s, version: v, clock: s.Start, tables: map[string]*liveTable{}, schemas: map[string]bool{},
		gnos: map[gnoKey]int64{}, eventServerID: s.ServerID, nextTableID: 88, xid: 10}
	if err := st.openFile(1, s.Start); err != nil {
		return nil, err
	}
	return st, nil
}

// Write appends one transaction to the open file.
func (st *Writer) Write(txn Txn) (TxnPos, error) {
	if st.err != nil {
		return TxnPos{}, fmt.Errorf("mysqlbinlog: the writer stopped at an earlier error: %w", st.err)
	}
	commit := txn.CommitTime
	if commit.IsZero() {
		commit = st.clock.Add(time.Millisecond)
	}
	st.clock = commit
	if err := st.txn(txn, commit); err != nil {
		st.err = err
		return TxnPos{}, err
	}
	return st.out.Txns[len(st.out.Txns)-1], nil
}

// Rotate closes the open file with a ROTATE and opens the next, at the
// time of the last transaction.
func (st *Writer) Rotate() error {
	if st.err != nil {
		return fmt.Errorf("mysqlbinlog: the writer stopped at an earlier error: %w", st.err)
	}
	if err := st.rotate(st.clock); err != nil {
		st.err = err
		return err
	}
	return nil
}

// Binlog returns what the server has now: every file (the open one last,
// copied), the transactions and events so far, the tables as the DDL so
// far left them.
func (st *Writer) Binlog() (*Binlog, error) {
	if st.err != nil {
		return nil, fmt.Errorf("mysqlbinlog: the writer stopped at an earlier error: %w", st.err)
	}
	return st.result()
}

func (st *Writer) openFile(index int, at time.Time) error {
	fde := FormatDescription{ServerVersion: st.server.Version, Checksum: true}
	if index == 1 {
		fde.CreateTimestamp = uint32(at.Unix())
	}
	f, err := NewFile(fde, st.server.ServerID, uint32(at.Unix()), PreviousGTIDs{Set: st.gtidSet()})
	if err != nil {
		return err
	}
	st.file, st.fileIndex, st.seq = f, index, 0
	st.fileName = fmt.Sprintf("%s.%06d", st.server.BaseName, index)
	st.event(4, "Format_desc", fmt.Sprintf("Server ver: %s, Binlog ver: 4", st.server.Version))
	st.event(st.eventEnd(4), "Previous_gtids", st.gtidString())
	return nil
}

// eventEnd reads the end position of the event at pos.
func (st *Writer) eventEnd(pos uint32) uint32 {
	b := st.file.Bytes()
	return uint32(b[pos+13]) | uint32(b[pos+14])<<8 | uint32(b[pos+15])<<16 | uint32(b[pos+16])<<24
}

func (st *Writer) event(pos uint32, typ, info string) {
	st.out.Events = append(st.out.Events, EventInfo{LogName: st.fileName, Pos: pos, EventType: typ,
		ServerID: st.eventServerID, EndLogPos: st.eventEnd(pos), Info: info})
}

func (st *Writer) rotate(at time.Time) error {
	next := fmt.Sprintf("%s.%06d", st.server.BaseName, st.fileIndex+1)
	pos := st.file.Pos()
	st.file.Rotate(uint32(at.Unix()), next)
	st.event(pos, "Rotate", next+";pos=4")
	index := st.fileIndex + 1
	st.closeFile()
	return st.openFile(index, at)
}

func (st *Writer) closeFile() {
	if st.file == nil {
		return
	}
	st.files = append(st.files, BinlogFile{Name: st.fileName, Data: st.file.Bytes()})
	st.file = nil
}

// gnoKey names a GTID sequence: a server UUID and a tag.
type gnoKey struct {
	sid UUID
	tag string
}

// sortedGNOs returns the executed set's sequences by UUID, then tag.
func (st *Writer) sortedGNOs() []gnoKey {
	keys := make([]gnoKey, 0, len(st.gnos))
	for k := range st.gnos {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if a, b := keys[i].sid.String(), keys[j].sid.String(); a != b {
			return a < b
		}
		return keys[i].tag < keys[j].tag
	})
	return keys
}

func (st *Writer) gtidSet() []GTIDSetEntry {
	if st.server.AnonymousGTIDs {
		return nil
	}
	var set []GTIDSetEntry
	for _, k := range st.sortedGNOs() {
		set = append(set, GTIDSetEntry{SID: k.sid, Tag: k.tag, Intervals: []GTIDInterval{{1, st.gnos[k]}}})
	}
	return set
}

// gtidString prints the executed set as MySQL does: each UUID once, in
// order, with its untagged interval, then each tag's; UUIDs apart by
// ",\n".
func (st *Writer) gtidString() string {
	var b strings.Builder
	keys := st.sortedGNOs()
	for i, k := range keys {
		if i == 0 || keys[i-1].sid != k.sid {
			if i > 0 {
				b.WriteString(",\n")
			}
			b.WriteString(k.sid.String())
		}
		if k.tag != "" {
			b.WriteString(":" + k.tag)
		}
		if n := st.gnos[k]; n == 1 {
			b.WriteString(":1")
		} else {
			fmt.Fprintf(&b, ":1-%d", n)
		}
	}
	return b.String()
}

func (st *Writer) txn(txn Txn, commit time.Time) error {
	if (txn.DDL == nil) == (len(txn.Statements) == 0) {
		return fmt.Errorf("mysqlbinlog: a transaction is either one DDL or row statements")
	}
	st.seq++
	commitUS := uint64(commit.UnixMicro())
	original := commitUS
	if !txn.OriginalCommitTime.IsZero() {
		original = uint64(txn.OriginalCommitTime.UnixMicro())
	}
	g := GTID{LastCommitted: st.seq - 1, SequenceNumber: st.seq,
		ImmediateCommitTimestamp: commitUS, OriginalCommitTimestamp: original,
		ImmediateServerVersion: st.version.ID(), OriginalServerVersion: st.version.ID()}
	gtidText := ""
	if !st.server.AnonymousGTIDs {
		if txn.Tag != "" && !st.version.AtLeast(8, 3, 0) {
			return fmt.Errorf("mysqlbinlog: tagged GTIDs need MySQL 8.3+, the server is %s", st.server.Version)
		}
		k := gnoKey{st.server.UUID, txn.Tag}
		if txn.Origin.UUID != (UUID{}) {
			k.sid = txn.Origin.UUID
		}
		st.gnos[k]++
		g.SID, g.Tag, g.GNO = k.sid, txn.Tag, st.gnos[k]
		gtidText = k.sid.String()
		if txn.Tag != "" {
			gtidText += ":" + txn.Tag
		}
		gtidText += fmt.Sprintf(":%d", g.GNO)
	}
	ts := uint32(commit.Unix())
	var events []Event
	var infos []struct{ typ, info string }
	note := func(typ, info string) { infos = append(infos, struct{ typ, info string }{typ, info}) }
	compression := Uncompressed
	if txn.DDL != nil {
		g.Flags = GTIDMayHaveSBR
		e, info, err := st.ddl(txn.DDL, ts)
		if err != nil {
			return err
		}
		events = append(events, e)
		note("Query", info)
	} else {
		if txn.Compressed {
			compression = Zstd
		}
		begin := Query{ThreadID: st.server.ThreadID, Schema: st.defaultSchema(txn), SQL: "BEGIN", SuppressedUse: true, Status: BeginStatus(st.server.Collation)}
		body, err := begin.Body()
		if err != nil {
			return err
		}
		events = append(events, Event{Type: replication.QUERY_EVENT, Timestamp: ts, Flags: begin.HeaderFlags(), Body: body})
		note("Query", "BEGIN")
		for _, stmt := range txn.Statements {
			evs, notes, err := st.statement(stmt, ts)
			if err != nil {
				return err
			}
			events = append(events, evs...)
			infos = append(infos, notes...)
		}
		st.xid++
		events = append(events, Event{Type: replication.XID_EVENT, Timestamp: ts, Body: XIDBody(st.xid)})
		note("Xid", fmt.Sprintf("COMMIT /* xid=%d */", st.xid))
	}
	if txn.Origin.ServerID != 0 {
		st.file.ServerID, st.eventServerID = txn.Origin.ServerID, txn.Origin.ServerID
		defer func() { st.file.ServerID, st.eventServerID = st.server.ServerID, st.server.ServerID }()
	}
	start, end, err := st.file.AppendTransaction(g, ts, events, compression)
	if err != nil {
		return err
	}
	gtidType, gtidInfo := "Gtid", fmt.Sprintf("SET @@SESSION.GTID_NEXT= '%s'", gtidText)
	switch {
	case st.server.AnonymousGTIDs:
		gtidType, gtidInfo = "Anonymous_Gtid", "SET @@SESSION.GTID_NEXT= 'ANONYMOUS'"
	case txn.Tag != "":
		gtidType = "Gtid_tagged_log"
	}
	st.event(start, gtidType, gtidInfo)
	pos := st.eventEnd(start)
	if compression == Zstd {
		raw := 0
		for _, e := range events {
			raw += HeaderSize + len(e.Body)
		}
		st.event(pos, "Transaction_payload", fmt.Sprintf("compression='ZSTD', decompressed_size=%d bytes", raw))
	} else {
		for _, in := range infos {
			st.event(pos, in.typ, in.info)
			pos = st.eventEnd(pos)
		}
	}
	st.out.Txns = append(st.out.Txns, TxnPos{File: st.fileName, Start: start, End: end, GTID: gtidText, CommitTime: commit})
	return nil
}

// defaultSchema is the database of the transaction's first statement:
// the session's current database a BEGIN carries.
func (st *Writer) defaultSchema(txn Txn) string {
	if s, _, ok := strings.Cut(txn.Statements[0].Table, "."); ok {
		return s
	}
	return ""
}

func (st *Writer) ddl(d *DDL, ts uint32) (Event, string, error) {
	st.xid++
	sql := d.SQL
	if d.Drops != "" {
		delete(st.tables, d.Drops)
	}
	if d.CreatesDatabase {
		st.schemas[d.Schema] = true
	}
	if d.Table != nil {
		create, err := d.Table.ShowCreateTable()
		if err != nil {
			return Event{}, "", err
		}
		if sql == "" {
			sql = create
		}
		t, err := d.Table.Table(st.nextTableID)
		if err != nil {
			return Event{}, "", err
		}
		for _, c := range t.Columns {
			switch {
			case c.Kind == KindVector && !st.version.AtLeast(9, 0, 0):
				return Event{}, "", fmt.Errorf("mysqlbinlog: %s column %s: VECTOR needs MySQL 9.0+, the server is %s", d.Table.QualifiedName(), c.Name, st.server.Version)
			case c.Invisible && !st.version.AtLeast(8, 0, 23):
				return Event{}, "", fmt.Errorf("mysqlbinlog: %s column %s: INVISIBLE needs MySQL 8.0.23+, the server is %s", d.Table.QualifiedName(), c.Name, st.server.Version)
			}
		}
		st.nextTableID++
		lt := &liveTable{def: d.Table, table: t, contents: newContents()}
		if old, ok := st.tables[d.Table.QualifiedName()]; ok {
			// ALTER: the rows stay, in the new columns
			lt.contents = old.contents
			lt.contents.alter(old.table, t)
		}
		st.tables[d.Table.QualifiedName()] = lt
		st.schemas[d.Table.Schema] = true
	}
	if sql == "" {
		return Event{}, "", fmt.Errorf("mysqlbinlog: a DDL without SQL must create a table")
	}
	// Database statements name their database: the server suppresses
	// the "use" of the session's.
	q := Query{ThreadID: st.server.ThreadID, Schema: d.Schema, SQL: sql, SuppressedUse: d.CreatesDatabase,
		Status: DDLStatus(st.server.Collation, d.Schema, st.xid, d.CreatesDatabase)}
	body, err := q.Body()
	if err != nil {
		return Event{}, "", err
	}
	info := sql + fmt.Sprintf(" /* xid=%d */", st.xid)
	if d.Schema != "" {
		info = "use " + quoteName(d.Schema) + "; " + info
	}
	return Event{Type: replication.QUERY_EVENT, Timestamp: ts, Flags: q.HeaderFlags(), Body: body}, info, nil
}

// statement writes a table map and the statement's rows, split into
// events of about binlog_row_event_max_size as MySQL splits them; only
// the last carries STMT_END_F.
func (st *Writer) statement(stmt Statement, ts uint32) ([]Event, []struct{ typ, info string }, error) {
	lt, ok := st.tables[stmt.Table]
	if !ok {
		return nil, nil, fmt.Errorf("mysqlbinlog: statement on %s, which no DDL created", stmt.Table)
	}
	if len(stmt.Rows) == 0 {
		return nil, nil, fmt.Errorf("mysqlbinlog: statement on %s has no rows", stmt.Table)
	}
	tm, err := TableMap{Table: lt.table, Metadata: st.server.RowMetadata, Flags: 1, Version: st.version}.Body()
	if err != nil {
		return nil, nil, err
	}
	typ, typName := map[StatementKind]replication.EventType{
		Insert: replication.WRITE_ROWS_EVENTv2, Update: replication.UPDATE_ROWS_EVENTv2,
		Delete: replication.DELETE_ROWS_EVENTv2, PartialUpdate: replication.PARTIAL_UPDATE_ROWS_EVENT,
	}[stmt.Kind], map[StatementKind]string{Insert: "Write_rows", Update: "Update_rows", Delete: "Delete_rows", PartialUpdate: "Update_rows_partial"}[stmt.Kind]
	events := []Event{{Type: replication.TABLE_MAP_EVENT, Timestamp: ts, Body: tm}}
	notes := []struct{ typ, info string }{{"Table_map", fmt.Sprintf("table_id: %d (%s)", lt.table.ID, stmt.Table)}}
	// Rows go into an event until the next would take it past
	// binlog_row_event_max_size, as the server fills its pending event;
	// only the statement's last event ends it.
	proto := Rows{Type: typ, Table: lt.table}
	header, err := proto.Header()
	if err != nil {
		return nil, nil, err
	}
	var bodies [][]byte
	cur := append([]byte(nil), header...)
	for i, r := range stmt.Rows {
		start := len(cur)
		if cur, err = proto.AppendRow(cur, r); err != nil {
			return nil, nil, fmt.Errorf("mysqlbinlog: %s row %d %w", stmt.Table, i, err)
		}
		if start > len(header) && len(cur) > rowsEventMaxSize {
			// the row starts a new event
			row := cur[start:]
			bodies = append(bodies, cur[:start:start])
			cur = append(append([]byte(nil), header...), row...)
		}
	}
	bodies = append(bodies, cur)
	lt.contents.apply(lt.table, stmt.Kind, stmt.Rows)
	for i, body := range bodies {
		flagInfo := ""
		if i == len(bodies)-1 {
			// the flags sit after the 6-byte table id
			body[6] |= byte(StmtEndFlag)
			flagInfo = " flags: STMT_END_F"
		}
		events = append(events, Event{Type: typ, Timestamp: ts, Body: body})
		notes = append(notes, struct{ typ, info string }{typName, fmt.Sprintf("table_id: %d%s", lt.table.ID, flagInfo)})
	}
	return events, notes, nil
}

func (st *Writer) result() (*Binlog, error) {
	out := st.out
	out.Txns = append([]TxnPos(nil), st.out.Txns...)
	out.Events = append([]EventInfo(nil), st.out.Events...)
	out.Server = st.server
	out.Files = append([]BinlogFile(nil), st.files...)
	out.Files = append(out.Files, BinlogFile{Name: st.fileName, Data: append([]byte(nil), st.file.Bytes()...)})
	out.GTIDExecuted = st.gtidString()
	for name := range st.schemas {
		out.Schemas = append(out.Schemas, name)
	}
	sort.Strings(out.Schemas)
	names := make([]string, 0, len(st.tables))
	for name := range st.tables {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		def := st.tables[name].def
		create, err := def.ShowCreateTable()
		if err != nil {
			return nil, err
		}
		cols, stats, err := def.InformationSchema()
		if err != nil {
			return nil, err
		}
		state := TableState{Def: def, Create: create, Columns: cols, Statistics: stats, RowsUnknown: st.tables[name].contents.unknown}
		if state.RowsUnknown == "" {
			if state.Rows, err = st.tables[name].contents.selected(st.tables[name].table); err != nil {
				return nil, err
			}
		}
		out.Tables = append(out.Tables, state)
	}
	return &out, nil
}
