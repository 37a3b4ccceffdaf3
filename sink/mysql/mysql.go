// Package mysql is the sink that applies a destination's stream to a
// MySQL or MariaDB table (spec sinks: type: mysql): each worker
// transaction writes its rows and the worker's checkpoint
// (braid_meta.sink_checkpoint, a row per destination, sink and worker)
// before it commits, so a restart resumes
// exactly where the target stands. Into MariaDB from MariaDB it replays
// the binlog's row events in BINLOG statements (replay.go), as a replica
// applies them; elsewhere, and whenever a row is not as a replica
// expects it, it writes SQL statements: multi-row INSERTs, upserts and
// DELETEs whose affected rows it checks, or a row at a time.
//
// A DDL is never run as the shard wrote it: it is parsed under the
// sql_mode its session had, checked and restored with the target's
// names (schema.TargetDDLs); one it will not rebuild stops the sink with
// a line naming it (sink.ErrDDLRefused). Its sessions run in the
// server's sql_mode less the modes that change how text reads, so the
// restored text means what its parse said.
package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/braid-cdc/braid/change"
	"github.com/braid-cdc/braid/internal/mysqlauth"
	"github.com/braid-cdc/braid/internal/sqlutf8"
	"github.com/braid-cdc/braid/schema"
	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/spec"
)

// Target is a MySQL or MariaDB target.
type Target struct {
	db    *sql.DB
	spec  spec.Sink
	dest  string // the sink's destination, which owns its checkpoints
	log   *slog.Logger
	stmts sync.Map // statementKey → string

	applied, upserts, missing atomic.Uint64
	// tables holds the target tables known to exist (ensureTables).
	tables sync.Map
	replay replayState
	// routing is the sink's sink.Routing, as Checkpoints found it.
	routing atomic.Int32
	// turns, when the sink has more workers than connections, holds a
	// token for each worker transaction running on the target.
	turns chan struct{}
}

var _ sink.Target = (*Target)(nil)

type statementKey struct {
	t    *change.Table
	kind byte // 'u' upsert, 'd' delete
}

// Open connects to sink s of destination dest and makes its checkpoint
// table; log (nil: none) hears what it decides on its own.
func Open(ctx context.Context, s spec.Sink, dest string, log *slog.Logger) (*Target, error) {
	pw, err := s.ResolvePassword()
	if err != nil {
		return nil, err
	}
	cfg := driver.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr = s.User, pw, "tcp", s.Address
	cfg.InterpolateParams = true
	if err := sqlutf8.MySQLDriver(cfg); err != nil {
		return nil, fmt.Errorf("sink %s: %w", s.Name, err)
	}
	// No TLS: the server must not have the password in clear.
	var watch mysqlauth.Watch
	if cfg.TLS == nil {
		cfg.DialFunc = watch.Dial(nil)
	}
	// The DDL the sink runs is restored for the default quoting (names in
	// backquotes, strings in single quotes with backslash escapes); a
	// server whose sql_mode reads them otherwise would run something else.
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["sql_mode"] = pinnedSQLMode
	connector, err := driver.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("sink %s: %w", s.Name, err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(s.Workers + 2)
	db.SetMaxIdleConns(s.Workers + 2)
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := &Target{db: db, spec: s, dest: dest, log: log}
	if s.Connections > 0 && s.Connections < s.Workers {
		t.turns = make(chan struct{}, s.Connections)
	}
	if err := t.initReplay(ctx); err != nil {
		db.Close()
		if refused := watch.Err(); refused != nil {
			return nil, fmt.Errorf("sink %s (%s): %w: check that the address is the target's own, and give user %q an authentication plugin "+
				"that proves the password without sending it (mysql_native_password, ed25519, or caching_sha2_password once the server has cached it)",
				s.Name, s.Address, refused, cfg.User)
		}
		return nil, fmt.Errorf("sink %s (%s): %w: check the address and the user's password", s.Name, s.Address, err)
	}
	if !t.exactlyOnce() {
		return t, nil // no checkpoint table: the sink's cursor is the record
	}
	if err := t.setupCheckpoints(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sink %s (%s): %w: check the address, the user's password and its CREATE, ALTER and INSERT grants on %s", s.Name, s.Address, err, s.MetaDatabase)
	}
	return t, nil
}

// exactlyOnce reports whether the target keeps checkpoints (mode
// exactly-once); else (at-least-once) a change is applied again after a
// crash, as an idempotent upsert or delete, and counts nothing.
func (t *Target) exactlyOnce() bool { return t.spec.Mode != spec.SinkAtLeastOnce }

// Close implements sink.Target.
func (t *Target) Close() error { return t.db.Close() }

// Stats implements sink.Target.
func (t *Target) Stats() sink.Stats {
	return sink.Stats{Applied: t.applied.Load(), Upserts: t.upserts.Load(), Missing: t.missing.Load(), Replayed: t.replay.replayed.Load()}
}

// Checkpoints implements sink.Target.
func (t *Target) Checkpoints(ctx context.Context, n int) ([]sink.Point, error) {
	if !t.exactlyOnce() {
		t.routing.Store(int32(sink.RouteByRange)) // no checkpoints to keep to
		return make([]sink.Point, n), nil
	}
	if err := t.adoptCheckpoints(ctx); err != nil {
		return nil, fmt.Errorf("sink %s: read checkpoints: %w", t.spec.Name, err)
	}
	rows, err := t.db.QueryContext(ctx, "SELECT worker, seq, idx FROM "+t.checkpointTable()+" WHERE dest = ? AND sink = ?", t.dest, t.spec.Name)
	if err != nil {
		return nil, fmt.Errorf("sink %s: read checkpoints: %w", t.spec.Name, err)
	}
	defer rows.Close()
	next := func() (r sink.CheckpointRow, ok bool, err error) {
		if !rows.Next() {
			return r, false, rows.Err()
		}
		return r, true, rows.Scan(&r.Worker, &r.Seq, &r.Idx)
	}
	out, routing, err := sink.SQLCheckpoints(t.spec.Name, n, "the sink's rows of "+t.checkpointTable()+" (dest '"+t.dest+"')", next, func(r sink.Routing) error {
		_, err := t.db.ExecContext(ctx, "INSERT IGNORE INTO "+t.checkpointTable()+" (dest, sink, worker, seq, idx) VALUES (?, ?, ?, ?, ?)", t.dest, t.spec.Name, sink.WorkersRow, n, int(r))
		return err
	})
	if err != nil {
		return nil, err
	}
	t.routing.Store(int32(routing))
	return out, nil
}

// Routing implements sink.RoutedTarget.
func (t *Target) Routing() sink.Routing { return sink.Routing(t.routing.Load()) }

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
var errOneByOne = errors.New("apply the batch a row at a time")

// How applyTx applies its changes.
type applyMode int

const (
	applyReplay   applyMode = iota // as binlog row events
	applyRuns                      // as runs of multi-row statements
	applyOneByOne                  // a row at a time
)

// applyTx is Apply's transaction; statements are the BINLOG statements
// of applyReplay.
func (t *Target) applyTx(ctx context.Context, worker int, changes []sink.Change, mode applyMode, statements []string) error {
	if t.turns != nil {
		select {
		case t.turns <- struct{}{}:
			defer func() { <-t.turns }()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	tx, err := t.db.BeginTx(ctx, nil)
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
// applied past where this batch starts, nothing of it is applied
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
		// A change may be applied again: INSERTs and UPDATEs are upserts,
		// and no count is expected.
		if kind == sink.RunDelete {
			q, args = t.deleteStatement(tv, table, cs)
		} else {
			q, args = t.valuesStatement(tv, table, cs, " ON DUPLICATE KEY UPDATE "+t.updateList(tv, table))
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

// valuesStatement is INSERT INTO table of cs's after-images, one VALUES
// row each, then tail.
func (t *Target) valuesStatement(tv *change.Table, table string, cs []sink.Change, tail string) (string, []any) {
	one := t.statement(tv, 'u', table)
	head := one[:strings.Index(one, " ON DUPLICATE KEY UPDATE ")]
	values := head[strings.LastIndex(head, " VALUES ")+len(" VALUES "):]
	var b strings.Builder
	b.Grow(len(head) + (len(values)+2)*len(cs) + len(tail))
	b.WriteString(head)
	args := make([]any, 0, len(cs)*(len(tv.Columns)+1))
	for i, c := range cs {
		if i > 0 {
			b.WriteString(", ")
			b.WriteString(values)
		}
		args = append(args, c.After...)
		if t.spec.OriginColumn != "" {
			args = append(args, c.Source+"/"+c.Origin)
		}
	}
	b.WriteString(tail)
	return b.String(), args
}

// updateList is the ON DUPLICATE KEY UPDATE list of tv's columns.
func (t *Target) updateList(tv *change.Table, table string) string {
	one := t.statement(tv, 'u', table)
	return one[strings.Index(one, " ON DUPLICATE KEY UPDATE ")+len(" ON DUPLICATE KEY UPDATE "):]
}

// deleteStatement deletes cs's rows by key (with the origin column, each
// row's shard table's): one IN list for a one-column key, else ORs.
func (t *Target) deleteStatement(tv *change.Table, table string, cs []sink.Change) (string, []any) {
	idx := sink.KeyColumns(tv)
	oc := t.spec.OriginColumn
	var b strings.Builder
	b.WriteString("DELETE FROM ")
	b.WriteString(table)
	b.WriteString(" WHERE ")
	args := make([]any, 0, len(cs)*(len(idx)+1))
	if len(idx) == 1 && oc == "" {
		b.WriteString(quote(tv.Columns[idx[0]].Name))
		b.WriteString(" IN (")
		for i, c := range cs {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('?')
			args = append(args, c.Before[idx[0]])
		}
		b.WriteByte(')')
		return b.String(), args
	}
	for i, c := range cs {
		if i > 0 {
			b.WriteString(" OR ")
		}
		b.WriteByte('(')
		for k, j := range idx {
			if k > 0 {
				b.WriteString(" AND ")
			}
			b.WriteString(quote(tv.Columns[j].Name))
			b.WriteString(" = ?")
			args = append(args, c.Before[j])
		}
		if oc != "" {
			b.WriteString(" AND ")
			b.WriteString(quote(oc))
			b.WriteString(" = ?")
			args = append(args, c.Source+"/"+c.Origin)
		}
		b.WriteByte(')')
	}
	return b.String(), args
}

// hasKey reports whether tv has a primary key.
func hasKey(tv *change.Table) bool {
	return slices.ContainsFunc(tv.Columns, func(c change.Column) bool { return c.Key })
}

// apply runs one row change: INSERT and UPDATE are upserts of the
// after-image (an UPDATE whose row was missing, or that changes the key,
// counted or preceded by the old key's delete), DELETE deletes by key.
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
	res, err := tx.ExecContext(ctx, t.statement(rc.Table, 'u', table), args...)
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

// target is the target table of a logical one, quoted.
func (t *Target) target(logical string) string {
	db, tbl, _ := strings.Cut(t.spec.Target(logical), ".")
	return quote(db) + "." + quote(tbl)
}

// statement is the upsert or delete of rows of table version tv into table.
func (t *Target) statement(tv *change.Table, kind byte, table string) string {
	k := statementKey{tv, kind}
	if s, ok := t.stmts.Load(k); ok {
		return s.(string)
	}
	var b strings.Builder
	switch kind {
	case 'i', 'u':
		cols := make([]string, len(tv.Columns))
		set := make([]string, len(tv.Columns))
		for i, c := range tv.Columns {
			cols[i] = quote(c.Name)
			set[i] = cols[i] + " = VALUES(" + cols[i] + ")"
		}
		if oc := t.spec.OriginColumn; oc != "" {
			cols = append(cols, quote(oc))
		}
		fmt.Fprintf(&b, "INSERT INTO %s (%s) VALUES (%s)", table, strings.Join(cols, ", "), strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", "))
		if kind == 'u' {
			b.WriteString(" ON DUPLICATE KEY UPDATE " + strings.Join(set, ", "))
		}
	case 'd':
		var where []string
		for _, i := range sink.KeyColumns(tv) {
			where = append(where, quote(tv.Columns[i].Name)+" <=> ?")
		}
		if oc := t.spec.OriginColumn; oc != "" {
			where = append(where, quote(oc)+" = ?")
		}
		fmt.Fprintf(&b, "DELETE FROM %s WHERE %s LIMIT 1", table, strings.Join(where, " AND "))
	}
	s := b.String()
	t.stmts.Store(k, s)
	return s
}

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
	if err := t.ddlBehind(ctx, t.db, ev.Seq, workers); err != nil {
		return err
	}
	if t.spec.DDL != "ignore" {
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
			err := t.exec(ctx, st.Text)
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
	}
	return t.checkpointAll(ctx, t.db, ev.Seq, workers)
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

// execer is a *sql.DB or a *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
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
	t.tables.Clear() // a DDL may have made or dropped a target table
	t.replay.fits.Clear()
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

func values(img []change.Value, idx []int) []any {
	out := make([]any, len(idx))
	for k, i := range idx {
		out[k] = img[i]
	}
	return out
}

func quote(name string) string { return "`" + strings.ReplaceAll(name, "`", "``") + "`" }

// pinnedSQLMode is the sql_mode of the sink's sessions: the server's own,
// less the modes that change how text reads (NO_BACKSLASH_ESCAPES,
// ANSI_QUOTES and ANSI, PIPES_AS_CONCAT, HIGH_NOT_PRECEDENCE).
const pinnedSQLMode = "TRIM(BOTH ',' FROM " +
	"REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(CONCAT(',', @@GLOBAL.sql_mode, ','), " +
	"',NO_BACKSLASH_ESCAPES,', ','), ',ANSI_QUOTES,', ','), ',ANSI,', ','), ',PIPES_AS_CONCAT,', ','), ',HIGH_NOT_PRECEDENCE,', ','))"

// clip shortens a statement for an error.
func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
