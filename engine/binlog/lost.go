package binlog

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/braid-cdc/braid/engine/change"
)

// A writable server that lacks transactions braid already emitted (a
// promoted replica, after an asynchronous failover lost them) will never
// have them: checkServer names them (Stats.Lost) and waits. An operator
// may accept the loss (AcceptLoss, kept by the destination first): the
// reader then goes on on that server from the GTID state it holds of
// braid's (per MariaDB domain the lower of braid's and the server's last
// GTID; MySQL's set less the transactions lost), so the transactions the
// server has that braid did not emit come next, and before them a marker
// transaction (change.Event.Lost) naming the lost ones. A loss is
// accepted exactly: the same GTIDs missing after the same point
// (change.Loss.Same); another needs another accept. The losses accepted
// come back in Config.Accepted, so a restart from a cursor at the same
// point goes on without asking again, and one from a cursor before it
// gives the lost transactions that went out after the cursor again as
// LOST markers of their own, at their seqs (armLoss, from Loss.Txs).

// ErrNothingLost: a loss was to be accepted, but the reader is not
// waiting on one.
var ErrNothingLost = errors.New("binlog: nothing lost")

// Loss returns the loss the reader waits on now, if any.
func (p *Reader) Loss() (change.Loss, bool) {
	p.lossMu.Lock()
	defer p.lossMu.Unlock()
	if p.waiting == nil {
		return change.Loss{}, false
	}
	return *p.waiting, true
}

// AcceptLoss accepts l, which the caller has kept: a reader waiting on
// that loss goes on within a moment. Safe for concurrent use.
func (p *Reader) AcceptLoss(l change.Loss) {
	p.lossMu.Lock()
	defer p.lossMu.Unlock()
	if !slices.ContainsFunc(p.accepted, l.Same) {
		p.accepted = append(p.accepted, l)
	}
}

// waitOn notes the loss checkServer waits on (nil: none) and reports
// whether it was accepted.
func (p *Reader) waitOn(l *change.Loss) bool {
	p.lossMu.Lock()
	defer p.lossMu.Unlock()
	p.waiting = l
	return l != nil && slices.ContainsFunc(p.accepted, l.Same)
}

// noteLoss notes the loss the reader waits on, l, for Loss and Stats.
func (p *Reader) noteLoss(l change.Loss) {
	p.waitOn(&l)
	if p.live.Lost != l.Lost {
		p.live.Lost = l.Lost
		p.share()
	}
}

// isAccepted reports whether the loss l was accepted.
func (p *Reader) isAccepted(l change.Loss) bool {
	return slices.ContainsFunc(p.acceptedNow(), l.Same)
}

// acceptedNow lists the losses accepted: AcceptLoss's and
// Config.Accepted's, and Config.Losses's now.
func (p *Reader) acceptedNow() []change.Loss {
	p.lossMu.Lock()
	out := slices.Clone(p.accepted)
	p.lossMu.Unlock()
	if p.cfg.Losses != nil {
		out = append(out, p.cfg.Losses()...)
	}
	return out
}

// armLoss finds the accepted loss, if any, that a MariaDB reader at
// cursor, switching to a server at have (gtid_binlog_pos) and state
// (gtid_binlog_state) from old at oldPos, has not gone past yet: some of
// its transactions went out after cursor (the position lies inside
// them, or before them all, when a restart, a new owner or a replay
// starts from a cursor kept before the marker). They are gone, but each
// had its seq: the reader gives each again as a LOST marker of its own
// (a ghost, from the loss's Txs, at its commit time, so the merge puts
// it where it went), then the loss's marker, then the server's own
// transactions, so every seq is the first run's. Inside them it goes on
// at once (from the last GTID the server shares with braid); before
// them it reads the server up to that GTID first (p.pending). A loss
// whose Txs lack some of them (the reader that emitted them remembered
// too few) cannot be given again: ErrLostInside, one line.
func (p *Reader) armLoss(cursor, have gtidPos, state []mysql.MariadbGTID, old *change.Server, oldPos change.Position) error {
	p.pending = nil
	for _, l := range p.acceptedNow() {
		from, err := parseGTIDPos(l.From)
		if err != nil {
			continue
		}
		held := acceptedStart(from, have, state)
		// after is, per domain the loss is ahead of cursor in, the last
		// GTID before the transactions to give again.
		var after gtidPos
		before := false
		for _, f := range from {
			c, ok := cursor.get(f.DomainID)
			s, sok := held.get(f.DomainID)
			if !ok || !sok || c.ServerID != f.ServerID || s.ServerID != f.ServerID ||
				s.SequenceNumber >= f.SequenceNumber || c.SequenceNumber >= f.SequenceNumber {
				continue
			}
			if c.SequenceNumber < s.SequenceNumber {
				before = true
				after.set(s)
			} else {
				after.set(c)
			}
		}
		if len(after) == 0 {
			continue
		}
		ghosts, ok := ghostsOf(l, from, after)
		if !ok {
			return fatal{fmt.Errorf("%w: source %s (%s): braid's position %s lies before transactions lost in a failover, whose loss an operator accepted (%s): "+
				"they went out in the stream after this position, no server has them now, and the accept does not name them all (braid remembers the last %d it emitted), so the stream from here cannot be given again with its seqs. "+
				"A consumer or sink whose cursor is here: drop it (braid consumer drop) and subscribe it again after the loss's LOST marker, or start the destination over",
				ErrLostInside, p.spec.Name, p.spec.Address, cursor, l.Lost, recentTxs)}
		}
		if before {
			p.pending = &pendingLoss{at: held, loss: l, ghosts: ghosts, old: old, oldPos: oldPos}
			p.log.Warn("braid's position lies before transactions lost in a failover, whose loss an operator accepted: reading the new server up to them, then a LOST marker for each as it went out, then the loss's marker",
				"position", cursor.String(), "lost", l.Lost, "up_to", held.String())
			return nil
		}
		p.setGhosts(cursor, ghosts, old, oldPos)
		p.goOnMariaDB(l, have, state)
		return nil
	}
	return nil
}

// recentTxs is how many of the transactions it emitted last a MariaDB
// reader remembers, for a loss's Txs.
const recentTxs = 10000

// recentTx is a transaction a reader emitted: its GTID, commit time (µs)
// and change.LostTx.Kind.
type recentTx struct {
	gtid mysql.MariadbGTID
	time int64
	kind string
}

// ghostTx is a lost transaction given again as a LOST marker: its GTID
// and commit time, the GTID state after it, and the server and position
// before the loss (a resume from after it checks the server it finds,
// and, finding the new one, arms the rest of the loss).
type ghostTx struct {
	gtid   mysql.MariadbGTID
	time   int64
	state  string
	server *change.Server
	pos    change.Position
}

// pendingLoss is an accepted loss a reader goes past once its GTID
// state reaches at: ghosts, then the marker.
type pendingLoss struct {
	at     gtidPos
	loss   change.Loss
	ghosts []recentTx
	old    *change.Server
	oldPos change.Position
}

// trackLost wraps a MariaDB reader's emit: it remembers the
// transactions emitted (recent) and, once the stream reaches a pending
// loss's point, emits its ghosts and marker.
func (p *Reader) trackLost(emit func(*change.Event) error) func(*change.Event) error {
	if p.info.flavor != mysql.MariaDBFlavor {
		return emit
	}
	return func(ev *change.Event) error {
		kind, gtid, at := "", ev.GTID, ev.CommitTime
		switch {
		case ev.Lost != "" || gtid == "":
			return emit(ev)
		case ev.Type == change.EventCommit:
			kind = "rows"
		case ev.Type == change.EventDDL:
			kind = "ddl"
		case ev.Type != change.EventProgress:
			return emit(ev)
		}
		if err := emit(ev); err != nil {
			return err
		}
		if g, err := mysql.ParseMariadbGTID(gtid); err == nil {
			if len(p.recent) >= 2*recentTxs {
				p.recent = append([]recentTx(nil), p.recent[len(p.recent)-recentTxs:]...)
			}
			p.recent = append(p.recent, recentTx{gtid: *g, time: at.UnixMicro(), kind: kind})
		}
		if pl := p.pending; pl != nil && reached(p.gtids, pl.at) {
			p.pending = nil
			p.setGhosts(p.gtids, pl.ghosts, pl.old, pl.oldPos)
			p.marker = pl.loss.Lost
			p.lossAccepted(pl.loss)
			return p.emitMarker(emit)
		}
		return nil
	}
}

// reached reports whether pos is at or past at in each of at's domains.
func reached(pos, at gtidPos) bool {
	for _, a := range at {
		g, ok := pos.get(a.DomainID)
		if !ok || g.ServerID != a.ServerID || g.SequenceNumber < a.SequenceNumber {
			return false
		}
	}
	return true
}

// lostTxs lists the transactions the reader remembers emitting that the
// loss found at from on a server that holds held lacks: per domain of
// from, those of from's server after held's GTID, up to from's.
func (p *Reader) lostTxs(from, held gtidPos) []change.LostTx {
	var out []change.LostTx
	for _, r := range p.recent {
		f, ok := from.get(r.gtid.DomainID)
		if !ok || f.ServerID != r.gtid.ServerID || r.gtid.SequenceNumber > f.SequenceNumber {
			continue
		}
		if s, ok := held.get(r.gtid.DomainID); ok && r.gtid.SequenceNumber <= s.SequenceNumber {
			continue
		}
		out = append(out, change.LostTx{GTID: r.gtid.String(), Time: r.time, Kind: r.kind})
	}
	return out
}

// ghostsOf picks the transactions of the accepted loss l (found at from)
// after after, per domain, in the order they went out; ok is false when
// l.Txs lacks some of them (each GTID of a domain's range is one).
func ghostsOf(l change.Loss, from, after gtidPos) (out []recentTx, ok bool) {
	count := map[uint32]uint64{}
	for _, t := range l.Txs {
		g, err := mysql.ParseMariadbGTID(t.GTID)
		if err != nil {
			return nil, false
		}
		a, aok := after.get(g.DomainID)
		f, _ := from.get(g.DomainID)
		if !aok || g.ServerID != f.ServerID || g.SequenceNumber <= a.SequenceNumber || g.SequenceNumber > f.SequenceNumber {
			continue
		}
		count[g.DomainID]++
		if t.Kind != "" {
			out = append(out, recentTx{gtid: *g, time: t.Time, kind: t.Kind})
		}
	}
	for _, a := range after {
		f, _ := from.get(a.DomainID)
		if count[a.DomainID] != f.SequenceNumber-a.SequenceNumber {
			return nil, false
		}
	}
	return out, true
}

// setGhosts arms the ghosts of txs, which follow base in the stream.
func (p *Reader) setGhosts(base gtidPos, txs []recentTx, old *change.Server, oldPos change.Position) {
	st := slices.Clone(base)
	p.ghosts = nil
	for _, t := range txs {
		st.set(t.gtid)
		p.ghosts = append(p.ghosts, ghostTx{gtid: t.gtid, time: t.time, state: st.String(), server: old, pos: oldPos})
	}
}

// ErrLostInside: a reader's position lies inside transactions lost in a
// failover (insideLoss).
var ErrLostInside = errors.New("binlog: position inside lost transactions")

// acceptedStart is where a MariaDB reader goes on after an accepted
// loss: per domain of cursor, the last GTID of braid's history the
// server holds (see compareGTIDs): the cursor's, or, where the server
// lacks it, the server's last of the cursor's server_id (state) or,
// without a state, its position in the domain (have). The server sends
// what follows it: its own transactions braid did not emit. A domain
// the server holds none of braid's is left out.
func acceptedStart(cursor, have gtidPos, state []mysql.MariadbGTID) gtidPos {
	var out gtidPos
	for _, c := range cursor {
		h, ok := have.get(c.DomainID)
		if ok && h.ServerID != c.ServerID && state != nil {
			h, ok = lastOf(state, c.DomainID, c.ServerID)
		}
		switch {
		case !ok:
		case h.SequenceNumber < c.SequenceNumber:
			out.set(h)
		default:
			out.set(c)
		}
	}
	return out
}

// goOnMariaDB moves a MariaDB reader's GTID state past the accepted loss
// l on a server at have (its gtid_binlog_pos) and state (its
// gtid_binlog_state), and arms the marker.
func (p *Reader) goOnMariaDB(l change.Loss, have gtidPos, state []mysql.MariadbGTID) {
	p.gtids = acceptedStart(p.gtids, have, state)
	p.gtidStr = p.gtids.String()
	p.marker = l.Lost
	p.lossAccepted(l)
}

// goOnMySQL moves a MySQL reader's executed set past the accepted loss
// l (missing), and arms the marker; it returns the set to start from.
func (p *Reader) goOnMySQL(l change.Loss, cursor, missing change.MySQLGTIDSet) change.MySQLGTIDSet {
	start := cursor.Minus(missing)
	p.mexec = change.NewMySQLExecuted(start)
	p.marker = l.Lost
	p.lossAccepted(l)
	return start
}

func (p *Reader) lossAccepted(l change.Loss) {
	p.waitOn(nil)
	p.log.Warn("going on without the transactions lost in the failover: an operator accepted the loss; a marker naming them goes into the stream",
		"lost", l.Lost, "from", l.From, "new_server", l.Server)
}

// emitMarker emits the marker transaction of the accepted loss, if one
// is armed: an EventBegin and an EventCommit with no rows, carrying the
// lost GTIDs, whose boundary is the GTID state the reader goes on from
// (no position yet: the next connection starts by GTID). Its commit
// time is left zero: the merge gives it the source's last key, so it
// stands where the source continued, the same in every run.
func (p *Reader) emitMarker(emit func(*change.Event) error) error {
	if p.marker == "" {
		return nil
	}
	for len(p.ghosts) > 0 {
		g := p.ghosts[0]
		name, at := g.gtid.String(), time.UnixMicro(g.time)
		begin := &change.Event{Type: change.EventBegin, Source: p.spec.Name, ServerID: g.gtid.ServerID, Pos: g.pos, GTID: name, CommitTime: at, Lost: name, Server: g.server}
		if err := emit(begin); err != nil {
			return err
		}
		commit := &change.Event{Type: change.EventCommit, Source: p.spec.Name, ServerID: g.gtid.ServerID, Pos: g.pos, GTID: name, CommitTime: at, Lost: name,
			GTIDs: change.GTIDText(g.state), Server: g.server}
		if err := emit(commit); err != nil {
			return err
		}
		p.ghosts = p.ghosts[1:]
	}
	lost := p.marker
	begin := &change.Event{Type: change.EventBegin, Source: p.spec.Name, Pos: p.resume, Lost: lost}
	if err := emit(begin); err != nil {
		return err
	}
	commit := &change.Event{Type: change.EventCommit, Source: p.spec.Name, Lost: lost, GTIDs: p.gtidState()}
	if err := emit(commit); err != nil {
		return err
	}
	p.marker = ""
	return nil
}
