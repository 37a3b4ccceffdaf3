package change

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// MySQLGTIDSet is a set of MySQL GTIDs, tagged ones (MySQL 8.3+,
// uuid:tag:n) included: what @@gtid_executed holds and what a replica
// sends in COM_BINLOG_DUMP_GTID. go-mysql v1.14's MysqlGTIDSet knows no
// tags, in text or in the binary encoding.
//
// Its text is MySQL's: "uuid:1-5:7,uuid2:3" and, with tags,
// "uuid:1-5:tag_a:1-3:tag_b:9". Parsing normalises as MySQL does: uuids
// and tags in lower case, intervals merged and sorted; String prints that
// form, entries sorted by uuid, then tag (the untagged one first), as
// MySQL prints a set.
//
// The zero value is the empty set. A set is a value: Add and Union change
// only the set they are called on, never one it was copied from or
// merged with.
type MySQLGTIDSet struct {
	sids []gtidSID // sorted by uuid, then tag; none without intervals
}

// gtidSID is the transactions of one transaction source id: a server
// uuid and a tag ("" for untagged GTIDs).
type gtidSID struct {
	uuid      [16]byte
	tag       string
	intervals []gnoInterval // sorted, disjoint, not adjacent
}

// gnoInterval is the transaction numbers [start, end).
type gnoInterval struct{ start, end int64 }

// maxGNO is the largest transaction number MySQL assigns (GNO_END - 1).
const maxGNO = math.MaxInt64 - 1

// maxTagLen is the longest tag MySQL accepts.
const maxTagLen = 32

// ParseMySQLGTIDSet reads a GTID set in MySQL's text form: uuids, each
// followed by ":"-separated intervals ("5" or "1-5") and tags, which name
// the tag of the intervals after them, up to the next tag ("uuid:1-5" is
// untagged, "uuid:tag:1-5" and "uuid:1-5:tag:7" tagged). Elements are
// separated by commas; spaces and newlines around the parts are allowed
// (MySQL prints ",\n"), and "" is the empty set. A tag is a letter or
// underscore then up to 31 letters, digits or underscores, in any case.
//
// Where MySQL accepts a part that names no transaction (a uuid or a tag
// with no interval after it, an interval whose end is before its start),
// this refuses it: in a start position it is a mistake, not a request.
func ParseMySQLGTIDSet(text string) (MySQLGTIDSet, error) {
	var s MySQLGTIDSet
	for elem := range strings.SplitSeq(text, ",") {
		if strings.TrimSpace(elem) == "" {
			continue
		}
		parts := strings.Split(elem, ":")
		uuid, err := parseUUID(strings.TrimSpace(parts[0]))
		if err != nil {
			return MySQLGTIDSet{}, fmt.Errorf("malformed MySQL GTID set %q: %w", text, err)
		}
		tag, some, named := "", false, false
		for _, p := range parts[1:] {
			p = strings.TrimSpace(p)
			if p != "" && !isDigit(p[0]) {
				if !validTag(p) {
					return MySQLGTIDSet{}, fmt.Errorf("malformed MySQL GTID set %q: %q is neither an interval nor a tag (a letter or _, then up to %d letters, digits or _)", text, p, maxTagLen-1)
				}
				if named && !some {
					return MySQLGTIDSet{}, fmt.Errorf("malformed MySQL GTID set %q: tag %q has no interval after it", text, tag)
				}
				tag, some, named = strings.ToLower(p), false, true
				continue
			}
			in, err := parseInterval(p)
			if err != nil {
				return MySQLGTIDSet{}, fmt.Errorf("malformed MySQL GTID set %q: %w", text, err)
			}
			s.addInterval(uuid, tag, in)
			some = true
		}
		if !some {
			what := "uuid " + formatUUID(uuid)
			if named {
				what = fmt.Sprintf("tag %q", tag)
			}
			return MySQLGTIDSet{}, fmt.Errorf("malformed MySQL GTID set %q: %s has no interval after it", text, what)
		}
	}
	return s, nil
}

// Add adds one GTID, "uuid:n" or "uuid:tag:n" (as a GTID event names its
// transaction).
func (s *MySQLGTIDSet) Add(gtid string) error {
	uuid, tag, gno, err := parseMySQLGTID(gtid)
	if err != nil {
		return err
	}
	s.addInterval(uuid, tag, gnoInterval{gno, gno + 1})
	return nil
}

// Union adds every GTID of o.
func (s *MySQLGTIDSet) Union(o MySQLGTIDSet) {
	for _, x := range o.sids {
		for _, in := range x.intervals {
			s.addInterval(x.uuid, x.tag, in)
		}
	}
}

// Contains reports whether every GTID of o is in s.
func (s MySQLGTIDSet) Contains(o MySQLGTIDSet) bool {
	for _, x := range o.sids {
		mine := s.find(x.uuid, x.tag)
		if mine == nil {
			return false
		}
		for _, in := range x.intervals {
			if !covers(mine.intervals, in) {
				return false
			}
		}
	}
	return true
}

// ContainsGTID reports whether one GTID, "uuid:n" or "uuid:tag:n", is in
// s; false for anything that is not a GTID.
func (s MySQLGTIDSet) ContainsGTID(gtid string) bool {
	if len(s.sids) == 0 || gtid == "" {
		return false
	}
	uuid, tag, gno, err := parseMySQLGTID(gtid)
	if err != nil {
		return false
	}
	x := s.find(uuid, tag)
	return x != nil && covers(x.intervals, gnoInterval{gno, gno + 1})
}

// IsEmpty reports whether s holds no GTID.
func (s MySQLGTIDSet) IsEmpty() bool { return len(s.sids) == 0 }

// Tagged reports whether s holds a tagged GTID: its encoding then needs
// MySQL 8.3 or later.
func (s MySQLGTIDSet) Tagged() bool {
	for _, x := range s.sids {
		if x.tag != "" {
			return true
		}
	}
	return false
}

// String is s in MySQL's text form (see the type), "" when empty.
func (s MySQLGTIDSet) String() string {
	var b strings.Builder
	for i, x := range s.sids {
		if i == 0 || x.uuid != s.sids[i-1].uuid {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(formatUUID(x.uuid))
		}
		if x.tag != "" {
			b.WriteByte(':')
			b.WriteString(x.tag)
		}
		for _, in := range x.intervals {
			b.WriteByte(':')
			b.WriteString(strconv.FormatInt(in.start, 10))
			if in.end-1 > in.start {
				b.WriteByte('-')
				b.WriteString(strconv.FormatInt(in.end-1, 10))
			}
		}
	}
	return b.String()
}

// Encode is s in MySQL's binary encoding (Gtid_set::encode), the GTID
// set of COM_BINLOG_DUMP_GTID and of a PREVIOUS_GTIDS event. A set
// without tags has the classic encoding every MySQL 5.6+ server reads: a
// little-endian uint64 count of uuids, then for each the uuid's 16 bytes,
// a uint64 count of intervals and each interval as two uint64s, start
// and end (exclusive). A set with a tag has the tagged encoding of MySQL
// 8.3+ (older servers refuse it as a malformed packet): the count becomes
// (1<<56 | count<<8 | 1), the format 1 in its top and bottom bytes, and
// each entry carries its tag after the uuid, a length byte (length<<1,
// MySQL's variable-length integer for a value under 128) and the lower
// case tag, 0x00 for the untagged entry.
func (s MySQLGTIDSet) Encode() []byte {
	tagged := s.Tagged()
	n := uint64(len(s.sids))
	head := n
	if tagged {
		head = 1<<56 | n<<8 | 1
	}
	out := binary.LittleEndian.AppendUint64(nil, head)
	for _, x := range s.sids {
		out = append(out, x.uuid[:]...)
		if tagged {
			out = append(out, byte(len(x.tag)<<1))
			out = append(out, x.tag...)
		}
		out = binary.LittleEndian.AppendUint64(out, uint64(len(x.intervals)))
		for _, in := range x.intervals {
			out = binary.LittleEndian.AppendUint64(out, uint64(in.start))
			out = binary.LittleEndian.AppendUint64(out, uint64(in.end))
		}
	}
	return out
}

var errGTIDEncoding = errors.New("change: malformed MySQL GTID set encoding")

// DecodeMySQLGTIDSet reads either binary encoding Encode writes, as MySQL
// does (decode_nsids_format): the top byte of the count is the format.
func DecodeMySQLGTIDSet(b []byte) (MySQLGTIDSet, error) {
	var s MySQLGTIDSet
	if len(b) < 8 {
		return s, errGTIDEncoding
	}
	head := binary.LittleEndian.Uint64(b)
	var n uint64
	tagged := false
	switch head >> 56 {
	case 0:
		n = head
	case 1:
		if head&0xff != 1 {
			return s, fmt.Errorf("%w: tagged format without its low format byte", errGTIDEncoding)
		}
		tagged, n = true, head>>8&(1<<48-1)
	default:
		return s, fmt.Errorf("%w: format %d", errGTIDEncoding, head>>56)
	}
	b = b[8:]
	for range n {
		if len(b) < 16 {
			return MySQLGTIDSet{}, errGTIDEncoding
		}
		var uuid [16]byte
		copy(uuid[:], b)
		b = b[16:]
		tag := ""
		if tagged {
			if len(b) < 1 || b[0]&1 != 0 {
				return MySQLGTIDSet{}, errGTIDEncoding // a tag's length fits one byte
			}
			l := int(b[0] >> 1)
			if l > maxTagLen || len(b) < 1+l || l > 0 && !validTag(string(b[1:1+l])) {
				return MySQLGTIDSet{}, errGTIDEncoding
			}
			tag = strings.ToLower(string(b[1 : 1+l]))
			b = b[1+l:]
		}
		if len(b) < 8 {
			return MySQLGTIDSet{}, errGTIDEncoding
		}
		k := binary.LittleEndian.Uint64(b)
		b = b[8:]
		if k > uint64(len(b))/16 {
			return MySQLGTIDSet{}, errGTIDEncoding
		}
		for range k {
			in := gnoInterval{int64(binary.LittleEndian.Uint64(b)), int64(binary.LittleEndian.Uint64(b[8:]))}
			b = b[16:]
			if in.start < 1 || in.end <= in.start {
				return MySQLGTIDSet{}, errGTIDEncoding
			}
			s.addInterval(uuid, tag, in)
		}
	}
	if len(b) != 0 {
		return MySQLGTIDSet{}, fmt.Errorf("%w: %d bytes after the last entry", errGTIDEncoding, len(b))
	}
	return s, nil
}

// find is the entry of uuid and tag, nil if s has none.
func (s MySQLGTIDSet) find(uuid [16]byte, tag string) *gtidSID {
	i, ok := slices.BinarySearchFunc(s.sids, gtidSID{uuid: uuid, tag: tag}, compareSID)
	if !ok {
		return nil
	}
	return &s.sids[i]
}

func compareSID(a, b gtidSID) int {
	if c := slices.Compare(a.uuid[:], b.uuid[:]); c != 0 {
		return c
	}
	return strings.Compare(a.tag, b.tag)
}

// addInterval adds in to the entry of uuid and tag. It builds new slices
// for what it changes, so a set copied before shares nothing that moves.
func (s *MySQLGTIDSet) addInterval(uuid [16]byte, tag string, in gnoInterval) {
	key := gtidSID{uuid: uuid, tag: tag}
	i, ok := slices.BinarySearchFunc(s.sids, key, compareSID)
	sids := slices.Clone(s.sids)
	if !ok {
		sids = slices.Insert(sids, i, key)
	}
	sids[i].intervals = mergeInterval(sids[i].intervals, in)
	s.sids = sids
}

// mergeInterval is list with in added: sorted, disjoint, not adjacent. A
// new slice; list is not changed.
func mergeInterval(list []gnoInterval, in gnoInterval) []gnoInterval {
	out := make([]gnoInterval, 0, len(list)+1)
	i := 0
	for ; i < len(list) && list[i].end < in.start; i++ {
		out = append(out, list[i])
	}
	for ; i < len(list) && list[i].start <= in.end; i++ {
		in.start, in.end = min(in.start, list[i].start), max(in.end, list[i].end)
	}
	out = append(out, in)
	return append(out, list[i:]...)
}

// covers reports whether the sorted, disjoint list holds all of in.
func covers(list []gnoInterval, in gnoInterval) bool {
	i, _ := slices.BinarySearchFunc(list, in.start, func(x gnoInterval, start int64) int {
		if x.end <= start {
			return -1
		}
		if x.start > start {
			return 1
		}
		return 0
	})
	return i < len(list) && list[i].start <= in.start && in.end <= list[i].end
}

// parseMySQLGTID reads one GTID: "uuid:n" or "uuid:tag:n".
func parseMySQLGTID(gtid string) (uuid [16]byte, tag string, gno int64, err error) {
	parts := strings.Split(gtid, ":")
	if len(parts) != 2 && len(parts) != 3 {
		return uuid, "", 0, fmt.Errorf("change: %q is not a MySQL GTID (uuid:n or uuid:tag:n)", gtid)
	}
	if uuid, err = parseUUID(parts[0]); err != nil {
		return uuid, "", 0, fmt.Errorf("change: %q is not a MySQL GTID: %w", gtid, err)
	}
	if len(parts) == 3 {
		if !validTag(parts[1]) {
			return uuid, "", 0, fmt.Errorf("change: %q is not a MySQL GTID: %q is not a tag", gtid, parts[1])
		}
		tag = strings.ToLower(parts[1])
	}
	gno, err = strconv.ParseInt(parts[len(parts)-1], 10, 64)
	if err != nil || gno < 1 || gno > maxGNO {
		return uuid, "", 0, fmt.Errorf("change: %q is not a MySQL GTID: bad transaction number", gtid)
	}
	return uuid, tag, gno, nil
}

// parseInterval reads "n" or "n-m", with spaces around the numbers.
func parseInterval(p string) (gnoInterval, error) {
	lo, hi, ranged := strings.Cut(p, "-")
	start, err := strconv.ParseInt(strings.TrimSpace(lo), 10, 64)
	if err != nil || start < 1 || start > maxGNO {
		return gnoInterval{}, fmt.Errorf("bad interval %q: transaction numbers go from 1 to %d", p, int64(maxGNO))
	}
	end := start
	if ranged {
		end, err = strconv.ParseInt(strings.TrimSpace(hi), 10, 64)
		if err != nil || end > maxGNO {
			return gnoInterval{}, fmt.Errorf("bad interval %q: transaction numbers go from 1 to %d", p, int64(maxGNO))
		}
		if end < start {
			return gnoInterval{}, fmt.Errorf("bad interval %q: it ends before it starts", p)
		}
	}
	return gnoInterval{start, end + 1}, nil
}

// parseUUID reads a uuid in its text form, 8-4-4-4-12 hex digits in any
// case.
func parseUUID(s string) ([16]byte, error) {
	var u [16]byte
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, fmt.Errorf("%q is not a uuid", s)
	}
	h := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	if _, err := hex.Decode(u[:], []byte(h)); err != nil {
		return u, fmt.Errorf("%q is not a uuid", s)
	}
	return u, nil
}

func formatUUID(u [16]byte) string {
	h := hex.EncodeToString(u[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// validTag: a letter or underscore, then up to 31 letters, digits or
// underscores (MySQL's rule; any case).
func validTag(t string) bool {
	if t == "" || len(t) > maxTagLen {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		letter := c|0x20 >= 'a' && c|0x20 <= 'z'
		if !letter && c != '_' && (i == 0 || !isDigit(c)) {
			return false
		}
	}
	return true
}
