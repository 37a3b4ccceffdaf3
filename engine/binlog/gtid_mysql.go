package binlog

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/internal/mysqlauth"
	"github.com/braid-cdc/braid/spec"
)

// A MySQL source's GTID state is its executed set: every GTID of the
// transactions up to the reader's position, tags included (Reader.mexec).
// It is known (mknown) from where the reader can tell it:
//
//   - a cursor that kept it, or a {gtid} start (the start set);
//   - a latest start: the Executed_Gtid_Set of the same status statement
//     that named the position;
//   - the PREVIOUS_GTIDS event at the start of each binlog file, the set
//     of every transaction before the file: a start at a file's
//     beginning knows it at once; for a start inside a file (a position,
//     or a cursor saved before braid kept GTIDs) the reader reads the
//     file up to it once, on a binlog connection of its own, for its
//     PREVIOUS_GTIDS and the GTIDs before the position (gtidSetAt).
//
// Each transaction adds its GTID, which costs no allocation in the usual
// case (change.MySQLExecuted), and the set is printed only when a cursor
// is saved (change.GTIDState).
//
// On another server (checkServer) the reader checks DM's two conditions
// against the set: the server holds it (gtid_executed contains it; a
// lagging one is waited for) and has purged nothing braid has not read
// (gtid_purged is within it), then asks for the binlog with
// COM_BINLOG_DUMP_GTID and the set (gtid_start.go), and drops any
// transaction in the set the server sends all the same.

// mysqlTxGTID is a MySQL transaction's GTID: source id, tag and number
// (gno 0: an anonymous transaction).
type mysqlTxGTID struct {
	sid [16]byte
	tag string
	gno int64
}

// mysqlTxGTID notes the GTID of the transaction a MySQL GTID event
// opens, and whether it was emitted before a switch of servers.
func (p *Reader) mysqlTxGTID(ev *replication.GTIDEvent, typ replication.EventType) {
	if typ == replication.ANONYMOUS_GTID_EVENT || len(ev.SID) != 16 || ev.GNO <= 0 {
		return
	}
	g := &p.tx.my
	copy(g.sid[:], ev.SID)
	g.tag, g.gno = strings.ToLower(ev.Tag), ev.GNO
	if p.byGTID && p.mexec.ContainsGTID(g.sid, g.tag, g.gno) {
		p.tx.dup = true
	}
}

// previousGTIDs reads a PREVIOUS_GTIDS event, the set of every
// transaction before its file: the executed set here.
func (p *Reader) previousGTIDs(e *replication.BinlogEvent, start change.Position) error {
	if p.info.flavor != mysql.MySQLFlavor {
		return nil
	}
	body := e.RawData[min(len(e.RawData), replication.EventHeaderSize) : len(e.RawData)-p.checksum]
	set, err := change.DecodeMySQLGTIDSet(body)
	if err != nil {
		return fatal{fmt.Errorf("%w: source %s at %s: PREVIOUS_GTIDS: %v", ErrBadEvent, p.spec.Name, start, err)}
	}
	p.mexec.Union(set)
	p.mknown = true
	return nil
}

// gtidState is the GTID state a boundary event carries: MariaDB's
// position, MySQL's executed set once it is known.
func (p *Reader) gtidState() change.GTIDState {
	if p.info.flavor == mysql.MySQLFlavor {
		if !p.mknown {
			return change.GTIDState{}
		}
		return change.MySQLGTIDs(p.mexec)
	}
	return change.GTIDText(p.gtidStr)
}

// startMySQLGTIDs learns a MySQL source's executed set at the start (see
// the top of the file); latest is the Executed_Gtid_Set of the status
// statement that named the server's position, gtidOn whether the server
// has GTIDs at all.
func (p *Reader) startMySQLGTIDs(ctx context.Context, latest string, latestStart, gtidOn bool) error {
	text := ""
	switch r := p.cfg.Resume; {
	case r != nil && r.GTIDs != "":
		text = r.GTIDs
	case !p.started:
		text = p.startGTID
	case latestStart:
		text = latest
	case !gtidOn:
		return nil
	case p.resume.Pos <= 4:
		return nil // PREVIOUS_GTIDS comes first
	default:
		set, err := p.gtidSetAt(ctx, p.resume)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			p.log.Warn("cannot learn the GTID set at the start position; it is known from the next binlog file on, and until then a switch of servers stops the source",
				"pos", p.resume.String(), "err", err)
			return nil
		}
		p.mexec, p.mknown = change.NewMySQLExecuted(set), true
		p.share()
		return nil
	}
	set, err := change.ParseMySQLGTIDSet(text)
	if err != nil {
		return fatal{fmt.Errorf("binlog: source %s: the GTID set at the start: %v", p.spec.Name, err)}
	}
	p.mexec, p.mknown = change.NewMySQLExecuted(set), true
	p.share()
	return nil
}

// gtidSetAt reads the server's binlog file of pos from its start up to
// pos, on a binlog connection of its own, and returns the executed set
// at pos: the file's PREVIOUS_GTIDS and the GTIDs of the transactions
// before pos. Rows are not decoded.
func (p *Reader) gtidSetAt(ctx context.Context, pos change.Position) (change.MySQLGTIDSet, error) {
	var set change.MySQLGTIDSet
	cfg := p.syncerConfig()
	cfg.RowsEventDecodeFunc = func(*replication.RowsEvent, []byte) error { return nil }
	tlsCfg, err := p.tlsConfig()
	if err != nil {
		return set, err
	}
	var watch mysqlauth.Watch
	cfg.Dialer = watch.Dial(recvBufferDialer(cfg.RecvBufferSize))
	if tlsCfg != nil {
		cfg.TLSConfig = tlsCfg
		cfg.Dialer = recvBufferDialer(cfg.RecvBufferSize)
	}
	syncer := replication.NewBinlogSyncer(cfg)
	defer syncer.Close()
	st, err := syncer.StartSync(mysql.Position{Name: pos.File, Pos: 4})
	if err != nil {
		return set, err
	}
	checksum := 0
	for {
		e, err := st.GetEvent(ctx)
		if err != nil {
			return set, err
		}
		h := e.Header
		switch ev := e.Event.(type) {
		case *replication.RotateEvent:
			if h.LogPos != 0 && string(ev.NextLogName) != pos.File {
				return set, fmt.Errorf("binlog %s ends before %d", pos.File, pos.Pos)
			}
			continue // the artificial one naming the file
		case *replication.HeartbeatEvent:
			return set, fmt.Errorf("binlog %s ends before %d", pos.File, pos.Pos)
		case *replication.FormatDescriptionEvent:
			if ev.ChecksumAlgorithm == replication.BINLOG_CHECKSUM_ALG_CRC32 {
				checksum = 4
			}
		case *replication.PreviousGTIDsEvent:
			prev, err := change.DecodeMySQLGTIDSet(e.RawData[replication.EventHeaderSize : len(e.RawData)-checksum])
			if err != nil {
				return set, fmt.Errorf("PREVIOUS_GTIDS: %w", err)
			}
			set.Union(prev)
		case *replication.GTIDEvent:
			if h.LogPos <= pos.Pos {
				if g := mysqlGTID(ev, h.EventType); g != "" {
					if err := set.Add(g); err != nil {
						return set, err
					}
				}
			}
		case *replication.GtidTaggedLogEvent:
			if h.LogPos <= pos.Pos {
				if err := set.Add(mysqlGTID(&ev.GTIDEvent, h.EventType)); err != nil {
					return set, err
				}
			}
		}
		if h.LogPos >= pos.Pos {
			return set, nil
		}
	}
}

// isLatestStart reports whether the reader starts at the server's
// position named by the status statement.
func (p *Reader) isLatestStart(snapPos change.Position) bool {
	return p.cfg.Resume == nil && p.started && p.resume == snapPos && p.spec.Start.Kind != spec.StartPosition &&
		p.spec.Start.Kind != spec.StartEarliest && p.spec.Start.Kind != spec.StartTimestamp
}

// switchMySQL prepares the resume of a MySQL source on another server
// (now; old is the server whose binlog the position is in) by GTID, once
// the server holds the executed set and has purged nothing after it.
func (p *Reader) switchMySQL(ctx context.Context, c *client.Conn, old, now *change.Server) error {
	if !p.mknown || p.mexec.IsEmpty() {
		return fatal{fmt.Errorf("%w: source %s (%s): %s answers, but braid's position %s is in the binlog of %s and braid does not know its GTID set there "+
			"(it started inside a binlog file and has not read to the next one): point the address back at %s, or start the destination again from a GTID set or a position on this server",
			ErrServerChanged, p.spec.Name, p.spec.Address, now, p.resume, old, old)}
	}
	cursor := p.mexec.Set()
	waitStart := time.Now()
	var lastLog time.Time
	lost := false // the server is writable: what it lacks is lost
	for {
		c.SetDeadline(time.Now().Add(handshakeTimeout))
		executed, purged, err := serverGTIDSets(c)
		if err != nil {
			return p.queryError("read gtid_executed and gtid_purged", err)
		}
		c.SetDeadline(time.Time{})
		if err := p.insideLossMySQL(cursor, executed, old); err != nil {
			return err
		}
		if gone := purged.Minus(cursor); !gone.IsEmpty() {
			return fatal{fmt.Errorf("%w: source %s (%s): %s answers, but it purged GTIDs braid has not read yet (%s; braid is at %s): "+
				"restore those binlogs or point the address at a server that has them, else start the destination again from a later position",
				ErrPurged, p.spec.Name, p.spec.Address, now, gone, cursor)}
		}
		missing := cursor.Minus(executed)
		lacks := missing.String()
		live := ""
		if missing.IsEmpty() {
			// A replay reader also needs what the live reader read
			// (Config.Live), as on MariaDB (checkServer).
			if live = p.liveLacksMySQL(executed); live == "" {
				p.waitOn(nil)
				break
			}
			lacks = live
		} else {
			l := change.Loss{Lost: lacks, From: cursor.String(), Server: now.String()}
			if p.isAccepted(l) {
				cursor = p.goOnMySQL(l, cursor, missing)
				break
			}
			if lost {
				p.noteLoss(l) // the set may change between two lines
			}
		}
		if p.lagLimit > 0 && time.Since(waitStart) >= p.lagLimit {
			// One of several servers: the next may not lag (servers.go).
			p.waitOn(nil)
			return fmt.Errorf("binlog: source %s (%s): %s still lacks transactions braid already emitted after %v (%s)",
				p.spec.Name, p.spec.Address, now, p.lagLimit, lacks)
		}
		if time.Since(lastLog) >= lagLogEvery {
			if live != "" {
				p.sayLiveLacks(old, now, live, cursor.String())
			} else {
				lost = p.sayMissing(c, old, now, lacks, cursor.String(), waitStart)
			}
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	p.started, p.startGTID, p.byGTID = false, cursor.String(), true
	p.live.Lost = ""
	p.switched(old, now, waitStart)
	return nil
}

// serverGTIDSets reads a MySQL server's gtid_executed and gtid_purged.
func serverGTIDSets(c *client.Conn) (executed, purged change.MySQLGTIDSet, err error) {
	r, err := c.Execute("SELECT @@GLOBAL.gtid_executed, @@GLOBAL.gtid_purged")
	if err != nil {
		return executed, purged, err
	}
	defer r.Close()
	e, _ := r.GetString(0, 0)
	pu, _ := r.GetString(0, 1)
	if executed, err = change.ParseMySQLGTIDSet(e); err != nil {
		return executed, purged, fmt.Errorf("gtid_executed: %w", err)
	}
	if purged, err = change.ParseMySQLGTIDSet(pu); err != nil {
		return executed, purged, fmt.Errorf("gtid_purged: %w", err)
	}
	return executed, purged, nil
}

// sayLiveLacks logs that a replay reader waits on a server (now) that
// lacks what the destination's live reader read (live), braid's position
// being at.
func (p *Reader) sayLiveLacks(old, now *change.Server, live, at string) {
	p.log.Warn("a replay reader waits: the server lacks transactions the destination's live reader read; if they were lost in a failover, the loss accepted says how the stream went on",
		"old_server", old.String(), "new_server", now.String(), "lacks", live, "position", at)
}

// sayMissing logs that the server that answers (now, on c) lacks
// transactions braid emitted (missing) and that braid waits. A writable
// server (read_only=OFF: a promoted one) is not catching up: those
// transactions were lost in the failover, which the line says, and the
// source's Stats name (Lost) while it waits.
func (p *Reader) sayMissing(c *client.Conn, old, now *change.Server, missing, from string, waitStart time.Time) (writable bool) {
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	if r, err := c.Execute("SELECT @@read_only"); err == nil {
		ro, _ := r.GetString(0, 0)
		writable = !isOn(ro)
		r.Close()
	}
	c.SetDeadline(time.Time{})
	waiting := time.Since(waitStart).Round(time.Millisecond)
	if !writable {
		p.log.Warn("the server that answers lacks transactions braid already emitted; waiting for it to catch up",
			"old_server", old.String(), "new_server", now.String(), "missing", missing, "waiting", waiting)
		return false
	}
	p.noteLoss(change.Loss{Lost: missing, From: from, Server: now.String()})
	p.log.Error("the server that answers is writable (read_only=OFF: a promoted server) and lacks transactions braid already emitted: "+
		"they were lost in the failover and will not come; braid waits rather than go on without them. "+
		"Point the address at a server that has them, or restore them on this one, "+
		"or accept the loss with `braid destination accept-lost "+p.cfg.Destination+" "+p.spec.Name+"` (a marker naming them goes into the stream)",
		"old_server", old.String(), "new_server", now.String(), "lost", missing, "waiting", waiting)
	return true
}

// switched logs and counts a resume on another server.
func (p *Reader) switched(old, now *change.Server, waitStart time.Time) {
	down := p.live.DownSince
	if down.IsZero() {
		down = waitStart
	}
	took := time.Since(down).Round(time.Millisecond)
	why := p.switchWhy // a pass over the source's addresses (servers.go)
	if why == "" {
		why = "another server answers at " + p.spec.Address
	}
	p.log.Warn("source switched servers: resuming by GTID", "old_server", old.String(), "new_server", now.String(),
		"why", why, "gtid", p.startGTID, "old_pos", p.resume.String(), "took", took)
	p.live.Switches++
	p.live.LastSwitchAt = time.Now()
	// The schema model's positions were the old server's; from here on
	// they are the new one's.
	p.schema.Rebase()
}
