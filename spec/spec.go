package spec

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
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
	Ordering Ordering `yaml:"ordering,omitempty" json:"ordering,omitempty"`
	// Heartbeat is the replication heartbeat period asked of each source.
	// Default: 200ms.
	Heartbeat Duration `yaml:"heartbeat,omitempty" json:"heartbeat,omitempty"`
	// MaxClockSkew is how far a source's clock may run from braid's.
	// Default: 1s.
	MaxClockSkew Duration `yaml:"max_clock_skew,omitempty" json:"max_clock_skew,omitempty"`
	// ShardDDL is how the DDL of shard tables routed to one logical table
	// becomes the logical table's: "pessimistic" (a shard table that ran
	// a DDL waits until every shard table of its logical table has run it,
	// then one DDL of the logical table goes out, followed by the rows
	// that waited), "optimistic" (ADD COLUMN goes out at the first shard,
	// DROP COLUMN at the last, anything else as pessimistic) or
	// "passthrough" (every shard's DDL goes out as it comes, as of old).
	// A logical table only one shard table routes to is passed through
	// in every mode. Default: pessimistic.
	ShardDDL ShardDDLMode `yaml:"shard_ddl,omitempty" json:"shard_ddl,omitempty"`
	// DDLLockWarnAfter is how old a shard-DDL lock may grow before a
	// warning is logged (and repeated) naming the shard tables it waits
	// for. Default: 10m.
	DDLLockWarnAfter Duration `yaml:"ddl_lock_warn_after,omitempty" json:"ddl_lock_warn_after,omitempty"`
	// OnlineDDL is which online schema-change tools' helper tables are
	// recognised: "auto" (gh-ost's and pt-online-schema-change's),
	// "gh-ost", "pt-osc" or "off". A helper table's rows and its CREATE,
	// ALTER and DROP never reach the stream; the DDL run on the shadow
	// copy goes out, at the swap, as the ALTER of the real table (and
	// into the shard-DDL merge). Default: auto.
	OnlineDDL OnlineDDLMode `yaml:"online_ddl,omitempty" json:"online_ddl,omitempty"`
	// ShadowTableRules and TrashTableRules replace the mode's helper-table
	// names: regular expressions on a table's name whose first group is
	// the changed table's. Shadow tables are the altered copies swapped
	// in; trash tables those swapped out, and changelogs. Default: per
	// mode, gh-ost '^_(.+)_gho$' and '^_(.+?)(?:_\d{14})?_(?:ghc|del)$',
	// pt-osc '^_+(.+)_new$' and '^_+(.+)_old$'.
	ShadowTableRules []string `yaml:"shadow_table_rules,omitempty" json:"shadow_table_rules,omitempty"`
	TrashTableRules  []string `yaml:"trash_table_rules,omitempty" json:"trash_table_rules,omitempty"`
	// Consumers says how the destination treats its consumers (client
	// ids). Default: each of its fields at its default.
	Consumers Consumers `yaml:"consumers,omitempty" json:"consumers,omitzero"`
	// Sinks are the targets the stream is applied to, each a consumer of
	// its own that runs where the destination runs. Default: none.
	Sinks []Sink `yaml:"sinks,omitempty" json:"sinks,omitempty"`
	// Snapshot is "initial" (the rows the selected tables hold where the
	// destination starts enter the stream first, as INSERTs marked
	// snapshot, read in key-range chunks without locks while live changes
	// flow) or "never" (the stream holds only changes). Default: never.
	Snapshot string `yaml:"snapshot,omitempty" json:"snapshot,omitempty"`
	// SnapshotChunkRows is how many rows one snapshot chunk (one
	// transaction of the stream) reads at most. Default: 8192.
	SnapshotChunkRows int `yaml:"snapshot_chunk_rows,omitempty" json:"snapshot_chunk_rows,omitempty"`
	// SnapshotParallelism is how many sources read their snapshot at once.
	// Default: the number of sources, at most 4.
	SnapshotParallelism int `yaml:"snapshot_parallelism,omitempty" json:"snapshot_parallelism,omitempty"`
}

// The snapshot modes.
const (
	SnapshotInitial = "initial"
	SnapshotNever   = "never"
)

func (Spec) example() string { return "{name: shop, sources: [{name: a, address: 127.0.0.1:3306}]}" }

// Consumers is the spec's consumers: block: where a new client id starts,
// when a client id that went away is forgotten, and how long one that does
// not read may hold the store.
type Consumers struct {
	// Start is where a new client id that does not say where to start
	// begins: "earliest" (the destination's own start positions, as
	// pinned when it was created: the whole stream) or "latest" (what is
	// committed from now on). Canal clients, which cannot ask, always
	// start here; a native client may ask (?from=). Default: earliest.
	Start StartKind `yaml:"start,omitempty" json:"start,omitempty"`
	// ExpireAfter drops a client id, with its cursor, once it has not
	// been connected for this long; "never" (or 0) keeps client ids until
	// dropped (`braid consumer drop`). Sinks' client ids never expire.
	// Default: 168h, a week.
	ExpireAfter Expiry `yaml:"expire_after,omitempty" json:"expire_after,omitempty"`
	// MaxClientIDs bounds the client ids one user may have on the
	// destination (on each node that serves it); the one past it is
	// refused until an idle one expires or is dropped. Without users, all
	// clients count as one user. Default: 100.
	MaxClientIDs int `yaml:"max_client_ids,omitempty" json:"max_client_ids,omitempty"`
	// DetachAfter is how long one client id may hold the store full (the
	// other consumers and the sources waiting for it) before it is
	// detached: its cursor stays, and when it reads again a replay reader
	// of its own serves it from there. Default (and 0): 10s.
	DetachAfter Duration `yaml:"detach_after,omitempty" json:"detach_after,omitempty"`
}

func (Consumers) example() string { return "{start: earliest, detach_after: 10s}" }

// RouteRule rewrites a shard table name ("shop_3.orders") to a logical one
// ("shop.orders"): Match is a regexp on "schema.table", To its replacement
// with $1-style groups.
type RouteRule struct {
	Match string `yaml:"match" json:"match"`
	To    string `yaml:"to" json:"to"`
}

func (RouteRule) example() string { return `{match: 'shop_\d+\.(\w+)', to: 'shop.$1'}` }

// Source is one server of a destination.
type Source struct {
	// Name names the source within the destination. Required, unique.
	Name string `yaml:"name" json:"name"`
	// Address is the source's server, host:port, or its servers in order
	// of preference: a YAML list ([db1:3306, db2:3306]) or one string
	// with commas, which is how a list is kept (Addresses splits it).
	// braid reads the first listed server that answers and holds its
	// position; when it loses that one for FailoverAfter it reads
	// another, as ReadFrom prefers, resuming there by GTID. Required.
	Address string `yaml:"address" json:"address" spec:"list"`
	// FailoverAfter is how long braid keeps retrying the server it read
	// after losing it (a broken connection, or neither event nor
	// heartbeat for the read timeout) before it tries the source's other
	// addresses in order. Only with several addresses. Default: 10s.
	FailoverAfter Duration `yaml:"failover_after,omitempty" json:"failover_after,omitempty"`
	// ReadFrom is which of the source's servers braid prefers when it
	// picks one of several addresses: "primary", a writable one
	// (read_only=OFF), or "replica", a read_only one (offloading the
	// primary, as canal and DM users do). When none of the preferred
	// kind can be read, braid reads the first of the other kind that
	// can rather than stop, and stays on it until it loses it. Default:
	// primary.
	ReadFrom ReadFrom `yaml:"read_from,omitempty" json:"read_from,omitempty"`
	// User and Password log in; the user needs REPLICATION SLAVE,
	// REPLICATION CLIENT and SELECT. Default user: root.
	User     string `yaml:"user,omitempty" json:"user,omitempty"`
	Password string `yaml:"password,omitempty" json:"password,omitempty"`
	// PasswordFile and PasswordEnv name where the password is instead: a
	// file (its content, trailing newline trimmed) or an environment
	// variable, read on the node that runs the destination when it starts
	// (Refs.Resolve), so the secret is in no spec. The file must lie in a
	// directory the node's operator allows, the variable's name start
	// with the operator's prefix (see Refs). At most one of password,
	// password_file and password_env.
	PasswordFile string `yaml:"password_file,omitempty" json:"password_file,omitempty"`
	PasswordEnv  string `yaml:"password_env,omitempty" json:"password_env,omitempty"`
	// Start is where reading begins the first time. Default: latest.
	Start Start `yaml:"start,omitempty" json:"start,omitempty"`
	// ServerID is the replica server_id braid presents to this source. It
	// must differ from every other replica of the server. Default: derived
	// from the destination and source names (see DeriveServerID); never random.
	ServerID uint32 `yaml:"server_id,omitempty" json:"server_id,omitempty"`
	// TLS, when set, makes every connection to the source (the binlog's
	// and the queries') use TLS, which caching_sha2_password's full
	// authentication needs. Default: none (and no password is sent in a
	// form the server could read).
	TLS *TLS `yaml:"tls,omitempty" json:"tls,omitempty"`
}

func (Source) example() string { return "{name: a, address: 127.0.0.1:3306}" }

// Addresses are the source's addresses in order: Address split at its
// commas, each trimmed of spaces; empty entries are kept (Validate
// refuses them).
func (s Source) Addresses() []string {
	if s.Address == "" {
		return nil
	}
	out := strings.Split(s.Address, ",")
	for i, a := range out {
		out[i] = strings.TrimSpace(a)
	}
	return out
}

// FailoverAfterOrDefault is FailoverAfter, or DefaultFailoverAfter when
// unset.
func (s Source) FailoverAfterOrDefault() time.Duration {
	if s.FailoverAfter <= 0 {
		return DefaultFailoverAfter
	}
	return time.Duration(s.FailoverAfter)
}

// ReadFrom is which servers of a source braid prefers to read (the
// source's read_from:).
type ReadFrom string

// The read_from values.
const (
	// ReadFromPrimary prefers a writable server (read_only=OFF).
	ReadFromPrimary ReadFrom = "primary"
	// ReadFromReplica prefers a read-only server (read_only=ON).
	ReadFromReplica ReadFrom = "replica"
)

// Replica reports whether r prefers replicas (primary is the default).
func (r ReadFrom) Replica() bool { return r == ReadFromReplica }

// Defaults applied by WithDefaults.
const (
	DefaultHeartbeat        = 200 * time.Millisecond
	DefaultFailoverAfter    = 10 * time.Second
	DefaultMaxClockSkew     = time.Second
	DefaultDDLLockWarnAfter = 10 * time.Minute
	DefaultUser             = "root"
	DefaultConsumersStart   = StartEarliest
	DefaultDetachAfter      = 10 * time.Second
	DefaultExpireAfter      = 7 * 24 * time.Hour
	DefaultMaxClientIDs     = 100
	MaxMaxClientIDs         = 100_000
	DefaultSnapshotChunk    = 8192
)

// Parse reads a destination spec from YAML (or JSON, which YAML reads
// too), applies its defaults and validates it. It reports every problem
// at once, one per line (errors.Join of *FieldError): unknown keys (so a
// typo never silently falls back to a default), values of the wrong form
// and what Validate finds, each with its YAML path and line.
func Parse(data []byte) (*Spec, error) {
	var root yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&root); err != nil && !errors.Is(err, io.EOF) {
		return nil, joinProblems([]*FieldError{syntaxError(err)})
	}
	d := newDecoder()
	var s Spec
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		d.value("", root.Content[0], reflect.ValueOf(&s).Elem())
	}
	s = s.WithDefaults()
	for _, p := range s.problems() {
		if !d.covered(p.Path) {
			p.Line = d.line(p.Path)
			d.problems = append(d.problems, p)
		}
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Load reads and parses a spec file. Its errors begin with the file's name.
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
		s.Ordering = OrderingStrict
	}
	if s.Heartbeat == 0 {
		s.Heartbeat = Duration(DefaultHeartbeat)
	}
	if s.MaxClockSkew == 0 {
		s.MaxClockSkew = Duration(DefaultMaxClockSkew)
	}
	if s.ShardDDL == "" {
		s.ShardDDL = ShardDDLPessimistic
	}
	if s.DDLLockWarnAfter == 0 {
		s.DDLLockWarnAfter = Duration(DefaultDDLLockWarnAfter)
	}
	if s.OnlineDDL == "" {
		s.OnlineDDL = OnlineDDLAuto
	}
	if s.Snapshot == "" {
		s.Snapshot = SnapshotNever
	}
	if s.SnapshotChunkRows == 0 {
		s.SnapshotChunkRows = DefaultSnapshotChunk
	}
	if s.SnapshotParallelism == 0 {
		s.SnapshotParallelism = max(1, min(len(s.Sources), 4))
	}
	if s.Consumers.Start == "" {
		s.Consumers.Start = DefaultConsumersStart
	}
	if s.Consumers.DetachAfter == 0 {
		s.Consumers.DetachAfter = Duration(DefaultDetachAfter)
	}
	if s.Consumers.ExpireAfter == 0 {
		s.Consumers.ExpireAfter = Expiry(DefaultExpireAfter)
	}
	if s.Consumers.MaxClientIDs == 0 {
		s.Consumers.MaxClientIDs = DefaultMaxClientIDs
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
	s.Sinks = slices.Clone(s.Sinks)
	for i := range s.Sinks {
		sk := &s.Sinks[i]
		if sk.User == "" {
			switch sk.Type {
			case SinkPostgres:
				sk.User = "postgres"
			case SinkRabbitMQ:
				sk.User = "guest"
			case SinkMySQL:
				sk.User = DefaultUser
			}
		}
		if sk.Type == SinkPostgres && sk.Database == "" {
			sk.Database = "postgres"
		}
		if sk.Mode == "" {
			sk.Mode = SinkExactlyOnce
			if sk.Type == SinkRabbitMQ {
				sk.Mode = SinkAtLeastOnce
			}
		}
		if sk.Workers == 0 {
			sk.Workers = DefaultSinkWorkers
			if sk.Ordered() {
				sk.Workers = 1
			}
		}
		switch sk.Type {
		case SinkMySQL:
			sk.Connections = cmp.Or(sk.Connections, min(DefaultSinkConnections, sk.Workers))
		case SinkRabbitMQ:
			sk.Exchange = cmp.Or(sk.Exchange, DefaultExchange)
			sk.RoutingKey = cmp.Or(sk.RoutingKey, DefaultRoutingKey)
			sk.Queues = cmp.Or(sk.Queues, "none")
		case SinkKafka:
			sk.Topic = cmp.Or(sk.Topic, DefaultTopic)
		case SinkRedis:
			sk.Key = cmp.Or(sk.Key, DefaultRedisKey)
			sk.Format = cmp.Or(sk.Format, "json")
			sk.TombstoneTTL = cmp.Or(sk.TombstoneTTL, Duration(DefaultTombstoneTTL))
		}
		if sk.Batch == 0 {
			sk.Batch = DefaultSinkBatch
		}
		if sk.DDL == "" {
			sk.DDL = "apply"
		}
		if sk.MetaDatabase == "" {
			sk.MetaDatabase = "braid_meta"
		}
	}
	return s
}

// ResolvePassword returns the source's password. A reference
// (PasswordFile, PasswordEnv) must have been resolved by Refs.Resolve on
// the machine that runs the destination, which alone knows what its
// operator lets a spec read: here it is an error, never read.
func (src Source) ResolvePassword() (string, error) {
	if src.PasswordFile != "" || src.PasswordEnv != "" {
		return "", fmt.Errorf("spec: source %q: %w", src.Name, errUnresolved)
	}
	return src.Password, nil
}

// errUnresolved: a password reference reached a connection unresolved.
var errUnresolved = errors.New("the password reference was not resolved where the destination runs (spec.Refs.Resolve)")

// Hidden is what Redacted shows in place of a password.
const Hidden = "******"

// Redacted is the spec as braid shows it to people and programs: each
// source and sink password replaced by Hidden. The spec itself is not changed.
func (s Spec) Redacted() Spec {
	s.Sources = slices.Clone(s.Sources)
	for i := range s.Sources {
		if s.Sources[i].Password != "" {
			s.Sources[i].Password = Hidden
		}
	}
	s.Sinks = slices.Clone(s.Sinks)
	for i := range s.Sinks {
		if s.Sinks[i].Password != "" {
			s.Sinks[i].Password = Hidden
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
	s.Sinks = slices.Clone(s.Sinks)
	for i := range s.Sinks {
		sk := &s.Sinks[i]
		if sk.Password == "" {
			continue
		}
		pw, err := f(sk.Password)
		if err != nil {
			return Spec{}, fmt.Errorf("sink %s: password: %w", sk.Name, err)
		}
		sk.Password = pw
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
	// skip leaves tables out whatever the regexes say (Without).
	skip func(schema, table string) bool
}

// systemSchemas are never captured unless a regex names them explicitly.
var systemSchemas = map[string]bool{"mysql": true, "information_schema": true, "performance_schema": true, "sys": true}

// CompileTableFilter compiles the spec's table regexes; each must match the
// whole "schema.table". An empty list selects every non-system table.
func CompileTableFilter(patterns []string) (*TableFilter, error) {
	f := &TableFilter{}
	var ps []*FieldError
	for i, p := range patterns {
		re, err := regexp.Compile(`^(?:` + p + `)$`)
		if err != nil {
			ps = append(ps, &FieldError{Path: fmt.Sprintf("tables[%d]", i), Msg: regexProblem(p)})
			continue
		}
		f.res = append(f.res, re)
	}
	if err := joinProblems(ps); err != nil {
		return nil, err
	}
	return f, nil
}

// Match reports whether schema.table is selected.
func (f *TableFilter) Match(schema, table string) bool {
	if f.skip != nil && f.skip(schema, table) {
		return false
	}
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
