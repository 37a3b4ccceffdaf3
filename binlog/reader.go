package binlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/braid-cdc/braid/change"
	"github.com/braid-cdc/braid/schema"
	"github.com/braid-cdc/braid/spec"
)

// Config configures a Reader. Zero fields take the defaults given.
type Config struct {
	// Destination names the destination the source belongs to; with the
	// source's name it derives the replica server_id when the spec gives none.
	Destination string
	// Source is the source's spec. Required.
	Source spec.Source
	// Tables selects the tables whose rows are decoded and emitted.
	// Default: every non-system table.
	Tables *spec.TableFilter
	// Heartbeat is the replication heartbeat period asked of the server.
	// Default: DefaultHeartbeat.
	Heartbeat time.Duration
	// Resume, when set, continues after a transaction boundary instead of
	// Source.Start: Pos is the boundary (an EventCommit's Pos) and Schema the
	// schema history saved with it.
	Resume *Resume
	// MaxBackoff caps the wait between reconnect attempts. Default: 5s.
	MaxBackoff time.Duration
	// ReadAhead is how many binlog events go-mysql may read and decode
	// ahead of the parser. Default: 1024 (see syncerConfig).
	ReadAhead int
	// Logger receives one line per connect, reconnect attempt and warning.
	// Default: discard.
	Logger *slog.Logger

	// goMySQLRows sends every rows event to go-mysql's decoder, the path
	// tables braid does not read raw take (for tests, which check the raw
	// path against it).
	goMySQLRows bool
}

// Resume is a saved transaction boundary of one source.
type Resume struct {
	Pos    change.Position
	Schema *change.SchemaSnapshot
}

// Reader reads one source's binlog and emits its transactions as Events.
type Reader struct {
	cfg    Config
	spec   spec.Source
	filter *spec.TableFilter
	log    *slog.Logger

	info    serverInfo
	schema  *schema.Tracker
	decoder *decoder
	// provisional holds the live schema of tables not yet known to hold
	// before snapPos, the server's position when it was read; see
	// loadSchema.
	provisional map[string]*change.Table
	snapPos     change.Position

	// Reading state; owned by the goroutine running Run.
	file      string          // current binlog file
	resume    change.Position // boundary after the last finished transaction
	started   bool            // resume is a real position (not yet, in GTID start mode)
	startGTID string          // GTID set to start from when !started
	notBefore time.Time

	tx txState
	// After a reconnect in the middle of a transaction, the parser reads the
	// transaction again from its start; replay says how much of it was
	// already emitted so nothing is emitted twice.
	replay txState
}

// txState is the part of the current transaction already emitted.
type txState struct {
	open     bool // a transaction has started (GTID or BEGIN seen)
	begun    bool // its EventBegin was emitted
	rows     int  // row changes emitted
	start    change.Position
	gtid     string
	commit   time.Time
	serverID uint32
}

// NewReader checks the configuration; it does not connect.
func NewReader(cfg Config) (*Reader, error) {
	src := cfg.Source
	if src.User == "" {
		src.User = spec.DefaultUser
	}
	if src.ServerID == 0 {
		src.ServerID = spec.DeriveServerID(cfg.Destination, src.Name)
	}
	if src.Address == "" {
		return nil, fmt.Errorf("binlog: source %q: no address", src.Name)
	}
	pw, err := src.ResolvePassword()
	if err != nil {
		return nil, err
	}
	src.Password, src.PasswordFile, src.PasswordEnv = pw, "", ""
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = spec.DefaultHeartbeat
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 5 * time.Second
	}
	if cfg.ReadAhead <= 0 {
		cfg.ReadAhead = 1024
	}
	filter := cfg.Tables
	if filter == nil {
		filter, _ = spec.CompileTableFilter(nil)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Reader{cfg: cfg, spec: src, filter: filter, log: log.With("source", src.Name)}, nil
}

// ServerID is the replica server_id the parser presents to its source.
func (p *Reader) ServerID() uint32 { return p.spec.ServerID }

// Run connects, emits events through emit until ctx is done or a fatal
// error, and returns nil when ctx ends it.
//
// The first connection's failure is returned at once (a wrong password or
// address should not be retried forever). Once streaming, a lost connection
// or a restarted server is retried with backoff, one log line per attempt,
// from the last transaction boundary: nothing is lost and nothing is emitted
// twice.
//
// emit runs on the parser's goroutine; it may block for backpressure but
// must return (with an error, which stops Run) once ctx is done.
func (p *Reader) Run(ctx context.Context, emit func(*change.Event) error) error {
	if err := p.prepare(ctx); err != nil {
		return err
	}
	backoff := 100 * time.Millisecond
	for {
		before := p.resume
		err := p.stream(ctx, emit)
		if ctx.Err() != nil {
			return nil
		}
		if isFatal(err) {
			return err
		}
		if p.resume != before {
			backoff = 100 * time.Millisecond // the connection got somewhere
		}
		p.log.Warn("binlog connection lost; reconnecting", "err", err, "resume", p.resumeString(), "retry_in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, p.cfg.MaxBackoff)
	}
}

func (p *Reader) resumeString() string {
	if !p.started {
		return "gtid " + p.startGTID
	}
	return p.resume.String()
}

// prepare inspects the server, resolves the start position and builds the
// schema model at it.
func (p *Reader) prepare(ctx context.Context) error {
	c, err := p.dial(ctx)
	if err != nil {
		return fatal{err}
	}
	defer c.Close()
	if p.info, err = p.inspect(c); err != nil {
		return err
	}
	files, err := binlogFiles(c)
	if err != nil {
		return fatal{fmt.Errorf("binlog: source %s (%s): SHOW BINARY LOGS: %v", p.spec.Name, p.spec.Address, err)}
	}
	snapPos, err := masterPosition(c)
	if err != nil {
		return fatal{fmt.Errorf("binlog: source %s (%s): SHOW MASTER STATUS: %v", p.spec.Name, p.spec.Address, err)}
	}

	if r := p.cfg.Resume; r != nil {
		if err := p.checkNotPurged(files, r.Pos); err != nil {
			return err
		}
		p.resume, p.started = r.Pos, true
		if r.Schema != nil {
			if p.schema, err = schema.Restore(*r.Schema); err != nil {
				return fatal{fmt.Errorf("binlog: source %s: restore schema history: %w", p.spec.Name, err)}
			}
		}
	} else {
		st := p.spec.Start
		switch st.Kind {
		case spec.StartEarliest, spec.StartTimestamp:
			if len(files) == 0 {
				return fatal{fmt.Errorf("%w on source %s: SHOW BINARY LOGS lists no file", ErrBinlogDisabled, p.spec.Name)}
			}
			p.resume, p.started = change.Position{File: files[0], Pos: 4}, true
			if st.Kind == spec.StartTimestamp {
				p.notBefore = st.Time
			}
		case spec.StartPosition:
			if err := p.checkNotPurged(files, st.Pos); err != nil {
				return err
			}
			p.resume, p.started = st.Pos, true
		case spec.StartGTID:
			if _, err := mysql.ParseGTIDSet(p.info.flavor, st.GTID); err != nil {
				return fatal{fmt.Errorf("binlog: source %s: start gtid %q is not a %s GTID set: %v", p.spec.Name, st.GTID, p.info.flavor, err)}
			}
			p.startGTID = st.GTID
		default: // latest
			p.resume, p.started = snapPos, true
		}
	}
	if p.schema == nil {
		if err := p.loadSchema(c, snapPos); err != nil {
			return err
		}
	}
	p.decoder = newDecoder(p)
	p.log.Info("source ready", "addr", p.spec.Address, "version", p.info.version, "server_id", p.spec.ServerID,
		"start", p.resumeString(), "row_metadata_full", p.info.fullMeta)
	return nil
}

// syncerConfig is go-mysql's configuration for one binlog connection. braid
// does its own reconnecting (go-mysql's would resume mid-transaction).
func (p *Reader) syncerConfig() replication.BinlogSyncerConfig {
	host, port := splitHostPort(p.spec.Address)
	return replication.BinlogSyncerConfig{
		ServerID:                p.spec.ServerID,
		Flavor:                  p.info.flavor,
		Host:                    host,
		Port:                    port,
		User:                    p.spec.User,
		Password:                p.spec.Password,
		TimestampStringLocation: p.info.location,
		HeartbeatPeriod:         p.cfg.Heartbeat,
		ReadTimeout:             max(5*time.Second, 10*p.cfg.Heartbeat),
		DisableRetrySync:        true,
		// A larger socket buffer lets the server keep sending while the
		// reader decodes; the kernel caps it at net.core.rmem_max.
		RecvBufferSize: 4 << 20,
		Logger:         slog.New(slog.DiscardHandler),
		// Events go-mysql may decode ahead of the parser: reading and
		// decoding run on go-mysql's goroutine while the parser handles and
		// emits on Run's. Measured in bench/ for one source: 256 left the
		// reader waiting on the parser's scheduling hiccups, about 10%
		// slower than 1024; 1024 events are about 8 MiB of binlog at
		// MariaDB's 8 KiB rows events.
		EventCacheCount: p.cfg.ReadAhead,
	}
}

// stream runs one binlog connection until it fails or ctx ends.
func (p *Reader) stream(ctx context.Context, emit func(*change.Event) error) error {
	cfg := p.syncerConfig()
	cfg.RowsEventDecodeFunc = newRowFilter(p.filter, p.info.compressed || p.cfg.goMySQLRows).decodeRows
	syncer := replication.NewBinlogSyncer(cfg)
	defer syncer.Close()

	// Whatever the last connection left half-read is read again from the
	// boundary; remember what of it was emitted. A connection lost while
	// replaying keeps the furthest point emitted.
	if p.tx.open {
		r := p.tx
		if p.replay.open {
			r.rows = max(r.rows, p.replay.rows)
			r.begun = r.begun || p.replay.begun
		}
		p.replay = r
	}
	p.tx = txState{}

	var (
		st  *replication.BinlogStreamer
		err error
	)
	if p.started {
		p.file = p.resume.File
		st, err = syncer.StartSync(mysql.Position{Name: p.resume.File, Pos: p.resume.Pos})
	} else {
		var set mysql.GTIDSet
		set, err = mysql.ParseGTIDSet(p.info.flavor, p.startGTID)
		if err == nil {
			st, err = syncer.StartSyncGTID(set)
		}
	}
	if err != nil {
		return p.streamError(err)
	}
	for {
		e, err := st.GetEvent(ctx)
		if err != nil {
			return p.streamError(err)
		}
		if err := p.handle(ctx, e, emit); err != nil {
			return err
		}
	}
}

// erSlaveSameID is MariaDB's ER_SLAVE_SAME_ID: a replica with the same
// server_id is already connected.
const erSlaveSameID = 4052

// streamError classifies an error that ended a binlog connection.
func (p *Reader) streamError(err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	var me *mysql.MyError
	if errors.As(err, &me) {
		switch me.Code {
		case mysql.ER_MASTER_FATAL_ERROR_READING_BINLOG:
			msg := strings.ToLower(me.Message)
			if strings.Contains(msg, "could not find") || strings.Contains(msg, "purged") || strings.Contains(msg, "not find first log") {
				return fatal{fmt.Errorf("%w: source %s (%s): the server no longer has %s (%s): start from earliest or a later position",
					ErrPurged, p.spec.Name, p.spec.Address, p.resumeString(), me.Message)}
			}
			return fatal{fmt.Errorf("binlog: source %s (%s): the server cannot send its binlog from %s: %s",
				p.spec.Name, p.spec.Address, p.resumeString(), me.Message)}
		case mysql.ER_ACCESS_DENIED_ERROR:
			return p.connError(err)
		case erSlaveSameID:
			return fmt.Errorf("binlog: source %s (%s): another replica with server_id %d is reading this server (a second braid reading the same destination, or a server_id collision: set server_id in the spec); retrying",
				p.spec.Name, p.spec.Address, p.spec.ServerID)
		}
	}
	var ee *replication.EventError
	if errors.As(err, &ee) {
		// EventError carries the raw event bytes; never log them.
		return fatal{fmt.Errorf("%w: source %s at %s: %s event: %s", ErrBadEvent, p.spec.Name,
			change.Position{File: p.file, Pos: ee.Header.LogPos - ee.Header.EventSize}, ee.Header.EventType, ee.Err)}
	}
	if strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "i/o timeout") {
		return fmt.Errorf("%w: source %s: %s: %v", ErrUnreachable, p.spec.Name, p.spec.Address, rootCause(err))
	}
	return fmt.Errorf("binlog: source %s (%s): %v", p.spec.Name, p.spec.Address, rootCause(err))
}

func splitHostPort(addr string) (string, uint16) {
	i := strings.LastIndexByte(addr, ':')
	var port uint16
	fmt.Sscanf(addr[i+1:], "%d", &port)
	return strings.Trim(addr[:i], "[]"), port
}
