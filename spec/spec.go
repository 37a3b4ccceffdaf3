package spec

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/braid-cdc/braid/change"
)

// Spec is a destination: a set of sources read as one stream. It is what a
// user writes in shop.yaml; the field comments give each default.
type Spec struct {
	// Name names the destination. Required; letters, digits, '_' and '-'.
	Name string `yaml:"name" json:"name"`
	// Sources are the MySQL/MariaDB servers read; a source's index is its
	// place in this list (it breaks merge-key ties). At least one.
	Sources []Source `yaml:"sources" json:"sources"`
	// Tables are regular expressions matched against "schema.table" (the
	// whole name must match). Rows of other tables are skipped without being
	// decoded. Default: every table outside the system schemas.
	Tables []string `yaml:"tables,omitempty" json:"tables,omitempty"`
	// Route maps shard tables to logical tables. Default: none (names pass
	// through unchanged).
	Route []RouteRule `yaml:"route,omitempty" json:"route,omitempty"`
	// Ordering is "strict" (merged commit-time order) or "per-source".
	// Default: strict.
	Ordering string `yaml:"ordering,omitempty" json:"ordering,omitempty"`
	// Heartbeat is the replication heartbeat period asked of each source.
	// Default: 200ms.
	Heartbeat Duration `yaml:"heartbeat,omitempty" json:"heartbeat,omitempty"`
	// MaxClockSkew is how far a source's clock may run from braid's.
	// Default: 1s.
	MaxClockSkew Duration `yaml:"max_clock_skew,omitempty" json:"max_clock_skew,omitempty"`
}

// RouteRule rewrites a shard table name ("shop_3.orders") to a logical one
// ("shop.orders"): Match is a regexp on "schema.table", To its replacement
// with $1-style groups.
type RouteRule struct {
	Match string `yaml:"match" json:"match"`
	To    string `yaml:"to" json:"to"`
}

// Source is one server of a destination.
type Source struct {
	// Name names the source within the destination. Required, unique.
	Name string `yaml:"name" json:"name"`
	// Address is host:port of the server. Required.
	Address string `yaml:"address" json:"address"`
	// User and Password log in; the user needs REPLICATION SLAVE,
	// REPLICATION CLIENT and SELECT. Default user: root.
	User     string `yaml:"user,omitempty" json:"user,omitempty"`
	Password string `yaml:"password,omitempty" json:"password,omitempty"`
	// PasswordFile and PasswordEnv name where the password is instead: a
	// file (its content, trailing newline trimmed) or an environment
	// variable, read on the node that runs the destination when it starts
	// (ResolvePassword), so the secret is in no spec. At most one of
	// password, password_file and password_env.
	PasswordFile string `yaml:"password_file,omitempty" json:"password_file,omitempty"`
	PasswordEnv  string `yaml:"password_env,omitempty" json:"password_env,omitempty"`
	// Start is where reading begins the first time. Default: latest.
	Start Start `yaml:"start,omitempty" json:"start,omitempty"`
	// ServerID is the replica server_id braid presents to this source. It
	// must differ from every other replica of the server. Default: derived
	// from the destination and source names (see DeriveServerID); never random.
	ServerID uint32 `yaml:"server_id,omitempty" json:"server_id,omitempty"`
}

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
// `{file: binlog.000002, pos: 4}`, `{gtid: "0-1-42"}` or
// `{timestamp: "2026-11-29T10:00:00Z"}` (the first transaction committed at or
// after that time).
type Start struct {
	Kind StartKind
	Pos  change.Position
	GTID string
	Time time.Time
}

// UnmarshalYAML accepts the scalar and mapping forms.
func (s *Start) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		switch k := StartKind(strings.ToLower(n.Value)); k {
		case StartLatest, StartEarliest, "":
			s.Kind = k
			if k == "" {
				s.Kind = StartLatest
			}
			return nil
		}
		return fmt.Errorf("line %d: start %q: want earliest, latest, {file, pos}, {gtid} or {timestamp}", n.Line, n.Value)
	}
	var m struct {
		File      string  `yaml:"file"`
		Pos       *uint32 `yaml:"pos"`
		GTID      string  `yaml:"gtid"`
		Timestamp string  `yaml:"timestamp"`
	}
	if err := n.Decode(&m); err != nil {
		return fmt.Errorf("line %d: start: %w", n.Line, err)
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
			return fmt.Errorf("line %d: start: pos without file", n.Line)
		}
	}
	if m.GTID != "" {
		set++
		s.Kind = StartGTID
		s.GTID = m.GTID
	}
	if m.Timestamp != "" {
		set++
		t, err := time.Parse(time.RFC3339Nano, m.Timestamp)
		if err != nil {
			return fmt.Errorf("line %d: start timestamp %q: want RFC 3339, e.g. 2026-11-29T10:00:00Z", n.Line, m.Timestamp)
		}
		s.Kind = StartTimestamp
		s.Time = t
	}
	if set != 1 {
		return fmt.Errorf("line %d: start: give exactly one of {file, pos}, {gtid} or {timestamp}", n.Line)
	}
	return nil
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

// Duration is a time.Duration written as "200ms" in YAML and JSON.
type Duration time.Duration

// UnmarshalYAML parses Go duration syntax.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: duration %q: want e.g. 200ms or 1s", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes Go duration syntax.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// Defaults applied by WithDefaults.
const (
	DefaultHeartbeat    = 200 * time.Millisecond
	DefaultMaxClockSkew = time.Second
	DefaultUser         = "root"
)

// Parse reads a destination spec from YAML (or JSON, which YAML reads
// too). Unknown fields are errors, so a typo never silently falls back to a
// default. The result has defaults applied and is validated.
func Parse(data []byte) (*Spec, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var s Spec
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("spec: invalid spec: %w", err)
	}
	s = s.WithDefaults()
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Load reads and parses a spec file.
func Load(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("spec: read spec: %w", err)
	}
	s, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// WithDefaults returns a copy with every unset field at its default.
func (s Spec) WithDefaults() Spec {
	if s.Ordering == "" {
		s.Ordering = "strict"
	}
	if s.Heartbeat == 0 {
		s.Heartbeat = Duration(DefaultHeartbeat)
	}
	if s.MaxClockSkew == 0 {
		s.MaxClockSkew = Duration(DefaultMaxClockSkew)
	}
	src := make([]Source, len(s.Sources))
	copy(src, s.Sources)
	for i := range src {
		if src[i].User == "" {
			src[i].User = DefaultUser
		}
		if src[i].Start.Kind == "" {
			src[i].Start.Kind = StartLatest
		}
		if src[i].ServerID == 0 {
			src[i].ServerID = DeriveServerID(s.Name, src[i].Name)
		}
	}
	s.Sources = src
	return s
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Limits on a spec, so that one spec cannot make a node hold or dial
// without bound: at most MaxSources sources, names of at most MaxNameBytes.
const (
	MaxSources   = 1024
	MaxNameBytes = 128
)

// Validate reports every problem of the spec at once. It does not modify s.
func (s *Spec) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("spec: "+format, a...)) }
	if len(s.Name) > MaxNameBytes {
		bad("name is %d bytes long: at most %d", len(s.Name), MaxNameBytes)
	} else if !nameRE.MatchString(s.Name) {
		bad("name %q: want letters, digits, '_' or '-'", s.Name)
	}
	if len(s.Sources) == 0 {
		bad("no sources: add at least one under sources:")
	}
	if len(s.Sources) > MaxSources {
		bad("%d sources: at most %d; split the shards into several destinations", len(s.Sources), MaxSources)
		return errors.Join(errs...) // one line, not one per source
	}
	seen := map[string]bool{}
	for i, src := range s.Sources {
		if len(src.Name) > MaxNameBytes {
			bad("sources[%d].name is %d bytes long: at most %d", i, len(src.Name), MaxNameBytes)
		} else if !nameRE.MatchString(src.Name) {
			bad("sources[%d].name %q: want letters, digits, '_' or '-'", i, src.Name)
		} else if seen[src.Name] {
			bad("sources[%d].name %q is used twice", i, src.Name)
		}
		seen[src.Name] = true
		if _, port, err := net.SplitHostPort(src.Address); err != nil {
			bad("source %q: address %q: want host:port", src.Name, src.Address)
		} else if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
			bad("source %q: address %q: bad port", src.Name, src.Address)
		}
		if n := countSet(src.Password, src.PasswordFile, src.PasswordEnv); n > 1 {
			bad("source %q: give one of password, password_file and password_env, not %d", src.Name, n)
		}
	}
	if _, err := CompileTableFilter(s.Tables); err != nil {
		errs = append(errs, err)
	}
	for i, r := range s.Route {
		if _, err := regexp.Compile(r.Match); err != nil {
			bad("route[%d].match %q: %v", i, r.Match, err)
		}
		if r.To == "" {
			bad("route[%d].to is empty", i)
		}
	}
	switch s.Ordering {
	case "", "strict", "per-source":
	default:
		bad("ordering %q: want strict or per-source", s.Ordering)
	}
	if s.Heartbeat < 0 || (s.Heartbeat > 0 && time.Duration(s.Heartbeat) < time.Millisecond) {
		bad("heartbeat %v: want at least 1ms", time.Duration(s.Heartbeat))
	}
	if s.MaxClockSkew < 0 {
		bad("max_clock_skew %v: must not be negative", time.Duration(s.MaxClockSkew))
	}
	return errors.Join(errs...)
}

// ResolvePassword returns the source's password: Password, or what
// PasswordFile or PasswordEnv refer to, read now on this machine.
func (src Source) ResolvePassword() (string, error) {
	switch {
	case src.PasswordFile != "":
		b, err := os.ReadFile(src.PasswordFile)
		if err != nil {
			return "", fmt.Errorf("spec: source %q: password_file: %w: put the file on every node that may run the destination, or use password_env", src.Name, err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	case src.PasswordEnv != "":
		pw, ok := os.LookupEnv(src.PasswordEnv)
		if !ok {
			return "", fmt.Errorf("spec: source %q: password_env: %s is not set here: set it for every node that may run the destination, or use password_file", src.Name, src.PasswordEnv)
		}
		return pw, nil
	}
	return src.Password, nil
}

// Hidden is what Redacted shows in place of a password.
const Hidden = "******"

// Redacted is the spec as braid shows it to people and programs: each
// source password replaced by Hidden. The spec itself is not changed.
func (s Spec) Redacted() Spec {
	s.Sources = slices.Clone(s.Sources)
	for i := range s.Sources {
		if s.Sources[i].Password != "" {
			s.Sources[i].Password = Hidden
		}
	}
	return s
}

// MapPasswords returns the spec with each source password replaced by
// f's answer (sealing them for Raft, opening them to run); empty ones are
// left alone. The spec itself is not changed. The first error stops it.
func (s Spec) MapPasswords(f func(password string) (string, error)) (Spec, error) {
	s.Sources = slices.Clone(s.Sources)
	for i := range s.Sources {
		src := &s.Sources[i]
		if src.Password == "" {
			continue
		}
		pw, err := f(src.Password)
		if err != nil {
			return Spec{}, fmt.Errorf("source %s: password: %w", src.Name, err)
		}
		src.Password = pw
	}
	return s, nil
}

func countSet(ss ...string) int {
	n := 0
	for _, s := range ss {
		if s != "" {
			n++
		}
	}
	return n
}

// DeriveServerID is the replica server_id braid presents to a source when the
// spec gives none: FNV-1a of "destination/source", folded into
// [0x40000000, 0x7fffffff] so it stays clear of the small ids operators give
// their own servers. The same names always give the same id, so a restarted
// or failed-over reader takes the place of its predecessor on the server
// instead of appearing as a second replica.
func DeriveServerID(destination, source string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(destination))
	h.Write([]byte{'/'})
	h.Write([]byte(source))
	return 0x40000000 | (h.Sum32() & 0x3fffffff)
}

// TableFilter selects tables by regular expressions on "schema.table".
type TableFilter struct {
	res []*regexp.Regexp
}

// systemSchemas are never captured unless a regex names them explicitly.
var systemSchemas = map[string]bool{"mysql": true, "information_schema": true, "performance_schema": true, "sys": true}

// CompileTableFilter compiles the spec's table regexes; each must match the
// whole "schema.table". An empty list selects every non-system table.
func CompileTableFilter(patterns []string) (*TableFilter, error) {
	f := &TableFilter{}
	var errs []error
	for _, p := range patterns {
		re, err := regexp.Compile(`^(?:` + p + `)$`)
		if err != nil {
			errs = append(errs, fmt.Errorf("spec: tables: regex %q: %v", p, err))
			continue
		}
		f.res = append(f.res, re)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return f, nil
}

// Match reports whether schema.table is selected.
func (f *TableFilter) Match(schema, table string) bool {
	if len(f.res) == 0 {
		return !systemSchemas[strings.ToLower(schema)]
	}
	name := schema + "." + table
	for _, re := range f.res {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}
