package binlog

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/schema"
	"github.com/braid-cdc/braid/spec"
)

// handle processes one binlog event.
func (p *Reader) handle(ctx context.Context, e *replication.BinlogEvent, emit func(*change.Event) error) error {
	hdr := e.Header
	start := change.Position{File: p.file, Pos: hdr.LogPos - hdr.EventSize}
	end := change.Position{File: p.file, Pos: hdr.LogPos}
	return p.handleAt(ctx, e, start, end, emit)
}

// handleAt processes one binlog event that starts at start and ends at
// end in the binlog: its own positions, or those of the transaction
// payload it is inside.
func (p *Reader) handleAt(ctx context.Context, e *replication.BinlogEvent, start, end change.Position, emit func(*change.Event) error) error {
	hdr := e.Header
	if p.tx.hasM && !p.tx.timed && mariadbStatementTime(hdr) {
		p.tx.commit, p.tx.timed = time.Unix(int64(hdr.Timestamp), 0), true
	}
	switch ev := e.Event.(type) {
	case *replication.RotateEvent:
		// A GTID start stays one until the first boundary: the server
		// names the file (at offset 4) but skips what comes before the
		// GTID state in it, so a reconnect before then must ask by GTID
		// again.
		p.file = string(ev.NextLogName)
		return nil

	case *replication.MariadbGTIDEvent:
		g := mariadbGTID(e, ev)
		if ev.IsStandalone() {
			// A DDL (or other non-transactional statement) follows without
			// BEGIN/COMMIT; the Query event itself is the transaction.
			p.tx = txState{start: start, gtid: gtidString(g), commit: time.Unix(int64(hdr.Timestamp), 0), serverID: hdr.ServerID}
		} else {
			p.openTx(start, gtidString(g), time.Unix(int64(hdr.Timestamp), 0), hdr.ServerID)
		}
		p.tx.mgtid, p.tx.hasM = g, true
		if p.byGTID {
			// Resumed by GTID on another server: one not past the state
			// was emitted before.
			if last, ok := p.gtids.get(g.DomainID); ok && g.SequenceNumber <= last.SequenceNumber {
				p.tx.dup = true
			}
		}
		if p.replay.open && p.replay.gtid != "" && p.replay.gtid != p.tx.gtid && !p.tx.dup {
			return fatal{fmt.Errorf("binlog: source %s at %s: braid was in the middle of transaction %s when its connection was lost, and the server now sends %s first: "+
				"its history differs from what braid read; start the destination again from a position before %s", p.spec.Name, start, p.replay.gtid, p.tx.gtid, p.replay.gtid)}
		}
		return nil

	case *replication.GTIDEvent: // GTID_EVENT, ANONYMOUS_GTID_EVENT
		// MySQL follows with a BEGIN query (or a transaction payload) for
		// DML and the statement for DDL.
		p.tx = txState{start: start, gtid: mysqlGTID(ev, hdr.EventType), commit: mysqlCommitTime(ev, hdr), serverID: hdr.ServerID}
		p.mysqlTxGTID(ev, hdr.EventType)
		return nil

	case *replication.GtidTaggedLogEvent: // 8.3+: uuid:tag:n
		p.tx = txState{start: start, gtid: mysqlGTID(&ev.GTIDEvent, hdr.EventType), commit: mysqlCommitTime(&ev.GTIDEvent, hdr), serverID: hdr.ServerID}
		p.mysqlTxGTID(&ev.GTIDEvent, hdr.EventType)
		return nil

	case *replication.PreviousGTIDsEvent:
		return p.previousGTIDs(e, start)

	case *replication.TransactionPayloadEvent:
		return p.handlePayload(ctx, ev, start, end, emit)

	case *replication.QueryEvent:
		q := strings.TrimSpace(string(ev.Query))
		switch {
		case strings.EqualFold(q, "BEGIN"):
			if !p.tx.open {
				txStart := start
				if !p.tx.start.IsZero() { // MySQL: the transaction starts at its (maybe anonymous) GTID event
					txStart = p.tx.start
				}
				commit := p.tx.commit
				if commit.IsZero() {
					commit = time.Unix(int64(hdr.Timestamp), 0)
				}
				my, dup := p.tx.my, p.tx.dup // a MySQL GTID event's
				p.openTx(txStart, p.tx.gtid, commit, hdr.ServerID)
				p.tx.my, p.tx.dup = my, dup
			}
			return nil
		case strings.EqualFold(q, "COMMIT"), strings.EqualFold(q, "ROLLBACK"):
			// COMMIT ends a transaction on non-transactional engines;
			// ROLLBACK is logged when one touched such a table, whose
			// changes stay.
			return p.commitTx(end, emit)
		}
		if p.tx.open {
			// A statement inside a transaction (SAVEPOINT, or DML logged as
			// a statement despite ROW format): nothing to emit.
			return nil
		}
		return p.handleDDL(ctx, ev, hdr, start, end, emit)

	case *replication.XIDEvent:
		return p.commitTx(end, emit)

	case *replication.FormatDescriptionEvent:
		p.checksum, p.format = 0, nil
		if ev.ChecksumAlgorithm == replication.BINLOG_CHECKSUM_ALG_CRC32 {
			p.checksum = 4
		}
		if strings.Contains(ev.ServerVersion, "MariaDB") {
			// Up to its checksum algorithm; the 4 bytes after it, a
			// checksum or not, are there whatever the algorithm.
			p.format = e.RawData[replication.EventHeaderSize : len(e.RawData)-4]
		}
		return nil

	case *replication.TableMapEvent:
		if p.format != nil {
			p.maps = append(p.maps, tableMapBody{ev, e.RawData[replication.EventHeaderSize : len(e.RawData)-p.checksum]})
		}
		return nil

	case *replication.RowsEvent:
		return p.handleRows(ctx, ev, start, hdr, emit)

	case *replication.HeartbeatEvent:
		if p.replay.open {
			return nil
		}
		return emit(&change.Event{Type: change.EventHeartbeat, Source: p.spec.Name, Pos: end, Stale: p.staleBeat})
	}
	if ignoredEvents[hdr.EventType] {
		return nil
	}
	return p.unknownEvent(hdr, start)
}

// tableMapBody is a table map event and its body (change.RowsBinlog).
type tableMapBody struct {
	ev   *replication.TableMapEvent
	body []byte
}

// rowsBinlog is what a target needs to replay rows event ev's images.
func (p *Reader) rowsBinlog(ev *replication.RowsEvent) *change.RowsBinlog {
	for i := len(p.maps) - 1; i >= 0; i-- { // the latest first: a transaction may map a table per statement
		if m := p.maps[i]; m.ev == ev.Table {
			b := &change.RowsBinlog{Format: p.format, TableMap: m.body, Present: ev.ColumnBitmap1}
			if ev.Type() == replication.EnumRowsEventTypeUpdate {
				b.PresentAfter = ev.ColumnBitmap2
			}
			return b
		}
	}
	return nil
}

// forgetMaps drops the transaction's table maps.
func (p *Reader) forgetMaps() {
	clear(p.maps)
	p.maps = p.maps[:0]
}

// openTx starts a transaction at start.
func (p *Reader) openTx(start change.Position, gtid string, commit time.Time, serverID uint32) {
	p.tx = txState{open: true, start: start, gtid: gtid, commit: commit, serverID: serverID}
}

// skipping reports whether the current transaction is before a {timestamp}
// start, or in a MySQL {gtid} start's set, and so is not emitted.
func (p *Reader) skipping() bool {
	return !p.notBefore.IsZero() && p.tx.commit.Before(p.notBefore) || p.skipGTIDs.ContainsGTID(p.tx.gtid)
}

// boundary moves the resume point past a transaction that ends at end:
// a position now of the server read, with tx's GTID in the state.
func (p *Reader) boundary(end change.Position, tx *txState) {
	p.resume, p.started = end, true
	p.posServer = p.connServer
	if tx.hasM && !tx.dup {
		p.gtids.set(tx.mgtid)
		p.gtidStr = p.gtids.String()
		p.live.GTIDs = change.GTIDText(p.gtidStr)
	}
	if tx.my.gno != 0 {
		p.mexec.Add(tx.my.sid, tx.my.tag, tx.my.gno)
	}
	p.share() // the stats with the transaction read (note)
}

// commitTx ends the current transaction at end.
func (p *Reader) commitTx(end change.Position, emit func(*change.Event) error) error {
	tx := p.tx
	p.tx = txState{}
	p.replay = txState{}
	p.boundary(end, &tx)
	p.forgetMaps()
	if !tx.open || tx.dup {
		return nil
	}
	if p.skipping() && !tx.begun || p.skipGTIDs.ContainsGTID(tx.gtid) {
		return nil
	}
	if !p.notBefore.IsZero() && !tx.commit.Before(p.notBefore) {
		p.notBefore = time.Time{} // from here on, everything is emitted
	}
	if !tx.begun {
		return emit(&change.Event{Type: change.EventProgress, Source: p.spec.Name, ServerID: tx.serverID, Pos: tx.start, EndPos: end, GTID: tx.gtid, CommitTime: tx.commit,
			GTIDs: p.gtidState(), Server: p.posServer})
	}
	return emit(&change.Event{Type: change.EventCommit, Source: p.spec.Name, ServerID: tx.serverID, Pos: end, GTID: tx.gtid, CommitTime: tx.commit,
		GTIDs: p.gtidState(), Server: p.posServer})
}

// handleDDL applies a statement outside a transaction to the schema model
// and emits it when it touches a selected table: changes its schema,
// acts on it with no change the model keeps (schema.Tracker.Kept: ADD
// FULLTEXT INDEX), or empties it (TRUNCATE).
func (p *Reader) handleDDL(ctx context.Context, ev *replication.QueryEvent, hdr *replication.EventHeader, start, end change.Position, emit func(*change.Event) error) error {
	tx := p.tx
	p.tx = txState{}
	p.replay = txState{}
	p.forgetMaps()
	if p.skipGTIDs.ContainsGTID(tx.gtid) || tx.dup {
		// Before a {gtid} start (as the server skips it), or emitted
		// before a switch of servers: the schema has it.
		p.boundary(end, &tx)
		return nil
	}
	if tx.start.IsZero() {
		tx.start = start
		tx.commit = time.Unix(int64(hdr.Timestamp), 0)
	}
	db := string(ev.Schema)
	sql := string(ev.Query)
	mode, _ := statusSQLMode(ev.StatusVars)
	if err := p.provisionalDDL(ctx, start, db, sql, mode); err != nil {
		return err
	}
	changed, err := p.schema.ApplyDDL(start, db, sql, schema.SQLMode(mode))
	p.boundary(end, &tx)
	if err != nil {
		// A statement braid cannot parse leaves the model as it was; rows
		// that then disagree with it fail loudly on the column count.
		p.log.Warn("cannot parse DDL; schema model unchanged", "pos", start.String(), "err", err)
		p.badDDL = badDDL{pos: start, sql: sql, err: oneLine(err)}
	}
	var selected []string
	// A TRUNCATE, and a DDL that changed nothing the model keeps (ADD
	// FULLTEXT INDEX), make no version; consumers must see them still.
	touched := append(changed, p.schema.Kept(start)...)
	if name, ok := schema.TruncatedTable(db, sql, schema.SQLMode(mode)); ok {
		touched = append(touched, name)
	}
	for _, name := range touched {
		schema, table, _ := strings.Cut(name, ".")
		if p.filter.Match(schema, table) {
			selected = append(selected, name)
		}
	}
	if !p.notBefore.IsZero() {
		if tx.commit.Before(p.notBefore) {
			return nil
		}
		p.notBefore = time.Time{}
	}
	var snap *change.SchemaSnapshot
	if len(changed) > 0 || p.schema.DatabasesChanged(start) || p.schema.OnlineChanged(start) {
		// A snapshot is saved with a cursor and restored as fact: first
		// settle the tables still provisional, whose live schema may not
		// hold here (one created later in the binlog would be taken as
		// existing, and its CREATE TABLE then changes nothing).
		if p.anyProvisional(start) {
			if err := p.resolveProvisional(ctx, start); err != nil {
				return err
			}
		}
		s := p.schema.Snapshot()
		s.Server = p.posServer
		snap = &s
	}
	ddl := p.onlineDDL(start, &change.DDL{Schema: db, SQL: sql, SQLMode: mode, Tables: selected})
	if selected = ddl.Tables; len(selected) == 0 {
		return emit(&change.Event{Type: change.EventProgress, Source: p.spec.Name, ServerID: hdr.ServerID, Pos: tx.start, EndPos: end, GTID: tx.gtid,
			CommitTime: tx.commit, Schema: snap, GTIDs: p.gtidState(), Server: p.posServer})
	}
	versions := make([]*change.Table, len(selected))
	for i, name := range selected {
		schema, table, _ := strings.Cut(name, ".")
		versions[i], _ = p.schema.Table(schema, table)
	}
	return emit(&change.Event{Type: change.EventDDL, Source: p.spec.Name, ServerID: hdr.ServerID, Pos: tx.start, EndPos: end, GTID: tx.gtid,
		CommitTime: tx.commit, DDL: ddl, Schema: snap, Versions: versions, GTIDs: p.gtidState(), Server: p.posServer})
}

// handleRows emits the row changes of a rows event of a selected table.
func (p *Reader) handleRows(ctx context.Context, ev *replication.RowsEvent, start change.Position, hdr *replication.EventHeader, emit func(*change.Event) error) error {
	if len(ev.Rows) == 0 || ev.Table == nil {
		return nil // a table braid does not read: not decoded at all
	}
	if !p.tx.open {
		// Rows outside BEGIN/COMMIT only come from a server without
		// transactions in its binlog; treat the event as its own transaction.
		p.openTx(start, "", p.tx.commit, hdr.ServerID)
	}
	if p.skipping() || p.tx.dup {
		return nil
	}
	// A table map that names its columns (binlog_row_metadata=FULL when
	// the row was written, whatever the server's setting is now) labels
	// the row itself; one that does not needs the schema of its time.
	if len(ev.Table.ColumnName) == 0 && p.anyProvisional(start) && p.isProvisional(string(ev.Table.Schema)+"."+string(ev.Table.Table), start) {
		if err := p.resolveProvisional(ctx, start); err != nil {
			return err
		}
	}
	table, err := p.decoder.table(ev.Table, start)
	if err != nil {
		return err
	}
	kind, step := change.Insert, 1
	switch ev.Type() {
	case replication.EnumRowsEventTypeUpdate:
		kind, step = change.Update, 2
	case replication.EnumRowsEventTypeDelete:
		kind = change.Delete
	case replication.EnumRowsEventTypeInsert:
	default:
		if !partialUpdate(ev) {
			return fatal{fmt.Errorf("%w: source %s at %s: rows event type %d (%s) braid does not read: read this source with a braid that knows it, or start after it",
				ErrBadEvent, p.spec.Name, start, byte(hdr.EventType), hdr.EventType)}
		}
		kind, step = change.Update, 2 // its JSON diffs applied (SplitPartialRows)
	}
	if !p.tx.begun {
		p.tx.begun = true
		if !p.replay.begun {
			if err := emit(&change.Event{Type: change.EventBegin, Source: p.spec.Name, ServerID: p.tx.serverID, Pos: p.tx.start, GTID: p.tx.gtid, CommitTime: p.tx.commit,
				Server: p.connServer}); err != nil {
				return err
			}
		}
	}
	images := rowImagesOf(ev)
	if images.Raw() && table.Shapes == nil {
		return fatal{fmt.Errorf("%w: source %s: %s.%s at %s: raw rows of a table braid reads with go-mysql", ErrBadEvent, p.spec.Name, ev.Table.Schema, ev.Table.Table, start)}
	}
	if p.format != nil && images.Raw() {
		if b := p.rowsBinlog(ev); b != nil {
			images.SetBinlog(b)
		}
	}
	switch kind {
	case change.Insert:
		images.SetPresent(nil, ev.ColumnBitmap1, int(ev.ColumnCount))
	case change.Delete:
		images.SetPresent(ev.ColumnBitmap1, nil, int(ev.ColumnCount))
	case change.Update:
		images.SetPresent(ev.ColumnBitmap1, ev.ColumnBitmap2, int(ev.ColumnCount))
	}
	n := images.Count()
	changes := make([]change.RowChange, 0, n/step)
	for k := 0; k+step <= n; k += step {
		index := p.tx.rows
		p.tx.rows++
		if index < p.replay.rows {
			continue // emitted before the reconnect
		}
		changes = append(changes, change.NewRowChange(table, kind, index, images, k))
	}
	if len(changes) == 0 {
		return nil
	}
	p.live.Rows += uint64(len(changes))
	rowsEv := &change.Event{Type: change.EventRows, Source: p.spec.Name, ServerID: p.tx.serverID, Pos: start, GTID: p.tx.gtid, CommitTime: p.tx.commit, Rows: changes,
		BinlogBytes: int64(hdr.EventSize), OffsetBytes: images.OffsetBytes()}
	return emit(rowsEv)
}

// rowFilter is go-mysql's RowsEventDecodeFunc: it reads the rows of
// selected tables only, so a skipped table's rows event costs a header and
// two map lookups, and it leaves the row images of the common column types
// raw (rowimage.go), only finding where each value starts. It runs on
// go-mysql's reading goroutine, so it has its own caches and touches
// nothing of the Reader's.
type rowFilter struct {
	filter *spec.TableFilter
	sel    map[string]map[string]bool
	// slow sends every event to go-mysql's decoder: the server compresses
	// its rows events (MariaDB's log_bin_compress), or a test compares.
	slow bool
	// lastMap and lastShapes cache tableShapes for a transaction's table
	// map (nil shapes: go-mysql decodes its rows). Each transaction has
	// table maps of its own; the shapes are kept while the next maps have
	// the same column types and metadata (shapesOf).
	lastMap    *replication.TableMapEvent
	lastShapes []change.Shape
}

// shapesOf returns the shapes of tm's columns: lastShapes again when tm
// has the columns of the last table map whose shapes were made.
func (f *rowFilter) shapesOf(tm *replication.TableMapEvent) []change.Shape {
	if last := f.lastMap; last != nil && bytes.Equal(last.ColumnType, tm.ColumnType) && slices.Equal(last.ColumnMeta, tm.ColumnMeta) {
		return f.lastShapes
	}
	return change.TableShapes(tm)
}

func newRowFilter(f *spec.TableFilter, compressed bool) *rowFilter {
	return &rowFilter{filter: f, sel: map[string]map[string]bool{}, slow: compressed}
}

func (f *rowFilter) decodeRows(re *replication.RowsEvent, data []byte) error {
	pos, err := re.DecodeHeader(data)
	if err != nil {
		return err
	}
	if !f.selected(re.Table) {
		re.Table = nil // tells handleRows the event was skipped
		return nil
	}
	if re.Table != f.lastMap {
		f.lastShapes, f.lastMap = f.shapesOf(re.Table), re.Table
	}
	if partialUpdate(re) {
		// go-mysql keeps only the first JSON diff of a column, as text:
		// braid applies them all to the before image (SplitPartialRows).
		if f.lastShapes == nil {
			return fmt.Errorf("a partial JSON update of %s.%s, a table with a column type braid does not read itself: set binlog_row_value_options='' on the server, then start after this event", re.Table.Schema, re.Table.Table)
		}
		rr, err := change.SplitPartialRows(re, re.Table, f.lastShapes, pos, data)
		if err != nil {
			return err
		}
		re.Rows = [][]any{{rr}}
		return nil
	}
	if f.slow || f.lastShapes == nil || re.Type() == replication.EnumRowsEventTypeUnknown {
		return re.DecodeData(pos, data)
	}
	rr, err := change.SplitRows(re, f.lastShapes, pos, data)
	if err != nil {
		return err
	}
	re.Rows = [][]any{{rr}} // handleRows takes them out (rowImagesOf)
	return nil
}

// partialUpdate reports whether re is a PARTIAL_UPDATE_ROWS event (MySQL
// 8.0+, binlog_row_value_options=PARTIAL_JSON): go-mysql gives it no rows
// event type of its own, and it is the only version 2 rows event with two
// column bitmaps whose type is unknown.
func partialUpdate(re *replication.RowsEvent) bool {
	return re.Type() == replication.EnumRowsEventTypeUnknown && re.Version == 2 && re.ColumnBitmap2 != nil
}

// rowImagesOf returns a rows event's images: the raw ones decodeRows left
// in it instead of go-mysql's decoded rows, or those.
func rowImagesOf(re *replication.RowsEvent) *change.Images {
	if len(re.Rows) == 1 && len(re.Rows[0]) == 1 {
		if rr, ok := re.Rows[0][0].(*change.Images); ok {
			return rr
		}
	}
	return &change.Images{Decoded: re.Rows}
}

// selected reports whether rows of the table-map's table are read. The
// lookups by string(bytes) do not allocate.
func (f *rowFilter) selected(tm *replication.TableMapEvent) bool {
	bySchema, ok := f.sel[string(tm.Schema)]
	if !ok {
		bySchema = map[string]bool{}
		f.sel[string(tm.Schema)] = bySchema
	}
	v, ok := bySchema[string(tm.Table)]
	if !ok {
		v = f.filter.Match(string(tm.Schema), string(tm.Table))
		bySchema[string(tm.Table)] = v
	}
	return v
}

// mariadbStatementTime reports whether hdr is an event of a MariaDB
// transaction's statements, whose time is the transaction's in the merge
// (its key) once the first is read. A primary stamps a transaction's
// GTID event (and its XID) with the second it commits in, a replica with
// its last statement's: read from a replica, a transaction whose commit
// fell a second after its statements got an earlier key and went before
// other shards' transactions of that second, a stream other than the
// primary's (make chaos: stream-consistent, 42 seqs, after a failover
// moved the replay to the former replica). Statement events keep the
// primary's time on every server.
func mariadbStatementTime(hdr *replication.EventHeader) bool {
	if hdr.Timestamp == 0 {
		return false
	}
	switch hdr.EventType {
	case replication.TABLE_MAP_EVENT, replication.MARIADB_ANNOTATE_ROWS_EVENT,
		replication.QUERY_EVENT, replication.MARIADB_QUERY_COMPRESSED_EVENT,
		replication.WRITE_ROWS_EVENTv1, replication.UPDATE_ROWS_EVENTv1, replication.DELETE_ROWS_EVENTv1,
		replication.WRITE_ROWS_EVENTv2, replication.UPDATE_ROWS_EVENTv2, replication.DELETE_ROWS_EVENTv2,
		replication.MARIADB_WRITE_ROWS_COMPRESSED_EVENT_V1, replication.MARIADB_UPDATE_ROWS_COMPRESSED_EVENT_V1,
		replication.MARIADB_DELETE_ROWS_COMPRESSED_EVENT_V1:
		return true
	}
	return false
}
