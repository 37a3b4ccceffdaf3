package grouptest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/spec"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// A Log also holds its tables' rows as they stand at its end (what Load,
// Tx and Write leave), which Snapshot serves: a snapshot connection's
// Chunk selects them in key order, as the server's SELECT does, and its
// Position is the log's end. Begin copies the rows to read its Chunks
// from until End, and returns the log's end (exact, as MariaDB's
// binlog_snapshot_position; not told after Inexact, as MySQL). A test
// can make the next chunks fail (FailChunks) or read one at a time
// (HoldChunks, Step).

// Change is one row change of Write: Before nil is an INSERT, After nil a
// DELETE, both an UPDATE.
type Change struct{ Before, After []change.Value }

// ErrChunk is the error a chunk made to fail returns.
var ErrChunk = errors.New("grouptest: chunk failed (scripted)")

// step is one chunk a held log lets run: between runs after its SELECT
// and before its high watermark is taken; done closes after both.
type step struct {
	between func()
	done    chan struct{}
}

// Load puts rows in t as they stand where the log begins: rows written
// before it, which a snapshot reads and no reader sees.
func (l *Log) Load(t *change.Table, rows ...[]change.Value) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range rows {
		l.setRow(t, nil, r)
	}
}

// setRow applies one change to the rows held (under l.mu).
func (l *Log) setRow(t *change.Table, before, after []change.Value) {
	if l.rows == nil {
		l.rows = map[string]map[string][]change.Value{}
	}
	m := l.rows[t.FullName()]
	if m == nil {
		m = map[string][]change.Value{}
		l.rows[t.FullName()] = m
	}
	if before != nil {
		delete(m, rowKey(t, before))
	}
	if after != nil {
		m[rowKey(t, after)] = after
	}
}

// Rows returns t's rows at the log's end, in key order.
func (l *Log) Rows(t *change.Table) [][]change.Value {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sorted(t)
}

func (l *Log) sorted(t *change.Table) [][]change.Value { return sortedRows(l.rows, t) }

// sortedRows are t's rows of all, in key order.
func sortedRows(all map[string]map[string][]change.Value, t *change.Table) [][]change.Value {
	var out [][]change.Value
	for _, r := range all[t.FullName()] {
		out = append(out, r)
	}
	keys := keyCols(t)
	slices.SortFunc(out, func(a, b []change.Value) int { return compareKey(keys, a, b) })
	return out
}

// Write appends a transaction committed at commit making changes to t,
// and returns the position it begins at.
func (l *Log) Write(commit time.Time, t *change.Table, changes ...Change) change.Position {
	return l.write(commit, t, true, changes)
}

// WriteUnseen appends a transaction as Write does, but its rows stay
// out of the snapshot's reads (Chunk, and Begin's position is before
// it) until Show: a transaction in the binlog whose engine commit has
// not made it visible yet. Writes after it must wait for Show (a server
// makes transactions visible in binlog order).
func (l *Log) WriteUnseen(commit time.Time, t *change.Table, changes ...Change) change.Position {
	return l.write(commit, t, false, changes)
}

// Show makes the transactions of WriteUnseen visible.
func (l *Log) Show() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, u := range l.unseen {
		for _, ch := range u.changes {
			l.setRow(u.table, ch.Before, ch.After)
		}
	}
	l.unseen = nil
}

// unseenTx is a transaction of WriteUnseen not yet shown.
type unseenTx struct {
	start   change.Position
	table   *change.Table
	changes []Change
}

func (l *Log) write(commit time.Time, t *change.Table, seen bool, changes []Change) change.Position {
	codec := codecOf(t)
	return l.append(100, func(start, end change.Position) []*change.Event {
		base := change.Event{Source: l.name, Pos: start, CommitTime: commit}
		begin, rs, c := base, base, base
		begin.Type, rs.Type, c.Type = change.EventBegin, change.EventRows, change.EventCommit
		for i, ch := range changes {
			var kind change.ChangeKind
			var images [][]change.Value
			switch {
			case ch.Before == nil:
				kind, images = change.Insert, [][]change.Value{ch.After}
			case ch.After == nil:
				kind, images = change.Delete, [][]change.Value{ch.Before}
			default:
				kind, images = change.Update, [][]change.Value{ch.Before, ch.After}
			}
			rs.Rows = append(rs.Rows, change.NewRowChange(codec, kind, i, &change.Images{Decoded: images}, 0))
			if seen {
				l.setRow(t, ch.Before, ch.After)
			}
		}
		if !seen {
			l.unseen = append(l.unseen, unseenTx{start: start, table: t, changes: changes})
		}
		c.Pos, c.EndPos = end, end
		return []*change.Event{&begin, &rs, &c}
	})
}

// Inexact makes Begin not tell its snapshot's position, as a MySQL
// server does not.
func (l *Log) Inexact() {
	l.mu.Lock()
	l.inexact = true
	l.mu.Unlock()
}

// FailChunks makes the next n chunks read fail with ErrChunk.
func (l *Log) FailChunks(n int) {
	l.mu.Lock()
	l.failChunks += n
	l.mu.Unlock()
}

// Chunks is how many chunks were read, failed ones included.
func (l *Log) Chunks() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.chunks
}

// HoldChunks makes each chunk wait for Step before it reads (before
// its Begin, for one read in a snapshot).
func (l *Log) HoldChunks() {
	l.mu.Lock()
	if l.steps == nil {
		l.steps = make(chan step)
	}
	l.mu.Unlock()
}

// Step lets the next chunk of a held log read, calls between (if not
// nil) after its SELECT and before its high watermark is taken (a change
// there is one the chunk's rows miss and its window brings), and returns
// once both are done.
func (l *Log) Step(between func()) {
	l.mu.Lock()
	steps := l.steps
	l.mu.Unlock()
	s := step{between: between, done: make(chan struct{})}
	select {
	case steps <- s:
	case <-time.After(Stuck):
		panic(fmt.Sprintf("grouptest: no snapshot chunk of %s asked to read within %s: the destination is stuck", l.name, Stuck))
	}
	select {
	case <-s.done:
	case <-time.After(Stuck):
		panic(fmt.Sprintf("grouptest: the snapshot chunk of %s let read did not finish within %s: the destination is stuck", l.name, Stuck))
	}
}

// Snapshot implements group.Sources: a connection reading src's log's
// rows.
func (s *Sources) Snapshot(_ context.Context, src spec.Source) (group.SnapshotConn, error) {
	return &snapshotConn{log: s.Log(src.Name)}, nil
}

type snapshotConn struct {
	log  *Log
	step *step // the held chunk whose high watermark is next
	// snap is the rows Begin copied, which Chunk reads until End.
	snap map[string]map[string][]change.Value
}

// await takes the next step of a held log.
func (c *snapshotConn) await(ctx context.Context) error {
	l := c.log
	l.mu.Lock()
	steps := l.steps
	l.mu.Unlock()
	if steps != nil {
		select {
		case s := <-steps:
			c.step = &s
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (c *snapshotConn) Begin(ctx context.Context) (change.Position, bool, error) {
	if err := c.await(ctx); err != nil {
		return change.Position{}, false, err
	}
	l := c.log
	l.mu.Lock()
	defer l.mu.Unlock()
	c.snap = map[string]map[string][]change.Value{}
	for name, rows := range l.rows {
		c.snap[name] = maps.Clone(rows)
	}
	if l.inexact {
		return change.Position{}, false, nil
	}
	if len(l.unseen) > 0 {
		return l.unseen[0].start, true, nil
	}
	return l.pos(l.end), true, nil
}

func (c *snapshotConn) End() error {
	c.snap = nil
	return nil
}

func (c *snapshotConn) Chunk(ctx context.Context, t *change.Table, keys []int, after, through []string, limit int) (*change.TextRows, error) {
	l := c.log
	if c.snap == nil {
		if err := c.await(ctx); err != nil {
			return nil, err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.chunks++
	if l.failChunks > 0 {
		l.failChunks--
		c.release()
		return nil, ErrChunk
	}
	if len(keys) == 0 && (len(after) > 0 || len(through) > 0 || limit > 0) {
		return nil, errors.New("grouptest: a chunk with no key columns is the whole table")
	}
	rows := change.NewTextRows(t)
	n := 0
	all := l.rows
	if c.snap != nil {
		all = c.snap
	}
	for _, r := range sortedRows(all, t) {
		if len(after) > 0 && compareText(keys, r, after) <= 0 || len(through) > 0 && compareText(keys, r, through) > 0 {
			continue
		}
		if limit > 0 && n == limit {
			break
		}
		n++
		for _, v := range r {
			rows.Add(text(v))
		}
	}
	return rows, nil
}

// release runs a held chunk's between and closes it (under l.mu, which
// it lets go while between runs).
func (c *snapshotConn) release() {
	if s := c.step; s != nil {
		c.step = nil
		if s.between != nil {
			c.log.mu.Unlock()
			s.between()
			c.log.mu.Lock()
		}
		close(s.done)
	}
}

func (c *snapshotConn) Position() (change.Position, error) {
	l := c.log
	l.mu.Lock()
	defer l.mu.Unlock()
	c.release()
	return l.pos(l.end), nil
}

// Fresh is Position: a scripted log names no server (the zero Mark
// compares by position).
func (c *snapshotConn) Fresh() (change.Position, change.Mark, error) {
	pos, err := c.Position()
	return pos, change.Mark{}, err
}

func (c *snapshotConn) EstimateRows(t *change.Table) int64 {
	c.log.mu.Lock()
	defer c.log.mu.Unlock()
	return int64(len(c.log.rows[t.FullName()]))
}

func (c *snapshotConn) Close() error {
	c.log.mu.Lock()
	defer c.log.mu.Unlock()
	c.release()
	return nil
}

// keyCols are t's key columns; of a table with none, all its columns
// (its rows are held as a set: identical rows are not modelled).
func keyCols(t *change.Table) []int {
	var k, all []int
	for i, col := range t.Columns {
		if col.Key {
			k = append(k, i)
		}
		all = append(all, i)
	}
	if len(k) == 0 {
		return all
	}
	return k
}

func rowKey(t *change.Table, r []change.Value) string {
	return fmt.Sprint(pick(keyCols(t), r))
}

func pick(keys []int, r []change.Value) []change.Value {
	out := make([]change.Value, len(keys))
	for i, k := range keys {
		out[i] = r[k]
	}
	return out
}

func compareKey(keys []int, a, b []change.Value) int {
	for _, k := range keys {
		if c := compareValue(a[k], b[k]); c != 0 {
			return c
		}
	}
	return 0
}

// compareText compares row r's key with a key given as text.
func compareText(keys []int, r []change.Value, k []string) int {
	for i, c := range keys {
		n, err := strconv.ParseInt(k[i], 10, 64)
		if err != nil {
			panic(fmt.Sprintf("grouptest: key %q: %v", k[i], err))
		}
		if d := compareValue(r[c], n); d != 0 {
			return d
		}
	}
	return 0
}

func compareValue(a, b change.Value) int {
	switch x := a.(type) {
	case int64:
		return cmp.Compare(x, b.(int64))
	case string:
		return cmp.Compare(x, b.(string))
	}
	panic(fmt.Sprintf("grouptest: a key of %T", a))
}

// text is v as the server's text protocol prints it.
func text(v change.Value) []byte {
	switch x := v.(type) {
	case nil:
		return nil
	case int64:
		return strconv.AppendInt(nil, x, 10)
	case string:
		return []byte(x)
	}
	panic(fmt.Sprintf("grouptest: a value of %T", v))
}

// codecOf is a codec of t's Values (int, bigint and varchar columns).
func codecOf(t *change.Table) *change.Codec {
	tm := &replication.TableMapEvent{}
	for _, col := range t.Columns {
		typ, meta := byte(mysql.MYSQL_TYPE_VARCHAR), uint16(255)
		switch col.Type {
		case "int":
			typ, meta = mysql.MYSQL_TYPE_LONG, 0
		case "bigint":
			typ, meta = mysql.MYSQL_TYPE_LONGLONG, 0
		}
		tm.ColumnType, tm.ColumnMeta = append(tm.ColumnType, typ), append(tm.ColumnMeta, meta)
	}
	return change.NewCodec(t, tm, nil)
}
