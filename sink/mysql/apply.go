package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/sink"
)

// Apply implements sink.Target: one transaction of the changes and the
// worker's checkpoint. Where it can, the target replays the changes as
// binlog row events (replay.go); else, or when a row was not as a
// replica expects it, they go as runs (sink.Plan), each one statement
// whose affected-row count says whether every row found what it
// expected; when one did not, the transaction is rolled back and applied
// a row at a time in stream order, which counts that row (an upsert, a
// missing row) or names it in a collision error.
func (t *Target) Apply(ctx context.Context, worker int, changes []sink.Change) error {
	if err := t.ensureTables(ctx, changes); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		err := errNotReplayed
		if t.replayable(ctx, changes) {
			statements, done, rerr := t.replayStatements(ctx, changes)
			if err = rerr; err == nil {
				err = t.applyTx(ctx, worker, changes, applyReplay, statements)
				done()
			}
		}
		if errors.Is(err, errNotReplayed) {
			err = t.applyTx(ctx, worker, changes, applyRuns, nil)
		}
		if errors.Is(err, errOneByOne) {
			err = t.applyTx(ctx, worker, changes, applyOneByOne, nil)
		}
		if !lockConflict(err) || attempt == lockRetries {
			return err
		}
		// InnoDB rolled this transaction back so that another worker's
		// could go on: that one commits, and this one, again, after it.
		// Giving the whole sink up instead rolled both back, and their
		// retries deadlocked the same way again and again.
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt) * 10 * time.Millisecond):
		}
	}
}

// DecodesImages: the target decodes a change's images only when it
// writes SQL statements; replaying takes the binlog's bytes.
func (t *Target) DecodesImages() {}

// AppliesPartialImages: a replayed rows event changes only the columns
// its after image holds, as on a replica; SQL statements would write the
// others NULL, so a transaction that falls back to them with such a
// change is a sink.PartialImageError.
func (t *Target) AppliesPartialImages() {}

// lockRetries is how many times a worker's transaction is tried when
// InnoDB ends it over a lock (MariaDB's replica retries 10 times too:
// slave_transaction_retries).
const lockRetries = 10

// lockConflict reports whether err is InnoDB ending a transaction over a
// lock: a deadlock (1213, the transaction rolled back) or a lock wait
// timeout (1205).
func lockConflict(err error) bool {
	var me *driver.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}

// errOneByOne: a multi-row statement found a row it did not expect.
var errOneByOne = errors.New("apply the transaction's changes a row at a time")

// How applyTx applies its changes.
type applyMode int

const (
	applyReplay   applyMode = iota // as binlog row events
	applyRuns                      // as runs of multi-row statements
	applyOneByOne                  // a row at a time
)

// applyTx is Apply's transaction; statements are the payloads of
// applyReplay's BINLOG statements (runReplay).
func (t *Target) applyTx(ctx context.Context, worker int, changes []sink.Change, mode applyMode, statements []string) error {
	if t.turns != nil {
		select {
		case t.turns <- struct{}{}:
			defer func() { <-t.turns }()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	db := t.db
	if mode == applyReplay && t.replayDB != nil {
		db = t.replayDB
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if t.exactlyOnce() {
		if err := t.claim(ctx, tx, worker, changes); err != nil {
			return err
		}
	}
	var upserts, missing uint64
	one := func(c sink.Change) error {
		u, m, err := t.apply(ctx, tx, c)
		if _, ok := err.(*sink.CollisionError); ok {
			return err
		}
		if err != nil {
			return fmt.Errorf("sink %s: seq %d, %s from %s/%s: %w", t.spec.Name, c.Seq, c.Logical, c.Source, c.Origin, err)
		}
		upserts += u
		missing += m
		return nil
	}
	if mode != applyReplay {
		if i := slices.IndexFunc(changes, func(c sink.Change) bool { return c.Row.PartialAfter() }); i >= 0 {
			return sink.PartialImageError(t.spec.Name, changes[i])
		}
		sink.DecodeAll(changes)
	}
	switch mode {
	case applyReplay:
		if err := t.runReplay(ctx, tx, statements); err != nil {
			return err
		}
	case applyRuns:
		// Runs are not cut at batch (a cut run would make the next run of
		// its kind start after the runs in between); each goes as
		// statements of at most batch rows.
		for _, run := range sink.Plan(changes, math.MaxInt) {
			if len(run.Changes) == 1 || run.Kind == sink.RunMove || run.Kind != sink.RunInsert && !hasKey(run.Changes[0].Row.Table) {
				for _, c := range run.Changes {
					if err := one(c); err != nil {
						return err
					}
				}
				continue
			}
			if err := t.applyRun(ctx, tx, run); err != nil {
				return err
			}
		}
	case applyOneByOne:
		for _, c := range changes {
			if err := one(c); err != nil {
				return err
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	t.applied.Add(uint64(len(changes)))
	if mode == applyReplay {
		t.replay.replayed.Add(uint64(len(changes)))
	}
	t.upserts.Add(upserts)
	t.missing.Add(missing)
	return nil
}

// claim moves worker's checkpoint to the last of changes, in tx, if it is
// before the first of them: the row stays locked until tx ends, so if
// another runner (a former owner that has not yet learnt it is one)
// applied past where these changes start, nothing of them is applied
// (sink.ErrBehind), and the runner starts again from the checkpoints.
func (t *Target) claim(ctx context.Context, tx *sql.Tx, worker int, changes []sink.Change) error {
	first, last := changes[0], changes[len(changes)-1]
	res, err := tx.ExecContext(ctx, "UPDATE "+t.checkpointTable()+" SET seq = ?, idx = ? WHERE dest = ? AND sink = ? AND worker = ? AND (seq < ? OR seq = ? AND idx < ?)",
		last.Seq, last.Row.Index, t.dest, t.spec.Name, worker, first.Seq, first.Seq, sink.FromIndex(first))
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	var at sink.Point
	err = tx.QueryRowContext(ctx, "SELECT seq, idx FROM "+t.checkpointTable()+" WHERE dest = ? AND sink = ? AND worker = ? FOR UPDATE", t.dest, t.spec.Name, worker).Scan(&at.Seq, &at.Idx)
	if errors.Is(err, sql.ErrNoRows) {
		// The worker's first transaction: its row is made (a runner doing
		// the same at once fails on the key, and starts again).
		_, err = tx.ExecContext(ctx, "INSERT INTO "+t.checkpointTable()+" (dest, sink, worker, seq, idx) VALUES (?, ?, ?, ?, ?)", t.dest, t.spec.Name, worker, last.Seq, last.Row.Index)
		return err
	}
	if err != nil {
		return err
	}
	if at.Seq < first.Seq || at.Seq == first.Seq && at.Idx < sink.FromIndex(first) {
		// Claimable, and already where the claim moves it: MariaDB counts
		// changed rows, not matched ones. A snapshot chunk read again
		// (MayExist) is applied whole once more on a worker that had
		// applied its part of it to the last row, which ends where the
		// worker's checkpoint is.
		return nil
	}
	return fmt.Errorf("%w: worker %d of sink %s is at seq %d, row %d, past seq %d, row %d", sink.ErrBehind, worker, t.spec.Name, at.Seq, at.Idx, first.Seq, first.Row.Index)
}

// applyRun applies a run of INSERTs, UPDATEs that keep their key, or
// DELETEs of one table version as statements of at most batch rows;
// errOneByOne when a row was not as expected (an INSERT's key there, an
// UPDATE's or DELETE's row missing).
func (t *Target) applyRun(ctx context.Context, tx *sql.Tx, run sink.Run) error {
	for len(run.Changes) > 0 {
		n := min(len(run.Changes), t.spec.Batch)
		if err := t.applyStatement(ctx, tx, run.Kind, run.Changes[:n]); err != nil {
			return err
		}
		run.Changes = run.Changes[n:]
	}
	return nil
}

// applyStatement applies cs, changes of one kind and table version, as
// one statement.
func (t *Target) applyStatement(ctx context.Context, tx *sql.Tx, kind sink.RunKind, cs []sink.Change) error {
	tv, table := cs[0].Row.Table, t.target(cs[0].Logical)
	var q string
	var args []any
	want := int64(len(cs))
	if !t.exactlyOnce() {
		// A change may be applied again: INSERTs and UPDATEs are
		// REPLACEs (replaceStatement), and no count is expected.
		if kind == sink.RunDelete {
			q, args = t.deleteStatement(tv, table, cs)
		} else {
			q, args = t.replaceStatement(tv, table, cs)
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("sink %s: %d changes of %s from seq %d: %w", t.spec.Name, len(cs), cs[0].Logical, cs[0].Seq, err)
		}
		return nil
	}
	switch kind {
	case sink.RunInsert:
		// A plain INSERT: a key already there fails it (1062).
		q, args = t.valuesStatement(tv, table, cs, "")
	case sink.RunUpdate:
		// Each row found and changed counts 2 (MySQL's ON DUPLICATE KEY
		// UPDATE); a row missing counts 1, one unchanged 0.
		q, args = t.valuesStatement(tv, table, cs, " ON DUPLICATE KEY UPDATE "+t.updateList(tv, table))
		want *= 2
	case sink.RunDelete:
		q, args = t.deleteStatement(tv, table, cs)
	}
	res, err := tx.ExecContext(ctx, q, args...)
	var me *driver.MySQLError
	if errors.As(err, &me) && me.Number == 1062 { // duplicate key
		return errOneByOne
	}
	if err != nil {
		return fmt.Errorf("sink %s: %d changes of %s from seq %d: %w", t.spec.Name, len(cs), cs[0].Logical, cs[0].Seq, err)
	}
	if n, _ := res.RowsAffected(); n != want {
		return errOneByOne
	}
	return nil
}

// apply runs one row change: INSERT and UPDATE are upserts of the
// after-image (an UPDATE whose row was missing, or that changes the key,
// counted or preceded by the old key's delete; at least once, REPLACEs),
// DELETE deletes by key.
func (t *Target) apply(ctx context.Context, tx *sql.Tx, c sink.Change) (upserts, missing uint64, err error) {
	rc := c.Row
	table := t.target(c.Logical)
	keyIdx := sink.KeyColumns(rc.Table)
	moved := false // an UPDATE of the key: the old row deleted, the new one inserted
	origin := c.Source + "/" + c.Origin
	del := func(img []change.Value) (int64, error) {
		args := values(img, keyIdx)
		if t.spec.OriginColumn != "" {
			args = append(args, origin)
		}
		res, err := tx.ExecContext(ctx, t.statement(rc.Table, 'd', table), args...)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	}
	switch rc.Kind {
	case change.Delete:
		n, err := del(c.Before)
		if n == 0 && err == nil {
			missing++
		}
		return 0, missing, err
	case change.Update:
		before, after := c.Before, c.After
		if moved = sink.Key("", before, keyIdx) != sink.Key("", after, keyIdx); moved {
			if n, err := del(before); err != nil {
				return 0, 0, err
			} else if n == 0 {
				missing++
			}
		}
	}
	args := c.After
	if t.spec.OriginColumn != "" {
		args = append(slices.Clip(args), origin)
	}
	if (rc.Kind == change.Insert || moved) && t.exactlyOnce() && t.spec.OriginColumn == "" && !c.MayExist {
		// Its checkpoint says it was not applied, so a row that holds one
		// of its keys is another shard table's (or was there before the
		// sink): a plain INSERT fails on it, naming the key.
		_, err := tx.ExecContext(ctx, t.statement(rc.Table, 'i', table), args...)
		if key, ok := duplicateKey(err); ok {
			return 0, 0, t.collision(ctx, c, table, key)
		}
		return 0, missing, err
	}
	kind := byte('u')
	if !t.exactlyOnce() {
		kind = 'r' // see replaceStatement
	}
	res, err := tx.ExecContext(ctx, t.statement(rc.Table, kind, table), args...)
	if err != nil {
		return 0, 0, err
	}
	n, _ := res.RowsAffected()
	switch {
	case !t.exactlyOnce():
		// A change applied again finds what it wrote: nothing to count.
	case rc.Kind == change.Insert && n != 1:
		upserts++ // the key was there: this shard table's own row
	case rc.Kind == change.Update && n == 1 && !moved:
		missing++ // the row was not there: inserted from the after-image
	}
	return upserts, missing, nil
}

// duplicateKey returns the key a duplicate-key error (1062) names:
// MariaDB says "Duplicate entry 'v' for key 'k'", MySQL 8 'table.k'.
func duplicateKey(err error) (key string, ok bool) {
	var me *driver.MySQLError
	if !errors.As(err, &me) || me.Number != 1062 {
		return "", false
	}
	at := strings.LastIndex(me.Message, " for key '")
	if at < 0 {
		return "", true
	}
	return strings.TrimSuffix(me.Message[at+len(" for key '"):], "'"), true
}

// collision is the error of change c, whose INSERT into table (quoted)
// found key (a target key's name, as duplicateKey gives it) taken: it
// names the key's columns, so that the error and the lookup of the key's
// holders at the sources (sink.Runner.Holders) are about the key that
// collided. A key it cannot read is taken as the primary key.
func (t *Target) collision(ctx context.Context, c sink.Change, table, key string) *sink.CollisionError {
	var columns []string
	if key != "PRIMARY" && !strings.HasSuffix(key, ".PRIMARY") {
		keys, _ := t.uniqueKeys(ctx, t.spec.Target(c.Logical))
		for _, k := range keys {
			if k.name == key || strings.HasSuffix(key, "."+k.name) {
				columns = k.names
				break
			}
		}
	}
	return sink.Collision(t.spec.Name, table, c, columns)
}
