package flat

import (
	"strconv"
	"strings"
	"time"

	"github.com/braid-cdc/braid/engine/change"
)

// DefaultMaxRows is Writer.MaxRows's default, as canal's flat messages.
const DefaultMaxRows = 1000

// Writer renders a reader's events as canal flat messages (canal's
// FlatMessage, Flink's canal-json), one JSON object per line, with braid's
// fields added: seq, source, originDatabase, originTable, position, gtid.
//
// A message holds one run of row changes of one table and one kind inside one
// transaction; a run longer than MaxRows is split into several messages of
// the same seq. Each transaction with rows, and each DDL, takes the next seq.
//
// Column maps keep the table's column order, as canal's do. Values take
// canal's string form: numbers in decimal, DECIMAL with its exact digits,
// dates as MySQL prints them, ENUM and SET by name, and binary values as
// ISO-8859-1 text (each byte one character), as canal renders them.
//
// With Binary set it writes the same messages in braid's binary encoding
// (see BinaryMessage) instead of JSON.
//
// A Writer is not safe for concurrent use.
type Writer struct {
	// Seq is the seq of the last transaction written; the next takes Seq+1.
	Seq uint64
	// MaxRows caps the rows of one message. Default: DefaultMaxRows.
	MaxRows int
	// Now stamps ts. Default: time.Now.
	Now func() time.Time
	// Binary makes Write produce braid's binary encoding of each message
	// (see BinaryMessage) instead of a JSON line.
	Binary bool
	// SplitKeyChanges writes an UPDATE that changes its row's primary key
	// as the old key's DELETE and the new key's INSERT (RowChange.Split),
	// for a reader that keys each row by its primary key (a Kafka topic:
	// each key's changes stay on its partition, in order). Write only.
	SplitKeyChanges bool
	// EmptyTransactions writes a transaction that holds no row change (a
	// snapshot chunk that found no rows: its seq was taken) as one
	// message of type TypeEmpty, with no table, columns nor data, and the
	// transaction's seq, source, position and gtid, so that a reader is
	// handed every seq (the native stream). Without it such a
	// transaction writes nothing (a Kafka topic, a RabbitMQ exchange).
	EmptyTransactions bool
	// Markers writes the marker transaction of transactions lost in a
	// source failover (change.Event.Lost) as one message of type
	// TypeLost even without EmptyTransactions (which writes it so too):
	// its sql names the lost transactions, its source the source, its
	// seq the marker's. Without either, a marker writes nothing (a
	// Kafka topic, a RabbitMQ exchange: they have no table to put it
	// under).
	Markers bool

	tx     *change.Event // the open transaction's EventBegin
	txRows bool          // a row change of tx was written
	runEv  *change.Event // the EventRows the pending run starts in
	run    []*change.RowChange
	buf    []byte
	// planning is set while WriteEvents records its messages as jobs
	// instead of writing them; parts are its goroutines' buffers.
	planning bool
	jobs     []flatJob
	runs     []*change.RowChange // the jobs' rows, one after another
	parts    []*flatPart
	rowBytes int // what WriteEvents reserves for a row (0: maxRowBytes)
	// keys caches each table version's column keys (columnKeys); runKeys
	// are a WriteEvents job's, set on the writer that formats it.
	keys    map[*change.Table][][]byte
	runKeys [][]byte
}

// Write consumes one event and calls out for each finished line (without
// the newline). The line's bytes are only valid during the call.
func (w *Writer) Write(ev *change.Event, out func(line []byte) error) error {
	switch ev.Type {
	case change.EventBegin:
		w.nextSeq(ev)
		w.tx, w.txRows = ev, false
	case change.EventRows:
		w.txRows = w.txRows || len(ev.Rows) > 0
		for i := range ev.Rows {
			rc := &ev.Rows[i]
			if w.SplitKeyChanges && rc.KeyChanged() {
				del, ins := rc.Split()
				if err := w.add(ev, &del, out); err != nil {
					return err
				}
				rc = &ins
			}
			if err := w.add(ev, rc, out); err != nil {
				return err
			}
		}
	case change.EventCommit:
		err := w.flush(out)
		if err == nil && w.tx != nil && !w.txRows && (w.EmptyTransactions || w.Markers && w.tx.Lost != "") {
			err = w.empty(out)
		}
		w.tx = nil
		return err
	case change.EventDDL:
		w.nextSeq(ev)
		switch {
		case w.planning:
			w.jobs = append(w.jobs, flatJob{seq: w.Seq, ts: w.now(), ddl: ev})
			return nil
		case w.Binary:
			return out(w.ddlBinary(ev))
		}
		return out(w.ddlLine(ev))
	}
	return nil
}

// add adds rc, of ev, to the pending run, writing the run first when rc
// cannot join it.
func (w *Writer) add(ev *change.Event, rc *change.RowChange, out func(line []byte) error) error {
	if len(w.run) > 0 {
		last := w.run[len(w.run)-1]
		if last.Table != rc.Table || last.Kind != rc.Kind || len(w.run) >= w.maxRows() {
			if err := w.flush(out); err != nil {
				return err
			}
		}
	}
	if len(w.run) == 0 {
		w.runEv = ev
	}
	w.run = append(w.run, rc)
	return nil
}

// nextSeq sets Seq for a transaction: the merge's seq when it set one,
// else the next number.
func (w *Writer) nextSeq(ev *change.Event) {
	if ev.Seq != 0 {
		w.Seq = ev.Seq
		return
	}
	w.Seq++
}

func (w *Writer) maxRows() int {
	if w.MaxRows <= 0 {
		return DefaultMaxRows
	}
	return w.MaxRows
}

func (w *Writer) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

// flush writes the pending run as one message.
func (w *Writer) flush(out func([]byte) error) error {
	if len(w.run) == 0 {
		return nil
	}
	switch {
	case w.planning:
		w.plan()
		return nil
	case w.Binary:
		return w.flushBinary(out)
	}
	first := w.run[0]
	t := first.Table
	b := w.appendHead(w.buf[:0], t)
	b = append(b, `,"pkNames":`...)
	if keys := t.KeyNames(); len(keys) > 0 {
		b = append(b, '[')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = change.AppendJSONString(b, k)
		}
		b = append(b, ']')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"isDdl":false,"type":"`...)
	b = append(b, first.Kind.String()...)
	b = append(b, `","es":`...)
	b = strconv.AppendInt(b, w.commitMillis(), 10)
	b = append(b, `,"ts":`...)
	b = strconv.AppendInt(b, w.now().UnixMilli(), 10)
	b = append(b, `,"sql":"","sqlType":`...)
	b = appendColumnMap(b, t, func(b []byte, c *change.Column) []byte { return strconv.AppendInt(b, int64(SQLType(c)), 10) })
	b = append(b, `,"mysqlType":`...)
	b = appendColumnMap(b, t, func(b []byte, c *change.Column) []byte { return change.AppendJSONString(b, c.RawType) })
	b = append(b, `,"data":[`...)
	keys := w.columnKeys(t)
	for i, rc := range w.run {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendRow(b, rc, keys, rc.Kind != change.Delete, false)
	}
	b = append(b, ']', ',', '"', 'o', 'l', 'd', '"', ':')
	if first.Kind == change.Update {
		b = append(b, '[')
		for i, rc := range w.run {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendRow(b, rc, keys, false, true)
		}
		b = append(b, ']')
	} else {
		b = append(b, "null"...)
	}
	b = w.appendBraidFields(b, w.runEv, t.Schema, t.Name)
	w.buf = b
	err := out(b)
	w.endRun()
	return err
}

// Rows returns the row changes of the message out is called with: valid
// only during that call, and empty for a DDL's.
func (w *Writer) Rows() []*change.RowChange { return w.run }

// endRun empties the pending run once its message is written.
func (w *Writer) endRun() {
	clear(w.run)
	w.run = w.run[:0]
	w.runEv = nil
}

// appendHead opens a message: its id and the logical database and table
// of its rows' table.
func (w *Writer) appendHead(b []byte, t *change.Table) []byte {
	db, table := t.Logical()
	return w.appendNames(b, db, table)
}

// appendNames opens a message with its id and logical names.
func (w *Writer) appendNames(b []byte, db, ltable string) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendUint(b, w.Seq, 10)
	b = append(b, `,"database":`...)
	b = change.AppendJSONString(b, db)
	b = append(b, `,"table":`...)
	return change.AppendJSONString(b, ltable)
}

func (w *Writer) commitMillis() int64 {
	if w.tx == nil {
		return 0
	}
	return w.tx.CommitTime.UnixMilli()
}

func (w *Writer) appendBraidFields(b []byte, ev *change.Event, originDB, originTable string) []byte {
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, w.Seq, 10)
	b = append(b, `,"source":`...)
	b = change.AppendJSONString(b, ev.Source)
	b = append(b, `,"originDatabase":`...)
	b = change.AppendJSONString(b, originDB)
	b = append(b, `,"originTable":`...)
	b = change.AppendJSONString(b, originTable)
	b = append(b, `,"position":`...)
	b = change.AppendJSONString(b, ev.Pos.String())
	if ev.GTID != "" {
		b = append(b, `,"gtid":`...)
		b = change.AppendJSONString(b, ev.GTID)
	}
	if ev.Snapshot {
		b = append(b, `,"snapshot":true`...)
	}
	return append(b, '}')
}

// appendRow writes one of rc's images, the after image when after is set
// and else the before image, as a JSON object in column order. With
// onlyChanged set, only the columns the update changed are written
// (canal's "old": the previous values of the changed columns). A column
// the image leaves out (binlog_row_image MINIMAL or NOBLOB) is not
// written, as canal writes only the columns present: null is SQL NULL.
func appendRow(b []byte, rc *change.RowChange, keys [][]byte, after, onlyChanged bool) []byte {
	if offs := rc.RawOffsets(after); offs != nil && !onlyChanged && !rc.Partial(after) {
		// The common case in a loop of its own: every column of a raw image.
		b = append(b, '{')
		for i, off := range offs {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, keys[i]...)
			if off < 0 {
				b = append(b, "null"...)
			} else {
				b = rc.AppendRawText(b, i, off, true)
			}
		}
		return append(b, '}')
	}
	if onlyChanged {
		if before, after := rc.RawChanges(); before != nil {
			// An UPDATE's "old" from the raw images: each column compared
			// and written straight from the offsets (4.5% of capture's CPU
			// on an UPDATE-heavy stream went to looking them up per column).
			b = append(b, '{')
			n := 0
			for i, off := range before {
				if !rc.RawChanged(i, off, after[i]) {
					continue
				}
				if n > 0 {
					b = append(b, ',')
				}
				n++
				b = append(b, keys[i]...)
				if off < 0 {
					b = append(b, "null"...)
				} else {
					b = rc.AppendRawText(b, i, off, true)
				}
			}
			return append(b, '}')
		}
	}
	b = append(b, '{')
	n := 0
	for i := range rc.Table.Columns {
		if onlyChanged && !rc.Changed(i) || !rc.Present(after, i) {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(b, keys[i]...)
		var null bool
		if b, null = rc.AppendJSON(b, after, i); null {
			b = append(b, "null"...)
		}
	}
	return append(b, '}')
}

// maxKeyTables bounds the writer's cache of column keys: it is emptied
// when it holds that many table versions (a stream of many DDLs).
const maxKeyTables = 4096

// columnKeys returns t's column names as JSON object keys (`"name":`),
// escaped once per table version for all the rows the writer writes. A
// job's writer (WriteEvents) has its run's keys set already.
func (w *Writer) columnKeys(t *change.Table) [][]byte {
	if w.runKeys != nil {
		return w.runKeys
	}
	if keys, ok := w.keys[t]; ok {
		return keys
	}
	if w.keys == nil || len(w.keys) >= maxKeyTables {
		w.keys = map[*change.Table][][]byte{}
	}
	keys := make([][]byte, len(t.Columns))
	for i := range t.Columns {
		keys[i] = append(change.AppendJSONString(nil, t.Columns[i].Name), ':')
	}
	w.keys[t] = keys
	return keys
}

// ddlLine renders a DDL as a flat message.
func (w *Writer) ddlLine(ev *change.Event) []byte {
	schema, table := ev.DDL.Origin()
	db, ltable := ev.DDL.Logical()
	b := w.appendNames(w.buf[:0], db, ltable)
	b = append(b, `,"pkNames":null,"isDdl":true,"type":`...)
	b = change.AppendJSONString(b, DDLKind(ev.DDL.SQL))
	b = append(b, `,"es":`...)
	b = strconv.AppendInt(b, ev.CommitTime.UnixMilli(), 10)
	b = append(b, `,"ts":`...)
	b = strconv.AppendInt(b, w.now().UnixMilli(), 10)
	b = append(b, `,"sql":`...)
	b = change.AppendJSONString(b, ev.DDL.SQL)
	b = append(b, `,"sqlType":null,"mysqlType":null,"data":null,"old":null`...)
	b = w.appendBraidFields(b, ev, schema, table)
	w.buf = b
	return b
}

// TypeEmpty is the type of the message of a transaction that holds no
// row change (Writer.EmptyTransactions).
const TypeEmpty = "EMPTY"

// TypeLost is the type of the message of the marker of transactions
// lost in a source failover (Writer.Markers): its sql names them.
const TypeLost = "LOST"

// emptyType and emptySQL are the type and sql of the message of the
// open transaction, which holds no row change: a marker's (TypeLost,
// the lost transactions) or TypeEmpty's.
func (w *Writer) emptyType() (typ, sql string) {
	if w.tx != nil && w.tx.Lost != "" {
		return TypeLost, w.tx.Lost
	}
	return TypeEmpty, ""
}

// empty writes the open transaction, which holds no row change, as one
// message of type TypeEmpty, or TypeLost for a marker.
func (w *Writer) empty(out func([]byte) error) error {
	switch {
	case w.planning:
		w.jobs = append(w.jobs, flatJob{seq: w.Seq, ts: w.now(), tx: w.tx, empty: true})
		return nil
	case w.Binary:
		return out(w.emptyBinary())
	}
	return out(w.emptyLine())
}

// emptyLine renders the open transaction, which holds no row change, as
// a flat message of type TypeEmpty: its names, columns and data empty or
// null, its braid fields the transaction's (its EventBegin's).
func (w *Writer) emptyLine() []byte {
	typ, sql := w.emptyType()
	b := w.appendNames(w.buf[:0], "", "")
	b = append(b, `,"pkNames":null,"isDdl":false,"type":"`+typ+`","es":`...)
	b = strconv.AppendInt(b, w.commitMillis(), 10)
	b = append(b, `,"ts":`...)
	b = strconv.AppendInt(b, w.now().UnixMilli(), 10)
	b = append(b, `,"sql":`...)
	b = change.AppendJSONString(b, sql)
	b = append(b, `,"sqlType":null,"mysqlType":null,"data":null,"old":null`...)
	b = w.appendBraidFields(b, w.tx, "", "")
	w.buf = b
	return b
}

// DDLKind is canal's event type name for a DDL statement: CREATE, ALTER,
// ERASE (drop), RENAME, TRUNCATE, CINDEX, DINDEX or QUERY.
func DDLKind(sql string) string {
	f := strings.Fields(strings.ToUpper(sql))
	if len(f) == 0 {
		return "QUERY"
	}
	has := func(w string) bool {
		for _, x := range f[1:min(len(f), 4)] {
			if x == w {
				return true
			}
		}
		return false
	}
	switch f[0] {
	case "CREATE":
		if has("INDEX") {
			return "CINDEX"
		}
		return "CREATE"
	case "ALTER":
		return "ALTER"
	case "DROP":
		if has("INDEX") {
			return "DINDEX"
		}
		return "ERASE"
	case "RENAME":
		return "RENAME"
	case "TRUNCATE":
		return "TRUNCATE"
	}
	return "QUERY"
}

// SQLType is the java.sql.Types code canal reports for a column.
func SQLType(c *change.Column) int {
	switch c.Type {
	case "bit":
		return -7 // BIT
	case "tinyint":
		return -6 // TINYINT
	case "smallint":
		return 5 // SMALLINT
	case "mediumint", "int", "integer":
		return 4 // INTEGER
	case "bigint":
		return -5 // BIGINT
	case "decimal", "numeric":
		return 3 // DECIMAL
	case "float":
		return 7 // REAL
	case "double", "real":
		return 8 // DOUBLE
	case "date", "year":
		return 91 // DATE
	case "time":
		return 92 // TIME
	case "datetime", "timestamp":
		return 93 // TIMESTAMP
	case "char", "enum", "set":
		return 1 // CHAR
	case "tinytext", "text", "mediumtext", "longtext":
		return 2005 // CLOB
	case "tinyblob", "blob", "mediumblob", "longblob":
		return 2004 // BLOB
	case "binary", "geometry":
		return -2 // BINARY
	case "varbinary":
		return -3 // VARBINARY
	}
	return 12 // VARCHAR: varchar, json and anything else
}

// appendColumnMap writes a JSON object of one value per column, in column
// order.
func appendColumnMap(b []byte, t *change.Table, value func([]byte, *change.Column) []byte) []byte {
	b = append(b, '{')
	for i := range t.Columns {
		if i > 0 {
			b = append(b, ',')
		}
		b = change.AppendJSONString(b, t.Columns[i].Name)
		b = append(b, ':')
		b = value(b, &t.Columns[i])
	}
	return append(b, '}')
}
