package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/braid-cdc/braid/internal/sqlutf8"
	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/spec"
)

// Target is a PostgreSQL target.
type Target struct {
	spec        spec.Sink
	dest        string // the sink's destination, which owns its checkpoints
	log         *slog.Logger
	cfg         *pgx.ConnConfig
	exactlyOnce bool
	// routing is the sink's sink.Routing, as Checkpoints found it.
	routing atomic.Int32

	mu     sync.Mutex
	idle   map[int]*pgx.Conn // a worker's connection while it is not in use; -1 the control one
	stages map[int]*stages   // the staging tables made on a worker's connection
	closed bool

	// copyMin is the fewest changes of a run that go through COPY
	// (copyMinRows; tests change it); canStage says the user may make
	// the staging tables (temporary tables: TEMPORARY on the database),
	// else upserts go as statements.
	copyMin  int
	canStage bool
	// copyBinary: COPY in the binary format where it can (copybin.go);
	// tests turn it off to compare with the text format.
	copyBinary bool

	create sync.Mutex // one table creation at a time
	tables sync.Map   // target table (quoted) → struct{}: known to exist
	stmts  sync.Map   // stmtKey → *tableStmts

	applied, upserts, missing atomic.Uint64
	// copied and staged count the rows of committed transactions that
	// went through COPY into the target and into the staging table.
	copied, staged atomic.Uint64
	// copiedBinary counts those of them that went in the binary format.
	copiedBinary atomic.Uint64
}

// The thin client under sink.Keyed, with the power it looks for.
var (
	_ sink.Target       = (*Target)(nil)
	_ sink.RoutedTarget = (*Target)(nil)
)

// control is the idle map's key of the connection Checkpoints and
// ApplyDDL use.
const control = -1

// errBehindCode is the SQLSTATE sink_advance raises when a worker's
// checkpoint is past the changes it was handed.
const errBehindCode = "BR001"

// Open connects to sink s of destination dest and, in exactly-once mode,
// makes its checkpoint table and the function that advances it; log (nil:
// none) hears what it decides on its own.
func Open(ctx context.Context, s spec.Sink, dest string, log *slog.Logger) (*Target, error) {
	pw, err := s.ResolvePassword()
	if err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig("")
	if err != nil {
		return nil, fmt.Errorf("sink %s: %w", s.Name, err)
	}
	host, port, err := net.SplitHostPort(s.Address)
	if err != nil {
		return nil, fmt.Errorf("sink %s: address %q: %w", s.Name, s.Address, err)
	}
	var p uint16
	if _, err := fmt.Sscan(port, &p); err != nil {
		return nil, fmt.Errorf("sink %s: address %q: port: %w", s.Name, s.Address, err)
	}
	cfg.Host, cfg.Port, cfg.User, cfg.Password, cfg.Database = host, p, s.User, pw, s.Database
	cfg.RuntimeParams = map[string]string{"application_name": "braid sink " + s.Name}
	sqlutf8.Postgres(cfg)
	// TLS as libpq's default (sslmode=prefer): TLS when the server
	// offers it, else not; the PG* environment variables (PGSSLMODE,
	// PGSSLROOTCERT, ...) apply as they do to psql.
	//
	// The password never goes in clear: the server at the spec's address
	// may ask for "password" authentication, which sends it as it is
	// (and sslmode=prefer's TLS verifies no certificate), so it is
	// refused, as libpq's require_auth=!password does. SCRAM and MD5
	// prove the password without sending it. PGREQUIREAUTH, the
	// operator's, wins.
	if cfg.RequireAuth == "" {
		cfg.RequireAuth = "!password"
	}
	if s.Batch <= 0 {
		s.Batch = spec.DefaultSinkBatch
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := &Target{spec: s, dest: dest, log: log, cfg: cfg, exactlyOnce: s.Mode.Checkpointed(), idle: map[int]*pgx.Conn{}, stages: map[int]*stages{}, copyMin: copyMinRows, copyBinary: true}
	c, err := t.conn(ctx, control)
	if err != nil && strings.Contains(err.Error(), "authentication method requirement") {
		return nil, fmt.Errorf("sink %s (%s): the server asked for the password in clear text (PostgreSQL password authentication), and braid never sends it so: "+
			"check that the address is the target's own, and give user %q scram-sha-256 or md5 authentication in its pg_hba.conf", s.Name, s.Address, cfg.User)
	}
	if err != nil {
		return nil, fmt.Errorf("sink %s (%s, database %s): %w: check the address, the user's password and the database", s.Name, s.Address, s.Database, err)
	}
	if t.exactlyOnce {
		err = t.setup(ctx, c)
	}
	if err == nil {
		err = c.QueryRow(ctx, "SELECT has_database_privilege(current_database(), 'TEMPORARY')").Scan(&t.canStage)
		if err == nil && !t.canStage {
			log.Info("sink user may not make temporary tables: upserts go as INSERT ... ON CONFLICT statements, not through COPY",
				"dest", dest, "sink", s.Name, "database", s.Database)
		}
	}
	t.release(control, c)
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("sink %s (%s): %w: check the user's CREATE grant on database %s and schema %s, or set mode: at-least-once", s.Name, s.Address, err, s.Database, s.MetaDatabase)
	}
	return t, nil
}

// conn takes worker w's connection (connecting when it has none); give it
// back with release. A worker's connection is used by one goroutine at a
// time: the runner applies a worker's batches one after another.
func (t *Target) conn(ctx context.Context, w int) (*pgx.Conn, error) {
	t.mu.Lock()
	c := t.idle[w]
	delete(t.idle, w)
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return nil, errors.New("sink: target closed")
	}
	if c != nil {
		return c, nil
	}
	return pgx.ConnectConfig(ctx, t.cfg)
}

// release gives back a connection conn took; a broken one is dropped.
func (t *Target) release(w int, c *pgx.Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c.IsClosed() || t.closed || t.idle[w] != nil {
		c.Close(context.Background())
		return
	}
	t.idle[w] = c
}

// dropIdle closes the idle connections of the workers.
func (t *Target) dropIdle() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for w, c := range t.idle {
		if w >= 0 {
			c.Close(context.Background())
			delete(t.idle, w)
		}
	}
}

// Close implements sink.Target.
func (t *Target) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for w, c := range t.idle {
		c.Close(context.Background())
		delete(t.idle, w)
	}
	return nil
}

// Stats implements sink.Target.
func (t *Target) Stats() sink.Stats {
	return sink.Stats{Applied: t.applied.Load(), Upserts: t.upserts.Load(), Missing: t.missing.Load()}
}

// Checkpoints implements sink.Target; at-least-once, every point is zero.
func (t *Target) Checkpoints(ctx context.Context, n int) ([]sink.Point, error) {
	if !t.exactlyOnce {
		t.routing.Store(int32(sink.RouteByWideRange)) // no checkpoints to keep to
		return make([]sink.Point, n), nil
	}
	c, err := t.conn(ctx, control)
	if err != nil {
		return nil, fmt.Errorf("sink %s: read checkpoints: %w", t.spec.Name, err)
	}
	defer t.release(control, c)
	if err := t.adoptCheckpoints(ctx, c); err != nil {
		return nil, fmt.Errorf("sink %s: read checkpoints: %w", t.spec.Name, err)
	}
	rows, err := c.Query(ctx, "SELECT worker, seq, idx FROM "+t.checkpointTable()+" WHERE dest = $1 AND sink = $2", t.dest, t.spec.Name)
	if err != nil {
		return nil, fmt.Errorf("sink %s: read checkpoints: %w", t.spec.Name, err)
	}
	defer rows.Close()
	next := func() (r sink.CheckpointRow, ok bool, err error) {
		if !rows.Next() {
			return r, false, rows.Err()
		}
		var w, idx int32
		var seq int64
		err = rows.Scan(&w, &seq, &idx)
		return sink.CheckpointRow{Worker: int(w), Seq: uint64(seq), Idx: int(idx)}, true, err
	}
	out, routing, err := sink.SQLCheckpoints(t.spec.Name, n, "the sink's rows of "+t.checkpointTable()+" (dest '"+t.dest+"')", next, func(r sink.Routing) error {
		_, err := c.Exec(ctx, "INSERT INTO "+t.checkpointTable()+" (dest, sink, worker, seq, idx) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING", t.dest, t.spec.Name, sink.WorkersRow, int64(sink.WorkersRowSeq(n, r)), int32(r))
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

// pgCode is err's SQLSTATE, "" when it is not a server's error.
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// quoteIdent quotes a PostgreSQL identifier.
func quoteIdent(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// target is the target table of a logical one, quoted: schema and table
// as the spec (or the logical name) spells them.
func (t *Target) target(logical string) string {
	s, tbl, _ := strings.Cut(t.spec.Target(logical), ".")
	return quoteIdent(s) + "." + quoteIdent(tbl)
}
