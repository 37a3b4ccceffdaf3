package change

import (
	"bytes"
	"strings"
	"time"
)

// EventType says what an Event carries.
type EventType uint8

// The event types a binlog.Reader emits, in the order they come for one transaction:
// EventBegin, then EventRows (the row changes of one binlog rows event),
// then EventCommit. EventDDL
// is a transaction of its own. EventProgress stands for a transaction with no
// selected row (it moves the position and the commit clock on) and
// EventHeartbeat for the server's replication heartbeat on an idle binlog.
const (
	EventBegin EventType = iota + 1
	EventRows
	EventCommit
	EventDDL
	EventProgress
	EventHeartbeat
)

var eventTypeNames = [...]string{"", "begin", "rows", "commit", "ddl", "progress", "heartbeat"}

func (t EventType) String() string {
	if int(t) < len(eventTypeNames) {
		return eventTypeNames[t]
	}
	return "unknown"
}

// ChangeKind is the kind of a row change.
type ChangeKind uint8

// Row change kinds.
const (
	Insert ChangeKind = iota + 1
	Update
	Delete
)

var changeKindNames = [...]string{"", "INSERT", "UPDATE", "DELETE"}

// String returns canal's name for the kind: INSERT, UPDATE or DELETE.
func (k ChangeKind) String() string {
	if int(k) < len(changeKindNames) {
		return changeKindNames[k]
	}
	return "UNKNOWN"
}

// Event is one thing a binlog.Reader emits. Which fields are set depends on Type.
//
// An Event and what it points to belong to the receiver once handed over; the
// reader never touches them again.
type Event struct {
	Type EventType
	// ServerID is the server_id of the server that wrote the transaction.
	// (The small fields sit together, here and Snapshot with Stale, so
	// that no padding rounds an Event past 320 bytes, a size class: the
	// binlog reader allocates one per rows event.)
	ServerID uint32
	// Source is the source's name in the spec.
	Source string
	// Pos: for EventBegin, EventDDL and EventProgress, where the
	// transaction starts; for EventRows, where its rows event starts; for
	// EventCommit, where the transaction ends (the next one starts): the
	// position to resume from after it. For EventHeartbeat, the server's
	// current position.
	Pos Position
	// EndPos is where an EventDDL or EventProgress transaction ends.
	EndPos Position
	// GTIDs, on an EventCommit, EventDDL or EventProgress of a binlog
	// reader, is the source's GTID state at the boundary after it: on
	// MariaDB the last GTID of each domain ("0-1-42,1-2-7", what a
	// replica's gtid_slave_pos holds), on MySQL the executed set (tags
	// included, printed only when asked); zero when the source has none.
	// Server, on the same events, is the server whose binlog the
	// boundary's position is in, and on an EventBegin the server whose
	// binlog its Pos is in (shared, never modified); nil on events not
	// from a binlog reader.
	GTIDs  GTIDState
	Server *Server
	// GTID of the transaction when the server logs one ("0-1-42" on
	// MariaDB, "uuid:42" on MySQL, "uuid:tag:42" for MySQL 8.3+'s tagged
	// GTIDs).
	GTID string
	// CommitTime is when the transaction committed: on MySQL 8 its
	// original_commit_timestamp (µs, set by the server it was first
	// committed on and the same on every replica; the immediate one when
	// a 5.7 source left none), else the binlog event header's seconds
	// (MariaDB, MySQL 5.7). Set on every event of a transaction (EventBegin,
	// EventRows, EventCommit), EventDDL and EventProgress.
	CommitTime time.Time
	// Rows are the row changes of an EventRows, in binlog order: all of
	// one table and one kind.
	Rows []RowChange
	// DDL is the statement of an EventDDL.
	DDL *DDL
	// Schema is the source's schema history right after a DDL (an EventDDL,
	// or an EventProgress for a DDL of unselected tables), to be saved with a
	// cursor at that boundary; nil when the schema did not change.
	Schema *SchemaSnapshot
	// Tables, on the EventProgress a reader sends before any other when
	// asked to (binlog.Config.AnnounceTables), lists "schema.table" of
	// the selected tables that exist where it starts, sorted.
	Tables []string
	// Versions, on the EventProgress of AnnounceTables and on an EventDDL
	// (or the EventProgress of a DDL of unselected tables), are the
	// versions of the tables named (Tables, DDL.Tables) in force after
	// it, nil for a table that no longer exists: what a snapshot reads
	// those tables with.
	Versions []*Table
	// Snapshot marks the events of a snapshot chunk: a transaction of
	// INSERTs of rows the source held, not of changes it logged.
	Snapshot bool
	// Stale, on an EventHeartbeat, says more binlog was already on its
	// way behind it when it was read: the server sent it a while ago, so
	// it says nothing of whether the source is idle now.
	Stale bool
	// SnapshotState, on a snapshot chunk's EventCommit, is the source's
	// snapshot progress after the chunk, saved with a cursor there.
	SnapshotState *SnapshotState
	// FreshAt, on the events of a snapshot chunk read again (a restart
	// or a new owner emitting a chunk kept before), is the source's end
	// of binlog when it was read: its rows are as they were there, so the
	// source's changes before that point, which follow the chunk in the
	// stream, may find their rows already so (an INSERT its key taken).
	// Those changes' EventRows carry it too (SnapshotState.FreshAt). It
	// is a position of the server the chunk was read on, which after a
	// failover is not the one the changes are read from: a consumer
	// asks only whether it is set.
	FreshAt Position
	// Lost, on the EventBegin and EventCommit of a marker transaction
	// (one with no rows), names the transactions of the source that
	// braid had emitted and the server it went on reading lacks: lost in
	// a failover, accepted by an operator (binlog.Reader.AcceptLoss).
	// The marker stands where the source continued; "" on every other
	// event.
	Lost string
	// Seq is the merged transaction's sequence number, set by the merge
	// (package group) on the events of a transaction it emits; 0 before.
	Seq uint64

	// BinlogBytes is the size of the binlog event an EventRows's values
	// share (raw images and decoded strings point into it), held as long
	// as they are; OffsetBytes the size of its raw images' offsets (Images.
	// OffsetBytes). Set by the binlog reader, for Size.
	BinlogBytes, OffsetBytes int64
	// size memoizes Size: an event does not change once emitted.
	size int64
}

// RowChange is one row's change.
//
// It keeps its row images as the binlog wrote them (the common column
// types, see Images) or as go-mysql decoded them (the rest), and
// converts them to Values only when asked (Before, After), so a consumer
// that only renders them (the flat writer, the canal encoder) or only
// counts them pays for no conversion. A RowChange is read-only and safe
// for concurrent readers.
type RowChange struct {
	// Table is the schema the row was decoded with: the table's columns as
	// they were when the row was written.
	Table *Table
	Kind  ChangeKind
	// Index counts the transaction's row changes from 0.
	Index int

	codec *Codec
	// images are the rows event's images; before and after number this
	// change's (-1: it has none).
	images *Images
	// view maps each column of Table to the column of the images it is
	// read from, -1 for one the row does not have (read as NULL); nil
	// when Table is the images' own (see WithView). A pointer, and the
	// int32s last, keep a RowChange at 56 bytes (72 with the slice
	// inline): a catch-up allocates one per row, and most have no view.
	view          *columnView
	before, after int32
}

// columnView is a RowChange's view (WithView): for each column of the
// view's table, the column of the images it is read from, or -1.
type columnView struct{ from []int32 }

// WithView returns rc shown as a row of view: each of view's columns is
// the row's column of the same name (case-insensitive), or NULL when the
// row has none. The shard-DDL merge shows rows of a shard table that has
// not yet run an ADD COLUMN (or has run a DROP COLUMN the others have
// not) with the logical table's columns.
func (rc RowChange) WithView(view *Table) RowChange {
	from := make([]int32, len(view.Columns))
	for i, c := range view.Columns {
		from[i] = int32(rc.Table.ColumnIndex(c.Name))
	}
	rc.Table, rc.view = view, &columnView{from}
	return rc
}

// col maps a column of Table to the images' column (-1: none).
func (rc *RowChange) col(i int) int {
	if rc.view == nil {
		return i
	}
	return int(rc.view.from[i])
}

// NewRowChange is the change of a rows event's image k (k and k+1, the
// before and after images, for an UPDATE), the transaction's index'th,
// read with codec.
func NewRowChange(codec *Codec, kind ChangeKind, index int, images *Images, k int) RowChange {
	rc := RowChange{Table: codec.Table, Kind: kind, Index: index, codec: codec, images: images, before: -1, after: -1}
	switch kind {
	case Insert:
		rc.after = int32(k)
	case Delete:
		rc.before = int32(k)
	case Update:
		rc.before, rc.after = int32(k), int32(k+1)
	}
	return rc
}

// KeyChanged reports whether an UPDATE changed its row's primary key (a
// table without one: any column), which a keyed reader must see as the
// old key's DELETE and the new key's INSERT (Split).
func (rc *RowChange) KeyChanged() bool {
	if rc.Kind != Update {
		return false
	}
	keyed := false
	for i, c := range rc.Table.Columns {
		if c.Key {
			keyed = true
			if rc.Changed(i) {
				return true
			}
		}
	}
	if !keyed {
		for i := range rc.Table.Columns {
			if rc.Changed(i) {
				return true
			}
		}
	}
	return false
}

// Split returns an UPDATE as the DELETE of its before image and the
// INSERT of its after image, with its Index: what it is to a reader that
// keys each row change by its primary key.
func (rc RowChange) Split() (del, ins RowChange) {
	del, ins = rc, rc
	del.Kind, del.after = Delete, -1
	ins.Kind, ins.before = Insert, -1
	return del, ins
}

// Before is the row before an UPDATE or DELETE (nil for an INSERT), one
// Value per column of Table. Each call converts anew; keep the result.
func (rc *RowChange) Before() []Value { return rc.image(rc.before) }

// After is the row after an INSERT or UPDATE (nil for a DELETE).
func (rc *RowChange) After() []Value { return rc.image(rc.after) }

// Value is column i of the after image (of the before image when after
// is false), as After()[i] (Before()[i]) is, decoding that column only.
// The image must exist.
func (rc *RowChange) Value(after bool, i int) Value {
	k := rc.before
	if after {
		k = rc.after
	}
	if i = rc.col(i); i < 0 {
		return nil
	}
	im, codec := rc.images, rc.codec
	var v any
	switch {
	case im.Decoded != nil:
		v = im.Decoded[k][i]
	case im.ends != nil:
		if x := im.text(k, i); x != nil {
			return textValue(&codec.Columns[i], x)
		}
		return nil
	default:
		off := im.offsets(k)[i]
		if off < 0 {
			return nil
		}
		v, _, _ = decodeValue(im.data[off:], codec.types[i], codec.metas[i], codec.tz)
	}
	if i < len(codec.converts) && codec.converts[i] {
		return codec.value(i, v)
	}
	return v
}

// Integer is column i of the after image (of the before image when after
// is false) when the images hold it raw and it is an integer column
// (TINYINT to BIGINT; not ENUM, SET or BIT): the number Value gives, as
// int64 bits when signed, else uint64, read without boxing it in a Value
// (a key's value is read for every row change a sink keys). ok is false
// otherwise, and for NULL: then Value has it.
func (rc *RowChange) Integer(after bool, i int) (v uint64, signed, ok bool) {
	k := rc.before
	if after {
		k = rc.after
	}
	im, codec := rc.images, rc.codec
	if i = rc.col(i); i < 0 || !im.Raw() || codec.kinds == nil {
		return 0, false, false
	}
	kind := codec.kinds[i]
	if kind != rawSigned && kind != rawUnsigned {
		return 0, false, false
	}
	off := im.offsets(k)[i]
	if off < 0 {
		return 0, false, false
	}
	n := codec.Shapes[i].fixed
	v = readUint(im.data[off:], n)
	if kind == rawSigned {
		shift := 64 - 8*n
		return uint64(int64(v<<shift) >> shift), true, true
	}
	return v, false, true
}

// HasBefore and HasAfter report which images the row change has: an
// INSERT only the after image, a DELETE only the before image, an UPDATE
// both.
func (rc *RowChange) HasBefore() bool { return rc.before >= 0 }

// HasAfter: see HasBefore.
func (rc *RowChange) HasAfter() bool { return rc.after >= 0 }

// PartialAfter reports whether the change's after image leaves columns
// out (the source's binlog_row_image is MINIMAL or NOBLOB): they read as
// NULL, not as the row holds them.
func (rc *RowChange) PartialAfter() bool { return rc.Partial(true) }

// Partial reports whether the change's after image (before image when
// after is false) leaves columns out: see Present.
func (rc *RowChange) Partial(after bool) bool {
	if after {
		return rc.after >= 0 && rc.images.presentAfter != nil
	}
	return rc.before >= 0 && rc.images.presentBefore != nil
}

// Present reports whether the after image (before image when after is
// false) holds column i. With binlog_row_image MINIMAL or NOBLOB an image
// leaves columns out: they read as NULL, but the row's value is not
// known, and a reader must not take them for SQL NULL. A column a view
// (WithView) has and the row's table lacks is present, as NULL.
func (rc *RowChange) Present(after bool, i int) bool {
	if i = rc.col(i); i < 0 {
		return true
	}
	bm := rc.images.presentBefore
	if after {
		bm = rc.images.presentAfter
	}
	return bm == nil || bm[i>>3]&(1<<(i&7)) != 0
}

// AppendText appends column i's value, from the after image when after is
// set and else from the before image, in canal's string form (see
// flat.Writer) as valid UTF-8, converting nothing it need not; isNull
// reports SQL NULL, for which nothing is appended. The image must exist.
func (rc *RowChange) AppendText(b []byte, after bool, i int) (out []byte, isNull bool) {
	return rc.appendText(b, after, i, false)
}

// AppendJSON is AppendText writing the value as a JSON string.
func (rc *RowChange) AppendJSON(b []byte, after bool, i int) (out []byte, isNull bool) {
	return rc.appendText(b, after, i, true)
}

// BinlogRow is a row change's images as its binlog wrote them: each the
// null bitmap of the columns its rows event holds, then their non-NULL
// values.
type BinlogRow struct {
	// Rows is what else of the rows event replaying it takes.
	Rows *RowsBinlog
	// Before and After are the images' bytes (nil where the change has
	// none); BeforePresent and AfterPresent the bitmaps of the columns
	// each holds.
	Before, After               []byte
	BeforePresent, AfterPresent []byte
}

// Binlog returns the change's images as the binlog wrote them, or false
// when the reader kept no such thing: the images are not raw (a snapshot
// row, a rows event go-mysql decoded), or the change is shown through a
// view (WithView), whose columns are not the binlog's.
func (rc *RowChange) Binlog() (BinlogRow, bool) {
	im := rc.images
	if rc.view != nil || im.binlog == nil {
		return BinlogRow{}, false
	}
	r := BinlogRow{Rows: im.binlog}
	if rc.before >= 0 {
		r.Before, r.BeforePresent = im.data[im.starts[rc.before]:im.starts[rc.before+1]], im.binlog.Present
	}
	if rc.after >= 0 {
		r.After, r.AfterPresent = im.data[im.starts[rc.after]:im.starts[rc.after+1]], im.binlog.Present
		if im.binlog.PresentAfter != nil {
			r.AfterPresent = im.binlog.PresentAfter
		}
	}
	return r, true
}

// Raw reports whether the change's images are raw (RawOffsets), not
// decoded by go-mysql.
func (rc *RowChange) Raw() bool { return rc.images.Raw() }

// RawOffsets are the offsets of the after image's values (the before
// image's when after is false) when the rows event is one braid reads raw:
// one per column, -1 for NULL, for AppendRawText. nil when go-mysql decoded
// the event (use AppendText). The image must exist.
func (rc *RowChange) RawOffsets(after bool) []int32 {
	if !rc.images.Raw() {
		return nil
	}
	k := rc.before
	if after {
		k = rc.after
	}
	offs := rc.images.offsets(k)
	if rc.view == nil {
		return offs
	}
	out := make([]int32, len(rc.view.from))
	for i, j := range rc.view.from {
		out[i] = -1
		if j >= 0 {
			out[i] = offs[j]
		}
	}
	return out
}

// RawChanges returns the offsets of an UPDATE's before and after images
// (RawOffsets(false), RawOffsets(true)) when its rows event is one braid
// reads raw and neither image leaves a column out (Partial): then
// RawChanged tells a changed column from both offsets, and AppendRawText
// writes its old value, with no per-column lookups. nil, nil otherwise
// (use Changed and AppendText).
func (rc *RowChange) RawChanges() (before, after []int32) {
	if rc.before < 0 || rc.after < 0 || !rc.images.Raw() || rc.Partial(false) || rc.Partial(true) {
		return nil, nil
	}
	return rc.RawOffsets(false), rc.RawOffsets(true)
}

// RawChanged is Changed(i) for offsets before and after of column i, from
// RawChanges.
func (rc *RowChange) RawChanged(i int, before, after int32) bool {
	if i = rc.col(i); i < 0 {
		return false
	}
	return !rc.codec.rawEqual(i, rc.images.data, before, after)
}

// AppendRawText appends column i's value at off, one of RawOffsets (not
// -1), as AppendText or, when quoted, as AppendJSON would.
func (rc *RowChange) AppendRawText(b []byte, i int, off int32, quoted bool) []byte {
	return rc.codec.appendRawText(b, rc.col(i), rc.images.data[off:], quoted)
}

// appendText is AppendText, writing a JSON string when quoted is set.
func (rc *RowChange) appendText(b []byte, after bool, i int, quoted bool) ([]byte, bool) {
	if i = rc.col(i); i < 0 {
		return b, true
	}
	k, im := rc.before, rc.images
	if after {
		k = rc.after
	}
	if im.Decoded != nil {
		v := im.Decoded[k][i]
		if v == nil {
			return b, true
		}
		return rc.codec.appendText(b, i, v, quoted), false
	}
	if im.ends != nil {
		x := im.text(k, i)
		if x == nil {
			return b, true
		}
		return rc.codec.appendTextValue(b, i, x, quoted), false
	}
	off := im.offsets(k)[i]
	if off < 0 {
		return b, true
	}
	return rc.codec.appendRawText(b, i, im.data[off:], quoted), false
}

// Changed reports whether an UPDATE changed column i: whether its before
// and after values differ (what canal marks "updated", and what the flat
// message's "old" lists). A column the after image leaves out did not
// change; one only the before image leaves out did, as canal takes it.
func (rc *RowChange) Changed(i int) bool {
	if rc.before < 0 || rc.after < 0 {
		return rc.after >= 0
	}
	if !rc.Present(true, i) {
		return false
	}
	if !rc.Present(false, i) {
		return true
	}
	if i = rc.col(i); i < 0 {
		return false
	}
	im := rc.images
	if im.Decoded != nil {
		return !rawEqual(im.Decoded[rc.before][i], im.Decoded[rc.after][i])
	}
	if im.ends != nil {
		return !bytes.Equal(im.text(rc.before, i), im.text(rc.after, i))
	}
	return !rc.codec.rawEqual(i, im.data, im.offsets(rc.before)[i], im.offsets(rc.after)[i])
}

func (rc *RowChange) image(k int32) []Value {
	if k < 0 {
		return nil
	}
	im := rc.images
	var vals []Value
	if im.Decoded != nil {
		vals = rc.codec.values(im.Decoded[k])
	} else if im.ends != nil {
		vals = make([]Value, im.cols)
		for i := range vals {
			if x := im.text(k, i); x != nil {
				vals[i] = textValue(&rc.codec.Columns[i], x)
			}
		}
	} else {
		vals = rc.codec.values(rc.codec.decodeRaw(im.data, im.offsets(k)))
	}
	if rc.view == nil {
		return vals
	}
	out := make([]Value, len(rc.view.from))
	for i, j := range rc.view.from {
		if j >= 0 {
			out[i] = vals[j]
		}
	}
	return out
}

// Value is one decoded column value. Its dynamic type is one of:
//
//	nil                          SQL NULL
//	int64                        signed integers, YEAR
//	uint64                       unsigned integers, BIT
//	float32, float64             FLOAT, DOUBLE
//	string                       DECIMAL (exact digits), DATE, TIME, DATETIME,
//	                             TIMESTAMP (in the source's time zone), ENUM and
//	                             SET (member names), JSON (text), character types
//	[]byte                       BINARY, VARBINARY, BLOB types, GEOMETRY
type Value = any

// DDL is a schema change statement.
type DDL struct {
	// Schema is the default database the statement ran in.
	Schema string
	// SQL is the statement text as logged.
	SQL string
	// SQLMode is the sql_mode of the session that ran it (the query
	// event's Q_SQL_MODE_CODE; bits as MySQL numbers them), under which
	// alone SQL means what it meant at the source: under
	// NO_BACKSLASH_ESCAPES a backslash in a string is a plain byte, under
	// ANSI_QUOTES "x" is a name. Whoever parses SQL parses it under this
	// mode (schema.SQLMode); 0 is the default mode.
	SQLMode uint64
	// Tables lists "schema.table" of the selected tables it changes.
	Tables []string
	// LogicalSchema and LogicalTable are Origin's logical names, stamped
	// by package group before the DDL leaves the merge; empty until then.
	LogicalSchema, LogicalTable string
	// LogicalTables are the logical names ("schema.table") of Tables, in
	// order, stamped with LogicalSchema and LogicalTable (nil until then):
	// a target maps each table a DDL names through them.
	LogicalTables []string
}

// Origin is the DDL's schema and table as the source names them: its
// first table's, or its default schema and no table.
func (d *DDL) Origin() (schema, table string) {
	if len(d.Tables) > 0 {
		schema, table, _ = strings.Cut(d.Tables[0], ".")
		return schema, table
	}
	return d.Schema, ""
}

// Logical is Origin's logical schema and table (Origin until stamped).
func (d *DDL) Logical() (schema, table string) {
	if d.LogicalSchema == "" && d.LogicalTable == "" {
		return d.Origin()
	}
	return d.LogicalSchema, d.LogicalTable
}

// Origin is the schema and table of a rows event's rows or of a DDL as the
// source names them; empty for other events.
func (e *Event) Origin() (schema, table string) {
	switch {
	case len(e.Rows) > 0:
		return e.Rows[0].Table.Schema, e.Rows[0].Table.Name
	case e.DDL != nil:
		return e.DDL.Origin()
	}
	return "", ""
}

// Logical is Origin's logical schema and table: the names consumers see
// (see Table.LogicalName, DDL.LogicalTable).
func (e *Event) Logical() (schema, table string) {
	switch {
	case len(e.Rows) > 0:
		return e.Rows[0].Table.Logical()
	case e.DDL != nil:
		return e.DDL.Logical()
	}
	return "", ""
}

// Size estimates the memory an event holds, for the store's bound: a fixed
// overhead; for row changes, the binlog event their images live in (raw
// images point into it, as do the strings go-mysql decodes), the raw
// images' offsets, each RowChange, and each decoded image's value
// headers, boxed numbers and own bytes (counted even when shared, erring
// on the safe side).
//
// The first call computes and remembers it: call it only once the event is
// complete (emitted), as the destination's queues and the store do.
func (e *Event) Size() int64 {
	if e.size > 0 {
		return e.size
	}
	n := int64(256) + e.BinlogBytes + e.OffsetBytes
	if e.DDL != nil {
		n += int64(len(e.DDL.SQL))
	}
	n += 64 * int64(len(e.Rows))
	if len(e.Rows) > 0 && e.Rows[0].images.Decoded != nil {
		for _, img := range e.Rows[0].images.Decoded {
			n += imageSize(img)
		}
	}
	e.size = n
	return n
}

// imageSize is a row image's slice, an interface header and a boxed value
// of 8 bytes per column, and the bytes of strings and byte slices.
func imageSize(img []any) int64 {
	if img == nil {
		return 0
	}
	n := int64(24 + 24*len(img))
	for _, v := range img {
		switch x := v.(type) {
		case string:
			n += int64(len(x))
		case []byte:
			n += int64(len(x))
		}
	}
	return n
}
