package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/braid-cdc/braid/sink"
)

// The checkpoint table, <meta_database>.sink_checkpoint, holds a row per
// destination, sink and worker (and the sink.WorkersRow): sinks of two
// destinations may share a name and a meta schema, and each reads only
// its own rows.

func (t *Target) checkpointTable() string {
	return quoteIdent(t.spec.MetaDatabase) + ".sink_checkpoint"
}

// advanceSignature is sink_advance's argument types, as to_regprocedure
// and DROP FUNCTION name it; oldAdvanceSignature an older braid's, whose
// checkpoints had no destination.
const (
	advanceSignature    = "(text, text, integer, bigint, integer, bigint, integer)"
	oldAdvanceSignature = "(text, integer, bigint, integer, bigint, integer)"
)

// setup makes the meta schema, its checkpoint table and sink_advance, one
// sink's Open at a time (CREATE ... IF NOT EXISTS races with itself).
// When they are there already, as this version makes them, it changes
// nothing: a user who may only write to them (made by another) can run
// a sink. A checkpoint table an older braid made, keyed by sink and
// worker alone, is migrated: the dest column joins the key, Unowned in
// the old rows (which Checkpoints adopts), without a default, and the
// older sink_advance is dropped, so that an older braid still running
// against it fails rather than writes rows no destination owns.
func (t *Target) setup(ctx context.Context, c *pgx.Conn) error {
	meta := quoteIdent(t.spec.MetaDatabase)
	create := fmt.Sprintf(advanceFunc, meta, errBehindCode)
	body := create[strings.Index(create, "$fn$")+4 : strings.LastIndex(create, "$fn$")]
	var ready bool
	err := c.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'dest' AND NOT attisdropped)
		AND EXISTS (SELECT 1 FROM pg_proc WHERE oid = to_regprocedure($2) AND prosrc = $3)`,
		t.checkpointTable(), meta+".sink_advance"+advanceSignature, body).Scan(&ready)
	if err != nil || ready {
		return err
	}
	migrated := false
	err = pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('braid sink setup'))"); err != nil {
			return err
		}
		if err := ensureSchema(ctx, tx, meta); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+t.checkpointTable()+" (dest text NOT NULL, sink text NOT NULL, worker integer NOT NULL, seq bigint NOT NULL, idx integer NOT NULL, PRIMARY KEY (dest, sink, worker))"); err != nil {
			return err
		}
		var pkey string
		var keyed bool
		err := tx.QueryRow(ctx, `SELECT conname, EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = conrelid AND attname = 'dest' AND NOT attisdropped)
			FROM pg_constraint WHERE conrelid = to_regclass($1) AND contype = 'p'`, t.checkpointTable()).Scan(&pkey, &keyed)
		if err != nil {
			return fmt.Errorf("read %s's primary key: %w", t.checkpointTable(), err)
		}
		if !keyed {
			for _, q := range []string{
				"ALTER TABLE " + t.checkpointTable() + " ADD COLUMN dest text NOT NULL DEFAULT '', DROP CONSTRAINT " + quoteIdent(pkey) + ", ADD PRIMARY KEY (dest, sink, worker)",
				"ALTER TABLE " + t.checkpointTable() + " ALTER COLUMN dest DROP DEFAULT",
			} {
				if _, err := tx.Exec(ctx, q); err != nil {
					return fmt.Errorf("migrate %s to checkpoints per destination: %w", t.checkpointTable(), err)
				}
			}
			migrated = true
		}
		for _, q := range []string{"DROP FUNCTION IF EXISTS " + meta + ".sink_advance" + oldAdvanceSignature, create} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil && migrated {
		t.log.Info("sink checkpoint table migrated: checkpoints are kept per destination and sink; the older rows go to the first destination that opens a sink of their name",
			"dest", t.dest, "sink", t.spec.Name, "table", t.spec.MetaDatabase+".sink_checkpoint")
	}
	return err
}

// advanceFunc is sink_advance(dest, sink, worker, first seq, first idx,
// last seq, last idx): it locks the worker's checkpoint row, raises
// errBehindCode if it is not before (first seq, first idx), and sets it
// to (last seq, last idx). It is the first statement of a worker's
// transaction, so changes another runner applied abort the transaction
// before its rows commit, and the rest of the transaction needs no answer
// from the server before it is sent: the whole transaction is one round
// trip.
const advanceFunc = `CREATE OR REPLACE FUNCTION %[1]s.sink_advance(p_dest text, p_sink text, p_worker integer, p_first_seq bigint, p_first_idx integer, p_last_seq bigint, p_last_idx integer)
RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
	at_seq bigint;
	at_idx integer;
BEGIN
	SELECT seq, idx INTO at_seq, at_idx FROM %[1]s.sink_checkpoint WHERE dest = p_dest AND sink = p_sink AND worker = p_worker FOR UPDATE;
	IF NOT FOUND THEN
		BEGIN
			INSERT INTO %[1]s.sink_checkpoint (dest, sink, worker, seq, idx) VALUES (p_dest, p_sink, p_worker, p_last_seq, p_last_idx);
		EXCEPTION WHEN unique_violation THEN
			RAISE EXCEPTION 'worker %% of sink %% was checkpointed by another runner at the same time', p_worker, p_sink USING ERRCODE = '%[2]s';
		END;
		RETURN;
	END IF;
	IF (at_seq, at_idx) >= (p_first_seq, p_first_idx) THEN
		RAISE EXCEPTION 'worker %% of sink %% is at seq %%, row %%', p_worker, p_sink, at_seq, at_idx USING ERRCODE = '%[2]s';
	END IF;
	UPDATE %[1]s.sink_checkpoint SET seq = p_last_seq, idx = p_last_idx WHERE dest = p_dest AND sink = p_sink AND worker = p_worker;
END
$fn$`

// adoptCheckpoints gives the sink's Unowned checkpoint rows to its
// destination when sink.AdoptCheckpoints says so, or returns its error.
// The rows are read without a lock first, since there are none but
// after a migration; then again under one, so that two destinations
// that open a sink of one name at once do not both adopt them.
func (t *Target) adoptCheckpoints(ctx context.Context, c *pgx.Conn) error {
	rows, err := t.checkpointOwners(ctx, c)
	if err != nil || rows[sink.Unowned] == 0 {
		return err
	}
	adopted := 0
	err = pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('braid sink checkpoints'))"); err != nil {
			return err
		}
		if rows, err = t.checkpointOwners(ctx, tx); err != nil {
			return err
		}
		adopt, err := sink.AdoptCheckpoints(t.dest, t.spec.Name, t.spec.MetaDatabase+".sink_checkpoint", rows)
		if err != nil || !adopt {
			return err
		}
		tag, err := tx.Exec(ctx, "UPDATE "+t.checkpointTable()+" SET dest = $1 WHERE dest = $2 AND sink = $3", t.dest, sink.Unowned, t.spec.Name)
		adopted = int(tag.RowsAffected())
		return err
	})
	if err == nil && adopted > 0 {
		t.log.Warn("sink adopted the checkpoints an older braid wrote under its name alone, as no other destination has a sink of that name with checkpoints",
			"dest", t.dest, "sink", t.spec.Name, "rows", adopted, "table", t.spec.MetaDatabase+".sink_checkpoint")
	}
	return err
}

// querier is a *pgx.Conn or a pgx.Tx.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// checkpointOwners counts the checkpoint rows of the sink's name by
// destination (sink.CheckpointOwners), read by q.
func (t *Target) checkpointOwners(ctx context.Context, q querier) (map[string]int, error) {
	rows, err := q.Query(ctx, "SELECT dest FROM "+t.checkpointTable()+" WHERE sink = $1", t.spec.Name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return sink.CheckpointOwners(rows)
}

// ensureSchema creates schema (quoted) unless it exists, by q. CREATE
// SCHEMA IF NOT EXISTS would do, but it asks for CREATE on the database
// even when the schema is there, which a user given CREATE on that schema
// alone has not; and a DO block would put the name inside a dollar-quoted
// body, which a name holding its tag ends.
func ensureSchema(ctx context.Context, q execQuerier, schema string) error {
	var missing bool
	if err := q.QueryRow(ctx, "SELECT to_regnamespace($1) IS NULL", schema).Scan(&missing); err != nil || !missing {
		return err
	}
	_, err := q.Exec(ctx, "CREATE SCHEMA "+schema)
	return err
}

// execQuerier is a *pgx.Conn or a pgx.Tx.
type execQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}
