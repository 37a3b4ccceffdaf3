package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	driver "github.com/go-sql-driver/mysql"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/schema"
	"github.com/braid-cdc/braid/sink"
)

// ApplyDDL implements sink.Target. MySQL commits a DDL by itself, so the
// checkpoints follow it: a crash between the two runs it again, and an
// error that says it is there already (a duplicate column, a table that
// exists) is taken as applied. A shard table's TRUNCATE is a DELETE of
// its rows, in one transaction with the checkpoints.
//
// Like a worker's transaction (claim), a DDL that every worker's
// checkpoint is past already is not applied (sink.ErrBehind): a runner
// that has not yet learnt another took over must not run a TRUNCATE's
// DELETE over the rows the other wrote since, nor set the checkpoints
// back to the DDL.
func (t *Target) ApplyDDL(ctx context.Context, ev *change.Event, workers int) error {
	if shard, ok := schema.TruncatedTable(ev.DDL.Schema, ev.DDL.SQL, schema.SQLMode(ev.DDL.SQLMode)); ok {
		if t.spec.OriginColumn == "" {
			return fmt.Errorf("sink %s: seq %d: TRUNCATE of shard table %s/%s: the target holds every shard table's rows of %s together; set origin_column to delete only that shard table's",
				t.spec.Name, ev.Seq, ev.Source, shard, strings.Join(ev.DDL.Tables, ","))
		}
		tx, err := t.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := t.ddlBehind(ctx, tx, ev.Seq, workers); err != nil {
			return err
		}
		ls, lt := ev.DDL.Logical()
		if _, err := tx.ExecContext(ctx, "DELETE FROM "+t.target(ls+"."+lt)+" WHERE "+quote(t.spec.OriginColumn)+" = ?", ev.Source+"/"+shard); err != nil {
			return fmt.Errorf("sink %s: seq %d: TRUNCATE of %s/%s: %w", t.spec.Name, ev.Seq, ev.Source, shard, err)
		}
		if err := t.checkpointAll(ctx, tx, ev.Seq, workers); err != nil {
			return err
		}
		return tx.Commit()
	}
	if t.spec.DDL == "ignore" {
		// Nothing is applied, so the checkpoints need not follow it (a
		// restart before the next rows meets it again, and ignores it
		// again) and no query runs: on a target whose tables were made
		// beforehand, each shard's CREATEs cost a read and a commit each,
		// and held the first rows back. What the sink read of the tables
		// it names is read again: their owner may change them to match.
		t.forget(ev.DDL)
		return nil
	}
	if err := t.ddlBehind(ctx, t.db, ev.Seq, workers); err != nil {
		return err
	}
	// The statement as parsed under its session's sql_mode, restored
	// with the target's names: never the shard's text (see
	// schema.TargetDDLs).
	stmts, err := sink.TargetDDLs(t.spec.Name, ev, t.spec.Target)
	if err != nil {
		return err
	}
	for _, st := range stmts {
		if st.Kind == schema.DDLCreate {
			db, _, _ := strings.Cut(st.Tables[0], ".")
			if _, err := t.db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+quote(db)); err != nil {
				return fmt.Errorf("sink %s: DDL at seq %d: %w", t.spec.Name, ev.Seq, err)
			}
		}
		// A MySQL 8 source's collations and VECTOR columns, as the
		// target can hold them (mysql8.go).
		text, err := t.mysql8Text(ctx, ev, st)
		if err != nil {
			return err
		}
		err = t.exec(ctx, text)
		if noSuchTable(err) && t.spec.CreateTables && st.Kind == schema.DDLAlter {
			// The target table is made at its first row (create_tables),
			// and this one has had none yet: it is made now, from the
			// stream's version of the table after the DDL, which holds
			// what the DDL changed.
			err = t.createAltered(ctx, ev)
		}
		if err == nil && t.spec.OriginColumn != "" {
			// A table the DDL made gets the origin column; one it gave
			// a unique key gets the column in that key.
			err = t.originKeys(ctx, ev.DDL.Tables[0])
		}
		if err != nil {
			return fmt.Errorf("sink %s: DDL at seq %d (%s): %w", t.spec.Name, ev.Seq, clip(st.Text), err)
		}
	}
	t.forget(ev.DDL)
	return t.checkpointAll(ctx, t.db, ev.Seq, workers)
}

// forget drops what the sink read of the target tables of the logical
// tables DDL d names (whether each exists, its columns and triggers,
// which table versions replay into it), to be read again at their next
// rows; the other tables' stay. Dropping them all at every DDL made each
// shard's CREATE TABLE read every table again, at two information_schema
// queries a table. A DDL that names no table drops them all.
func (t *Target) forget(d *change.DDL) {
	if len(d.LogicalTables) == 0 {
		t.tables.Clear()
		t.replay.fits.Clear()
		t.replay.targets.Clear()
		return
	}
	targets := make(map[string]bool, len(d.LogicalTables))
	for _, logical := range d.LogicalTables {
		target := t.spec.Target(logical)
		targets[target] = true
		t.tables.Delete(target)
		t.replay.targets.Delete(target)
	}
	t.replay.fits.Range(func(k, _ any) bool {
		if targets[t.spec.Target(k.(fitKey).logical)] {
			t.replay.fits.Delete(k)
		}
		return true
	})
}

// createAltered creates the target table of ev's logical table, which
// an ALTER found missing, from the stream's version of it after the DDL.
// Without one (the ALTER renamed it away) nothing is made: the table's
// first row makes it, as create_tables does.
func (t *Target) createAltered(ctx context.Context, ev *change.Event) error {
	if len(ev.Versions) == 0 || ev.Versions[0] == nil {
		return nil
	}
	ls, lt := ev.DDL.Logical()
	db, _, _ := strings.Cut(t.spec.Target(ls+"."+lt), ".")
	return t.createTable(ctx, ev.Versions[0], db, t.target(ls+"."+lt))
}

// noSuchTable reports MySQL's error for a table that does not exist (1146).
func noSuchTable(err error) bool {
	var me *driver.MySQLError
	return errors.As(err, &me) && me.Number == 1146
}

// ddlBehind returns sink.ErrBehind when every one of workers' checkpoints
// is at or past the DDL at seq: another runner applied it. In a
// transaction, the checkpoint rows stay locked till it ends.
func (t *Target) ddlBehind(ctx context.Context, q execer, seq uint64, workers int) error {
	if !t.exactlyOnce() {
		return nil
	}
	lock := ""
	if _, ok := q.(*sql.Tx); ok {
		lock = " FOR UPDATE"
	}
	rows, err := q.QueryContext(ctx, "SELECT worker, seq, idx FROM "+t.checkpointTable()+" WHERE dest = ? AND sink = ?"+lock, t.dest, t.spec.Name)
	if err != nil {
		return err
	}
	defer rows.Close()
	past := 0
	for rows.Next() {
		var w int
		var at sink.Point
		if err := rows.Scan(&w, &at.Seq, &at.Idx); err != nil {
			return err
		}
		if w >= 0 && w < workers && !at.Before(sink.Point{Seq: seq, Idx: sink.MaxIdx}) {
			past++
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if past == workers {
		return fmt.Errorf("%w: every worker of sink %s is at or past the DDL at seq %d", sink.ErrBehind, t.spec.Name, seq)
	}
	return nil
}

// exec runs a DDL, a second run of one already applied being no error.
func (t *Target) exec(ctx context.Context, ddl string) error {
	if _, err := t.db.ExecContext(ctx, ddl); err != nil && !alreadyApplied(err) {
		return err
	}
	return nil
}

// checkpointAll sets every worker's checkpoint to the whole of seq, by q
// (the target, or the transaction of a TRUNCATE's DELETE).
func (t *Target) checkpointAll(ctx context.Context, q execer, seq uint64, workers int) error {
	if !t.exactlyOnce() {
		return nil
	}
	// One statement, so one commit: every worker moves past the DDL, or
	// none does (a statement a worker took 16 commits: 5-7 ms on 3306,
	// against 0.4-0.7 for one).
	// A checkpoint only moves on: one already past the DDL (a runner
	// that took over applied it and more) stays. idx is set first, by the
	// row's seq before this statement changes it.
	var b strings.Builder
	b.WriteString("INSERT INTO " + t.checkpointTable() + " (dest, sink, worker, seq, idx) VALUES ")
	args := make([]any, 0, 5*workers)
	for w := range workers {
		if w > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?)")
		args = append(args, t.dest, t.spec.Name, w, seq, sink.MaxIdx)
	}
	b.WriteString(" ON DUPLICATE KEY UPDATE idx = IF(seq < VALUES(seq) OR seq = VALUES(seq) AND idx < VALUES(idx), VALUES(idx), idx), seq = GREATEST(seq, VALUES(seq))")
	_, err := q.ExecContext(ctx, b.String(), args...)
	return err
}

// alreadyApplied reports the errors of a DDL run a second time.
func alreadyApplied(err error) bool {
	var me *driver.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case 1050, 1060, 1061, 1091, 1051: // table exists, duplicate column or key, can't drop, unknown table
		return true
	}
	return false
}

// clip shortens a statement for an error.
func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
