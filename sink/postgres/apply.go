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
// worker's checkpoint: sink_advance first, then the rows, as runs
// (sink.Plan). A run of copyMinRows changes or more goes through COPY
// (copy.go): INSERTs whose keys are known new straight into the target,
// upserts (UPDATEs, and INSERTs that may find their key) through the
// staging table; the rest as multi-row statements. A transaction without
// a COPY is one pipeline of statements (one round trip once its
// statements are prepared) that the server runs as one implicit
// transaction; one with a COPY is an explicit one, its statements
// pipelined between the COPYs, COMMIT sent with the last of them. When a
// COPY straight into the target finds a key there, the transaction is
// sent again: through the staging table when the INSERTs are upserts, a
// row a statement in stream order otherwise, which names the row in a
// collision error.
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
			if err := t.statements(ch.Row.Table, ch.Logical).loadTypes(ctx, c); err != nil {
				return fmt.Errorf("sink %s: read the column types of target table %s: %w", t.spec.Name, t.spec.Target(ch.Logical), err)
			}
			last = ch.Row.Table
		}
	}
	err = t.applyTxn(ctx, c, worker, changes, modeFast)
	if errors.Is(err, errStaged) {
		err = t.applyTxn(ctx, c, worker, changes, modeStaged)
	}
	if errors.Is(err, errOneByOne) {
		err = t.applyTxn(ctx, c, worker, changes, modeOneByOne)
	}
	return err
}

// txnMode is how a worker's transaction sends its rows.
type txnMode byte

const (
	// modeFast: runs of rows through COPY; INSERTs whose keys are known
	// new (exactly once, and not a snapshot chunk read again) straight
	// into the target.
	modeFast txnMode = iota
	// modeStaged: sent again after a COPY into the target found a key
	// there: INSERTs that are upserts go through the staging table.
	modeStaged
	// modeOneByOne: a statement a change, in stream order, to name the
	// row whose key is taken.
	modeOneByOne
)

// errOneByOne: a multi-row statement found a row it did not expect.
var errOneByOne = errors.New("apply the transaction's changes a row at a time")

// errStaged: a COPY straight into the target found a key there.
var errStaged = errors.New("apply the transaction's INSERTs as upserts")

// op is one statement or COPY of a transaction: what its result adds to
// the counts, and what its changes were, for errors.
type op struct {
	// kind: 'a' sink_advance, 'b' BEGIN or COMMIT, 'i' plain insert,
	// 'u' upsert (or merge of the staging table), 'd' delete, 'k'
	// keyless delete, 'x' unique-conflict delete, 'C' COPY into the
	// target, 'S' COPY into the staging table, 'z' emptying it.
	kind    byte
	changes []sink.Change
	// missingIfInserted: the upsert's inserted rows are UPDATEs of a row
	// that was missing; else the rows it found are INSERTs that were upserts.
	missingIfInserted bool
	countFound        bool
	// optimistic: a COPY into the target of INSERTs that are upserts
	// (an origin column), on the checkpoint's word that their keys are
	// new; one found sends the transaction again, staged.
	optimistic bool
}

// applyTxn builds the transaction of changes as mode says, sends it and
// reads its answers.
func (t *Target) applyTxn(ctx context.Context, c *pgx.Conn, worker int, changes []sink.Change, mode txnMode) error {
	x := &txn{}
	if t.exactlyOnce {
		first, last := changes[0], changes[len(changes)-1]
		if last.Seq > math.MaxInt64 {
			return fmt.Errorf("sink %s: seq %d is past the checkpoint's bigint", t.spec.Name, last.Seq)
		}
		x.queue(op{kind: 'a', changes: changes[:1]}, "SELECT "+quoteIdent(t.spec.MetaDatabase)+".sink_advance($1, $2, $3, $4, $5, $6, $7)",
			t.dest, t.spec.Name, worker, int64(first.Seq), sink.FromIndex(first), int64(last.Seq), last.Row.Index)
	}
	for _, r := range t.runs(changes, mode == modeOneByOne) {
		if err := t.queueRun(x, r, mode); err != nil {
			return err
		}
	}
	if x.hasCopy() {
		x.explicit(changes)
		if err := t.ensureStages(ctx, c, worker, x.staged()); err != nil {
			return err
		}
	}
	res := t.send(ctx, c, x)
	if err := res.err; err != nil {
		var pe pgx.ErrPreprocessingBatch
		if errors.As(err, &pe) {
			// Before anything ran: preparing a statement, or encoding a
			// value for it, failed (the statement says which table and
			// columns; the values stay out of the message).
			return fmt.Errorf("sink %s: worker %d: %w (statement %s)", t.spec.Name, worker, err, clip(pe.SQL()))
		}
		if res.failed == nil {
			return fmt.Errorf("sink %s: worker %d: %w", t.spec.Name, worker, err)
		}
		return t.opError(ctx, c, *res.failed, worker, err)
	}
	t.applied.Add(uint64(len(changes)))
	t.upserts.Add(res.upserts)
	t.missing.Add(res.missing)
	for _, p := range x.parts {
		switch {
		case p.isCopy && p.stageFor != nil:
			t.staged.Add(uint64(len(p.copyOp.changes)))
		case p.isCopy:
			t.copied.Add(uint64(len(p.copyOp.changes)))
		}
		if p.isCopy && p.binary {
			t.copiedBinary.Add(uint64(len(p.copyOp.changes)))
		}
	}
	return nil
}

// opError is the error of the statement of o, sent on conn (its
// transaction has ended).
func (t *Target) opError(ctx context.Context, conn *pgx.Conn, o op, worker int, err error) error {
	c := o.changes[0]
	inserts := o.kind == 'i' || o.kind == 'C'
	switch code := pgCode(err); {
	case o.kind == 'a' && code == errBehindCode:
		return fmt.Errorf("%w: %v, past seq %d, row %d", sink.ErrBehind, err, c.Seq, c.Row.Index)
	case o.kind == 'C' && o.optimistic && code == "23505":
		return errStaged
	case inserts && (code == "23505" || code == "21000") && len(o.changes) > 1:
		return errOneByOne
	case inserts && code == "23505":
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
// gathered, as long as the worker's transaction: pieces and COPY size
// them), or, oneByOne, each change alone in stream order.
func (t *Target) runs(changes []sink.Change, oneByOne bool) []sink.Run {
	if !oneByOne {
		return sink.Plan(changes, len(changes))
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

// queueRun adds the statements and COPYs of r to x.
func (t *Target) queueRun(x *txn, r sink.Run, mode txnMode) error {
	first := r.Changes[0]
	ts := t.statements(first.Row.Table, first.Logical)
	mayExist := slices.ContainsFunc(r.Changes, func(c sink.Change) bool { return c.MayExist })
	// Exactly once without an origin column, an INSERT (or the new key of
	// a moved row) must not find its key: a plain INSERT fails if it does.
	plain := t.exactlyOnce && t.spec.OriginColumn == "" && !mayExist || ts.keyless
	limit := t.rowsPerStatement(first.Row.Table)
	bulk := mode != modeOneByOne && len(r.Changes) >= t.copyMin
	switch {
	case r.Kind == sink.RunInsert && bulk && (plain || mode == modeFast && t.exactlyOnce && !mayExist):
		// Keys known new (the checkpoint says none of these changes was
		// applied): straight into the target. One there is another shard
		// table's (a collision, plain) or was there before the sink (an
		// origin column: upserted, staged).
		data, bin, err := ts.copyData(r.Changes, t.copyBinary)
		if err != nil {
			return t.valueError(first, err)
		}
		x.copy(op{kind: 'C', changes: r.Changes, optimistic: !plain}, ts.copySQL(ts.table, bin), data, nil, bin)
	case (r.Kind == sink.RunInsert || r.Kind == sink.RunUpdate && !ts.keyless) && bulk && t.canStage:
		// Upserts: into the staging table, merged from there, a piece
		// without a key twice at a time (ON CONFLICT DO UPDATE affects a
		// row once a statement).
		for _, p := range distinctKeys(r.Changes) {
			data, bin, err := ts.copyData(p, t.copyBinary)
			if err != nil {
				return t.valueError(p[0], err)
			}
			if x.stagedBefore(ts) {
				x.queue(op{kind: 'z', changes: p}, "DELETE FROM "+ts.stageTable)
			}
			x.copy(op{kind: 'S', changes: p}, ts.copySQL(ts.stageTable, bin), data, ts, bin)
			for _, q := range pieces(p, limit) {
				t.queueUniqueDeletes(x, ts, q)
			}
			x.queue(op{kind: 'u', changes: p, missingIfInserted: r.Kind == sink.RunUpdate, countFound: r.Kind == sink.RunInsert}, ts.merge)
		}
	case r.Kind == sink.RunInsert:
		for _, p := range pieces(r.Changes, limit) {
			args := ts.rowArgs(p)
			if plain {
				x.queue(op{kind: 'i', changes: p}, ts.sql('i', len(p)), args...)
			} else {
				t.queueUniqueDeletes(x, ts, p)
				x.queue(op{kind: 'u', changes: p, countFound: true}, ts.sql('u', len(p)), args...)
			}
		}
	case ts.keyless && r.Kind == sink.RunDelete:
		for i := range r.Changes {
			one := r.Changes[i : i+1]
			x.queue(op{kind: 'k', changes: one}, ts.sql('k', 1), ts.keyArgs(one, true)...)
		}
	case ts.keyless:
		// An UPDATE: one row equal to the before-image deleted (missing
		// if none), the after-image inserted.
		for i := range r.Changes {
			one := r.Changes[i : i+1]
			x.queue(op{kind: 'k', changes: one}, ts.sql('k', 1), ts.keyArgs(one, true)...)
			x.queue(op{kind: 'i', changes: one}, ts.sql('i', 1), ts.rowArgs(one)...)
		}
	case r.Kind == sink.RunUpdate:
		for _, p := range pieces(r.Changes, limit) {
			t.queueUniqueDeletes(x, ts, p)
			x.queue(op{kind: 'u', changes: p, missingIfInserted: true}, ts.sql('u', len(p)), ts.rowArgs(p)...)
		}
	case r.Kind == sink.RunMove:
		for i := range r.Changes {
			one := r.Changes[i : i+1]
			x.queue(op{kind: 'd', changes: one}, ts.sql('d', 1), ts.keyArgs(one, true)...)
			if plain {
				x.queue(op{kind: 'i', changes: one}, ts.sql('i', 1), ts.rowArgs(one)...)
			} else {
				t.queueUniqueDeletes(x, ts, one)
				x.queue(op{kind: 'u', changes: one}, ts.sql('u', 1), ts.rowArgs(one)...)
			}
		}
	case r.Kind == sink.RunDelete:
		for _, p := range pieces(r.Changes, limit) {
			x.queue(op{kind: 'd', changes: p}, ts.sql('d', len(p)), ts.keyArgs(p, true)...)
		}
	}
	return nil
}

// valueError is the error of a value of c that has no COPY text.
func (t *Target) valueError(c sink.Change, err error) error {
	return fmt.Errorf("sink %s: seq %d, %s from %s/%s: %w", t.spec.Name, c.Seq, c.Logical, c.Source, c.Origin, err)
}

// queueUniqueDeletes queues, at least once, before the upsert of cs,
// the DELETE of the rows that hold one of their unique values under
// another key (tableStmts.uniqueDelete). Exactly
// once it queues nothing: a change is applied once, after every change
// before it that touches one of its keys (sink.Causality holds unique
// values too), so a row that holds its value is another shard table's
// or was there before the sink, which its plain INSERT names in a
// collision error, or a snapshot chunk's read again, whose rows hold
// what the source held at one time.
func (t *Target) queueUniqueDeletes(x *txn, ts *tableStmts, cs []sink.Change) {
	if t.exactlyOnce {
		return
	}
	for u := range ts.unique {
		if q, args, ok := ts.uniqueDelete(u, cs); ok {
			x.queue(op{kind: 'x', changes: cs}, q, args...)
		}
	}
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

// distinctKeys cuts a run where a key would come twice, and nowhere else.
func distinctKeys(cs []sink.Change) [][]sink.Change {
	var out [][]sink.Change
	seen := map[string]bool{}
	start := 0
	for i, c := range cs {
		if seen[c.PK] {
			out = append(out, cs[start:i])
			clear(seen)
			start = i
		}
		seen[c.PK] = true
	}
	return append(out, cs[start:])
}
