package binlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/spec"
)

// ErrSetting: a server setting braid cannot honour (the error names it
// and what to change).
var ErrSetting = errors.New("binlog: server setting braid cannot honour")

// ErrTLS: a TLS connection to the source failed: its certificate is not
// trusted, it offers no TLS, or the spec's tls files are unusable.
var ErrTLS = errors.New("binlog: TLS to the source failed")

// Verdict is what a source's setting means for braid.
type Verdict string

const (
	// SettingOK: braid reads the source as it is.
	SettingOK Verdict = "ok"
	// SettingWarning: braid honours the setting, with a consequence the
	// note names (e.g. binlog_row_image MINIMAL: partial row images).
	SettingWarning Verdict = "warning"
	// SettingProblem: braid cannot honour it; the source does not start.
	SettingProblem Verdict = "problem"
)

// Setting is one server setting braid relies on, as a source has it.
type Setting struct {
	// Name is the server variable ("binlog_format"), or "privileges".
	Name string `json:"name"`
	// Value is as the server reports it ("" when the server has no such
	// variable: an older or another flavor's server).
	Value string `json:"value"`
	// Verdict says whether braid can read the source with it.
	Verdict Verdict `json:"verdict"`
	// Note says what it means for braid and, unless ok, what to change.
	Note string `json:"note,omitempty"`

	sentinel error // the error a problem wraps (ErrSetting by default)
}

// SourceReport is the start-up check of one source: its flavor, version
// and every setting braid relies on, each with its verdict.
type SourceReport struct {
	Source  string `json:"source"`
	Address string `json:"address"`
	// Flavor is mysql or mariadb; Version as @@version prints it.
	Flavor  string `json:"flavor,omitempty"`
	Version string `json:"version,omitempty"`
	// Settings in the order braid checks them.
	Settings []Setting `json:"settings,omitempty"`
	// Pos is the server's end of binlog when it was checked; GTIDs, read
	// just before, its GTID position: on MariaDB gtid_binlog_pos (the
	// last GTID of each domain), on MySQL with gtid_mode=ON gtid_executed;
	// "" when it has none. A position on one server of a source means
	// nothing on another; the GTIDs mean the same on all.
	Pos   change.Position `json:"pos,omitzero"`
	GTIDs string          `json:"gtids,omitempty"`
	// Err is why the source could not be checked in full (unreachable,
	// refused, a query failed): Settings hold what was read before.
	Err error `json:"-"`
}

// Problems is every reason the source cannot start, one error per line
// (errors.Join), each naming the source, the setting and what to change;
// nil when it can start.
func (r SourceReport) Problems() error {
	var errs []error
	for _, s := range r.Settings {
		if s.Verdict != SettingProblem {
			continue
		}
		errs = append(errs, settingError{source: r.Source, address: r.Address, s: s})
	}
	if r.Err != nil {
		errs = append(errs, r.Err)
	}
	return errors.Join(errs...)
}

// settingError is a setting braid cannot honour, on one line: the
// source, the setting, its value and what to change. It wraps the
// setting's sentinel (ErrSetting by default).
type settingError struct {
	source, address string
	s               Setting
}

func (e settingError) Error() string {
	is := e.s.Name + " is " + shown(e.s.Value)
	if e.s.Name == "privileges" {
		is = "the user's privileges on *.* are " + shown(e.s.Value)
	}
	return fmt.Sprintf("binlog: source %s (%s): %s: %s", e.source, e.address, is, e.s.Note)
}

func (e settingError) Unwrap() error {
	if e.s.sentinel != nil {
		return e.s.sentinel
	}
	return ErrSetting
}

// Warnings are the settings braid honours with a consequence.
func (r SourceReport) Warnings() []Setting {
	var w []Setting
	for _, s := range r.Settings {
		if s.Verdict == SettingWarning {
			w = append(w, s)
		}
	}
	return w
}

// shown is a setting's value as a message prints it.
func shown(v string) string {
	if v == "" {
		return "empty"
	}
	return v
}

// Check connects to src as its reader would and reports its flavor,
// version and settings (the start-up check). It takes handshakeTimeout
// at most, less if ctx ends first. Passwords are never part of the report.
func Check(ctx context.Context, src spec.Source) SourceReport {
	rep := SourceReport{Source: src.Name, Address: src.Address}
	pw, err := src.ResolvePassword()
	if err != nil {
		rep.Err = err
		return rep
	}
	src.Password, src.PasswordFile, src.PasswordEnv = pw, "", ""
	if src.User == "" {
		src.User = spec.DefaultUser
	}
	p := &Reader{spec: src, log: slog.New(slog.DiscardHandler)}
	rep, c, _ := p.check(ctx, true)
	if c != nil {
		c.Close()
	}
	return rep
}

// check is Check on p's source, with the source's position read when
// positions is set. It returns the open connection it checked on (nil
// when the check failed) with what it learnt of the server; the caller
// closes it.
func (p *Reader) check(ctx context.Context, positions bool) (SourceReport, *client.Conn, serverInfo) {
	rep := SourceReport{Source: p.spec.Name, Address: p.spec.Address}
	c, stop, err := p.dialUntil(ctx, time.Now().Add(handshakeTimeout))
	if err != nil {
		rep.Err = err
		return rep, nil, serverInfo{}
	}
	defer stop()
	info, rep, err := p.readSettings(c)
	if err == nil && rep.Problems() == nil && positions {
		err = p.checkPositions(c, &rep)
	}
	if err != nil {
		rep.Err = err
		c.Close()
		return rep, nil, info
	}
	return rep, c, info
}

// checkPositions reads the server's end of binlog into rep, and its
// GTID position just before (MariaDB; MySQL with gtid_mode=ON).
func (p *Reader) checkPositions(c *client.Conn, rep *SourceReport) error {
	if rep.Flavor == mysql.MariaDBFlavor {
		r, err := c.Execute("SELECT @@gtid_binlog_pos")
		if err != nil {
			return p.queryError("read gtid_binlog_pos", err)
		}
		s, _ := r.GetString(0, 0)
		rep.GTIDs = strings.Clone(s)
		r.Close()
	} else if i := slices.IndexFunc(rep.Settings, func(s Setting) bool { return s.Name == "gtid_mode" }); i >= 0 && strings.EqualFold(rep.Settings[i].Value, "ON") {
		executed, _, err := serverGTIDSets(c)
		if err != nil {
			return p.queryError("read gtid_executed", err)
		}
		rep.GTIDs = executed.String()
	}
	pos, err := masterPosition(c)
	if err != nil {
		return p.queryError("read its binlog position", err)
	}
	rep.Pos = pos
	return nil
}

// CheckAll checks every source at once (Check) and returns their reports
// in the order of srcs.
func CheckAll(ctx context.Context, srcs []spec.Source) []SourceReport {
	out := make([]SourceReport, len(srcs))
	var wg sync.WaitGroup
	for i, src := range srcs {
		wg.Go(func() { out[i] = Check(ctx, src) })
	}
	wg.Wait()
	return out
}

// readSettings reads the server's flavor, version and settings, judges
// each, and returns what the reader needs of them. The error is a failed
// query; the settings' problems are in the report.
func (p *Reader) readSettings(c *client.Conn) (serverInfo, SourceReport, error) {
	var info serverInfo
	rep := SourceReport{Source: p.spec.Name, Address: p.spec.Address}
	r, err := c.Execute("SELECT @@version, @@log_bin, @@binlog_format, @@binlog_row_image, @@global.time_zone, @@system_time_zone, TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), NOW())")
	if err != nil {
		return info, rep, p.queryError("read server settings", err)
	}
	get := func(i int) string { s, _ := r.GetString(0, i); return s }
	info.version = get(0)
	info.flavor = mysql.MySQLFlavor
	if strings.Contains(strings.ToLower(info.version), "mariadb") {
		info.flavor = mysql.MariaDBFlavor
	}
	rep.Flavor, rep.Version = info.flavor, info.version
	info.location = change.ServerLocation(get(4), get(5), get(6))
	add := func(s Setting) { rep.Settings = append(rep.Settings, s) }

	if isOn(get(1)) {
		add(Setting{Name: "log_bin", Value: "ON", Verdict: SettingOK})
	} else {
		add(Setting{Name: "log_bin", Value: "OFF", Verdict: SettingProblem, sentinel: ErrBinlogDisabled,
			Note: "start the server with --log-bin (and --binlog-format=ROW)"})
	}
	if f := get(2); strings.EqualFold(f, "ROW") {
		add(Setting{Name: "binlog_format", Value: f, Verdict: SettingOK})
	} else {
		add(Setting{Name: "binlog_format", Value: f, Verdict: SettingProblem, sentinel: ErrBinlogFormat,
			Note: "run SET GLOBAL binlog_format=ROW and put binlog_format=ROW in the server's config"})
	}
	// A partial image is honoured: the stream carries the columns the
	// binlog holds and leaves the others out (as canal does), and the SQL
	// sinks stop on one rather than guess the rest.
	if img := get(3); strings.EqualFold(img, "FULL") {
		add(Setting{Name: "binlog_row_image", Value: img, Verdict: SettingOK})
	} else {
		add(Setting{Name: "binlog_row_image", Value: img, Verdict: SettingWarning,
			Note: "row images leave columns out: consumers get only the columns the binlog holds and SQL sinks stop on a partial image; set binlog_row_image=FULL on the server for whole rows"})
	}

	vars := p.optionalVariables(c, info.flavor)
	if v, ok := vars["binlog_row_metadata"]; ok {
		info.fullMeta = strings.EqualFold(v, "FULL")
		note := "column names come from braid's schema history"
		if info.fullMeta {
			note = "column names come from the binlog's table maps"
		}
		add(Setting{Name: "binlog_row_metadata", Value: v, Verdict: SettingOK, Note: note})
	}
	if v, ok := vars["log_bin_compress"]; ok {
		info.compressed = isOn(v)
		add(Setting{Name: "log_bin_compress", Value: v, Verdict: SettingOK})
	}
	if v, ok := vars["binlog_row_value_options"]; ok {
		s := Setting{Name: "binlog_row_value_options", Value: v, Verdict: SettingOK}
		if strings.Contains(strings.ToUpper(v), "PARTIAL_JSON") {
			s.Note = "JSON updates arrive as diffs (PARTIAL_UPDATE_ROWS), applied to the before image"
		}
		add(s)
	}
	if v, ok := vars["binlog_transaction_compression"]; ok {
		s := Setting{Name: "binlog_transaction_compression", Value: v, Verdict: SettingOK}
		if isOn(v) {
			s.Note = "compressed transactions (TRANSACTION_PAYLOAD) are unwrapped"
		}
		add(s)
	}
	if v, ok := vars["gtid_mode"]; ok {
		s := Setting{Name: "gtid_mode", Value: v, Verdict: SettingOK}
		switch {
		case strings.EqualFold(v, "ON"):
		case p.spec.Start.Kind == spec.StartGTID:
			s.Verdict, s.Note = SettingProblem, "the spec starts from a GTID set, which needs gtid_mode=ON (and enforce_gtid_consistency=ON) on the server; or start from a file and position"
		default:
			s.Verdict, s.Note = SettingWarning, "positions are files and offsets of this server only: set gtid_mode=ON (and enforce_gtid_consistency=ON) for GTID positions"
		}
		add(s)
	}
	if v, ok := vars["enforce_gtid_consistency"]; ok {
		add(Setting{Name: "enforce_gtid_consistency", Value: v, Verdict: SettingOK})
	}
	if v, ok := vars["server_id"]; ok {
		s := Setting{Name: "server_id", Value: v, Verdict: SettingOK}
		id, _ := strconv.ParseUint(v, 10, 32)
		switch {
		case id == 0:
			s.Verdict, s.Note = SettingProblem, "a server with server_id 0 refuses replicas: set server_id to a number no other server of the topology uses"
		case p.spec.ServerID != 0 && uint32(id) == p.spec.ServerID:
			s.Verdict, s.Note = SettingProblem, fmt.Sprintf("it is the replica server_id braid presents (%d): set server_id in the spec's source to another number", p.spec.ServerID)
		}
		add(s)
	}
	if v, ok := vars["binlog_checksum"]; ok {
		s := Setting{Name: "binlog_checksum", Value: v, Verdict: SettingOK}
		if !strings.EqualFold(v, "NONE") && !strings.EqualFold(v, "CRC32") {
			s.Verdict, s.Note = SettingProblem, "braid verifies CRC32 or none: set binlog_checksum=CRC32"
		}
		add(s)
	}
	if s, ok := p.privileges(c); ok {
		add(s)
	}
	return info, rep, nil
}

// optionalVariables are the settings braid reads that a server may not
// have (by flavor and version): a variable the server does not know is
// left out. They are asked in one SELECT, which every server of a
// current version answers; only when it fails (a variable unknown) is
// each asked on its own. (One query each was a third of the queries
// before a source's first row: each a round trip, which on a loaded
// machine is a wait for the server's thread and then for braid's.)
func (p *Reader) optionalVariables(c *client.Conn, flavor string) map[string]string {
	names := []string{"binlog_row_metadata", "server_id", "binlog_checksum"}
	if flavor == mysql.MariaDBFlavor {
		names = append(names, "log_bin_compress")
	} else {
		names = append(names, "binlog_row_value_options", "binlog_transaction_compression", "gtid_mode", "enforce_gtid_consistency")
	}
	out := make(map[string]string, len(names))
	if r, err := c.Execute("SELECT @@global." + strings.Join(names, ", @@global.")); err == nil {
		for i, n := range names {
			s, _ := r.GetString(0, i)
			out[n] = strings.Clone(s) // go-mysql's may share the connection's buffer
		}
		return out
	}
	for _, n := range names {
		r, err := c.Execute("SELECT @@global." + n)
		if err != nil {
			continue // absent: an older or another flavor's server
		}
		s, _ := r.GetString(0, 0)
		out[n] = s
	}
	return out
}

// privileges judges the user's global grants (SHOW GRANTS): reading the
// binlog needs REPLICATION SLAVE; tables it has no SELECT on are not seen.
// ok is false when the grants cannot be judged (the statement failed, or
// roles hold some of them).
func (p *Reader) privileges(c *client.Conn) (Setting, bool) {
	r, err := c.Execute("SHOW GRANTS")
	if err != nil {
		return Setting{}, false
	}
	var global []string
	for i := 0; i < r.RowNumber(); i++ {
		line, _ := r.GetString(i, 0)
		// Never kept or shown whole: a grant may carry a password hash.
		head, rest, found := strings.Cut(line, " ON ")
		if !found {
			return Setting{}, false // a role's grant: its privileges are elsewhere
		}
		if strings.HasPrefix(strings.TrimSpace(rest), "*.*") {
			for _, priv := range strings.Split(strings.TrimPrefix(head, "GRANT "), ",") {
				global = append(global, strings.ToUpper(strings.TrimSpace(priv)))
			}
		}
	}
	has := func(names ...string) bool {
		for _, g := range global {
			for _, n := range names {
				if g == n {
					return true
				}
			}
		}
		return false
	}
	s := Setting{Name: "privileges", Verdict: SettingOK, Value: strings.Join(global, ", ")}
	switch {
	case has("ALL PRIVILEGES", "ALL"):
	case !has("REPLICATION SLAVE", "REPLICATION REPLICA"):
		s.Verdict, s.Note = SettingProblem, "the user lacks REPLICATION SLAVE on *.*, without which the server sends no binlog: GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO the user (MariaDB: BINLOG MONITOR for REPLICATION CLIENT)"
	case !has("SELECT"):
		s.Verdict, s.Note = SettingWarning, "no SELECT on *.*: braid sees only the tables the user may read; tables it cannot see have no schema and stop the source when their rows come"
	}
	return s, true
}

// isOn reads a boolean server variable.
func isOn(s string) bool { return s == "1" || strings.EqualFold(s, "ON") }
