package mysqlsource

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MySQL's GTID sets, tags included. go-mysql v1.14's MysqlGTIDSet knows
// no tags (MySQL 8.3+: uuid:tag:n), neither in text nor in the binary
// encoding a replica sends in COM_BINLOG_DUMP_GTID, so the server keeps
// its own: the set of executed transactions, the purged ones, and what a
// replica says it has.

// sid is a server uuid.
type sid [16]byte

// parseSID reads a uuid in its text form (8-4-4-4-12 hex digits).
func parseSID(s string) (sid, error) {
	var u sid
	h := strings.ReplaceAll(s, "-", "")
	if len(h) != 32 || len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, fmt.Errorf("%q is not a uuid", s)
	}
	if _, err := hex.Decode(u[:], []byte(h)); err != nil {
		return u, fmt.Errorf("%q is not a uuid", s)
	}
	return u, nil
}

func (u sid) String() string {
	h := hex.EncodeToString(u[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// tsid is a transaction source id: a server uuid and a tag ("" untagged).
type tsid struct {
	sid sid
	tag string
}

// interval is the transaction numbers [start, end).
type interval struct{ start, end int64 }

// gtidSet is a set of GTIDs: intervals per tsid, sorted and disjoint.
type gtidSet map[tsid][]interval

// parseGTIDSet reads MySQL's text form: "uuid:1-5:tag:3,uuid2:7", with
// optional spaces and newlines around the commas (the server prints
// ",\n" between uuids).
func parseGTIDSet(s string) (gtidSet, error) {
	set := gtidSet{}
	for elem := range strings.SplitSeq(s, ",") {
		elem = strings.TrimSpace(elem)
		if elem == "" {
			continue
		}
		parts := strings.Split(elem, ":")
		u, err := parseSID(strings.TrimSpace(parts[0]))
		if err != nil {
			return nil, fmt.Errorf("malformed GTID set %q: %q is not a uuid", s, parts[0])
		}
		id := tsid{sid: u}
		for _, p := range parts[1:] {
			p = strings.TrimSpace(p)
			if p == "" || !isDigit(p[0]) {
				if !validTag(p) {
					return nil, fmt.Errorf("malformed GTID set %q: %q is neither an interval nor a tag", s, p)
				}
				id.tag = strings.ToLower(p)
				continue
			}
			lo, hi, found := strings.Cut(p, "-")
			start, err := strconv.ParseInt(lo, 10, 64)
			if err != nil || start < 1 {
				return nil, fmt.Errorf("malformed GTID set %q: bad interval %q", s, p)
			}
			end := start
			if found {
				if end, err = strconv.ParseInt(hi, 10, 64); err != nil || end < start {
					return nil, fmt.Errorf("malformed GTID set %q: bad interval %q", s, p)
				}
			}
			set.addInterval(id, interval{start, end + 1})
		}
	}
	return set, nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// validTag: a letter or underscore, then up to 31 letters, digits or
// underscores (MySQL's rule).
func validTag(t string) bool {
	if t == "" || len(t) > 32 {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i] | 0x20
		if !(c >= 'a' && c <= 'z' || t[i] == '_' || i > 0 && isDigit(t[i])) {
			return false
		}
	}
	return true
}

// addInterval adds [in.start, in.end) to id's intervals.
func (s gtidSet) addInterval(id tsid, in interval) {
	list := append(s[id], in)
	slices.SortFunc(list, func(a, b interval) int { return int(min(max(a.start-b.start, -1), 1)) })
	out := list[:1]
	for _, x := range list[1:] {
		last := &out[len(out)-1]
		if x.start <= last.end {
			last.end = max(last.end, x.end)
			continue
		}
		out = append(out, x)
	}
	s[id] = out
}

// add adds one transaction.
func (s gtidSet) add(id tsid, gno int64) { s.addInterval(id, interval{gno, gno + 1}) }

// union adds every GTID of o.
func (s gtidSet) union(o gtidSet) {
	for id, list := range o {
		for _, in := range list {
			s.addInterval(id, in)
		}
	}
}

// contains tells whether gno of id is in s.
func (s gtidSet) contains(id tsid, gno int64) bool {
	for _, in := range s[id] {
		if gno >= in.start && gno < in.end {
			return true
		}
	}
	return false
}

// subsetOf tells whether every GTID of s is in o.
func (s gtidSet) subsetOf(o gtidSet) bool {
	return s.minus(o).empty()
}

// minus is the GTIDs of s not in o.
func (s gtidSet) minus(o gtidSet) gtidSet {
	out := gtidSet{}
	for id, list := range s {
		for _, in := range list {
			pieces := []interval{in}
			for _, cut := range o[id] {
				var next []interval
				for _, p := range pieces {
					if cut.end <= p.start || cut.start >= p.end {
						next = append(next, p)
						continue
					}
					if p.start < cut.start {
						next = append(next, interval{p.start, cut.start})
					}
					if cut.end < p.end {
						next = append(next, interval{cut.end, p.end})
					}
				}
				pieces = next
			}
			for _, p := range pieces {
				out.addInterval(id, p)
			}
		}
	}
	return out
}

func (s gtidSet) empty() bool {
	for _, list := range s {
		if len(list) > 0 {
			return false
		}
	}
	return true
}

func (s gtidSet) clone() gtidSet {
	out := make(gtidSet, len(s))
	for id, list := range s {
		out[id] = slices.Clone(list)
	}
	return out
}

// sortedIDs lists s's tsids as MySQL prints them: by uuid, the untagged
// intervals first, then the tags in order.
func (s gtidSet) sortedIDs() []tsid {
	ids := make([]tsid, 0, len(s))
	for id, list := range s {
		if len(list) > 0 {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b tsid) int {
		if c := strings.Compare(a.sid.String(), b.sid.String()); c != 0 {
			return c
		}
		return strings.Compare(a.tag, b.tag)
	})
	return ids
}

// String is the set as MySQL prints it, uuids separated by sep (MySQL's
// @@gtid_executed and SHOW BINARY LOG STATUS use ",\n").
func (s gtidSet) format(sep string) string {
	var b strings.Builder
	var last sid
	for i, id := range s.sortedIDs() {
		if i == 0 || id.sid != last {
			if i > 0 {
				b.WriteString(sep)
			}
			b.WriteString(id.sid.String())
			last = id.sid
		}
		if id.tag != "" {
			b.WriteString(":" + id.tag)
		}
		for _, in := range s[id] {
			if in.end-1 == in.start {
				fmt.Fprintf(&b, ":%d", in.start)
			} else {
				fmt.Fprintf(&b, ":%d-%d", in.start, in.end-1)
			}
		}
	}
	return b.String()
}

func (s gtidSet) String() string { return s.format(",") }

// tagged tells whether any tsid has a tag.
func (s gtidSet) tagged() bool {
	for id := range s {
		if id.tag != "" {
			return true
		}
	}
	return false
}

// encode is MySQL's binary encoding of the set (Gtid_set::encode): the
// classic format without tags, the tagged one (8.3+) when a tag is in it.
func (s gtidSet) encode() []byte {
	ids := s.sortedIDs()
	tagged := s.tagged()
	out := make([]byte, 8)
	if tagged {
		out[0], out[7] = 1, 1
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(ids)))
		copy(out[1:7], n[:6])
	} else {
		binary.LittleEndian.PutUint64(out, uint64(len(ids)))
	}
	for _, id := range ids {
		out = append(out, id.sid[:]...)
		if tagged {
			out = append(out, byte(len(id.tag)<<1))
			out = append(out, id.tag...)
		}
		out = binary.LittleEndian.AppendUint64(out, uint64(len(s[id])))
		for _, in := range s[id] {
			out = binary.LittleEndian.AppendUint64(out, uint64(in.start))
			out = binary.LittleEndian.AppendUint64(out, uint64(in.end))
		}
	}
	return out
}

var errGTIDEncoding = errors.New("malformed GTID set encoding")

// decodeGTIDSet reads either binary encoding (see encode).
func decodeGTIDSet(b []byte) (gtidSet, error) {
	if len(b) < 8 {
		return nil, errGTIDEncoding
	}
	tagged := b[7] == 1
	var n uint64
	if tagged {
		var buf [8]byte
		copy(buf[:6], b[1:7])
		n = binary.LittleEndian.Uint64(buf[:])
	} else {
		n = binary.LittleEndian.Uint64(b)
	}
	b = b[8:]
	set := gtidSet{}
	for range n {
		if len(b) < 16 {
			return nil, errGTIDEncoding
		}
		var id tsid
		copy(id.sid[:], b[:16])
		b = b[16:]
		if tagged {
			if len(b) < 1 || b[0]&1 != 0 {
				return nil, errGTIDEncoding // a tag is at most 32 bytes: one length byte
			}
			l := int(b[0] >> 1)
			if len(b) < 1+l {
				return nil, errGTIDEncoding
			}
			id.tag = string(b[1 : 1+l])
			b = b[1+l:]
		}
		if len(b) < 8 {
			return nil, errGTIDEncoding
		}
		k := binary.LittleEndian.Uint64(b)
		b = b[8:]
		if uint64(len(b)) < 16*k {
			return nil, errGTIDEncoding
		}
		for range k {
			start := int64(binary.LittleEndian.Uint64(b))
			end := int64(binary.LittleEndian.Uint64(b[8:]))
			b = b[16:]
			if start < 1 || end <= start {
				return nil, errGTIDEncoding
			}
			set.addInterval(id, interval{start, end})
		}
	}
	return set, nil
}
