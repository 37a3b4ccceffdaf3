package mysqlsource

import (
	"fmt"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/mysqlsource/mysqlbinlog"
)

// History is one GTID history served by several test sources, as a MySQL
// primary and its replicas (log_replica_updates=ON) hold it: each
// transaction keeps the GTID, server_id and original commit time of the
// server it was first committed on, while each server writes it into
// binlog files of its own, under its own file names and at its own
// offsets. A test commits on the primary, lets each replica apply what it
// lacks when it wants (a replica may lag), and promotes a replica, whose
// own transactions then carry its uuid. The replicas are read_only, the
// primary not.
//
//	h := mysqlsource.NewHistory(t, primary, replica) // servers from Start
//	h.Commit(txn)          // on the primary's binlog
//	h.CatchUp(replica)     // the replica applies what it lacks
//	h.Rotate(replica)      // its files no longer line up with the primary's
//	h.Promote(replica)     // later Commits are the replica's own
//
// Every server names its files binlog.000001, ... (MySQL 8's default),
// and the same transactions sit at other offsets on each (see
// SameCommitTimes), in other files after a Rotate. A History is not safe
// for concurrent use; the servers are.
type History struct {
	// SameCommitTimes makes a replica commit a transaction at its
	// original commit time. Its GTID event then leaves the original
	// commit timestamp out, as MySQL does when the two are equal, and the
	// replica's files line up byte for byte with the primary's (until a
	// Rotate); else a replica commits 1 µs after its source, and each of
	// its transactions is 7 bytes longer.
	SameCommitTimes bool

	members []*member
	primary *member
	log     []entry // every transaction committed, in commit order
}

type member struct {
	s       *Server
	w       *mysqlbinlog.Writer
	feed    *Feed
	self    mysqlbinlog.Origin
	applied int // entries of log in its binlog
	// diverged: it holds transactions a promotion lost.
	diverged bool
}

// entry is a committed transaction and where it was first committed.
type entry struct {
	txn    mysqlbinlog.Txn // with its origin's commit time
	origin mysqlbinlog.Origin
}

// NewHistory makes servers (each from Start, with its own ServerID and
// ServerUUID) one history whose primary is the first.
func NewHistory(servers ...*Server) (*History, error) {
	h := &History{}
	for _, s := range servers {
		uuid, err := mysqlbinlog.ParseUUID(s.cfg.ServerUUID)
		if err != nil {
			return nil, err
		}
		self := mysqlbinlog.Origin{UUID: uuid, ServerID: s.cfg.ServerID}
		w, err := mysqlbinlog.NewWriter(mysqlbinlog.Server{Version: s.Version(), ServerID: s.cfg.ServerID, UUID: uuid})
		if err != nil {
			return nil, err
		}
		m := &member{s: s, w: w, feed: s.Feed(w), self: self}
		if err := m.feed.Sync(); err != nil {
			return nil, err
		}
		h.members = append(h.members, m)
	}
	if len(h.members) == 0 {
		return nil, fmt.Errorf("mysqlsource: a history needs a server")
	}
	h.primary = h.members[0]
	return h, h.setReadOnly()
}

func (h *History) member(s *Server) *member {
	for _, m := range h.members {
		if m.s == s {
			return m
		}
	}
	panic("mysqlsource: the server is not in the history")
}

// Commit commits txn on the primary and returns where it went there.
func (h *History) Commit(txn mysqlbinlog.Txn) (mysqlbinlog.TxnPos, error) {
	p := h.primary
	pos, err := p.w.Write(txn)
	if err != nil {
		return pos, err
	}
	if txn.OriginalCommitTime.IsZero() {
		txn.OriginalCommitTime = pos.CommitTime
	}
	txn.CommitTime, txn.RotateAfter = pos.CommitTime, false
	h.log = append(h.log, entry{txn: txn, origin: p.self})
	p.applied = len(h.log)
	return pos, p.feed.Sync()
}

// CatchUp makes the server apply every transaction it lacks.
func (h *History) CatchUp(s *Server) error { return h.catchUp(h.member(s)) }

// Apply makes the server apply the transactions it lacks up to the n-th
// committed (counting from 1), leaving it behind the others.
func (h *History) Apply(s *Server, n int) error {
	m := h.member(s)
	return h.applyTo(m, min(n, len(h.log)))
}

func (h *History) catchUp(m *member) error { return h.applyTo(m, len(h.log)) }

func (h *History) applyTo(m *member, n int) error {
	if m.diverged {
		return fmt.Errorf("mysqlsource: server %d holds transactions the history lost at a promotion", m.self.ServerID)
	}
	for ; m.applied < n; m.applied++ {
		e := h.log[m.applied]
		txn := e.txn
		if !h.SameCommitTimes {
			txn.CommitTime = txn.CommitTime.Add(time.Microsecond)
		}
		if e.origin != m.self {
			txn.Origin = e.origin
		}
		if _, err := m.w.Write(txn); err != nil {
			return err
		}
	}
	return m.feed.Sync()
}

// Rotate closes the server's binlog file and opens the next.
func (h *History) Rotate(s *Server) error {
	m := h.member(s)
	if err := m.w.Rotate(); err != nil {
		return err
	}
	return m.feed.Sync()
}

// Promote makes s the primary: later Commits are its own transactions.
// What it has not applied is lost, as in an asynchronous failover
// (CatchUp first to lose nothing); a server that had applied more
// diverged, and gets nothing more.
func (h *History) Promote(s *Server) {
	m := h.member(s)
	for _, o := range h.members {
		o.diverged = o.diverged || o.applied > m.applied
	}
	h.log = h.log[:m.applied]
	h.primary = m
	if err := h.setReadOnly(); err != nil {
		panic(err) // a variable every personality has
	}
}

// setReadOnly makes the replicas read_only, the primary writable, as a
// failover tool does.
func (h *History) setReadOnly() error {
	for _, m := range h.members {
		v := "ON"
		if m == h.primary {
			v = "OFF"
		}
		if err := m.s.SetVariable("read_only", v); err != nil {
			return err
		}
	}
	return nil
}
