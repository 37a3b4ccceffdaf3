package mysqlsource

import (
	"fmt"
	"strconv"
	"strings"
)

// A personality is what a MySQL version answers differently: the
// statements it knows, its variables and their defaults, the
// authentication plugins it loads. The server takes it from Config.Version
// and compares versions rather than naming three cases, so that an
// innovation release between them (8.2, 8.3) gets the features it had.
type personality struct {
	version             string // as @@version prints it, e.g. "8.4.3"
	major, minor, patch int
}

// Versions the package is tested with, one per personality braid must
// read: 8.0 (end of life April 2026), 8.4 LTS, and the 9.x innovation line.
const (
	Version80 = "8.0.40"
	Version84 = "8.4.3"
	Version9  = "9.1.0"
)

func parsePersonality(v string) (personality, error) {
	p := personality{version: v}
	parts := strings.SplitN(v, ".", 3)
	if len(parts) != 3 {
		return p, fmt.Errorf("mysqlsource: version %q: want major.minor.patch, e.g. %s", v, Version84)
	}
	nums := []*int{&p.major, &p.minor, &p.patch}
	for i, s := range parts {
		n, err := strconv.Atoi(s)
		if err != nil {
			return p, fmt.Errorf("mysqlsource: version %q: want major.minor.patch, e.g. %s", v, Version84)
		}
		*nums[i] = n
	}
	if p.major < 8 || p.major > 9 {
		return p, fmt.Errorf("mysqlsource: version %q: the test source plays MySQL 8.0 to 9.x only", v)
	}
	return p, nil
}

// atLeast tells whether the version is major.minor.patch or later.
func (p personality) atLeast(major, minor, patch int) bool {
	if p.major != major {
		return p.major > major
	}
	if p.minor != minor {
		return p.minor > minor
	}
	return p.patch >= patch
}

// hasShowMasterStatus: SHOW MASTER STATUS was removed in 8.4.0 (a parse
// error there), after SHOW BINARY LOG STATUS replaced it in 8.2.0.
func (p personality) hasShowMasterStatus() bool     { return !p.atLeast(8, 4, 0) }
func (p personality) hasShowBinaryLogStatus() bool  { return p.atLeast(8, 2, 0) }
func (p personality) hasShowSlaveHosts() bool       { return !p.atLeast(8, 4, 0) }
func (p personality) hasTaggedGTIDs() bool          { return p.atLeast(8, 3, 0) }
func (p personality) hasNativePassword() bool       { return !p.atLeast(9, 0, 0) }
func (p personality) nativePasswordByDefault() bool { return !p.atLeast(8, 4, 0) }

// source is how the version's messages name the source: "source" since
// 8.0.26's terminology change, "master" before.
func (p personality) source() string {
	if p.atLeast(8, 0, 26) {
		return "source"
	}
	return "master"
}

func (p personality) replica() string {
	if p.atLeast(8, 0, 26) {
		return "replica"
	}
	return "slave"
}

// The kinds of system variable, for how SELECT @@x prints them: a boolean
// is 1 or 0 there and ON or OFF in SHOW VARIABLES.
type varKind int

const (
	kindString varKind = iota
	kindInt
	kindBool
)

// scope is where a variable lives.
type scope int

const (
	scopeGlobal  scope = 1
	scopeSession scope = 2
	scopeBoth          = scopeGlobal | scopeSession
)

// sysvar is one system variable: its kind, scope and default.
type sysvar struct {
	kind     varKind
	scope    scope
	readOnly bool
	def      string
}

// sqlMode80 is the default sql_mode of MySQL 8.
const sqlMode80 = "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"

// sysvars returns the version's system variables with their defaults.
// gtid_executed and gtid_purged are computed from the binlog files
// unless a test sets them.
func (p personality) sysvars(serverID uint32, serverUUID string, port int) map[string]sysvar {
	str := func(sc scope, def string) sysvar { return sysvar{kind: kindString, scope: sc, def: def} }
	ro := func(k varKind, def string) sysvar {
		return sysvar{kind: k, scope: scopeGlobal, readOnly: true, def: def}
	}
	boolean := func(sc scope, on bool) sysvar {
		v := sysvar{kind: kindBool, scope: sc, def: "OFF"}
		if on {
			v.def = "ON"
		}
		return v
	}
	integer := func(sc scope, def int64) sysvar {
		return sysvar{kind: kindInt, scope: sc, def: strconv.FormatInt(def, 10)}
	}
	v := map[string]sysvar{
		"version":                                   ro(kindString, p.version),
		"version_comment":                           ro(kindString, "MySQL Community Server - GPL"),
		"version_compile_os":                        ro(kindString, "Linux"),
		"version_compile_machine":                   ro(kindString, "x86_64"),
		"innodb_version":                            ro(kindString, p.version),
		"protocol_version":                          ro(kindInt, "10"),
		"hostname":                                  ro(kindString, "mysqlsource"),
		"port":                                      ro(kindInt, strconv.Itoa(port)),
		"server_id":                                 integer(scopeGlobal, int64(serverID)),
		"server_uuid":                               ro(kindString, serverUUID),
		"log_bin":                                   ro(kindBool, "ON"),
		"log_bin_basename":                          ro(kindString, "/var/lib/mysql/binlog"),
		"log_bin_index":                             ro(kindString, "/var/lib/mysql/binlog.index"),
		"log_replica_updates":                       ro(kindBool, "ON"),
		"sql_log_bin":                               boolean(scopeSession, true),
		"binlog_format":                             str(scopeBoth, "ROW"),
		"binlog_row_image":                          str(scopeBoth, "FULL"),
		"binlog_row_metadata":                       str(scopeGlobal, "MINIMAL"),
		"binlog_row_value_options":                  str(scopeBoth, ""),
		"binlog_rows_query_log_events":              boolean(scopeBoth, false),
		"binlog_transaction_compression":            boolean(scopeBoth, false),
		"binlog_checksum":                           str(scopeGlobal, "CRC32"),
		"binlog_expire_logs_seconds":                integer(scopeGlobal, 2592000),
		"binlog_order_commits":                      boolean(scopeGlobal, true),
		"binlog_encryption":                         boolean(scopeGlobal, false),
		"gtid_mode":                                 str(scopeGlobal, "ON"),
		"enforce_gtid_consistency":                  str(scopeGlobal, "ON"),
		"gtid_executed":                             ro(kindString, ""),
		"gtid_purged":                               str(scopeGlobal, ""),
		"gtid_next":                                 str(scopeSession, "AUTOMATIC"),
		"source_verify_checksum":                    boolean(scopeGlobal, false),
		"time_zone":                                 str(scopeBoth, "SYSTEM"),
		"system_time_zone":                          ro(kindString, "UTC"),
		"character_set_server":                      str(scopeBoth, "utf8mb4"),
		"collation_server":                          str(scopeBoth, "utf8mb4_0900_ai_ci"),
		"character_set_database":                    str(scopeBoth, "utf8mb4"),
		"collation_database":                        str(scopeBoth, "utf8mb4_0900_ai_ci"),
		"character_set_client":                      str(scopeBoth, "utf8mb4"),
		"character_set_connection":                  str(scopeBoth, "utf8mb4"),
		"character_set_results":                     str(scopeBoth, "utf8mb4"),
		"collation_connection":                      str(scopeBoth, "utf8mb4_0900_ai_ci"),
		"character_set_system":                      ro(kindString, "utf8mb3"),
		"default_collation_for_utf8mb4":             str(scopeBoth, "utf8mb4_0900_ai_ci"),
		"lower_case_table_names":                    ro(kindInt, "0"),
		"sql_mode":                                  str(scopeBoth, sqlMode80),
		"max_allowed_packet":                        integer(scopeBoth, 67108864),
		"autocommit":                                boolean(scopeBoth, true),
		"transaction_isolation":                     str(scopeBoth, "REPEATABLE-READ"),
		"read_only":                                 boolean(scopeGlobal, false),
		"super_read_only":                           boolean(scopeGlobal, false),
		"explicit_defaults_for_timestamp":           boolean(scopeBoth, true),
		"performance_schema":                        ro(kindBool, "ON"),
		"wait_timeout":                              integer(scopeBoth, 28800),
		"interactive_timeout":                       integer(scopeBoth, 28800),
		"net_write_timeout":                         integer(scopeBoth, 60),
		"net_read_timeout":                          integer(scopeBoth, 30),
		"require_secure_transport":                  boolean(scopeGlobal, false),
		"tls_version":                               ro(kindString, "TLSv1.2,TLSv1.3"),
		"binlog_transaction_compression_level_zstd": integer(scopeBoth, 3),
	}
	if p.atLeast(8, 0, 27) {
		v["authentication_policy"] = str(scopeGlobal, "*,,")
	}
	if !p.atLeast(8, 4, 0) {
		// Removed in 8.4.
		v["default_authentication_plugin"] = ro(kindString, "caching_sha2_password")
		v["log_slave_updates"] = ro(kindBool, "ON")
		v["have_ssl"] = ro(kindString, "YES")
	}
	return v
}

// boolWord reads a value a boolean variable may be set to.
func boolWord(s string) (string, bool) {
	switch strings.ToUpper(s) {
	case "1", "ON", "TRUE":
		return "ON", true
	case "0", "OFF", "FALSE":
		return "OFF", true
	}
	return "", false
}
