package spec

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"time"
)

var (
	nameRE    = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	notNameRE = regexp.MustCompile(`[^A-Za-z0-9_-]+`)
)

// Limits on a spec, so that one spec cannot make a node hold or dial
// without bound: at most MaxSources sources, names of at most MaxNameBytes.
const (
	MaxSources   = 1024
	MaxNameBytes = 128
)

// Validate reports every problem of the spec at once, one per line
// (errors.Join of *FieldError), each naming the YAML field it concerns;
// a spec built in Go has no lines, so its problems carry none (Parse adds
// them). It does not modify s.
func (s *Spec) Validate() error { return joinProblems(s.problems()) }

// problems are Validate's problems, by YAML path, without lines.
func (s *Spec) problems() []*FieldError {
	var ps []*FieldError
	bad := func(path, format string, a ...any) {
		ps = append(ps, &FieldError{Path: path, Msg: fmt.Sprintf(format, a...)})
	}
	if m := nameProblem(s.Name, "shop"); m != "" {
		bad("name", "%s", m)
	}
	if len(s.Sources) == 0 {
		bad("sources", "no sources: add at least one, e.g. sources: [%s]", Source{}.example())
	}
	if len(s.Sources) > MaxSources {
		bad("sources", "%d sources: at most %d; split the shards into several destinations", len(s.Sources), MaxSources)
		return ps // one line, not one per source
	}
	seen := map[string]int{}
	for i, src := range s.Sources {
		path := fmt.Sprintf("sources[%d]", i)
		if m := nameProblem(src.Name, fmt.Sprintf("s%d", i)); m != "" {
			bad(path+".name", "%s", m)
		} else if first, dup := seen[src.Name]; dup {
			bad(path+".name", "%q is used twice (sources[%d] has it too): give each source its own name", src.Name, first)
		} else {
			seen[src.Name] = i
		}
		src.addressProblems(path, bad)
		if n := countSet(src.Password, src.PasswordFile, src.PasswordEnv); n > 1 {
			bad(path, "give one of password, password_file and password_env, not %d", n)
		}
		if m := startProblem(src.Start); m != "" {
			bad(path+".start", "%s", m)
		}
		if src.TLS != nil {
			src.TLS.problems(path+".tls", src.PasswordFile != "" || src.PasswordEnv != "", bad)
		}
	}
	for i, p := range s.Tables {
		if m := regexProblem(p); m != "" {
			bad(fmt.Sprintf("tables[%d]", i), "%s", m)
		}
	}
	for i, r := range s.Route {
		path := fmt.Sprintf("route[%d]", i)
		if r.Match == "" {
			bad(path+".match", "missing or empty: write a regex on the shard's schema.table, e.g. match: 'shop_\\d+\\.(\\w+)'")
		} else if m := regexProblem(r.Match); m != "" {
			bad(path+".match", "%s", m)
		}
		if r.To == "" {
			bad(path+".to", "missing or empty: write the logical schema.table, with $1 for the match's groups, e.g. to: 'shop.$1'")
		}
	}
	switch s.Ordering {
	case "", OrderingStrict, OrderingPerSource:
	default:
		bad("ordering", "%q: want strict or per-source", s.Ordering)
	}
	if s.Heartbeat < 0 || (s.Heartbeat > 0 && time.Duration(s.Heartbeat) < time.Millisecond) {
		bad("heartbeat", "%v: want at least 1ms, e.g. %v", time.Duration(s.Heartbeat), DefaultHeartbeat)
	}
	switch s.Snapshot {
	case "", SnapshotNever, SnapshotInitial:
	default:
		bad("snapshot", "%q: want never (the default) or initial", s.Snapshot)
	}
	if s.SnapshotChunkRows < 0 || s.SnapshotChunkRows > 1<<20 {
		bad("snapshot_chunk_rows", "%d: want 1 to 1048576 (default 8192)", s.SnapshotChunkRows)
	}
	if s.SnapshotParallelism < 0 {
		bad("snapshot_parallelism", "%d: want at least 1 (default: the number of sources, at most 4)", s.SnapshotParallelism)
	}
	switch s.ShardDDL {
	case "", ShardDDLPessimistic, ShardDDLOptimistic, ShardDDLPassthrough:
	default:
		bad("shard_ddl", "%q: want pessimistic (the default), optimistic or passthrough", s.ShardDDL)
	}
	s.onlineDDLProblems(bad)
	s.sinkProblems(bad)
	if s.DDLLockWarnAfter < 0 {
		bad("ddl_lock_warn_after", "%v: must not be negative, e.g. %v", time.Duration(s.DDLLockWarnAfter), DefaultDDLLockWarnAfter)
	}
	if s.MaxClockSkew < 0 {
		bad("max_clock_skew", "%v: must not be negative, e.g. %v", time.Duration(s.MaxClockSkew), DefaultMaxClockSkew)
	}
	c := s.Consumers
	switch c.Start {
	case "", StartEarliest, StartLatest:
	default:
		bad("consumers.start", "%q: want earliest (the whole stream, the default) or latest (from now on)", c.Start)
	}
	if c.ExpireAfter < 0 && c.ExpireAfter != ExpireNever {
		bad("consumers.expire_after", "%v: must not be negative: write never to keep client ids until dropped, or e.g. 24h (default %v)", time.Duration(c.ExpireAfter), DefaultExpireAfter)
	}
	if c.MaxClientIDs < 0 || c.MaxClientIDs > MaxMaxClientIDs {
		bad("consumers.max_client_ids", "%d: want 1 to %d (default %d)", c.MaxClientIDs, MaxMaxClientIDs, DefaultMaxClientIDs)
	}
	if c.DetachAfter < 0 {
		bad("consumers.detach_after", "%v: must not be negative: leave it out for %v, or write e.g. 1m", time.Duration(c.DetachAfter), DefaultDetachAfter)
	}
	return ps
}

// nameProblem says what is wrong with a destination's or source's name,
// "" if nothing; example is a name to suggest when it is missing.
func nameProblem(name, example string) string {
	switch {
	case name == "":
		return fmt.Sprintf("missing or empty: write e.g. name: %s", example)
	case len(name) > MaxNameBytes:
		return fmt.Sprintf("%d bytes long: at most %d", len(name), MaxNameBytes)
	case !nameRE.MatchString(name):
		fixed := strings.Trim(notNameRE.ReplaceAllString(name, "_"), "_")
		if fixed == "" {
			fixed = example
		}
		return fmt.Sprintf("%q: use letters, digits, '_' and '-' only, e.g. %s", name, fixed)
	}
	return ""
}

// addressProblems reports what is wrong with a source's address (one
// host:port or a list of them), failover_after and read_from.
func (src Source) addressProblems(path string, bad func(path, format string, a ...any)) {
	addrs := src.Addresses()
	if len(addrs) <= 1 {
		if m := addressProblem(src.Address); m != "" {
			bad(path+".address", "%s", m)
		}
	} else {
		seen := map[string]int{}
		for i, a := range addrs {
			if m := addressProblem(a); m != "" {
				bad(path+".address", "item %d: %s", i+1, m)
			} else if first, dup := seen[a]; dup {
				bad(path+".address", "item %d: %q is listed twice (item %d has it too): list each server once", i+1, a, first+1)
			} else {
				seen[a] = i
			}
		}
	}
	if src.FailoverAfter < 0 {
		bad(path+".failover_after", "%v: must not be negative: leave it out for %v, or write e.g. 30s", time.Duration(src.FailoverAfter), DefaultFailoverAfter)
	}
	switch src.ReadFrom {
	case "", ReadFromPrimary, ReadFromReplica:
	default:
		bad(path+".read_from", "%q: want primary (a writable server, the default) or replica (a read_only one)", src.ReadFrom)
	}
}

// addressProblem says what is wrong with one host:port, "" if nothing.
func addressProblem(addr string) string {
	const want = "write host:port, e.g. 127.0.0.1:3306"
	if addr == "" {
		return "missing or empty: " + want
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Sprintf("%q is not host:port: %s", addr, want)
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		if host == "" {
			host = "127.0.0.1"
		}
		return fmt.Sprintf("%q: bad port %q: want 1 to 65535, e.g. %s", addr, port, net.JoinHostPort(host, "3306"))
	}
	return ""
}

// startProblem says what is wrong with a start built in Go, "" if
// nothing (Parse reads only good ones).
func startProblem(st Start) string {
	switch st.Kind {
	case "", StartLatest, StartEarliest:
	case StartPosition:
		if st.Pos.File == "" {
			return "a position without a file: write e.g. {file: binlog.000002, pos: 4}"
		}
	case StartGTID:
		if st.GTID == "" {
			return `an empty gtid: write e.g. {gtid: "0-1-42"}`
		}
		return gtidProblem(st.GTID)
	case StartTimestamp:
		if st.Time.IsZero() {
			return `no time: write e.g. {timestamp: "2026-11-29T10:00:00Z"}`
		}
	default:
		return fmt.Sprintf("%q: %s", st.Kind, startWant)
	}
	return ""
}

// regexProblem says what is wrong with a regex of the spec, "" if nothing.
func regexProblem(p string) string {
	_, err := regexp.Compile(p)
	if err == nil {
		_, err = regexp.Compile(`^(?:` + p + `)$`)
	}
	if err == nil {
		return ""
	}
	why := err.Error()
	if se := (*syntax.Error)(nil); errors.As(err, &se) {
		why = se.Code.String()
		if se.Expr != p && se.Expr != "" {
			why += " at " + strconv.Quote(se.Expr)
		}
	}
	return fmt.Sprintf(`regex %q: %s: write a Go (RE2) regular expression, e.g. 'shop_\d+\.orders'`, p, why)
}
