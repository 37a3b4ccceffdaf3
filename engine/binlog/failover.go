package binlog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/braid-cdc/braid/engine/change"
)

// A source is a set of servers (a primary and its replicas, behind one
// address that a failover moves): a position in one server's binlog
// means nothing in another's. So the reader knows whose binlog its
// position is in (posServer), checks on every connect who answered, and
// resumes on another server by GTID, never at file:pos (DM's rules):
//
//   - the same server: by file:pos, as always;
//   - another MariaDB server in gtid_strict_mode: by the GTID state at
//     the position (the last GTID of each domain, MariaDB's
//     slave_connect_state), once the server holds all of it (a lagging
//     replica is waited for) and has purged none of what follows it (else
//     the source stops, naming the purged GTIDs); the transactions it
//     sends that braid had emitted (a GTID not past the state) are
//     dropped by GTID;
//   - anything else (no GTID state, strict mode off, MySQL) stops the
//     source with one line saying why and what to do.

// gtidPos is a MariaDB GTID position: the last GTID of each domain, by
// domain.
type gtidPos []mysql.MariadbGTID

// parseGTIDPos parses "0-1-42,1-2-7" (spaces and brackets, as a
// Gtid_list event's Info shows them, allowed); of two GTIDs of one domain
// the later wins.
func parseGTIDPos(s string) (gtidPos, error) {
	s = strings.Trim(strings.TrimSpace(s), "[]")
	var out gtidPos
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		g, err := mysql.ParseMariadbGTID(part)
		if err != nil {
			return nil, fmt.Errorf("%q is not a MariaDB GTID: %v", part, err)
		}
		out.set(*g)
	}
	return out, nil
}

// set makes g its domain's last GTID.
func (p *gtidPos) set(g mysql.MariadbGTID) {
	i, ok := slices.BinarySearchFunc(*p, g.DomainID, func(a mysql.MariadbGTID, d uint32) int {
		return cmpUint(a.DomainID, d)
	})
	if ok {
		(*p)[i] = g
		return
	}
	*p = slices.Insert(*p, i, g)
}

// get returns domain d's last GTID.
func (p gtidPos) get(d uint32) (mysql.MariadbGTID, bool) {
	i, ok := slices.BinarySearchFunc(p, d, func(a mysql.MariadbGTID, d uint32) int { return cmpUint(a.DomainID, d) })
	if !ok {
		return mysql.MariadbGTID{}, false
	}
	return p[i], true
}

func cmpUint(a, b uint32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// String renders "0-1-42,1-2-7"; "" when empty.
func (p gtidPos) String() string {
	b := make([]byte, 0, 16*len(p))
	for i, g := range p {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendGTID(b, g)
	}
	return string(b)
}

func appendGTID(b []byte, g mysql.MariadbGTID) []byte {
	b = strconv.AppendUint(b, uint64(g.DomainID), 10)
	b = append(b, '-')
	b = strconv.AppendUint(b, uint64(g.ServerID), 10)
	b = append(b, '-')
	return strconv.AppendUint(b, g.SequenceNumber, 10)
}

func gtidString(g mysql.MariadbGTID) string { return string(appendGTID(nil, g)) }

// compareGTIDs checks a cursor's GTID position against a server's, DM's
// two conditions: the server's binlog holds it (have, its
// gtid_binlog_pos, and state, its gtid_binlog_state: missing names what
// it lacks, by domain) and has purged nothing after it (oldest, the GTID
// list its oldest binlog starts with: purged names what is gone).
//
// Where the server's last GTID of a domain is another server_id's than
// the cursor's (a promoted server that wrote on in the domain), its state
// tells whether it holds the cursor's: its last GTID of the cursor's
// server_id. A promoted server that lacks transactions braid emitted
// reuses their seq numbers for its own, so the domain's position alone
// would soon say it holds them. Without a state (nil) the position is
// taken.
func compareGTIDs(cursor, have gtidPos, state []mysql.MariadbGTID, oldest gtidPos) (missing, purged []string) {
	for _, c := range cursor {
		h, ok := have.get(c.DomainID)
		s, held := lastOf(state, c.DomainID, c.ServerID)
		switch {
		case !ok:
			missing = append(missing, fmt.Sprintf("domain %d up to %s (the server has none of it)", c.DomainID, gtidString(c)))
		case h.ServerID == c.ServerID || state == nil:
			if h.SequenceNumber < c.SequenceNumber {
				missing = append(missing, fmt.Sprintf("domain %d seq %d to %s (the server is at %s)", c.DomainID, h.SequenceNumber+1, gtidString(c), gtidString(h)))
			}
		case !held:
			missing = append(missing, fmt.Sprintf("domain %d up to %s (the server has no GTID of server_id %d in it)", c.DomainID, gtidString(c), c.ServerID))
		case s.SequenceNumber < c.SequenceNumber:
			missing = append(missing, fmt.Sprintf("domain %d seq %d to %s (the server's last of server_id %d is %s)", c.DomainID, s.SequenceNumber+1, gtidString(c), c.ServerID, gtidString(s)))
		}
	}
	for _, o := range oldest {
		c, ok := cursor.get(o.DomainID)
		switch {
		case !ok:
			purged = append(purged, fmt.Sprintf("domain %d up to %s", o.DomainID, gtidString(o)))
		case o.SequenceNumber > c.SequenceNumber:
			purged = append(purged, fmt.Sprintf("domain %d seq %d to %s", o.DomainID, c.SequenceNumber+1, gtidString(o)))
		}
	}
	return missing, purged
}

// lastOf returns the GTID of domain d and server_id id in state (a
// gtid_binlog_state: the last GTID of each domain and server_id).
func lastOf(state []mysql.MariadbGTID, d, id uint32) (mysql.MariadbGTID, bool) {
	for _, g := range state {
		if g.DomainID == d && g.ServerID == id {
			return g, true
		}
	}
	return mysql.MariadbGTID{}, false
}

// parseGTIDState parses a gtid_binlog_state: "0-1-42,0-2-50,1-2-7".
func parseGTIDState(s string) ([]mysql.MariadbGTID, error) {
	out := []mysql.MariadbGTID{} // not nil: an empty state is known
	for part := range strings.SplitSeq(strings.TrimSpace(s), ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		g, err := mysql.ParseMariadbGTID(part)
		if err != nil {
			return nil, fmt.Errorf("%q is not a MariaDB GTID: %v", part, err)
		}
		out = append(out, *g)
	}
	return out, nil
}

// ErrServerChanged: another server answered at the source's address and
// braid cannot resume there (no GTIDs, or binlogs purged past its
// position).
var ErrServerChanged = errors.New("binlog: another server answers at the source's address")

// answer is what the reader learns of the server that answered a connect.
type answer struct {
	server *change.Server
	strict bool   // MariaDB gtid_strict_mode ON
	gtidOn bool   // MySQL gtid_mode ON
	have   string // MariaDB gtid_binlog_pos
	state  string // MariaDB gtid_binlog_state
}

// identify asks the server behind c who it is.
func (p *Reader) identify(c *client.Conn) (answer, error) {
	maria := p.info.flavor == mysql.MariaDBFlavor
	q := "SELECT @@server_id, @@hostname, @@port, @@log_bin_basename, @@server_uuid, @@gtid_mode, '', '', ''"
	if maria {
		q = "SELECT @@server_id, @@hostname, @@port, @@log_bin_basename, '', '', @@gtid_strict_mode, @@gtid_binlog_pos, @@gtid_binlog_state"
	}
	r, err := c.Execute(q)
	if err != nil {
		return answer{}, p.queryError("ask the server who it is", err)
	}
	defer r.Close()
	// go-mysql's strings may share the connection's read buffer, which
	// the next query overwrites: the identity outlives it.
	get := func(i int) string { s, _ := r.GetString(0, i); return strings.Clone(s) }
	id, _ := r.GetUint(0, 0)
	a := answer{
		server: &change.Server{ID: uint32(id), Host: get(1) + ":" + get(2), Binlog: get(3), UUID: get(4)},
		gtidOn: strings.EqualFold(get(5), "ON"),
		strict: isOn(get(6)),
		have:   get(7),
		state:  get(8),
	}
	return a, nil
}

// gtidAt is the MariaDB GTID position at pos in the server's binlog
// (BINLOG_GTID_POS), "" when the server cannot tell.
func gtidAt(c *client.Conn, pos change.Position) (string, error) {
	r, err := c.Execute("SELECT BINLOG_GTID_POS(?, ?)", pos.File, pos.Pos)
	if err != nil {
		return "", err
	}
	defer r.Close()
	s, _ := r.GetString(0, 0)
	return strings.Clone(s), nil
}

// oldestGTIDList is the GTID list the server's oldest binlog starts
// with: the GTIDs before it, none of which the server still holds.
func oldestGTIDList(c *client.Conn) (string, gtidPos, error) {
	files, err := binlogFiles(c)
	if err != nil || len(files) == 0 {
		return "", nil, err
	}
	files[0] = strings.Clone(files[0]) // go-mysql's buffer, which the next query reuses
	r, err := c.Execute("SHOW BINLOG EVENTS IN '" + strings.ReplaceAll(files[0], "'", "''") + "' LIMIT 6")
	if err != nil {
		return files[0], nil, err
	}
	defer r.Close()
	for i := 0; i < r.RowNumber(); i++ {
		typ, _ := r.GetStringByName(i, "Event_type")
		if typ != "Gtid_list" {
			continue
		}
		info, _ := r.GetStringByName(i, "Info")
		pos, err := parseGTIDPos(info)
		return files[0], pos, err
	}
	return files[0], nil, nil
}

// firstConnection reports whether no binlog connection was tried since
// prepare: none came up (up) and none failed (lost).
func (p *Reader) firstConnection() bool {
	return !p.live.Connected && p.live.DownSince.IsZero() && p.attempts == 0 && p.connServer != nil
}

// prepareAnswerStands reports whether the server prepare asked stands
// for the first binlog connection: the position is that server's, or the
// reader starts by GTID (checkServer).
func (p *Reader) prepareAnswerStands() bool {
	return !p.started || p.posServer == nil || p.posServer.Same(p.connServer)
}

// lagLogEvery is how often a reader waiting for a lagging server says so.
var lagLogEvery = 10 * time.Second

// checkServer runs before each binlog connection (the first takes
// prepare's answer): it asks who answers at
// the source's address and, when it is not the server whose binlog the
// position is in, prepares a resume by GTID there (waiting while it
// lags) or returns the fatal error that says why it cannot.
func (p *Reader) checkServer(ctx context.Context) error {
	if p.firstConnection() && p.prepareAnswerStands() {
		// prepare asked who answers a moment ago, on a connection of its
		// own, and the position is that server's (or it starts by GTID):
		// its answer stands for the first binlog connection, as a new
		// one's would (either is a connection before the binlog's, which
		// a virtual IP may move between). Asking again cost a connection
		// and a query before the first row.
		if p.started {
			if p.posServer == nil {
				p.posServer = p.connServer
			}
			p.byGTID = false
		}
		return nil
	}
	c, err := p.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	a, err := p.identify(c)
	if err != nil {
		return err
	}
	c.SetDeadline(time.Time{})
	p.connServer, p.live.Server = a.server, a.server
	if !p.started || p.posServer == nil || p.posServer.Same(a.server) {
		// A GTID start (the server finds the place), a position of this
		// server, or one of a cursor that predates server identities
		// (resumed by file:pos as before).
		if p.started {
			if p.posServer == nil {
				p.posServer = a.server
			}
			p.byGTID = false
		}
		return nil
	}
	old, now := p.posServer, a.server
	if p.info.flavor != mysql.MariaDBFlavor {
		if !a.gtidOn {
			return fatal{fmt.Errorf("%w: source %s (%s): %s answers, but braid's position %s is in the binlog of %s, and without gtid_mode=ON it means nothing here: "+
				"set gtid_mode=ON (and enforce_gtid_consistency=ON) on every server of the source, then start the destination again from a position on this server",
				ErrServerChanged, p.spec.Name, p.spec.Address, now, p.resume, old)}
		}
		return p.switchMySQL(ctx, c, old, now)
	}
	if len(p.gtids) == 0 || !a.strict {
		why := "braid's position has no GTID state"
		if !a.strict {
			why = "the server has gtid_strict_mode=OFF"
		}
		return fatal{fmt.Errorf("%w: source %s (%s): %s answers, but braid's position %s is in the binlog of %s and %s, so braid cannot find its place there: "+
			"set gtid_strict_mode=ON on every server of the source (braid then resumes on another server by GTID), or point the address back at %s",
			ErrServerChanged, p.spec.Name, p.spec.Address, now, p.resume, old, why, old)}
	}
	oldest, list, err := oldestGTIDList(c)
	if err != nil {
		return p.queryError("read the GTID list of its oldest binlog", err)
	}
	waitStart := time.Now()
	var lastLog time.Time
	lost := false // the server is writable: what it lacks is lost
	for {
		have, err := parseGTIDPos(a.have)
		if err != nil {
			return fatal{fmt.Errorf("binlog: source %s (%s): gtid_binlog_pos: %v", p.spec.Name, p.spec.Address, err)}
		}
		state, err := parseGTIDState(a.state)
		if err != nil {
			return fatal{fmt.Errorf("binlog: source %s (%s): gtid_binlog_state: %v", p.spec.Name, p.spec.Address, err)}
		}
		if err := p.insideLoss(p.gtids, have, state); err != nil {
			return err
		}
		missing, purged := compareGTIDs(p.gtids, have, state, list)
		if len(purged) > 0 {
			return fatal{fmt.Errorf("%w: source %s (%s): %s answers, but it purged GTIDs braid has not read yet (%s; its oldest binlog %s starts after %s; braid is at %s): "+
				"restore those binlogs or point the address at a server that has them, else start the destination again from a later position",
				ErrPurged, p.spec.Name, p.spec.Address, now, strings.Join(purged, ", "), oldest, list, p.gtids)}
		}
		lacks := strings.Join(missing, ", ")
		live := ""
		if len(missing) == 0 {
			if live = p.liveLacks(have, state); live == "" {
				p.waitOn(nil)
				break
			}
			lacks = live
		} else {
			l := change.Loss{Lost: lacks, From: p.gtids.String(), Server: now.String()}
			if p.isAccepted(l) {
				p.goOnMariaDB(l, have, state)
				break
			}
			if lost {
				p.noteLoss(l) // the set may change between two lines
			}
		}
		if p.lagLimit > 0 && time.Since(waitStart) >= p.lagLimit {
			// One of several servers: the next may not lag.
			p.waitOn(nil)
			return fmt.Errorf("binlog: source %s (%s): %s still lacks transactions braid already emitted after %v (%s)",
				p.spec.Name, p.spec.Address, now, p.lagLimit, lacks)
		}
		if time.Since(lastLog) >= lagLogEvery {
			if live != "" {
				p.sayLiveLacks(old, now, live, p.gtids.String())
			} else {
				lost = p.sayMissing(c, old, now, lacks, p.gtids.String(), waitStart)
			}
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		c.SetDeadline(time.Now().Add(handshakeTimeout))
		r, err := c.Execute("SELECT @@gtid_binlog_pos, @@gtid_binlog_state")
		if err != nil {
			return p.queryError("read gtid_binlog_pos", err)
		}
		pos, _ := r.GetString(0, 0)
		st, _ := r.GetString(0, 1)
		a.have, a.state = strings.Clone(pos), strings.Clone(st)
		r.Close()
		c.SetDeadline(time.Time{})
	}
	p.started, p.startGTID, p.byGTID = false, p.gtids.String(), true
	p.live.Lost = ""
	p.switched(old, now, waitStart)
	return nil
}

// mariadbGTID is a MariaDB GTID event's GTID, read from the event's
// bytes: go-mysql, when it streams from a GTID set, keeps a pointer to
// the first event's GTID of each domain and server in its own set and
// moves it forward with the later ones, so by the time the reader
// handles an event read ahead its GTID may already be a later one's.
func mariadbGTID(e *replication.BinlogEvent, ev *replication.MariadbGTIDEvent) mysql.MariadbGTID {
	body := e.RawData[min(len(e.RawData), replication.EventHeaderSize):]
	if len(body) < 12 {
		return ev.GTID
	}
	return mysql.MariadbGTID{
		SequenceNumber: binary.LittleEndian.Uint64(body),
		DomainID:       binary.LittleEndian.Uint32(body[8:]),
		ServerID:       e.Header.ServerID,
	}
}

// The server is asked who it is on a connection of its own, just before
// the binlog connection: a virtual IP that moves between the two would
// have braid read another server's binlog at the position it checked on
// the first. So the binlog connection checks too: the first event a
// server sends (the artificial ROTATE naming where it starts) carries its
// server_id, and a refusal before it (a position this server does not
// have) is checked against who answers now. Either way, another server
// than the one checked makes the reader connect again, which checks it.

// beforeDump, when set (tests), runs between the check of the server and
// the binlog connection.
var beforeDump func()

// checkDumpServer checks the first event of a binlog connection against
// the server checkServer asked.
func (p *Reader) checkDumpServer(e *replication.BinlogEvent) error {
	if _, ok := e.Event.(*replication.RotateEvent); !ok || p.connServer == nil || e.Header.ServerID == p.connServer.ID {
		return nil
	}
	return fmt.Errorf("binlog: source %s (%s): the binlog comes from server_id %d, not from %s that braid checked: another server took the address in between; checking it",
		p.spec.Name, p.spec.Address, e.Header.ServerID, p.connServer)
}

// dumpRefused turns a fatal refusal of a binlog connection before its
// first event into one to retry when another server than the one
// checked answers now.
func (p *Reader) dumpRefused(ctx context.Context, err error) error {
	if !isFatal(err) || p.connServer == nil || ctx.Err() != nil {
		return err
	}
	c, derr := p.dial(ctx)
	if derr != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	a, ierr := p.identify(c)
	if ierr != nil || a.server.Same(p.connServer) {
		return err
	}
	return fmt.Errorf("binlog: source %s (%s): %s refused the binlog (%v), but braid had checked %s: another server took the address in between; checking it",
		p.spec.Name, p.spec.Address, a.server, err, p.connServer)
}
