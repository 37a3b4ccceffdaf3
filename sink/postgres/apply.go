package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/braid-cdc/braid/change"
	"github.com/braid-cdc/braid/sink"
)

// Apply implements sink.Target: one transaction of the changes and the
// worker's checkpoint, sent as one pipeline of statements (one round trip
// once its statements are prepared) that the server runs as one implicit
// transaction: sink_advance first, then the rows, runs of one kind as
// multi-row statements.
func (t *Target) Apply(ctx context.Context, worker int, changes []sink.Change) error {
	if len(changes) == 0 {
		return nil
	}
	c, err := t.conn(ctx, worker)
	if err != nil {
		return fmt.Errorf("sink %s: connect: %w", t.spec.Name, err)
	}
	defer t.release(worker, c)
	rows := make([]row, len(changes))
	var last *change.Table
	for i := range changes {
		ch := &changes[i]
		if ch.Row.Table != last {
			if err := t.ensureTable(ctx, c, ch.Row.Table, ch.Logical); err != nil {
				return err
			}
			last = ch.Row.Table
		}
		t.row(&rows[i], ch)
	}
	err = t.applyBatch(ctx, c, worker, rows, false)
	if errors.Is(err, errOneByOne) {
		// A multi-row INSERT found a key there already: the transaction
		// was rolled back and is applied a row a statement, which names
		// the row in a collision error.
		err = t.applyBatch(ctx, c, worker, rows, true)
	}
	return err
}

// errOneByOne: a multi-row statement found a row it did not expect.
var errOneByOne = errors.New("apply the batch a row at a time")

// row is a change with its images decoded once, its run kind and its
// key.
type row struct {
	*sink.Change
	before, after []change.Value
	kind          byte
	key           string
}

// row sets r to c decoded: its images, its kind ('I' INSERT, 'U' an UPDATE that
// keeps its key, 'M' one that changes it, 'D' DELETE) and its key (with
// its shard table when the target keeps shard tables apart).
func (t *Target) row(r *row, c *sink.Change) {
	r.Change, r.before, r.after = c, c.Row.Before(), c.Row.After()
	idx := sink.KeyColumns(c.Row.Table)
	table := c.Logical
	if t.spec.OriginColumn != "" {
		table = c.Source + "/" + c.Origin + ">" + table
	}
	switch c.Row.Kind {
	case change.Insert:
		r.kind, r.key = 'I', sink.Key(table, r.after, idx)
	case change.Delete:
		r.kind, r.key = 'D', sink.Key(table, r.before, idx)
	default:
		r.kind, r.key = 'U', sink.Key(table, r.after, idx)
		if sink.Key(table, r.before, idx) != r.key {
			r.kind = 'M'
		}
	}
}

// op is one queued statement: what its result adds to the counts, and
// what its changes were, for errors.
type op struct {
	kind    byte // 'a' sink_advance, 'i' plain insert, 'u' upsert, 'd' delete, 'k' keyless delete
	changes []row
	// missingIfInserted: the upsert's inserted rows are UPDATEs of a row
	// that was missing; else the rows it found are INSERTs that were upserts.
	missingIfInserted bool
	countFound        bool
}

// applyBatch queues the transaction and reads its answers.
func (t *Target) applyBatch(ctx context.Context, c *pgx.Conn, worker int, changes []row, oneByOne bool) error {
	b := &pgx.Batch{}
	var ops []op
	if t.exactlyOnce {
		first, last := changes[0], changes[len(changes)-1]
		if last.Seq > math.MaxInt64 {
			return fmt.Errorf("sink %s: seq %d is past the checkpoint's bigint", t.spec.Name, last.Seq)
		}
		b.Queue("SELECT "+quoteIdent(t.spec.MetaDatabase)+".sink_advance($1, $2, $3, $4, $5, $6)",
			t.spec.Name, worker, int64(first.Seq), first.Row.Index, int64(last.Seq), last.Row.Index)
		ops = append(ops, op{kind: 'a', changes: changes[:1]})
	}
	for _, r := range t.runs(changes, oneByOne) {
		ops = t.queueRun(b, ops, r)
	}
	br := c.SendBatch(ctx, b)
	var upserts, missing uint64
	var err error
	failed := -1
	for i, o := range ops {
		switch o.kind {
		case 'u':
			var inserted int64
			if err = br.QueryRow().Scan(&inserted); err == nil {
				if o.missingIfInserted {
					missing += uint64(inserted)
				} else if o.countFound {
					upserts += uint64(int64(len(o.changes)) - inserted)
				}
			}
		default:
			var ct pgconn.CommandTag
			if ct, err = br.Exec(); err == nil && (o.kind == 'd' || o.kind == 'k') {
				missing += uint64(int64(len(o.changes)) - ct.RowsAffected())
			}
		}
		if err != nil {
			failed = i
			break
		}
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		var pe pgx.ErrPreprocessingBatch
		if errors.As(err, &pe) {
			// Before anything ran: preparing a statement, or encoding a
			// value for it, failed (the statement says which table and
			// columns; the values stay out of the message).
			return fmt.Errorf("sink %s: worker %d: %w (statement %s)", t.spec.Name, worker, err, clip(pe.SQL()))
		}
		if failed < 0 {
			return fmt.Errorf("sink %s: worker %d: %w", t.spec.Name, worker, err)
		}
		return t.opError(ops[failed], worker, err)
	}
	t.applied.Add(uint64(len(changes)))
	t.upserts.Add(upserts)
	t.missing.Add(missing)
	return nil
}

// opError is the error of the statement of o.
func (t *Target) opError(o op, worker int, err error) error {
	c := o.changes[0]
	switch code := pgCode(err); {
	case o.kind == 'a' && code == errBehindCode:
		return fmt.Errorf("%w: %v, past seq %d, row %d", sink.ErrBehind, err, c.Seq, c.Row.Index)
	case o.kind == 'i' && (code == "23505" || code == "21000") && len(o.changes) > 1:
		return errOneByOne
	case o.kind == 'i' && code == "23505":
		// Its checkpoint says it was not applied, so the row is another
		// shard table's (or was there before the sink).
		rc := c.Row
		e := &sink.CollisionError{Sink: t.spec.Name, Table: t.spec.Target(c.Logical), Logical: c.Logical, Source: c.Source, Origin: c.Origin}
		for _, i := range sink.KeyColumns(rc.Table) {
			e.Columns = append(e.Columns, rc.Table.Columns[i].Name)
			e.Values = append(e.Values, c.after[i])
		}
		return e
	case code == "42P01":
		return fmt.Errorf("sink %s: target table %s does not exist (dropped while the sink ran?): create it, or set create_tables: true: %w", t.spec.Name, t.spec.Target(c.Logical), err)
	}
	return fmt.Errorf("sink %s: worker %d: seq %d, %s from %s/%s: %w", t.spec.Name, worker, c.Seq, c.Logical, c.Source, c.Origin, err)
}

// run is consecutive changes of one kind and table version, applied by
// one statement (or a few: see pieces). kind is 'I' INSERTs, 'U' UPDATEs
// that keep their key, 'M' one UPDATE that changes its key, 'D' DELETEs.
type run struct {
	kind    byte
	changes []row
}

// runs cuts changes, in order, into runs. A run never holds one key
// twice, so its statement never meets a row it wrote itself; a keyless
// table's UPDATEs and DELETEs, and every change when oneByOne is set, are
// runs of one.
func (t *Target) runs(changes []row, oneByOne bool) []run {
	var out []run
	seen := map[string]bool{}
	for i := 0; i < len(changes); {
		c := changes[i]
		kind, key := c.kind, c.key
		j := i + 1
		if !oneByOne && kind != 'M' && (kind == 'I' || !keyless(c.Row.Table)) {
			clear(seen)
			seen[key] = true
			for j < len(changes) && j-i < t.rowsPerStatement(c.Row.Table) {
				n := changes[j]
				if n.Row.Table != c.Row.Table || n.Logical != c.Logical {
					break
				}
				if n.kind != kind || seen[n.key] {
					break
				}
				seen[n.key] = true
				j++
			}
		}
		out = append(out, run{kind: kind, changes: changes[i:j]})
		i = j
	}
	return out
}

// rowsPerStatement is the most rows of tv one statement carries: the
// spec's batch, within PostgreSQL's 65535 parameters a statement.
func (t *Target) rowsPerStatement(tv *change.Table) int {
	return max(1, min(t.spec.Batch, 65535/(len(tv.Columns)+1)))
}

// queueRun queues the statements of r and appends their ops.
func (t *Target) queueRun(b *pgx.Batch, ops []op, r run) []op {
	first := r.changes[0]
	ts := t.statements(first.Row.Table, first.Logical)
	// Exactly once without an origin column, an INSERT (or the new key of
	// a moved row) must not find its key: a plain INSERT fails if it does.
	plain := t.exactlyOnce && t.spec.OriginColumn == "" || ts.keyless
	switch r.kind {
	case 'I':
		for _, p := range pieces(r.changes, t.rowsPerStatement(first.Row.Table)) {
			args := ts.rowArgs(p)
			if plain {
				b.Queue(ts.sql('i', len(p)), args...)
				ops = append(ops, op{kind: 'i', changes: p})
			} else {
				b.Queue(ts.sql('u', len(p)), args...)
				ops = append(ops, op{kind: 'u', changes: p, countFound: true})
			}
		}
	case 'U':
		if ts.keyless {
			return t.queueKeylessUpdate(b, ops, ts, first)
		}
		for _, p := range pieces(r.changes, t.rowsPerStatement(first.Row.Table)) {
			b.Queue(ts.sql('u', len(p)), ts.rowArgs(p)...)
			ops = append(ops, op{kind: 'u', changes: p, missingIfInserted: true})
		}
	case 'M':
		if ts.keyless {
			return t.queueKeylessUpdate(b, ops, ts, first)
		}
		b.Queue(ts.sql('d', 1), ts.keyArgs(r.changes, true)...)
		ops = append(ops, op{kind: 'd', changes: r.changes})
		if plain {
			b.Queue(ts.sql('i', 1), ts.rowArgs(r.changes)...)
			ops = append(ops, op{kind: 'i', changes: r.changes})
		} else {
			b.Queue(ts.sql('u', 1), ts.rowArgs(r.changes)...)
			ops = append(ops, op{kind: 'u', changes: r.changes})
		}
	case 'D':
		if ts.keyless {
			b.Queue(ts.sql('k', 1), ts.keyArgs(r.changes, true)...)
			return append(ops, op{kind: 'k', changes: r.changes})
		}
		for _, p := range pieces(r.changes, t.rowsPerStatement(first.Row.Table)) {
			b.Queue(ts.sql('d', len(p)), ts.keyArgs(p, true)...)
			ops = append(ops, op{kind: 'd', changes: p})
		}
	}
	return ops
}

// queueKeylessUpdate queues a keyless table's UPDATE: one row equal to
// the before-image deleted (missing if none), the after-image inserted.
func (t *Target) queueKeylessUpdate(b *pgx.Batch, ops []op, ts *tableStmts, c row) []op {
	one := []row{c}
	b.Queue(ts.sql('k', 1), ts.keyArgs(one, true)...)
	b.Queue(ts.sql('i', 1), ts.rowArgs(one)...)
	return append(ops, op{kind: 'k', changes: one}, op{kind: 'i', changes: one})
}

// pieces cuts a run into statements: as few distinct row counts as
// possible (each a statement the connection prepares once), powers of
// two, or max.
func pieces(cs []row, max int) [][]row {
	var out [][]row
	for len(cs) > 0 {
		n := 1
		for n*2 <= len(cs) {
			n *= 2
		}
		if len(cs) >= max {
			n = max
		}
		out = append(out, cs[:n])
		cs = cs[n:]
	}
	return out
}
