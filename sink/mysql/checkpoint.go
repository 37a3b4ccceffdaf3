package mysql

import (
	"context"
	"fmt"

	"github.com/braid-cdc/braid/sink"
)

// The checkpoint table, <meta_database>.sink_checkpoint, holds a row per
// destination, sink and worker (and the sink.WorkersRow): sinks of two
// destinations may share a name and a meta database, and each reads only
// its own rows.

func (t *Target) checkpointTable() string { return quote(t.spec.MetaDatabase) + ".sink_checkpoint" }

// setupCheckpoints makes the meta database and the checkpoint table, and
// migrates one an older braid made, keyed by sink and worker alone: the
// dest column goes in front of the key, Unowned in the old rows (which
// Checkpoints adopts), and without a default, so that an older braid
// still running against it fails to insert rows no destination owns.
func (t *Target) setupCheckpoints(ctx context.Context) error {
	for _, q := range []string{
		"CREATE DATABASE IF NOT EXISTS " + quote(t.spec.MetaDatabase),
		"CREATE TABLE IF NOT EXISTS " + t.checkpointTable() + " (dest VARCHAR(128) NOT NULL, sink VARCHAR(128) NOT NULL, worker INT NOT NULL, seq BIGINT UNSIGNED NOT NULL, idx INT NOT NULL, PRIMARY KEY (dest, sink, worker))",
	} {
		if _, err := t.db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	if ok, err := t.checkpointsKeyDest(ctx); err != nil || ok {
		return err
	}
	_, err := t.db.ExecContext(ctx, "ALTER TABLE "+t.checkpointTable()+" ADD COLUMN dest VARCHAR(128) NOT NULL DEFAULT '' FIRST, DROP PRIMARY KEY, ADD PRIMARY KEY (dest, sink, worker)")
	if err != nil {
		if ok, err2 := t.checkpointsKeyDest(ctx); err2 == nil && ok {
			return nil // another sink's Open migrated it meanwhile
		}
		return fmt.Errorf("migrate %s to checkpoints per destination: %w", t.checkpointTable(), err)
	}
	if _, err := t.db.ExecContext(ctx, "ALTER TABLE "+t.checkpointTable()+" ALTER COLUMN dest DROP DEFAULT"); err != nil {
		return fmt.Errorf("migrate %s to checkpoints per destination: %w", t.checkpointTable(), err)
	}
	t.log.Info("sink checkpoint table migrated: checkpoints are kept per destination and sink; the older rows go to the first destination that opens a sink of their name",
		"dest", t.dest, "sink", t.spec.Name, "table", t.spec.MetaDatabase+".sink_checkpoint")
	return nil
}

// checkpointsKeyDest reports whether the checkpoint table has the dest
// column.
func (t *Target) checkpointsKeyDest(ctx context.Context) (bool, error) {
	var n int
	err := t.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'sink_checkpoint' AND COLUMN_NAME = 'dest'", t.spec.MetaDatabase).Scan(&n)
	return n > 0, err
}

// adoptCheckpoints gives the sink's Unowned checkpoint rows to its
// destination when sink.AdoptCheckpoints says so, or returns its error.
// The rows are read without a lock first, since there are none but
// after a migration; then again under one, so that two destinations
// that open a sink of one name at once do not both adopt them.
func (t *Target) adoptCheckpoints(ctx context.Context) error {
	rows, err := t.checkpointOwners(ctx, t.db, "")
	if err != nil || rows[sink.Unowned] == 0 {
		return err
	}
	tx, err := t.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if rows, err = t.checkpointOwners(ctx, tx, " FOR UPDATE"); err != nil {
		return err
	}
	adopt, err := sink.AdoptCheckpoints(t.dest, t.spec.Name, t.spec.MetaDatabase+".sink_checkpoint", rows)
	if err != nil || !adopt {
		return err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE "+t.checkpointTable()+" SET dest = ? WHERE dest = ? AND sink = ?", t.dest, sink.Unowned, t.spec.Name); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	t.log.Warn("sink adopted the checkpoints an older braid wrote under its name alone, as no other destination has a sink of that name with checkpoints",
		"dest", t.dest, "sink", t.spec.Name, "rows", rows[sink.Unowned], "table", t.spec.MetaDatabase+".sink_checkpoint")
	return nil
}

// checkpointOwners counts the checkpoint rows of the sink's name by
// destination (sink.CheckpointOwners), read by q with lock at the end.
func (t *Target) checkpointOwners(ctx context.Context, q execer, lock string) (map[string]int, error) {
	rows, err := q.QueryContext(ctx, "SELECT dest FROM "+t.checkpointTable()+" WHERE sink = ?"+lock, t.spec.Name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return sink.CheckpointOwners(rows)
}
