package spec

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/braid-cdc/braid/engine/change"
)

// StartKind says how a Start names its position.
type StartKind string

// The start kinds.
const (
	StartLatest    StartKind = "latest"
	StartEarliest  StartKind = "earliest"
	StartPosition  StartKind = "position"
	StartGTID      StartKind = "gtid"
	StartTimestamp StartKind = "timestamp"
)

// Start is where a source is read from: `earliest`, `latest`,
// `{file: binlog.000002, pos: 4}`, `{gtid: "0-1-42"}` (MariaDB's GTID
// position) or `{gtid: "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"}` (a
// MySQL GTID set, tags included: "uuid:tag:1-5", 8.3+), or
// `{timestamp: "2026-11-29T10:00:00Z"}` (the first transaction committed at or
// after that time). A GTID start reads the transactions after it: for
// MySQL, every transaction not in the set.
type Start struct {
	Kind StartKind
	Pos  change.Position
	GTID string
	Time time.Time
}

// startWant is what a start may be, for messages.
const startWant = `want earliest, latest, {file: binlog.000002, pos: 4}, {gtid: "0-1-42"} or {timestamp: "2026-11-29T10:00:00Z"}`

// startForm is the mapping form of a Start.
type startForm struct {
	File      string  `yaml:"file"`
	Pos       *uint32 `yaml:"pos"`
	GTID      string  `yaml:"gtid"`
	Timestamp string  `yaml:"timestamp"`
}

// UnmarshalYAML accepts the scalar and mapping forms.
func (s *Start) UnmarshalYAML(n *yaml.Node) error { return decodeOne(n, s) }

func (s *Start) decodeNode(d *decoder, path string, n *yaml.Node) {
	switch n.Kind {
	case yaml.ScalarNode:
		switch k := StartKind(strings.ToLower(n.Value)); k {
		case StartLatest, StartEarliest:
			s.Kind = k
		case "":
			s.Kind = StartLatest
		default:
			d.bad(path, n.Line, "%q: %s", n.Value, startWant)
		}
		return
	case yaml.MappingNode:
	default:
		d.bad(path, n.Line, "%s: %s", shape(n), startWant)
		return
	}
	var m startForm
	before := len(d.problems)
	d.value(path, n, reflect.ValueOf(&m).Elem())
	if len(d.problems) > before {
		return
	}
	set := 0
	if m.File != "" || m.Pos != nil {
		set++
		s.Kind = StartPosition
		s.Pos.File = m.File
		if m.Pos != nil {
			s.Pos.Pos = *m.Pos
		}
		if s.Pos.Pos < 4 {
			s.Pos.Pos = 4
		}
		if m.File == "" {
			d.bad(path, n.Line, "pos without file: give both, e.g. {file: binlog.000002, pos: 4}")
			return
		}
	}
	if m.GTID != "" {
		set++
		if msg := gtidProblem(m.GTID); msg != "" {
			p := joinPath(path, "gtid")
			d.bad(p, d.line(p), "%s", msg)
			return
		}
		s.Kind = StartGTID
		s.GTID = m.GTID
	}
	if m.Timestamp != "" {
		set++
		t, err := time.Parse(time.RFC3339Nano, m.Timestamp)
		if err != nil {
			p := joinPath(path, "timestamp")
			d.bad(p, d.line(p), "%q is not an RFC 3339 time: write e.g. 2026-11-29T10:00:00Z", m.Timestamp)
			return
		}
		s.Kind = StartTimestamp
		s.Time = t
	}
	if set != 1 {
		d.bad(path, n.Line, "give exactly one of {file, pos}, {gtid} or {timestamp}")
	}
}

// MarshalYAML writes the form UnmarshalYAML reads.
func (s Start) MarshalYAML() (any, error) {
	switch s.Kind {
	case StartPosition:
		return map[string]any{"file": s.Pos.File, "pos": s.Pos.Pos}, nil
	case StartGTID:
		return map[string]any{"gtid": s.GTID}, nil
	case StartTimestamp:
		return map[string]any{"timestamp": s.Time.Format(time.RFC3339Nano)}, nil
	case "":
		return string(StartLatest), nil
	}
	return string(s.Kind), nil
}

// String renders the start as a user would write it.
func (s Start) String() string {
	switch s.Kind {
	case StartPosition:
		return s.Pos.String()
	case StartGTID:
		return "gtid " + s.GTID
	case StartTimestamp:
		return "timestamp " + s.Time.Format(time.RFC3339Nano)
	case "":
		return string(StartLatest)
	}
	return string(s.Kind)
}

// Duration is a time.Duration written as "200ms" in YAML.
type Duration time.Duration

// UnmarshalYAML parses Go duration syntax.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error { return decodeOne(n, d) }

func (d *Duration) decodeNode(dec *decoder, path string, n *yaml.Node) {
	const want = "write e.g. 200ms, 1s, 5m or 1h30m"
	if n.Kind != yaml.ScalarNode {
		dec.bad(path, n.Line, "%s: %s", shape(n), want)
		return
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		if _, num := strconv.ParseFloat(n.Value, 64); num == nil {
			dec.bad(path, n.Line, "%q has no unit: write e.g. %sms or %ss", n.Value, n.Value, n.Value)
			return
		}
		dec.bad(path, n.Line, "%q is not a duration: %s", n.Value, want)
		return
	}
	*d = Duration(v)
}

// MarshalYAML writes Go duration syntax.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// Expiry is consumers.expire_after: a Duration, or "never" (also written
// 0), which is ExpireNever.
type Expiry Duration

// ExpireNever is an Expiry that keeps client ids until they are dropped.
const ExpireNever Expiry = -1

// UnmarshalYAML parses Go duration syntax or never.
func (e *Expiry) UnmarshalYAML(n *yaml.Node) error { return decodeOne(n, e) }

func (e *Expiry) decodeNode(dec *decoder, path string, n *yaml.Node) {
	if n.Kind == yaml.ScalarNode && n.Value == "never" {
		*e = ExpireNever
		return
	}
	var d Duration
	d.decodeNode(dec, path, n)
	*e = Expiry(d)
	if d == 0 {
		*e = ExpireNever // written, so not the default: 0 keeps for ever, as it always did
	}
}

// MarshalYAML writes never or Go duration syntax.
func (e Expiry) MarshalYAML() (any, error) {
	if e == ExpireNever {
		return "never", nil
	}
	return time.Duration(e).String(), nil
}

// mariadbGTIDs matches a MariaDB GTID position: domain-server-sequence,
// one per domain, separated by commas.
var mariadbGTIDs = regexp.MustCompile(`^\s*\d+-\d+-\d+\s*(,\s*\d+-\d+-\d+\s*)*$`)

// gtidProblem says what is wrong with a start GTID, "" if it is a MariaDB
// GTID position or a MySQL GTID set. Which one the source takes is known
// only once braid has reached it.
func gtidProblem(gtid string) string {
	if mariadbGTIDs.MatchString(gtid) {
		return ""
	}
	_, err := change.ParseMySQLGTIDSet(gtid)
	if err == nil {
		return ""
	}
	if !strings.Contains(gtid, ":") {
		return fmt.Sprintf("%q is neither a MariaDB GTID position (e.g. 0-1-42) nor a MySQL GTID set (e.g. 3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5)", gtid)
	}
	return fmt.Sprintf("%q is not a MySQL GTID set (e.g. 3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5, or with a tag 3e11fa47-71ca-11e1-9e33-c80aa9429562:shop:1-5): %v",
		gtid, strings.TrimPrefix(err.Error(), fmt.Sprintf("malformed MySQL GTID set %q: ", gtid)))
}
