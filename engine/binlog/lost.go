package binlog

import (
	"errors"
	"fmt"
	"slices"
	"strings"

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
// point goes on without asking again.

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

// insideLoss returns the error of a MariaDB reader whose position
// (cursor) lies inside or before the transactions of an accepted loss
// that the server (at have and state) lacks: they went out after this
// position and no server has them now, so the stream from here cannot
// be given again. Inside: after the last of them the server holds,
// before the point the loss was found at. Before: at or before that
// last one the server holds, where the server goes on with its own
// history, not with them; read on, the stream would lack them and their
// marker, and give the server's transactions other seqs than the first
// time (a consumer with a cursor past them would miss rows). nil
// otherwise: a position at the loss's point goes on past it as accepted;
// one past its marker is on the server's own history.
func (p *Reader) insideLoss(cursor, have gtidPos, state []mysql.MariadbGTID) error {
	for _, l := range p.acceptedNow() {
		from, err := parseGTIDPos(l.From)
		if err != nil {
			continue
		}
		held := acceptedStart(from, have, state)
		for _, f := range from {
			s, sok := held.get(f.DomainID)
			if !sok || s.ServerID != f.ServerID || s.SequenceNumber >= f.SequenceNumber {
				continue // the server holds them all, or none of that history
			}
			c, ok := cursor.get(f.DomainID)
			switch {
			case ok && c.ServerID == f.ServerID && s.SequenceNumber < c.SequenceNumber && c.SequenceNumber < f.SequenceNumber:
				return p.lostError(ErrLostInside, cursor.String(), l)
			case !ok || c.SequenceNumber <= s.SequenceNumber:
				return p.lostError(ErrLostBefore, cursor.String(), l)
			}
		}
	}
	return nil
}

// insideLossMySQL is insideLoss for a MySQL reader whose position, read
// on old, has the executed set cursor, on a server whose gtid_executed
// is executed. An accepted loss l of that history (cursor within its
// From, short of it) whose lost GTIDs the server lacks: inside when
// the cursor holds some of them, else before (the server would send its
// own transactions after the cursor, not them). A cursor of From less
// the lost ones in the binlog of the server that lacks them is past the
// marker, on the server's own history.
func (p *Reader) insideLossMySQL(cursor, executed change.MySQLGTIDSet, old *change.Server) error {
	for _, l := range p.acceptedNow() {
		lost, err := change.ParseMySQLGTIDSet(l.Lost)
		if err != nil {
			continue // a MariaDB loss
		}
		from, err := change.ParseMySQLGTIDSet(l.From)
		if err != nil || lost.Minus(executed).IsEmpty() || !from.Contains(cursor) || cursor.Contains(from) {
			continue // the server holds them, or another history, or at the loss's point or past it
		}
		if held := lost.Minus(lost.Minus(cursor)); !held.IsEmpty() {
			return p.lostError(ErrLostInside, cursor.String(), l)
		}
		if old != nil && old.String() == l.Server && from.Minus(lost).Contains(cursor) && cursor.Contains(from.Minus(lost)) {
			continue
		}
		return p.lostError(ErrLostBefore, cursor.String(), l)
	}
	return nil
}

// lostError is the error of a reader whose position (cursor) lies inside
// (ErrLostInside) or before (ErrLostBefore) the transactions of the
// accepted loss l on a server that lacks them (insideLoss).
func (p *Reader) lostError(which error, cursor string, l change.Loss) error {
	if which == ErrLostInside {
		return fatal{fmt.Errorf("%w: source %s (%s): braid's position %s lies inside transactions lost in a failover, whose loss an operator accepted (%s): "+
			"they went out in the stream after this position and no server has them now, so the stream from here cannot be given again. "+
			"A consumer or sink whose cursor is here lost them: drop it (braid consumer drop) and subscribe it again after the loss's LOST marker, or start the destination over",
			ErrLostInside, p.spec.Name, p.spec.Address, cursor, l.Lost)}
	}
	return fatal{fmt.Errorf("%w: source %s (%s): braid's position %s lies before transactions lost in a failover, whose loss an operator accepted (%s): "+
		"they went out in the stream after this position and no server has them now, so the stream from here cannot be given again (read on, it would lack them and their LOST marker, and give the server's later transactions other seqs). "+
		"A consumer or sink whose cursor is here cannot have them: drop it (braid consumer drop) and subscribe it again after the loss's LOST marker, or start the destination over",
		ErrLostBefore, p.spec.Name, p.spec.Address, cursor, l.Lost)}
}

// liveLacks names, for a replay reader (Config.Live), the transactions
// the destination's live reader read that the server (at have and
// state) lacks: "" when it has them all, or without a live reader.
func (p *Reader) liveLacks(have gtidPos, state []mysql.MariadbGTID) string {
	if p.cfg.Live == nil {
		return ""
	}
	live, err := parseGTIDPos(p.cfg.Live())
	if err != nil {
		return ""
	}
	missing, _ := compareGTIDs(live, have, state, nil)
	return strings.Join(missing, ", ")
}

// liveLacksMySQL is liveLacks for a MySQL server whose gtid_executed is
// executed.
func (p *Reader) liveLacksMySQL(executed change.MySQLGTIDSet) string {
	if p.cfg.Live == nil {
		return ""
	}
	live, err := change.ParseMySQLGTIDSet(p.cfg.Live())
	if err != nil {
		return ""
	}
	return live.Minus(executed).String()
}

// ErrLostInside: a reader's position lies inside transactions lost in a
// failover (insideLoss).
var ErrLostInside = errors.New("binlog: position inside lost transactions")

// ErrLostBefore: a reader's position lies before transactions lost in a
// failover, on a server that lacks them (insideLoss).
var ErrLostBefore = errors.New("binlog: position before lost transactions")

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
// lost GTIDs, whose boundary (both carry it) is the GTID state the
// reader goes on from
// (no position yet: the next connection starts by GTID). Its commit
// time is left zero: the merge gives it the source's last key, so it
// stands where the source continued, the same in every run.
func (p *Reader) emitMarker(emit func(*change.Event) error) error {
	if p.marker == "" {
		return nil
	}
	lost := p.marker
	// The begin carries the state too: the merge places a marker by it
	// (its Pos is the former server's).
	begin := &change.Event{Type: change.EventBegin, Source: p.spec.Name, Pos: p.resume, Lost: lost, GTIDs: p.gtidState()}
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
