package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/sink"
)

// Apply implements sink.Target: one transaction of the changes and the
// worker's checkpoint, sent as one pipeline of statements (one round trip
// once its statements are prepared) that the server runs as one implicit
// transaction: sink_advance first, then the rows, as runs (sink.Plan) of
// multi-row statements. When a multi-row INSERT finds a key there, the
// transaction is sent again a row a statement in stream order, which
// names the row in a collision error.
func (t *Target) Apply(ctx context.Context, worker int, changes []sink.Change) error {
	if len(changes) == 0 {
		return nil
	}
	c, err := t.conn(ctx, worker)
	if err != nil {
		return fmt.Errorf("sink %s: connect: %w", t.spec.Name, err)
	}
	defer t.release(worker, c)
	var last *change.Table
	for i := range changes {
		if ch := &changes[i]; ch.Row.Table != last {
			if err := t.ensureTable(ctx, c, ch.Row.Table, ch.Logical); err != nil {
				return err
			}
			last = ch.Row.Table
		}
	}
	err = t.applyTxn(ctx, c, worker, changes, false)
	if errors.Is(err, errOneByOne) {
		err = t.applyTxn(ctx, c, worker, changes, true)
	}
	return err
}

// errOneByOne: a multi-row statement found a row it did not expect.
var errOneByOne = errors.New("apply the transaction's changes a row at a time")

// op is one queued statement: what its result adds to the counts, and
// what its changes were, for errors.
type op struct {
	kind    byte // 'a' sink_advance, 'i' plain insert, 'u' upsert, 'd' delete, 'k' keyless delete, 'x' unique-conflict delete
	changes []sink.Change
	// missingIfInserted: the upsert's inserted rows are UPDATEs of a row
	// that was missing; else the rows it found are INSERTs that were upserts.
	missingIfInserted bool
	countFound        bool
}

// applyTxn queues the transaction and reads its answers.
func (t *Target) applyTxn(ctx context.Context, c *pgx.Conn, worker int, changes []sink.Change, oneByOne bool) error {
	b := &pgx.Batch{}
	var ops []op
	if t.exactlyOnce {
		first, last := changes[0], changes[len(changes)-1]
		if last.Seq > math.MaxInt64 {
			return fmt.Errorf("sink %s: seq %d is past the checkpoint's bigint", t.spec.Name, last.Seq)
		}
		b.Queue("SELECT "+quoteIdent(t.spec.MetaDatabase)+".sink_advance($1, $2, $3, $4, $5, $6, $7)",
			t.dest, t.spec.Name, worker, int64(first.Seq), sink.FromIndex(first), int64(last.Seq), last.Row.Index)
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
		return t.opError(ctx, c, ops[failed], worker, err)
	}
	t.applied.Add(uint64(len(changes)))
	t.upserts.Add(upserts)
	t.missing.Add(missing)
	return nil
}

// opError is the error of the statement of o, sent on conn.
func (t *Target) opError(ctx context.Context, conn *pgx.Conn, o op, worker int, err error) error {
	c := o.changes[0]
	switch code := pgCode(err); {
	case o.kind == 'a' && code == errBehindCode:
		return fmt.Errorf("%w: %v, past seq %d, row %d", sink.ErrBehind, err, c.Seq, c.Row.Index)
	case o.kind == 'i' && (code == "23505" || code == "21000") && len(o.changes) > 1:
		return errOneByOne
	case o.kind == 'i' && code == "23505":
		// Its checkpoint says it was not applied, so the row is another
		// shard table's (or was there before the sink).
		var pe *pgconn.PgError
		errors.As(err, &pe)
		return t.collision(ctx, conn, c, pe.ConstraintName)
	case code == "42P01":
		return fmt.Errorf("sink %s: target table %s does not exist (dropped while the sink ran?): create it, or set create_tables: true: %w", t.spec.Name, t.spec.Target(c.Logical), err)
	}
	return fmt.Errorf("sink %s: worker %d: seq %d, %s from %s/%s: %w", t.spec.Name, worker, c.Seq, c.Logical, c.Source, c.Origin, err)
}

// collision is the error of change c, whose INSERT found the key of
// index (the constraint PostgreSQL names) taken: it names the index's
// columns, so that the error and the lookup of the key's holders at the
// sources (sink.Runner.Holders) are about the key that collided. An index
// it cannot read is taken as the primary key.
func (t *Target) collision(ctx context.Context, conn *pgx.Conn, c sink.Change, index string) *sink.CollisionError {
	var columns []string
	if index != "" {
		// The batch's implicit transaction has ended, so conn answers.
		rows, err := conn.Query(ctx, `SELECT a.attname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
			JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = ANY(x.indkey)
			WHERE i.relname = $1 AND x.indrelid = $2::regclass ORDER BY array_position(x.indkey::int2[], a.attnum)`, index, t.target(c.Logical))
		if err == nil {
			columns, _ = pgx.CollectRows(rows, pgx.RowTo[string])
		}
	}
	return sink.Collision(t.spec.Name, t.spec.Target(c.Logical), c, columns)
}

// runs are the runs of changes: sink.Plan's (changes of different keys
// gathered into few statements), or, oneByOne, each change alone in
// stream order.
func (t *Target) runs(changes []sink.Change, oneByOne bool) []sink.Run {
	if !oneByOne {
		return sink.Plan(changes, t.spec.Batch)
	}
	out := make([]sink.Run, len(changes))
	for i, c := range changes {
		k := sink.RunUpdate
		switch {
		case c.Row.Kind == change.Insert:
			k = sink.RunInsert
		case c.Row.Kind == change.Delete:
			k = sink.RunDelete
		case c.Moved:
			k = sink.RunMove
		}
		out[i] = sink.Run{Kind: k, Changes: changes[i : i+1]}
	}
	return out
}

// rowsPerStatement is the most rows of tv one statement carries: the
// spec's batch, within PostgreSQL's 65535 parameters a statement.
func (t *Target) rowsPerStatement(tv *change.Table) int {
	return max(1, min(t.spec.Batch, 65535/(len(tv.Columns)+1)))
}

// queueRun queues the statements of r and appends their ops.
func (t *Target) queueRun(b *pgx.Batch, ops []op, r sink.Run) []op {
	first := r.Changes[0]
	ts := t.statements(first.Row.Table, first.Logical)
	// Exactly once without an origin column, an INSERT (or the new key of
	// a moved row) must not find its key: a plain INSERT fails if it does.
	plain := t.exactlyOnce && t.spec.OriginColumn == "" && !slices.ContainsFunc(r.Changes, func(c sink.Change) bool { return c.MayExist }) || ts.keyless
	limit := t.rowsPerStatement(first.Row.Table)
	switch {
	case r.Kind == sink.RunInsert:
		for _, p := range pieces(r.Changes, limit) {
			args := ts.rowArgs(p)
			if plain {
				b.Queue(ts.sql('i', len(p)), args...)
				ops = append(ops, op{kind: 'i', changes: p})
			} else {
				ops = t.queueUniqueDeletes(b, ops, ts, p)
				b.Queue(ts.sql('u', len(p)), args...)
				ops = append(ops, op{kind: 'u', changes: p, countFound: true})
			}
		}
	case ts.keyless && r.Kind == sink.RunDelete:
		for i := range r.Changes {
			one := r.Changes[i : i+1]
			b.Queue(ts.sql('k', 1), ts.keyArgs(one, true)...)
			ops = append(ops, op{kind: 'k', changes: one})
		}
	case ts.keyless:
		// An UPDATE: one row equal to the before-image deleted (missing
		// if none), the after-image inserted.
		for i := range r.Changes {
			one := r.Changes[i : i+1]
			b.Queue(ts.sql('k', 1), ts.keyArgs(one, true)...)
			b.Queue(ts.sql('i', 1), ts.rowArgs(one)...)
			ops = append(ops, op{kind: 'k', changes: one}, op{kind: 'i', changes: one})
		}
	case r.Kind == sink.RunUpdate:
		for _, p := range pieces(r.Changes, limit) {
			ops = t.queueUniqueDeletes(b, ops, ts, p)
			b.Queue(ts.sql('u', len(p)), ts.rowArgs(p)...)
			ops = append(ops, op{kind: 'u', changes: p, missingIfInserted: true})
		}
	case r.Kind == sink.RunMove:
		for i := range r.Changes {
			one := r.Changes[i : i+1]
			b.Queue(ts.sql('d', 1), ts.keyArgs(one, true)...)
			ops = append(ops, op{kind: 'd', changes: one})
			if plain {
				b.Queue(ts.sql('i', 1), ts.rowArgs(one)...)
				ops = append(ops, op{kind: 'i', changes: one})
			} else {
				ops = t.queueUniqueDeletes(b, ops, ts, one)
				b.Queue(ts.sql('u', 1), ts.rowArgs(one)...)
				ops = append(ops, op{kind: 'u', changes: one})
			}
		}
	case r.Kind == sink.RunDelete:
		for _, p := range pieces(r.Changes, limit) {
			b.Queue(ts.sql('d', len(p)), ts.keyArgs(p, true)...)
			ops = append(ops, op{kind: 'd', changes: p})
		}
	}
	return ops
}

// queueUniqueDeletes queues, at least once, before the upsert of cs,
// the DELETE of the rows that hold one of their unique values under
// another key (tableStmts.uniqueDelete), and appends their ops. Exactly
// once it queues nothing: a change is applied once, after every change
// before it that touches one of its keys (sink.Causality holds unique
// values too), so a row that holds its value is another shard table's
// or was there before the sink, which its plain INSERT names in a
// collision error, or a snapshot chunk's read again, whose rows hold
// what the source held at one time.
func (t *Target) queueUniqueDeletes(b *pgx.Batch, ops []op, ts *tableStmts, cs []sink.Change) []op {
	if t.exactlyOnce {
		return ops
	}
	for u := range ts.unique {
		if q, args, ok := ts.uniqueDelete(u, cs); ok {
			b.Queue(q, args...)
			ops = append(ops, op{kind: 'x', changes: cs})
		}
	}
	return ops
}

// pieces cuts a run into statements: a statement never holds one key
// twice (a run may: UPDATEs of one row that nothing else touched between
// them, and PostgreSQL's ON CONFLICT DO UPDATE affects a row once a
// statement), and holds at most max rows, in as few distinct row counts
// as can be (each a statement the connection prepares once): max, or
// powers of two.
func pieces(cs []sink.Change, max int) [][]sink.Change {
	var out [][]sink.Change
	seen := map[string]bool{}
	for len(cs) > 0 {
		clear(seen)
		end := 0
		for end < len(cs) && end < max && !seen[cs[end].PK] {
			seen[cs[end].PK] = true
			end++
		}
		n := end
		if n < max {
			n = 1
			for n*2 <= end {
				n *= 2
			}
		}
		out = append(out, cs[:n])
		cs = cs[n:]
	}
	return out
}
