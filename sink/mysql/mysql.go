package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/internal/mysqlauth"
	"github.com/braid-cdc/braid/internal/sqlutf8"
	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/spec"
)

// Target is a MySQL or MariaDB target.
type Target struct {
	db *sql.DB
	// replayDB, when set, is the pool of the replay transactions, whose
	// sessions read text as binary (replayPool).
	replayDB *sql.DB
	spec     spec.Sink
	dest     string // the sink's destination, which owns its checkpoints
	log      *slog.Logger
	stmts    sync.Map // statementKey → string

	applied, upserts, missing atomic.Uint64
	// tables holds the target tables known to exist (ensureTables);
	// ensuring is held while one is looked for.
	tables   sync.Map
	ensuring sync.Mutex
	replay   replayState

	// caseWarned holds the target tables whose origin column's collation
	// the sink has warned of (originCollation), under ensuring: once per
	// table, though ensureTables looks again after each DDL.
	caseWarned map[string]bool

	// routing is the sink's sink.Routing, as Checkpoints found it.
	routing atomic.Int32
	// turns, when the sink has more workers than connections, holds a
	// token for each worker transaction running on the target.
	turns chan struct{}
	// srv is the server's version and collations, read at the first
	// DDL that needs them (mysql8.go).
	srv targetServer
}

// The thin client under sink.Keyed, with the powers it looks for.
var (
	_ sink.Target         = (*Target)(nil)
	_ sink.RoutedTarget   = (*Target)(nil)
	_ sink.ImageDecoder   = (*Target)(nil)
	_ sink.PartialApplier = (*Target)(nil)
)

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
	if t.replayDB, err = replayPool(cfg, s, dest); err != nil {
		db.Close()
		return nil, fmt.Errorf("sink %s: %w", s.Name, err)
	}
	if t.replayDB != nil && !t.replay.off.Load() {
		n := s.Workers // as many as run transactions at once
		if t.turns != nil {
			n = cap(t.turns)
		}
		go warm(t.replayDB, n)
	}
	if !t.exactlyOnce() {
		return t, nil // no checkpoint table: the sink's cursor is the record
	}
	if err := t.setupCheckpoints(ctx); err != nil {
		t.Close()
		return nil, fmt.Errorf("sink %s (%s): %w: check the address, the user's password and its CREATE, ALTER and INSERT grants on %s", s.Name, s.Address, err, s.MetaDatabase)
	}
	return t, nil
}

// exactlyOnce reports whether the target keeps checkpoints (mode
// exactly-once); else (at-least-once) a change is applied again after a
// crash, as an idempotent upsert or delete, and counts nothing.
func (t *Target) exactlyOnce() bool { return t.spec.Mode.Checkpointed() }

// Close implements sink.Target.
func (t *Target) Close() error {
	if t.replayDB != nil {
		t.replayDB.Close()
	}
	return t.db.Close()
}

// replayPool opens the pool of sink s's replay transactions (replay.go)
// from the sink's driver configuration cfg: sessions whose
// character_set_client is binary, so that the server takes the BINLOG
// statements' base64 without checking it for multi-byte characters a
// byte at a time (about 8% of the target's CPU a row change, see
// runReplay). A replay transaction sends nothing else but the checkpoint
// claim, whose text is ASCII when the destination's and the sink's
// names and the meta database are (spec validation keeps the first two
// so): reading it as binary or as utf8mb4 is the same. Otherwise there
// is no such pool (nil), and the replay goes on the sink's own sessions.
// Nothing else runs on it: the SQL statements a transaction falls back
// to are a new transaction on the utf8mb4 pool.
func replayPool(cfg *driver.Config, s spec.Sink, dest string) (*sql.DB, error) {
	if !isASCII(dest) || !isASCII(s.Name) || !isASCII(s.MetaDatabase) {
		return nil, nil
	}
	rc := cfg.Clone()
	rc.Params["character_set_client"] = "binary"
	connector, err := driver.NewConnector(rc)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(s.Workers + 2)
	db.SetMaxIdleConns(s.Workers + 2)
	return db, nil
}

// warm opens n connections of pool db and leaves them idle, while the
// stream starts: the workers' first transactions each waited for their
// own (a connection, the authentication, the session's settings: 30-40
// ms on a busy two-core machine in BenchmarkSinkApply, where the readers
// take the cores as they start). A failure is left to the first
// transaction to meet; Close ends the wait.
func warm(db *sql.DB, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conns := make([]*sql.Conn, 0, n)
	for range n {
		c, err := db.Conn(ctx)
		if err != nil {
			break
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Close()
	}
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// Stats implements sink.Target.
func (t *Target) Stats() sink.Stats {
	return sink.Stats{Applied: t.applied.Load(), Upserts: t.upserts.Load(), Missing: t.missing.Load(), Replayed: t.replay.replayed.Load()}
}

// Checkpoints implements sink.Target.
func (t *Target) Checkpoints(ctx context.Context, n int) ([]sink.Point, error) {
	if !t.exactlyOnce() {
		t.routing.Store(int32(sink.RouteByWideRange)) // no checkpoints to keep to
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
		_, err := t.db.ExecContext(ctx, "INSERT IGNORE INTO "+t.checkpointTable()+" (dest, sink, worker, seq, idx) VALUES (?, ?, ?, ?, ?)", t.dest, t.spec.Name, sink.WorkersRow, sink.WorkersRowSeq(n, r), int(r))
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

// target is the target table of a logical one, quoted.
func (t *Target) target(logical string) string {
	db, tbl, _ := strings.Cut(t.spec.Target(logical), ".")
	return quote(db) + "." + quote(tbl)
}

// execer is a *sql.DB or a *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
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
