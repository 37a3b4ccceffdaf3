package binlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/klauspost/compress/zstd"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/schema"
	"github.com/braid-cdc/braid/internal/mysqlauth"
	"github.com/braid-cdc/braid/internal/sqlutf8"
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
	// ReadAhead is how many binlog events may be read and parsed ahead
	// of the reader. Default: 1024 (see stream).
	ReadAhead int
	// Logger receives one line per connect, reconnect attempt and warning.
	// Default: discard.
	Logger *slog.Logger
	// AnnounceTables makes the reader send, before any other event, an
	// EventProgress at its start whose Tables are the selected tables
	// existing there (the shard-DDL merge counts a logical table's shard
	// tables from it) and, when the schema is known to hold there (not a
	// start before the server's position that no DDL has settled), the
	// schema history for the cursor.
	AnnounceTables bool
	// OnlineDDL recognises the helper tables of online schema-change
	// tools (spec online_ddl): their rows and DDL are left out, and the
	// DDL run on a shadow table goes out at its swap as the real table's
	// (onlineddl.go). Default: nil, none.
	OnlineDDL *schema.OnlineRules

	// Accepted are the losses an operator accepted for this source
	// (kept in the destination's placement log): a server found lacking
	// exactly one of them is read on without asking again (lost.go).
	// Default: none.
	Accepted []change.Loss
	// Losses, if set, returns the losses accepted so far (Accepted's
	// later ones), asked while the reader waits on one: an accept kept
	// while it runs (by its destination's live run, for a replay
	// reader) reaches it. Default: none.
	Losses func() []change.Loss
	// Live, if set, returns the GTID state the destination's live
	// reader of this source has read (its Stats' GTIDs), for a replay
	// reader: one that resumes on another server by GTID waits while
	// that server lacks some of it, as the live reader waits on a loss,
	// rather than read on into the server's own history where the live
	// stream had transactions lost in a failover; once the loss is
	// accepted (Losses) it knows how the stream went on. Default: none.
	Live func() string

	// goMySQLRows sends every rows event to go-mysql's decoder, the path
	// tables braid does not read raw take (for tests, which check the raw
	// path against it).
	goMySQLRows bool
}

// Resume is a saved transaction boundary of one source.
type Resume struct {
	Pos    change.Position
	Schema *change.SchemaSnapshot
	// GTIDs is the source's GTID state at Pos (change.Event.GTIDs), and
	// Server the server whose binlog Pos is in: with them the reader
	// resumes on another server by GTID. Empty (a cursor saved before
	// braid kept them): Pos is taken as the answering server's, as
	// before. A zero Pos with GTIDs resumes by GTID.
	GTIDs  string
	Server *change.Server
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
	// unparsed holds, by name, the live tables the schema model could
	// not be built for at the start, and why (loadLiveTable); fromColumns
	// those it built from information_schema because it cannot parse
	// their CREATE TABLE, which the binlog's own CREATE TABLE of them
	// would not rebuild either.
	unparsed    map[string]string
	fromColumns map[string]bool
	// badDDL is the last DDL the model could not parse, which a later
	// row of a table it created names (decoder.table).
	badDDL badDDL

	// Reading state; owned by the goroutine running Run.
	file      string          // current binlog file
	resume    change.Position // boundary after the last finished transaction
	started   bool            // resume is a real position (not yet, in GTID start mode)
	startGTID string          // GTID set to start from when !started
	// skipGTIDs is a MySQL source's {gtid} start set: the server skips
	// its transactions, and so does the reader when a reconnect before
	// the first transaction after it reads the file from its start
	// (gtid_start.go). Empty otherwise.
	skipGTIDs change.MySQLGTIDSet
	notBefore time.Time

	// GTID state and servers (failover.go). gtids is the MariaDB GTID
	// position at resume, gtidStr its rendering; posServer is the server
	// whose binlog resume is in (nil: unknown, a cursor that predates
	// it), connServer the one the current connection reads. byGTID: the
	// connection resumed by GTID on another server, so a transaction
	// whose GTID is not past gtids was emitted already and is dropped.
	gtids      gtidPos
	gtidStr    string
	posServer  *change.Server
	connServer *change.Server
	byGTID     bool
	// mexec is a MySQL source's executed GTID set at resume, complete
	// when mknown (gtid_mysql.go); shareMexec its copy for Stats, under
	// statsMu.
	mexec      change.MySQLExecuted
	mknown     bool
	shareMexec change.MySQLExecuted

	// The source's servers (servers.go): addrs are its addresses in
	// order, cur the index of the one read (spec.Address, under statsMu
	// as watch copies it); failoverAfter and wantReplica are the spec's
	// failover_after and read_from. lagLimit bounds checkServer's wait
	// for a lagging server (0, with one address: none); switchWhy is the
	// why of its switch line while a pass tries the servers; refusals is the last
	// reason each address was refused, logged once.
	addrs         []string
	cur           int
	failoverAfter time.Duration
	wantReplica   bool
	lagLimit      time.Duration
	switchWhy     string
	refusals      map[string]string

	tx txState
	// After a reconnect in the middle of a transaction, the reader reads the
	// transaction again from its start; replay says how much of it was
	// already emitted so nothing is emitted twice.
	replay txState
	// staleBeat: the heartbeat being handled had more binlog right
	// behind it (peek).
	staleBeat bool

	// What a target replaying the rows as binlog events needs
	// (change.RowsBinlog): format is the MariaDB source's format
	// description body (nil for MySQL, whose events braid does not
	// replay), checksum the length of its events' checksum, and maps the
	// bodies of the transaction's table maps.
	format   []byte
	checksum int
	maps     []tableMapBody
	// zstd decompresses MySQL's transaction payloads (payload.go), made
	// at the first connection.
	zstd *zstd.Decoder
	// early is the first binlog connection, opened while prepare read
	// the schema (openEarly); stream takes it.
	early *binlogConn

	// Statistics (see Stats). live is the reading goroutine's own, copied
	// to shared under statsMu at transaction boundaries, heartbeats and
	// every shareEvery events; attempts counts the failed connections
	// since the last one that worked.
	live     Stats
	unshared int
	attempts int
	statsMu  sync.Mutex
	shared   Stats
	// server is the server's end of binlog as last learnt and when
	// (the status statement, a heartbeat); under statsMu, set by the reading
	// goroutine and by watch.
	server   change.Position
	serverAt time.Time
	// confirmedAt is when watch last found the server's end of binlog
	// at or before what had been read; under statsMu.
	confirmedAt time.Time
	// report is the start-up check of the last connection; under statsMu.
	report SourceReport

	// Losses (lost.go): waiting is the loss checkServer waits on now
	// (nil: none), accepted the losses an operator accepted, both under
	// lossMu; marker is the accepted loss whose marker transaction goes
	// out before the next binlog connection's events ("" none; the
	// reading goroutine's).
	lossMu   sync.Mutex
	waiting  *change.Loss
	accepted []change.Loss
	marker   string
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
	// mgtid is a MariaDB transaction's GTID (hasM: it has one); dup: it
	// was emitted before a switch of servers (byGTID) and is dropped.
	mgtid mysql.MariadbGTID
	hasM  bool
	dup   bool
	// timed: commit is the time of the transaction's first statement
	// (mariadbStatementTime), not its GTID event's.
	timed bool
	// my is a MySQL transaction's GTID (gno 0: none).
	my mysqlTxGTID
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
	p := &Reader{cfg: cfg, spec: src, filter: withoutHelpers(filter, cfg.OnlineDDL), log: log.With("source", src.Name),
		addrs: src.Addresses(), failoverAfter: src.FailoverAfterOrDefault(), wantReplica: src.ReadFrom.Replica(), refusals: map[string]string{}}
	p.spec.Address = p.addrs[0]
	if len(p.addrs) > 1 {
		p.lagLimit = p.failoverAfter // another server may not lag
	}
	if _, err := p.tlsConfig(); err != nil {
		return nil, err
	}
	p.live.Heartbeat = cfg.Heartbeat
	p.shared = p.live
	p.accepted = slices.Clone(cfg.Accepted)
	return p, nil
}

// ServerID is the replica server_id the reader presents to its source.
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
// emit runs on the reader's goroutine; it may block for backpressure but
// must return (with an error, which stops Run) once ctx is done.
func (p *Reader) Run(ctx context.Context, emit func(*change.Event) error) error {
	if err := p.prepare(ctx); err != nil {
		p.lost(err)
		return err
	}
	if p.cfg.AnnounceTables {
		if err := p.unmodelled(); err != nil {
			p.dropEarly()
			p.lost(err)
			return err
		}
		tables := []string{} // not nil: none is an answer
		var versions []*change.Table
		for _, name := range p.schema.TablesAt(p.resume) {
			schema, table, _ := strings.Cut(name, ".")
			if p.filter.Match(schema, table) {
				tables = append(tables, name)
				t, ok := p.schema.TableAt(schema, table, p.resume)
				if !ok {
					t = p.provisional[name] // the live schema, not yet known to hold here
				}
				versions = append(versions, t)
			}
		}
		var snap *change.SchemaSnapshot
		if !p.anyProvisional(p.resume) {
			// The schema holds here: a cursor that keeps it lets a restart
			// read a DDL that ran while braid was down instead of taking
			// the server's schema, which already has it, for this point.
			s := p.schema.Snapshot()
			s.Server = p.posServer
			snap = &s
		}
		if err := emit(&change.Event{Type: change.EventProgress, Source: p.spec.Name, Pos: p.resume, EndPos: p.resume, Tables: tables, Versions: versions, Schema: snap,
			GTIDs: p.gtidState(), Server: p.posServer}); err != nil {
			p.dropEarly()
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	wctx, stopWatch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { p.watch(wctx) })
	defer wg.Wait()
	defer stopWatch()
	backoff := 100 * time.Millisecond
	for {
		before := p.resume
		err := p.stream(ctx, emit)
		if ctx.Err() != nil {
			p.live.Connected = false
			p.share()
			return nil
		}
		p.lost(err)
		if isFatal(err) {
			return err
		}
		if p.resume != before {
			backoff = 100 * time.Millisecond // the connection got somewhere
		}
		wait := p.retryWait(backoff)
		p.log.Warn("binlog connection lost; reconnecting", "err", err, "resume", p.resumeString(), "retry_in", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
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
func (p *Reader) prepare(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			p.dropEarly()
		}
	}()
	c, err := p.startConn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	files, err := binlogFiles(c)
	if err != nil {
		return fatal{fmt.Errorf("binlog: source %s (%s): SHOW BINARY LOGS: %v", p.spec.Name, p.spec.Address, err)}
	}
	snapPos, snapGTIDs, err := masterStatus(c)
	if err != nil {
		return fatal{fmt.Errorf("binlog: source %s (%s): read its binlog position: %v", p.spec.Name, p.spec.Address, err)}
	}

	a, err := p.identify(c)
	if err != nil {
		return err
	}
	p.connServer, p.live.Server = a.server, a.server
	maria := p.info.flavor == mysql.MariaDBFlavor
	if r := p.cfg.Resume; r != nil {
		if maria && r.GTIDs != "" {
			if p.gtids, err = parseGTIDPos(r.GTIDs); err != nil {
				return fatal{fmt.Errorf("binlog: source %s: the cursor's GTID state: %v", p.spec.Name, err)}
			}
		}
		switch {
		case r.Pos.IsZero() && r.GTIDs != "":
			p.startGTID = r.GTIDs // nothing read since a GTID start
		case r.Server != nil && !r.Server.Same(a.server):
			// Another server's position: stream checks and resumes by GTID.
			p.resume, p.started, p.posServer = r.Pos, true, r.Server
		default:
			if err := p.checkNotPurged(files, r.Pos); err != nil {
				return err
			}
			p.resume, p.started, p.posServer = r.Pos, true, a.server
		}
		if r.Schema != nil {
			if p.schema, err = schema.Restore(*r.Schema); err != nil {
				return fatal{fmt.Errorf("binlog: source %s: restore schema history: %w", p.spec.Name, err)}
			}
			p.schema.SpellWithoutIntWidths(parseServerVersion(p.info.version).noIntWidths())
			if s := r.Schema.Server; s != nil && !s.Same(p.posServer) {
				// Saved before a switch of servers, and the position is
				// the new server's: its positions are the old one's.
				p.schema.Rebase()
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
			p.startGTID = st.GTID
			if _, err := p.gtidStart(nil); err != nil {
				return fatal{err}
			}
			if p.info.flavor == mysql.MySQLFlavor {
				p.skipGTIDs, _ = change.ParseMySQLGTIDSet(st.GTID) // gtidStart read it
			}
			if maria {
				p.gtids, _ = parseGTIDPos(st.GTID)
			}
		default: // latest
			p.resume, p.started = snapPos, true
		}
		if p.started {
			p.posServer = a.server
		}
	}
	if p.info.flavor == mysql.MySQLFlavor {
		if err := p.startMySQLGTIDs(ctx, snapGTIDs, p.isLatestStart(snapPos), a.gtidOn); err != nil {
			return err
		}
	}
	// The start is decided: the binlog connection opens while the rest
	// of the start (the GTID state there, the schema) is read.
	p.openEarly(ctx)
	if maria && p.started && len(p.gtids) == 0 && p.posServer.Same(a.server) {
		// The GTID state at the position, so that a later switch of
		// servers knows where it is.
		s, err := gtidAt(c, p.resume)
		if err == nil {
			p.gtids, err = parseGTIDPos(s)
		}
		if err != nil {
			p.log.Warn("cannot learn the GTID position at the start; a switch of servers will stop the source", "pos", p.resume.String(), "err", err)
			p.gtids = nil
		}
	}
	p.gtidStr = p.gtids.String()
	p.live.GTIDs = change.GTIDText(p.gtidStr)
	if p.schema == nil {
		latest := p.cfg.Resume == nil && p.resume == snapPos && p.spec.Start.Kind != spec.StartPosition
		if err := p.loadSchema(ctx, c, snapPos, latest); err != nil {
			return err
		}
	}
	p.schema.SetOnlineRules(p.cfg.OnlineDDL)
	p.decoder = newDecoder(p)
	p.live.ReadPos = p.resume
	p.setServer(snapPos, time.Now(), change.Position{})
	p.share()
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
		// go-mysql queues no event: its reading goroutine hands each to
		// braid's parser (stream), which queues them.
		EventCacheCount: 1,
		// The binlog connection's own queries (checksum, heartbeat,
		// GTID settings) in utf8mb4 too, as every session braid opens.
		Option: sqlutf8.SetNames,
	}
}

// recvBufferDialer dials TCP with a receive buffer of size bytes; the
// connection moves its read deadline coarsely (coarseDeadlines).
func recvBufferDialer(size int) mysqlauth.Dialer {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tcp, ok := nc.(*net.TCPConn); ok && size > 0 {
			_ = tcp.SetReadBuffer(size) // the kernel caps it at net.core.rmem_max
		}
		if err != nil {
			return nil, err
		}
		return &coarseDeadlines{Conn: nc}, nil
	}
}

// binlogConn is one binlog connection: go-mysql's syncer, braid's parser
// of its events, and where it was asked to start.
type binlogConn struct {
	syncer *replication.BinlogSyncer
	ep     *eventParser
	watch  mysqlauth.Watch
	// The start asked for: pos when started, else the GTID set set
	// (startGTID its text).
	started   bool
	pos       change.Position
	startGTID string
	set       mysql.GTIDSet
	// st and err are StartSync's answer, set once done is closed.
	st   *replication.BinlogStreamer
	err  error
	done chan struct{}
}

// openBinlog settles the server to read (connectServer) and makes the
// binlog connection's syncer and parser at the reader's start; start
// then connects.
func (p *Reader) openBinlog(ctx context.Context) (*binlogConn, error) {
	// Who answers decides where and how to start (by position, or by
	// GTID on another server): settled before the syncer's
	// configuration (its address) and start set are made.
	if err := p.connectServer(ctx); err != nil {
		return nil, err
	}
	cfg := p.syncerConfig()
	tlsCfg, err := p.tlsConfig()
	if err != nil {
		return nil, err
	}
	if p.zstd == nil {
		if p.zstd, err = newZstd(); err != nil {
			return nil, fatal{fmt.Errorf("binlog: source %s: a zstd decoder for compressed transactions: %v", p.spec.Name, err)}
		}
	}
	bc := &binlogConn{started: p.started, pos: p.resume, startGTID: p.startGTID, done: make(chan struct{})}
	// go-mysql reads the events and braid parses them (payload.go), on
	// go-mysql's goroutine while the reader handles and emits on Run's,
	// ReadAhead events ahead at most. Measured in bench/ for one source:
	// 256 left the reading goroutine waiting on the reader's scheduling
	// hiccups, about 10% slower than 1024; 1024 events are about 8 MiB of
	// binlog at MariaDB's 8 KiB rows events.
	bc.ep = p.newEventParser(p.cfg.ReadAhead, p.zstd)
	cfg.RawModeEnabled, cfg.SynchronousEventHandler = true, bc.ep
	// Without TLS the server must not have the password in clear: a
	// guard watches the authentication; with TLS the server proved its
	// certificate. (go-mysql sets RecvBufferSize only on a bare
	// *net.TCPConn: the dialer does.)
	cfg.Dialer = bc.watch.Dial(recvBufferDialer(cfg.RecvBufferSize))
	if tlsCfg != nil {
		cfg.TLSConfig = tlsCfg
		cfg.Dialer = recvBufferDialer(cfg.RecvBufferSize)
	}
	if beforeDump != nil {
		beforeDump()
	}
	if !p.started {
		if bc.set, err = p.gtidStart(&cfg); err != nil {
			return nil, fatal{err}
		}
	}
	bc.syncer = replication.NewBinlogSyncer(cfg)
	return bc, nil
}

// start connects, runs go-mysql's setup queries, registers as a replica
// and asks for the binlog from bc's start. It touches nothing of the
// reader's, so it may run beside prepare's queries (early).
func (bc *binlogConn) start() {
	defer close(bc.done)
	if bc.started {
		bc.st, bc.err = bc.syncer.StartSync(mysql.Position{Name: bc.pos.File, Pos: bc.pos.Pos})
	} else {
		bc.st, bc.err = bc.syncer.StartSyncGTID(bc.set)
	}
}

// close ends the connection, once start has returned.
func (bc *binlogConn) close() {
	<-bc.done
	bc.ep.stop() // before Close, which waits for a HandleEvent waiting for room
	bc.syncer.Close()
}

// at reports whether bc starts where the reader starts now.
func (bc *binlogConn) at(p *Reader) bool {
	if bc.started != p.started {
		return false
	}
	if bc.started {
		return bc.pos == p.resume
	}
	return bc.startGTID == p.startGTID
}

// openEarly opens the first binlog connection while prepare reads the
// schema (a connect, go-mysql's setup queries, the register and the dump
// request are about as many round trips as the schema's, and were the
// largest cost before the first row), once the start is decided. Only
// when the first connection needs no check of its own (checkServer
// takes prepare's answer): the server and the position are the ones
// prepare just checked. stream takes it, or closes it and connects
// again when prepare moved the start after all (loadSchema's DDL race).
func (p *Reader) openEarly(ctx context.Context) {
	if !p.firstConnection() || !p.prepareAnswerStands() {
		return
	}
	bc, err := p.openBinlog(ctx)
	if err != nil {
		return // stream connects again and reports it
	}
	p.early = bc
	go bc.start()
}

// dropEarly closes the connection openEarly opened, if stream did not
// take it.
func (p *Reader) dropEarly() {
	if p.early != nil {
		p.early.close()
		p.early = nil
	}
}

// stream runs one binlog connection until it fails or ctx ends.
func (p *Reader) stream(ctx context.Context, emit func(*change.Event) error) error {
	bc := p.early
	p.early = nil
	if bc != nil && !bc.at(p) {
		bc.close()
		bc = nil
	}
	if bc == nil {
		var err error
		if bc, err = p.openBinlog(ctx); err != nil {
			return err
		}
		bc.start()
	}
	<-bc.done
	defer bc.syncer.Close()
	defer bc.ep.stop() // before Close, which waits for a HandleEvent waiting for room

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

	if p.started {
		p.file = p.resume.File
	}
	st, err := bc.st, bc.err
	if err != nil {
		if refused := bc.watch.Err(); refused != nil {
			return p.clearTextError(refused)
		}
		if terr := p.tlsError(err); terr != nil {
			return terr
		}
		return p.dumpRefused(ctx, p.streamError(err))
	}
	// An accepted loss: its marker goes before the new server's
	// transactions (lost.go).
	if err := p.emitMarker(emit); err != nil {
		return err
	}
	ep := bc.ep
	q := ep.queue(st)
	defer q.close()
	var behind *parsed // read right after a heartbeat
	for first := true; ; first = false {
		var it parsed
		if behind != nil {
			it = *behind
		} else if it, err = q.next(ctx); err != nil {
			if first {
				return p.dumpRefused(ctx, p.streamError(err))
			}
			return p.streamError(err)
		}
		if it.err != nil {
			return p.parseErr(it.e, it.err)
		}
		e := it.e
		if first {
			if err := p.checkDumpServer(e); err != nil {
				return err
			}
			p.up()
		}
		behind = nil
		if _, ok := e.Event.(*replication.HeartbeatEvent); ok {
			next, ok, err := q.peek(ctx)
			if err != nil {
				return p.streamError(err)
			}
			if ok {
				behind = &next
			}
			p.staleBeat = ok
		}
		p.note(e)
		if err := p.handle(ctx, e, emit); err != nil {
			return err
		}
	}
}

// peekWindow is how long the reader looks for an event right behind a
// heartbeat. One already sent is in the socket or decoded ahead and
// comes within microseconds; the server sends a heartbeat only after a
// period (200 ms by default) with nothing to send.
const peekWindow = 2 * time.Millisecond

// peek returns the event that follows a heartbeat within peekWindow, if
// one does. A heartbeat followed at once by more binlog sat in the socket or
// the read-ahead behind nothing but older events: it was sent before
// those came, maybe seconds ago, and stamped with braid's clock it would
// promise the merge a time its source is past (its next transactions
// would come in below its watermark, one race from going out late).
func (q *eventQueue) peek(ctx context.Context) (parsed, bool, error) {
	wait, cancel := context.WithTimeout(ctx, peekWindow)
	defer cancel()
	it, err := q.next(wait)
	if err != nil && ctx.Err() == nil && wait.Err() != nil {
		return parsed{}, false, nil // nothing behind it: the source is idle
	}
	return it, err == nil, err
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
		// braid stops rather than skip an event it cannot decode.
		return fatal{fmt.Errorf("%w: source %s at %s: event type %d (%s) braid cannot decode: %s", ErrBadEvent, p.spec.Name,
			change.Position{File: p.file, Pos: ee.Header.LogPos - ee.Header.EventSize}, byte(ee.Header.EventType), ee.Header.EventType, oneLine(errors.New(ee.Err)))}
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

// Stats is a snapshot of a Reader: its connection to the server and how
// far it has read, for status pages and metrics.
type Stats struct {
	// Connected is true while a binlog connection streams (from its first
	// event until it fails).
	Connected bool
	// DownSince is when the connection was lost, while it is (zero while
	// connected and before the first connection).
	DownSince time.Time
	// LastError is the error that last ended or refused a connection
	// (empty before the first), LastErrorAt when; Errors counts them.
	LastError   string
	LastErrorAt time.Time
	Errors      uint64
	// Events and Bytes count the binlog events read and their size (not
	// heartbeats); Rows the row changes of selected tables emitted.
	Events, Bytes, Rows uint64
	// ReadPos is the end of the last binlog event read.
	ReadPos change.Position
	// ServerPos is the server's end of binlog as last learnt (SHOW MASTER
	// STATUS at the start and every 10 s while no heartbeat comes, each
	// heartbeat's position), at least ReadPos; ServerPosAt when.
	ServerPos   change.Position
	ServerPosAt time.Time
	// LastEventTime is the newest server timestamp of a transaction's
	// event read (whole seconds on MariaDB and MySQL 5.7).
	LastEventTime time.Time
	// HeartbeatAt is when the last heartbeat was read, and CaughtUp is
	// true while nothing but heartbeats came after it: the server, which
	// sends one only when it has nothing else to send, had sent it all.
	HeartbeatAt time.Time
	CaughtUp    bool
	// CaughtUpAt is when braid last knew it had read everything the
	// server had: the last heartbeat, or a status statement that named
	// a position already read (while the reader is held back by a full
	// store and hears no heartbeat).
	CaughtUpAt time.Time
	// Heartbeat is the heartbeat period asked of the server.
	Heartbeat time.Duration
	// Server is the server read (or last read), GTIDs the source's GTID
	// state at the last transaction boundary read (MariaDB: the last GTID
	// of each domain; MySQL: the executed set). Switches counts the times the reader resumed on
	// another server, LastSwitchAt the last.
	Server       *change.Server
	GTIDs        change.GTIDState
	Switches     uint64
	LastSwitchAt time.Time
	// Lost names the GTIDs braid emitted that the server answering, a
	// writable one (a promoted replica), lacks, while the reader waits
	// for them: they were lost in the failover. "" otherwise.
	Lost string
}

// Lag tells how far, at now, the reader trails its server:
//
//   - idle: connected, caught up (the last thing read was a heartbeat)
//     and heartbeats still coming (the last within three periods, at
//     least a second): lag is 0, however old the last commit is;
//   - behind: the server is known to hold binlog the reader has not read
//     (ServerPos after ReadPos);
//   - lag, when not idle, is the time since the newer of the last event's
//     server timestamp and the last time braid knew it had read everything
//     (CaughtUpAt): while events flow, how old the one just read is; while
//     the server is down, stalled or cut off, how long since it was last
//     heard from.
func (s Stats) Lag(now time.Time) (lag time.Duration, idle, behind bool) {
	behind = !s.ServerPos.IsZero() && s.ServerPos.Compare(s.ReadPos) > 0
	within := max(3*s.Heartbeat, time.Second)
	if s.Connected && s.CaughtUp && !behind && now.Sub(s.HeartbeatAt) <= within {
		return 0, true, false
	}
	ref := s.LastEventTime
	for _, t := range []time.Time{s.HeartbeatAt, s.CaughtUpAt} {
		if t.After(ref) {
			ref = t
		}
	}
	if ref.IsZero() {
		return 0, false, behind
	}
	return max(0, now.Sub(ref)), false, behind
}

// progressEvery is how often a reader behind its server by at least that
// much logs its catch-up (position, lag, rows/s), and how often it asks
// the server for its end of binlog while no heartbeat says it. A variable
// so that tests can shorten it.
var progressEvery = 10 * time.Second

// shareEvery is how many events the reading goroutine reads at most
// between two copies of its statistics.
const shareEvery = 64

// Stats returns the reader's statistics now. Safe for concurrent use.
func (p *Reader) Stats() Stats {
	p.statsMu.Lock()
	defer p.statsMu.Unlock()
	s := p.shared
	if !p.shareMexec.IsEmpty() {
		s.GTIDs = change.MySQLGTIDs(p.shareMexec)
	}
	s.ServerPos, s.ServerPosAt = p.server, p.serverAt
	if s.ServerPos.Compare(s.ReadPos) < 0 {
		s.ServerPos = s.ReadPos // the server has at least what was read
	}
	s.CaughtUpAt = s.HeartbeatAt
	if p.confirmedAt.After(s.CaughtUpAt) {
		s.CaughtUpAt = p.confirmedAt
	}
	return s
}

// share publishes the reading goroutine's statistics.
func (p *Reader) share() {
	p.unshared = 0
	p.statsMu.Lock()
	p.shared = p.live
	if p.mknown {
		p.shareMexec = p.mexec
	}
	p.statsMu.Unlock()
}

// setServer records the server's end of binlog, learnt at; read is what
// had been read when it was asked (zero: unknown).
func (p *Reader) setServer(pos change.Position, at time.Time, read change.Position) {
	if pos.IsZero() {
		return
	}
	p.statsMu.Lock()
	p.server, p.serverAt = pos, at
	if !read.IsZero() && pos.Compare(read) <= 0 {
		p.confirmedAt = at
	}
	p.statsMu.Unlock()
}

// note counts a binlog event read, before it is handled (handling may
// wait for backpressure: what was read counts as read).
func (p *Reader) note(e *replication.BinlogEvent) {
	hdr := e.Header
	st := &p.live
	boundary := false
	switch ev := e.Event.(type) {
	case *replication.HeartbeatEvent:
		now := time.Now()
		st.HeartbeatAt, st.CaughtUp = now, true
		if hdr.LogPos > 0 {
			file := ev.Filename
			if file == "" {
				file = p.file
			}
			p.setServer(change.Position{File: file, Pos: hdr.LogPos}, now, change.Position{})
		}
		p.share()
		return
	case *replication.RotateEvent:
		st.ReadPos = change.Position{File: string(ev.NextLogName), Pos: uint32(ev.Position)}
		boundary = true
	case *replication.XIDEvent, *replication.QueryEvent, *replication.TransactionPayloadEvent: // a payload: a whole transaction, XID included
		// The end of a transaction is shared once handled (boundary),
		// with the GTID state past it; shared here, the stats showed
		// the state before it until the next event or heartbeat.
		p.noteTime(hdr)
	case *replication.RowsEvent, *replication.TableMapEvent, *replication.GTIDEvent, *replication.GtidTaggedLogEvent, *replication.MariadbGTIDEvent:
		p.noteTime(hdr)
	}
	st.CaughtUp = false
	st.Events++
	st.Bytes += uint64(hdr.EventSize)
	if hdr.LogPos > 0 && hdr.EventType != replication.ROTATE_EVENT {
		st.ReadPos = change.Position{File: p.file, Pos: hdr.LogPos}
	}
	if p.unshared++; boundary || p.unshared >= shareEvery {
		p.share()
	}
}

// noteTime keeps the newest server timestamp of a transaction's event.
func (p *Reader) noteTime(hdr *replication.EventHeader) {
	if t := time.Unix(int64(hdr.Timestamp), 0); hdr.Timestamp != 0 && t.After(p.live.LastEventTime) {
		p.live.LastEventTime = t
	}
}

// up marks the connection streaming, with one log line when it comes back
// after a failure.
func (p *Reader) up() {
	st := &p.live
	if !st.DownSince.IsZero() {
		p.log.Info("binlog connection restored", "down_for", time.Since(st.DownSince).Round(time.Millisecond),
			"pos", p.resumeString(), "attempts", p.attempts, "last_err", st.LastError)
	}
	st.Connected, st.DownSince, st.CaughtUp = true, time.Time{}, false
	p.attempts = 0
	p.share()
}

// lost records a connection that ended, or could not be made, with err.
func (p *Reader) lost(err error) {
	st := &p.live
	now := time.Now()
	if st.DownSince.IsZero() {
		st.DownSince = now
	}
	st.Connected, st.CaughtUp = false, false
	if err != nil {
		st.LastError, st.LastErrorAt = err.Error(), now
		st.Errors++
	}
	p.attempts++
	p.share()
}
