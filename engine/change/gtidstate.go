package change

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// GTIDState is a source's GTID state at a transaction boundary, what a
// cursor keeps beside its file:pos to resume on another server (Event.GTIDs):
// on MariaDB the last GTID of each domain ("0-1-42,1-2-7"), kept as text;
// on MySQL the executed set, kept as a MySQLExecuted snapshot and printed
// only when asked (String, JSON), because a reader makes one per
// transaction and a cursor is saved far less often.
//
// The zero value is no state. A GTIDState is a value: it never changes
// once made, and its JSON is its text.
type GTIDState struct {
	text  string
	mysql *MySQLExecuted
}

// GTIDText is the state whose text is s ("" is no state): a MariaDB GTID
// position, or a MySQL GTID set read back from a saved cursor.
func GTIDText(s string) GTIDState { return GTIDState{text: s} }

// MySQLGTIDs is the state of a MySQL source whose executed set is e (a
// copy: e may grow on).
func MySQLGTIDs(e MySQLExecuted) GTIDState {
	if e.IsEmpty() {
		return GTIDState{}
	}
	return GTIDState{mysql: &e}
}

// String is the state's text: MySQL's executed set in its text form, or
// MariaDB's position; "" when there is none.
func (g GTIDState) String() string {
	if g.mysql != nil {
		return g.mysql.String()
	}
	return g.text
}

// IsZero reports whether g holds no state.
func (g GTIDState) IsZero() bool { return g.mysql == nil && g.text == "" }

// MarshalJSON writes the state's text.
func (g GTIDState) MarshalJSON() ([]byte, error) { return json.Marshal(g.String()) }

// UnmarshalJSON reads a state's text.
func (g *GTIDState) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("change: a GTID state is a string: %w", err)
	}
	*g = GTIDText(s)
	return nil
}

// MySQLExecuted is a MySQL source's executed GTID set as a reader grows
// it, one transaction at a time. A server numbers each source id's
// transactions one after another, so the usual Add extends the interval
// it extended last: that costs a comparison and no allocation. A copy is a
// snapshot: it does not change when the one it was copied from grows.
//
// The zero value is the empty set.
type MySQLExecuted struct {
	// base is never changed in place (addInterval builds new slices),
	// so copies share it safely.
	base MySQLGTIDSet
	// run is the interval being extended, GTIDs base may lack; end 0:
	// none.
	run gtidRun
}

type gtidRun struct {
	uuid       [16]byte
	tag        string
	start, end int64
}

// NewMySQLExecuted starts from set s.
func NewMySQLExecuted(s MySQLGTIDSet) MySQLExecuted { return MySQLExecuted{base: s} }

// Add adds the GTID uuid:tag:gno ("" tag: untagged).
func (e *MySQLExecuted) Add(uuid [16]byte, tag string, gno int64) {
	r := &e.run
	if r.end != 0 && r.uuid == uuid && r.tag == tag {
		if gno == r.end {
			r.end++
			return
		}
		if gno >= r.start && gno < r.end {
			return
		}
	}
	if x := e.base.find(uuid, tag); x != nil && covers(x.intervals, gnoInterval{gno, gno + 1}) {
		return
	}
	e.flush()
	e.run = gtidRun{uuid: uuid, tag: tag, start: gno, end: gno + 1}
}

// Union adds every GTID of o.
func (e *MySQLExecuted) Union(o MySQLGTIDSet) {
	if o.IsEmpty() || e.base.Contains(o) {
		return
	}
	e.flush()
	e.base.Union(o)
}

// flush moves the run into base.
func (e *MySQLExecuted) flush() {
	if e.run.end != 0 {
		e.base.addInterval(e.run.uuid, e.run.tag, gnoInterval{e.run.start, e.run.end})
		e.run = gtidRun{}
	}
}

// Set is the set now.
func (e MySQLExecuted) Set() MySQLGTIDSet {
	s := e.base
	if e.run.end != 0 {
		s.addInterval(e.run.uuid, e.run.tag, gnoInterval{e.run.start, e.run.end})
	}
	return s
}

// ContainsGTID reports whether uuid:tag:gno is in the set.
func (e MySQLExecuted) ContainsGTID(uuid [16]byte, tag string, gno int64) bool {
	if r := e.run; r.end != 0 && r.uuid == uuid && r.tag == tag && gno >= r.start && gno < r.end {
		return true
	}
	x := e.base.find(uuid, tag)
	return x != nil && covers(x.intervals, gnoInterval{gno, gno + 1})
}

// IsEmpty reports whether the set holds no GTID.
func (e MySQLExecuted) IsEmpty() bool { return e.run.end == 0 && e.base.IsEmpty() }

// String is the set in MySQL's text form (MySQLGTIDSet.String).
func (e MySQLExecuted) String() string { return e.Set().String() }

// Minus is the GTIDs of s that are not in o.
func (s MySQLGTIDSet) Minus(o MySQLGTIDSet) MySQLGTIDSet {
	var out MySQLGTIDSet
	for _, x := range s.sids {
		theirs := o.find(x.uuid, x.tag)
		for _, in := range x.intervals {
			rest := []gnoInterval{in}
			if theirs != nil {
				rest = subtract(in, theirs.intervals)
			}
			for _, r := range rest {
				out.addInterval(x.uuid, x.tag, r)
			}
		}
	}
	return out
}

// subtract is in without the sorted, disjoint intervals of list.
func subtract(in gnoInterval, list []gnoInterval) []gnoInterval {
	var out []gnoInterval
	at := in.start
	for _, o := range list {
		if o.end <= at {
			continue
		}
		if o.start >= in.end {
			break
		}
		if o.start > at {
			out = append(out, gnoInterval{at, o.start})
		}
		at = max(at, o.end)
	}
	if at < in.end {
		out = append(out, gnoInterval{at, in.end})
	}
	return out
}

// Holds reports whether the transaction whose GTID is gtid ("0-1-42" on
// MariaDB, "uuid:42" or "uuid:tag:42" on MySQL) committed at or before
// the boundary g is the state of. It is how one place in a source's
// history is compared with another across its servers, whose positions
// do not compare (a failover): on MariaDB (gtid_strict_mode, which a
// switch of servers requires) a domain's sequence numbers only grow, so
// the transaction is held when g's GTID of its domain is at or past it.
// ok is false when g or gtid is empty or unreadable, or the two are of
// different flavors: the caller then has nothing to compare by.
func (g GTIDState) Holds(gtid string) (held, ok bool) {
	if g.IsZero() || gtid == "" {
		return false, false
	}
	if set, mysql, ok := g.mysqlSet(); mysql {
		if !ok || !strings.Contains(gtid, ":") {
			return false, false
		}
		return set.ContainsGTID(gtid), true
	}
	last, ok := mariaDBLast(g.text)
	if !ok {
		return false, false
	}
	one, ok := mariaDBLast(gtid)
	if !ok || len(one) != 1 {
		return false, false
	}
	for domain, seq := range one {
		have, in := last[domain]
		return in && have >= seq, true
	}
	return false, false
}

// Covers reports whether every transaction o's boundary holds is held by
// g's: g is at or past o in the source's history, on whichever server
// each was read. ok is false when either is empty or unreadable, or the
// two are of different flavors.
func (g GTIDState) Covers(o GTIDState) (covers, ok bool) {
	if g.IsZero() || o.IsZero() {
		return false, false
	}
	mine, gm, gok := g.mysqlSet()
	theirs, om, ook := o.mysqlSet()
	if gm != om || !gok || !ook {
		return false, false
	}
	if gm {
		return mine.Contains(theirs), true
	}
	have, gok := mariaDBLast(g.text)
	want, ook := mariaDBLast(o.text)
	if !gok || !ook {
		return false, false
	}
	for domain, seq := range want {
		if have[domain] < seq {
			return false, true
		}
	}
	return true, true
}

// mysqlSet returns g as a MySQL GTID set; mysql is false for a MariaDB
// state, ok false for a MySQL one that cannot be read.
func (g GTIDState) mysqlSet() (set MySQLGTIDSet, mysql, ok bool) {
	if g.mysql != nil {
		return g.mysql.Set(), true, true
	}
	if !strings.Contains(g.text, ":") {
		return set, false, true
	}
	set, err := ParseMySQLGTIDSet(g.text)
	return set, true, err == nil
}

// mariaDBLast reads a MariaDB GTID position ("0-1-42,1-2-7") as the last
// sequence number of each domain; ok is false when it is not one.
func mariaDBLast(text string) (last map[uint32]uint64, ok bool) {
	last = map[uint32]uint64{}
	for part := range strings.SplitSeq(text, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		f := strings.Split(part, "-")
		if len(f) != 3 {
			return nil, false
		}
		domain, err1 := strconv.ParseUint(f[0], 10, 32)
		_, err2 := strconv.ParseUint(f[1], 10, 32)
		seq, err3 := strconv.ParseUint(f[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, false
		}
		last[uint32(domain)] = max(last[uint32(domain)], seq)
	}
	return last, len(last) > 0
}
