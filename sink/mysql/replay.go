package mysql

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	driver "github.com/go-sql-driver/mysql"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/sink"
)

// Replaying. A MariaDB target spends about twice the CPU on a row change
// of SQL statements as on the same row as a binlog row event
// (bench/sink_test.go, 1 to 4 workers: 10-14 µs a row change against
// 5-8; MariaDB's replica 6), so where it can, the
// sink hands the target the rows as the binlog events they were read
// from, in BINLOG statements, as mariadb-binlog's output does: the
// worker's transaction claims its checkpoint with SQL, then replays its
// changes in stream order as table map and rows events (built anew from
// each change's images, so the changes of a worker can be any of the
// stream's), then commits, all in one transaction.
//
// A rows event finds its rows as a replica does: an INSERT of a key that
// is there fails (1062), as does an UPDATE or DELETE of a row that is not
// (1032). Then, and on any other error, the transaction is rolled back
// and applied again as SQL statements, which count the upsert or the
// missing row, or name a collision: replaying is only ever a faster way
// to the same result.
//
// A change is replayed only when its images are the binlog's (a
// snapshot's rows are text, and a shard table's rows shown with the
// logical table's columns are not the binlog's), the source and the
// target are MariaDB, and the target table's columns are the source
// table's, by position, name, type and character set (then the origin
// column, if the sink has one, which the events are given), and it has no
// trigger (a replayed row fires none). A target that refuses BINLOG (it
// takes the BINLOG REPLAY privilege, or SUPER) gets SQL statements.

// replayState is what the target knows about replaying.
type replayState struct {
	// off: the target is not MariaDB, or refused a BINLOG statement.
	off atomic.Bool
	// serverID is the target's server_id, which its binlog logs the
	// replayed rows under, as it would a client's.
	serverID uint32
	// fits holds, per fitKey, whether a table version's rows replay into
	// a target table (a fit); targets, per target table ("db.table"),
	// its columns and triggers as the target says (a *targetTable), read
	// once for every shard table and table version that goes to it.
	fits, targets sync.Map
	// looking is held while a fit is worked out: the workers that all
	// meet a table at once wait for one to read it, rather than each
	// asking information_schema (whose reads MariaDB materialises in an
	// on-disk temporary table: with 16 workers, 60-90 of them held the
	// benchmark's first rows back by half a second).
	looking sync.Mutex
	// replayed counts the changes applied by replaying.
	replayed atomic.Uint64
	// builders holds *binlogStatements for the workers to reuse, with
	// their buffers.
	builders sync.Pool
}

type fitKey struct {
	tv      *change.Table
	logical string
}

// fit is whether a table version's rows replay into a target table, and
// how the target's origin column is: how many bytes it holds (0: there is
// none), and whether it comes first (else last).
type fit struct {
	ok bool
	origin
}

type origin struct {
	bytes int
	first bool
}

// errNotReplayed: apply the transaction as SQL statements.
var errNotReplayed = errors.New("apply as SQL statements")

// initReplay finds out whether the target can replay at all.
func (t *Target) initReplay(ctx context.Context) error {
	var version string
	var id uint32
	if err := t.db.QueryRowContext(ctx, "SELECT VERSION(), @@server_id").Scan(&version, &id); err != nil {
		return err
	}
	t.replay.serverID = id
	if !strings.Contains(version, "MariaDB") {
		t.replay.off.Store(true)
	}
	return nil
}

// replayable reports whether every one of changes can be replayed.
func (t *Target) replayable(ctx context.Context, changes []sink.Change) bool {
	if t.replay.off.Load() {
		return false
	}
	var keys []fitKey // the table versions and tables of changes, once each
	for _, c := range changes {
		r, ok := c.Row.Binlog()
		if !ok || r.Rows.Format == nil {
			return false
		}
		k := fitKey{c.Row.Table, c.Logical}
		if n := len(keys); (n == 0 || keys[n-1] != k) && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	t.readTargets(ctx, keys)
	for _, k := range keys {
		if !t.fits(ctx, k.tv, k.logical).ok {
			return false
		}
	}
	return true
}

// readTargets reads the target tables of keys not yet worked out, all
// at once (targetTables), so that the first transactions of a sink over
// many tables wait for two queries, not two a table; fits works out
// each key from what it read. An error is left for fits to meet again.
func (t *Target) readTargets(ctx context.Context, keys []fitKey) {
	var targets []string
	for _, k := range keys {
		if _, ok := t.replay.fits.Load(k); ok {
			continue
		}
		if target := t.spec.Target(k.logical); !slices.Contains(targets, target) {
			targets = append(targets, target)
		}
	}
	if len(targets) < 2 {
		return // fits reads a lone table itself
	}
	t.replay.looking.Lock()
	defer t.replay.looking.Unlock()
	targets = slices.DeleteFunc(targets, func(target string) bool {
		_, ok := t.replay.targets.Load(target)
		return ok // another worker read it meanwhile
	})
	_, _ = t.targetTables(ctx, targets) // an error: fits meets it again
}

// fits says whether rows of table version tv replay into the target
// table of logical: the same columns in the same order, of the same type
// and character set (then the origin column), and no trigger.
func (t *Target) fits(ctx context.Context, tv *change.Table, logical string) fit {
	k := fitKey{tv, logical}
	if v, ok := t.replay.fits.Load(k); ok {
		return v.(fit)
	}
	t.replay.looking.Lock()
	defer t.replay.looking.Unlock()
	if v, ok := t.replay.fits.Load(k); ok {
		return v.(fit) // another worker worked it out meanwhile
	}
	why, o, err := t.misfit(ctx, tv, logical)
	if err != nil {
		return fit{} // asked again next time; the SQL path reports it
	}
	f := fit{ok: why == "", origin: o}
	if _, loaded := t.replay.fits.LoadOrStore(k, f); !loaded && why != "" {
		t.log.Info("sink applies a table as SQL statements, not its binlog row events", "dest", t.dest, "sink", t.spec.Name, "table", t.spec.Target(logical), "from", tv.FullName(), "because", why)
	}
	return f
}

// targetTable is a target table as information_schema shows it.
type targetTable struct {
	triggers bool
	cols     []targetColumn
}

type targetColumn struct {
	name, typ, charset string
	octets             int
}

// targetTable reads target ("db.table") from information_schema, or
// returns what it read before (until a DDL naming it forgets it).
func (t *Target) targetTable(ctx context.Context, target string) (*targetTable, error) {
	if v, ok := t.replay.targets.Load(target); ok {
		return v.(*targetTable), nil
	}
	read, err := t.targetTables(ctx, []string{target})
	if err != nil {
		return nil, err
	}
	return read[target], nil
}

// targetTables reads targets ("db.table") from information_schema, in
// one query for their triggers and one for their columns (MariaDB
// opens only the tables a (schema, name) list names), keeps them and
// returns them.
func (t *Target) targetTables(ctx context.Context, targets []string) (map[string]*targetTable, error) {
	if len(targets) == 0 {
		return nil, nil
	}
	pairs := strings.TrimSuffix(strings.Repeat("(?, ?), ", len(targets)), ", ")
	args := make([]any, 0, 2*len(targets))
	read := make(map[string]*targetTable, len(targets))
	for _, target := range targets {
		db, table, _ := strings.Cut(target, ".")
		args = append(args, db, table)
		read[target] = &targetTable{}
	}
	// Names as information_schema spells them (lower case under
	// lower_case_table_names) find what was asked for by folding case.
	of := func(db, table string) *targetTable {
		if tt, ok := read[db+"."+table]; ok {
			return tt
		}
		for target, tt := range read {
			if strings.EqualFold(target, db+"."+table) {
				return tt
			}
		}
		return nil
	}
	rows, err := t.db.QueryContext(ctx, "SELECT DISTINCT EVENT_OBJECT_SCHEMA, EVENT_OBJECT_TABLE FROM information_schema.TRIGGERS WHERE (EVENT_OBJECT_SCHEMA, EVENT_OBJECT_TABLE) IN ("+pairs+")", args...)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var db, table string
		if err := rows.Scan(&db, &table); err != nil {
			rows.Close()
			return nil, err
		}
		if tt := of(db, table); tt != nil {
			tt.triggers = true
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = t.db.QueryContext(ctx, "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, LOWER(COLUMN_TYPE), COALESCE(CHARACTER_SET_NAME, ''), COALESCE(CHARACTER_OCTET_LENGTH, 0) FROM information_schema.COLUMNS WHERE (TABLE_SCHEMA, TABLE_NAME) IN ("+pairs+") ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION", args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var db, table string
		var c targetColumn
		if err := rows.Scan(&db, &table, &c.name, &c.typ, &c.charset, &c.octets); err != nil {
			return nil, err
		}
		if tt := of(db, table); tt != nil {
			tt.cols = append(tt.cols, c)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for target, tt := range read {
		t.replay.targets.Store(target, tt)
	}
	return read, nil
}

// misfit says why rows of tv do not replay into logical's target table
// ("" when they do), and how its origin column is.
func (t *Target) misfit(ctx context.Context, tv *change.Table, logical string) (why string, o origin, err error) {
	tt, err := t.targetTable(ctx, t.spec.Target(logical))
	if err != nil {
		return "", o, err
	}
	if tt.triggers {
		return "the target table has triggers, which replayed rows do not fire", o, nil
	}
	cols := tt.cols
	if oc := t.spec.OriginColumn; oc != "" {
		isOrigin := func(c targetColumn) bool {
			return strings.EqualFold(c.name, oc) && strings.HasPrefix(c.typ, "varchar(")
		}
		switch {
		case len(cols) > 0 && isOrigin(cols[0]):
			o = origin{bytes: cols[0].octets, first: true}
			cols = cols[1:]
		case len(cols) > 0 && isOrigin(cols[len(cols)-1]):
			o = origin{bytes: cols[len(cols)-1].octets}
			cols = cols[:len(cols)-1]
		default:
			return "its origin column " + oc + " is neither first nor last, or not a VARCHAR", o, nil
		}
	}
	if len(cols) != len(tv.Columns) {
		return fmt.Sprintf("the target table has %d columns, the source %d", len(cols), len(tv.Columns)), o, nil
	}
	for i, c := range tv.Columns {
		tc := cols[i]
		switch {
		case !strings.EqualFold(tc.name, c.Name):
			return fmt.Sprintf("column %d is %s in the target, %s at the source", i+1, tc.name, c.Name), o, nil
		case !sameType(tc.typ, strings.ToLower(c.RawType)):
			return fmt.Sprintf("column %s is %s in the target, %s at the source", tc.name, tc.typ, c.RawType), o, nil
		case tc.charset != "" && !c.Binary && !sameCharset(c.Charset, tc.charset):
			return fmt.Sprintf("column %s's character set is %s in the target, %s at the source", tc.name, tc.charset, c.Charset), o, nil
		}
	}
	return "", o, nil
}

// sameType reports whether a target column's type (information_schema's
// COLUMN_TYPE) is a source column's (SHOW CREATE TABLE's), both in lower
// case: MariaDB's JSON is a LONGTEXT.
func sameType(target, source string) bool {
	return target == source || source == "json" && target == "longtext"
}

// sameCharset reports whether a target column of charset holds the bytes
// of a source column braid reads as source (change.Column.Charset: empty
// for UTF-8 and ASCII).
func sameCharset(source, target string) bool {
	if source == "" {
		return target == "utf8mb4" || target == "utf8mb3" || target == "utf8"
	}
	return strings.EqualFold(source, target)
}

// replayStatements builds the payloads of the BINLOG statements that
// replay changes (their events in base64), or returns errNotReplayed. The
// payloads are good until done is called.
func (t *Target) replayStatements(ctx context.Context, changes []sink.Change) (payloads []string, done func(), err error) {
	b, _ := t.replay.builders.Get().(*binlogStatements)
	if b == nil {
		b = new(binlogStatements)
	}
	done = func() { t.replay.builders.Put(b) }
	b.reset(t.replay.serverID, uint32(time.Now().Unix()))
	var source, origin, value string // the last origin value made
	for _, c := range changes {
		f := t.fits(ctx, c.Row.Table, c.Logical)
		v := ""
		if f.bytes > 0 {
			if c.Source != source || c.Origin != origin {
				source, origin, value = c.Source, c.Origin, c.Source+"/"+c.Origin
			}
			v = value
		}
		if err := b.add(t.spec.Target(c.Logical), c.Row, v, f.origin); err != nil {
			done()
			return nil, nil, fmt.Errorf("%w: %v", errNotReplayed, err)
		}
	}
	return b.finish(), done, nil
}

// runReplay runs the BINLOG statements of payloads (replayStatements')
// in tx: errNotReplayed when the target refused one (tx is then to be
// rolled back and applied as SQL), a lock conflict as it is.
//
// Each payload reaches the server as the parameter of a prepared SET of a
// user variable, in the binary protocol, and the statement is BINLOG
// @var, @empty (MariaDB's form for events split over variables, which
// mariadb-binlog writes for big events): a BINLOG '<base64>' literal is
// lexed a byte at a time (parse_sql took 11-13% of the target's CPU in
// perf profiles of BenchmarkSinkApply, with or without a multi-byte check
// a byte); a parameter is copied, and scanned once for its character
// length, which is quick in the replay pool's binary sessions (replayPool;
// 2.7-3% of the target's CPU against 7-9% under utf8mb4). The server
// empties both variables as the BINLOG statement reads them.
func (t *Target) runReplay(ctx context.Context, tx *sql.Tx, payloads []string) error {
	if len(payloads) == 0 {
		return nil
	}
	set, err := tx.PrepareContext(ctx, "SET @braid_binlog_0 = ?, @braid_binlog_1 = ''")
	if err != nil {
		return t.replayFailed(err)
	}
	defer set.Close()
	for _, p := range payloads {
		if _, err := set.ExecContext(ctx, p); err != nil {
			return t.replayFailed(err)
		}
		if _, err := tx.ExecContext(ctx, "BINLOG @braid_binlog_0, @braid_binlog_1"); err != nil {
			return t.replayFailed(err)
		}
	}
	return nil
}

// replayFailed sorts out an error of a BINLOG statement.
func (t *Target) replayFailed(err error) error {
	var me *driver.MySQLError
	if lockConflict(err) || !errors.As(err, &me) {
		return err
	}
	switch me.Number {
	case 1062, 1032: // a key there, a row missing: the SQL path counts it
	case 1227, 1044, 1045, 1142, 1143: // no BINLOG REPLAY privilege (or SUPER)
		if !t.replay.off.Swap(true) {
			t.log.Warn("sink applies SQL statements: the target refuses BINLOG statements; grant the sink's user BINLOG REPLAY to have it apply the binlog's row events, which is faster",
				"dest", t.dest, "sink", t.spec.Name, "err", err)
		}
	default:
		if !t.replay.off.Swap(true) {
			t.log.Warn("sink applies SQL statements: the target failed a BINLOG statement", "dest", t.dest, "sink", t.spec.Name, "err", err)
		}
	}
	return fmt.Errorf("%w: %v", errNotReplayed, err)
}

// Binlog event layout (MariaDB's, binlog version 4): a 19-byte header,
// then the event's post-header and body; the events built here carry no
// checksum (their format description says so).
const (
	headerLen       = 19
	formatEvent     = 15
	tableMapEvent   = 19
	writeRowsEvent  = 23 // the v1 rows events MariaDB writes
	updateRowsEvent = 24
	deleteRowsEvent = 25
	stmtEndFlag     = 1
	varcharType     = 15 // MYSQL_TYPE_VARCHAR
	// statementBytes is about how much of the binlog one BINLOG statement
	// carries: a third more once in base64, which is under the 256 KiB
	// the driver keeps a buffer for (statements of 1 MiB each took two
	// fresh allocations, whose page faults cost more than building them),
	// and far below max_allowed_packet (16 MiB by default).
	statementBytes = 160 << 10
)

// binlogStatements builds BINLOG statements of row changes. A statement
// is a format description, then groups: each the table maps of its
// tables, then its rows events, the last one ending the group (as a
// binlog's statement ends). The server opens and locks a group's tables
// at its first rows event; a table map after that is not opened, and
// the rows of its table are skipped without an error (the replica's way
// of skipping a filtered table), so every table map of a group comes
// before its rows, and a table mapped anew (its columns changed) starts
// a group.
type binlogStatements struct {
	serverID, when uint32
	// text holds the statements' payloads (base64), one after the
	// other, each ending at its ends.
	text []byte
	ends []int
	// buf is the statement: its format description (whose body was
	// format) and its closed groups.
	buf    []byte
	format []byte
	// The open group: its table maps, their events, its rows events.
	maps     []replayMap
	mapBytes []byte
	rows     []byte
	// The open rows event: where it starts in rows (-1: none), and what
	// the next change must share to join it.
	rowsAt               int
	rowsType             byte
	rowsMap              uint64
	present, presentNext []byte
	// How many columns each of its images holds (without the origin).
	held, heldNext int
}

// replayMap is a table map of the group being built.
type replayMap struct {
	target string // "db.table"
	rest   []byte // the source's table map body after the names
	id     uint64
	// columns is the source table's column count; origin the target's
	// origin column, besides them.
	columns int
	origin  origin
}

// reset makes b ready to build statements anew, its events logged under
// serverID at time when.
func (b *binlogStatements) reset(serverID, when uint32) {
	b.serverID, b.when, b.text, b.ends, b.format = serverID, when, b.text[:0], b.ends[:0], nil
	b.buf, b.maps, b.mapBytes, b.rows, b.rowsAt = b.buf[:0], b.maps[:0], b.mapBytes[:0], b.rows[:0], -1
}

// add appends rc's row event, to target ("db.table"), with value in the
// target's origin column o (if o.bytes > 0).
func (b *binlogStatements) add(target string, rc *change.RowChange, value string, o origin) error {
	r, ok := rc.Binlog()
	if !ok {
		return errors.New("not a binlog row")
	}
	if len(value) > o.bytes {
		return fmt.Errorf("origin %q longer than the origin column", value)
	}
	if len(b.buf) > 0 && !sameBytes(b.format, r.Rows.Format) {
		b.end() // another source's format: a statement of its own
	}
	if len(b.buf) == 0 {
		b.formatEvent(r.Rows.Format)
	}
	m, err := b.tableMap(target, r.Rows.TableMap, o)
	if err != nil {
		return err
	}
	typ, present, presentNext := byte(writeRowsEvent), r.AfterPresent, []byte(nil)
	switch rc.Kind {
	case change.Update:
		typ, present, presentNext = updateRowsEvent, r.BeforePresent, r.AfterPresent
	case change.Delete:
		typ, present = deleteRowsEvent, r.BeforePresent
	}
	if b.rowsAt < 0 || b.rowsType != typ || b.rowsMap != m.id || string(b.present) != string(present) || string(b.presentNext) != string(presentNext) {
		b.closeRows(false)
		b.rowsAt, b.rowsType, b.rowsMap, b.present, b.presentNext = len(b.rows), typ, m.id, present, presentNext
		b.rows = b.header(b.rows, typ)
		b.rows = appendTableID(b.rows, m.id)
		b.rows = append(b.rows, 0, 0) // flags, set on the group's last
		if m.origin.bytes == 0 {
			b.rows = appendPacked(b.rows, uint64(m.columns))
			b.rows = append(b.rows, present...)
			if typ == updateRowsEvent {
				b.rows = append(b.rows, presentNext...)
			}
		} else {
			b.held = held(present, m.columns)
			b.rows = appendPacked(b.rows, uint64(m.columns+1))
			b.rows = appendBits(b.rows, present, m.columns, m.origin.first, true)
			if typ == updateRowsEvent {
				b.heldNext = held(presentNext, m.columns)
				b.rows = appendBits(b.rows, presentNext, m.columns, m.origin.first, true)
			}
		}
	}
	switch rc.Kind {
	case change.Insert:
		b.image(r.After, b.held, value, m)
	case change.Update:
		b.image(r.Before, b.held, value, m)
		b.image(r.After, b.heldNext, value, m)
	case change.Delete:
		b.image(r.Before, b.held, value, m)
	}
	if len(b.buf)+len(b.mapBytes)+len(b.rows) >= statementBytes {
		b.end()
	}
	return nil
}

// sameBytes reports whether a and b hold the same bytes, at once when
// they are the same slice (a source's format description always is).
func sameBytes(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	return len(a) == 0 || &a[0] == &b[0] || string(a) == string(b)
}

// held counts the columns of the first n a present bitmap marks.
func held(present []byte, n int) int {
	k := 0
	for i := range n {
		if present[i>>3]&(1<<(i&7)) != 0 {
			k++
		}
	}
	return k
}

// appendBits appends bitmap bits of n bits with one more, set to v: the
// origin column's, first or last.
func appendBits(b, bits []byte, n int, first, v bool) []byte {
	at := len(b)
	b = append(b, make([]byte, (n+1+7)/8)...)
	out := b[at:]
	shift, extra := 0, n
	if first {
		shift, extra = 1, 0
	}
	for i := range n {
		if bits[i>>3]&(1<<(i&7)) != 0 {
			j := i + shift
			out[j>>3] |= 1 << (j & 7)
		}
	}
	if v {
		out[extra>>3] |= 1 << (extra & 7)
	}
	return b
}

// image appends a row image of held columns, with value as that of m's
// origin column when it has one: the null bitmap one bit longer, the
// value first or last.
func (b *binlogStatements) image(img []byte, held int, value string, m *replayMap) {
	if m.origin.bytes == 0 {
		b.rows = append(b.rows, img...)
		return
	}
	nulls := (held + 7) / 8
	b.rows = appendBits(b.rows, img[:nulls], held, m.origin.first, false)
	if !m.origin.first {
		b.rows = append(b.rows, img[nulls:]...)
	}
	if m.origin.bytes > 255 {
		b.rows = binary.LittleEndian.AppendUint16(b.rows, uint16(len(value)))
	} else {
		b.rows = append(b.rows, byte(len(value)))
	}
	b.rows = append(b.rows, value...)
	if m.origin.first {
		b.rows = append(b.rows, img[nulls:]...)
	}
}

// finish returns the statements' payloads (their events in base64):
// strings that share b.text's bytes
// rather than copies (a 128 KiB copy a statement, and its allocation,
// cost more than building it), good until b is reset.
func (b *binlogStatements) finish() []string {
	b.end()
	out := make([]string, len(b.ends))
	at := 0
	for i, end := range b.ends {
		out[i] = unsafe.String(&b.text[at], end-at)
		at = end
	}
	return out
}

// end ends the statement being built, if it has rows.
func (b *binlogStatements) end() {
	b.closeGroup()
	if len(b.buf) > 0 && len(b.buf) > b.formatLen() {
		b.text = base64.StdEncoding.AppendEncode(b.text, b.buf)
		b.ends = append(b.ends, len(b.text))
	}
	b.buf, b.format = b.buf[:0], nil
}

// formatLen is the length of the statement's format description event.
func (b *binlogStatements) formatLen() int {
	return int(binary.LittleEndian.Uint32(b.buf[9:]))
}

// closeGroup appends the open group, if it has rows, to the statement:
// its table maps, then its rows events, the last one ending it.
func (b *binlogStatements) closeGroup() {
	if b.rowsAt >= 0 {
		b.closeRows(true)
		b.buf = append(append(b.buf, b.mapBytes...), b.rows...)
	}
	b.maps, b.mapBytes, b.rows, b.rowsAt = b.maps[:0], b.mapBytes[:0], b.rows[:0], -1
}

// closeRows sets the open rows event's size, and its end-of-statement
// flag when last.
func (b *binlogStatements) closeRows(last bool) {
	if b.rowsAt < 0 {
		return
	}
	binary.LittleEndian.PutUint32(b.rows[b.rowsAt+9:], uint32(len(b.rows)-b.rowsAt))
	if last {
		b.rows[b.rowsAt+headerLen+6] |= stmtEndFlag
	}
}

// header appends to dst an event header of type typ, its size to be set.
func (b *binlogStatements) header(dst []byte, typ byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, b.when)
	dst = append(dst, typ)
	dst = binary.LittleEndian.AppendUint32(dst, b.serverID)
	return append(dst, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0) // size, log position, flags
}

// appendTableID appends a 6-byte table id.
func appendTableID(dst []byte, id uint64) []byte {
	return append(dst, byte(id), byte(id>>8), byte(id>>16), byte(id>>24), byte(id>>32), byte(id>>40))
}

// formatEvent starts the statement with a format description event: the
// source's (body), made one of no checksum that created no binlog (a
// "created" one would roll the open transaction back, as a replica does
// when its master restarted).
func (b *binlogStatements) formatEvent(body []byte) {
	b.format = body
	b.buf = b.header(b.buf[:0], formatEvent)
	b.buf = append(b.buf, body...)
	fd := b.buf[headerLen:]
	binary.LittleEndian.PutUint32(fd[2+50:], 0) // create timestamp
	fd[len(fd)-1] = 0                           // checksum algorithm: off
	b.buf = append(b.buf, 0, 0, 0, 0)           // where its checksum would be, there even when off
	binary.LittleEndian.PutUint32(b.buf[9:], uint32(len(b.buf)))
}

// tableMap returns the group's map of target with the source's table map
// body, adding it if new (to a new group, if the group maps target
// otherwise).
func (b *binlogStatements) tableMap(target string, body []byte, o origin) (*replayMap, error) {
	rest, err := afterNames(body)
	if err != nil {
		return nil, err
	}
	for i := range b.maps {
		if m := &b.maps[i]; m.target == target {
			if string(m.rest) == string(rest) && m.origin == o {
				return m, nil
			}
			b.closeGroup()
			break
		}
	}
	db, table, _ := strings.Cut(target, ".")
	if len(db) > 255 || len(table) > 255 {
		return nil, fmt.Errorf("table name %s too long for a table map", target)
	}
	n, k := readPacked(rest)
	if k == 0 {
		return nil, errors.New("truncated table map")
	}
	m := replayMap{target: target, rest: rest, id: uint64(len(b.maps) + 1), columns: int(n), origin: o}
	at := len(b.mapBytes)
	b.mapBytes = b.header(b.mapBytes, tableMapEvent)
	b.mapBytes = appendTableID(b.mapBytes, m.id)
	b.mapBytes = append(b.mapBytes, body[6:8]...) // flags
	b.mapBytes = append(append(append(b.mapBytes, byte(len(db))), db...), 0)
	b.mapBytes = append(append(append(b.mapBytes, byte(len(table))), table...), 0)
	if o.bytes == 0 {
		b.mapBytes = append(b.mapBytes, rest...)
	} else if b.mapBytes, err = appendWithOrigin(b.mapBytes, rest, o); err != nil {
		return nil, err
	}
	binary.LittleEndian.PutUint32(b.mapBytes[at+9:], uint32(len(b.mapBytes)-at))
	b.maps = append(b.maps, m)
	return &b.maps[len(b.maps)-1], nil
}

// appendWithOrigin appends the part of a table map after the names, rest,
// with a VARCHAR origin column o besides the source's columns: the column
// count, types, metadata and null bitmap. The optional metadata (column
// names and such, binlog_row_metadata) is left out: it would describe a
// column less, and applying rows does not read it.
func appendWithOrigin(b, rest []byte, o origin) ([]byte, error) {
	n, k := readPacked(rest)
	at := k + int(n)
	if k == 0 || at > len(rest) {
		return nil, errors.New("truncated table map")
	}
	types := rest[k:at]
	metaLen, k := readPacked(rest[at:])
	at += k
	if k == 0 || at+int(metaLen)+int(n+7)/8 > len(rest) {
		return nil, errors.New("truncated table map")
	}
	meta := rest[at : at+int(metaLen)]
	nulls := rest[at+int(metaLen) : at+int(metaLen)+int(n+7)/8]
	b = appendPacked(b, n+1)
	if o.first {
		b = append(append(b, varcharType), types...)
	} else {
		b = append(append(b, types...), varcharType)
	}
	b = appendPacked(b, metaLen+2)
	if o.first {
		b = append(binary.LittleEndian.AppendUint16(b, uint16(o.bytes)), meta...)
	} else {
		b = binary.LittleEndian.AppendUint16(append(b, meta...), uint16(o.bytes))
	}
	return appendBits(b, nulls, int(n), o.first, false), nil // the origin is NOT NULL
}

// afterNames is what of a table map body follows the schema and table
// names: the column count, types, metadata and null bitmap.
func afterNames(body []byte) ([]byte, error) {
	at := 8 // table id, flags
	for range 2 {
		if at >= len(body) {
			return nil, errors.New("truncated table map")
		}
		at += 1 + int(body[at]) + 1
	}
	if at >= len(body) {
		return nil, errors.New("truncated table map")
	}
	return body[at:], nil
}

// appendPacked appends v as a length-encoded integer.
func appendPacked(b []byte, v uint64) []byte {
	switch {
	case v < 251:
		return append(b, byte(v))
	case v < 1<<16:
		return binary.LittleEndian.AppendUint16(append(b, 0xfc), uint16(v))
	case v < 1<<24:
		return append(b, 0xfd, byte(v), byte(v>>8), byte(v>>16))
	}
	return binary.LittleEndian.AppendUint64(append(b, 0xfe), v)
}

// readPacked reads a length-encoded integer.
func readPacked(b []byte) (uint64, int) {
	switch {
	case len(b) == 0:
		return 0, 0
	case b[0] < 251:
		return uint64(b[0]), 1
	case b[0] == 0xfc && len(b) >= 3:
		return uint64(binary.LittleEndian.Uint16(b[1:])), 3
	case b[0] == 0xfd && len(b) >= 4:
		return uint64(b[1]) | uint64(b[2])<<8 | uint64(b[3])<<16, 4
	case b[0] == 0xfe && len(b) >= 9:
		return binary.LittleEndian.Uint64(b[1:]), 9
	}
	return 0, 0
}
