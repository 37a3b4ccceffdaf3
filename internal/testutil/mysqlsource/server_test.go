package mysqlsource_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/braid-cdc/braid/internal/testutil/mysqlsource"
)

// versions are the three personalities braid must read.
var versions = []string{mysqlsource.Version80, mysqlsource.Version84, mysqlsource.Version9}

// shopFiles are two binlog files: binlog.000001 holds GTIDs 119 (CREATE
// TABLE shop.t) and 120 (a transaction without rows, at pos120) after
// PREVIOUS_GTIDS :1-118 and ends with a ROTATE; binlog.000002 holds 121
// (ALTER TABLE).
func shopFiles(t testing.TB) (first, second *binlogFile, pos120 uint32) {
	u := mustUUID(t, sourceUUID)
	first = newBinlogFile("8.0.40").previousGTIDs(classicSet(u, 118)).
		transaction(119, "shop", "CREATE TABLE t (id int NOT NULL, PRIMARY KEY (id))")
	pos120 = first.size()
	first.transaction(120, "", "BEGIN").xid(7).rotate("binlog.000002")
	second = newBinlogFile("8.0.40").previousGTIDs(classicSet(u, 120)).
		transaction(121, "shop", "ALTER TABLE t ADD COLUMN note varchar(20)")
	return first, second, pos120
}

// shopTable is shop.t after GTID 119, as the catalog describes it.
var shopTable = mysqlsource.Table{
	Name:    "t",
	Columns: []mysqlsource.Column{{Name: "id", Type: "int"}, {Name: "note", Type: "varchar(20)", Nullable: true}},
	Indexes: []mysqlsource.Index{{Name: "PRIMARY", Unique: true, Columns: []mysqlsource.IndexPart{{Column: "id"}}}},
	Rows:    [][]any{{int64(1), "a"}, {int64(2), nil}, {int64(3), "c"}, {int64(10), "j"}},
}

// startShop starts a server of version with shopFiles and shop.t; tail
// builds on binlog.000002, for events to Append.
func startShop(t testing.TB, version string) (s *mysqlsource.Server, tail *binlogFile) {
	t.Helper()
	s = mysqlsource.Start(t, mysqlsource.Config{Version: version, ServerUUID: sourceUUID})
	first, second, _ := shopFiles(t)
	if err := s.AddFile("binlog.000001", first.bytes()); err != nil {
		t.Fatal(err)
	}
	if err := s.AddFile("binlog.000002", second.bytes()); err != nil {
		t.Fatal(err)
	}
	s.PutSchema(mysqlsource.Schema{Name: "shop"})
	s.PutTable("shop", shopTable)
	return s, second
}

// appendTransaction appends a transaction to tail and the server's last
// file.
func appendTransaction(t testing.TB, s *mysqlsource.Server, tail *binlogFile, gno int64, db, sql string) {
	t.Helper()
	before := tail.size()
	tail.transaction(gno, db, sql)
	if err := s.Append(tail.bytes()[before:]); err != nil {
		t.Fatal(err)
	}
}

func connect(t testing.TB, s *mysqlsource.Server, opts ...client.Option) *client.Conn {
	t.Helper()
	c, err := client.Connect(s.Addr(), "root", "", "", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func exec(t testing.TB, c *client.Conn, q string) *mysql.Result {
	t.Helper()
	r, err := c.Execute(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return r
}

// myErr returns err's MySQL error code and message, failing when it is
// not one.
func myErr(t testing.TB, err error) (uint16, string) {
	t.Helper()
	var me *mysql.MyError
	if !errors.As(err, &me) {
		t.Fatalf("want a MySQL error, got %v", err)
	}
	return me.Code, me.Message
}

func str(r *mysql.Result, row, col int) string {
	s, _ := r.GetString(row, col)
	return s
}

// TestSettingsPerVersion: the query braid reads its settings with, the
// binlog status statement of each version (8.4 refuses SHOW MASTER
// STATUS with MySQL's parse error), SHOW BINARY LOGS, a variable a
// MariaDB has and MySQL not, and settings a test changes.
func TestSettingsPerVersion(t *testing.T) {
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			s, _ := startShop(t, v)
			c := connect(t, s)
			r := exec(t, c, "SELECT @@version, @@log_bin, @@binlog_format, @@binlog_row_image, @@global.time_zone, @@system_time_zone, TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), NOW())")
			got := []string{str(r, 0, 0), str(r, 0, 1), str(r, 0, 2), str(r, 0, 3), str(r, 0, 4), str(r, 0, 5), str(r, 0, 6)}
			want := []string{v, "1", "ROW", "FULL", "SYSTEM", "UTC", "0"}
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("settings = %q, want %q", got, want)
			}
			if name := string(r.Fields[0].Name); name != "@@version" {
				t.Errorf("column named %q, want @@version as MySQL names it", name)
			}
			r = exec(t, c, "SELECT @@collation_server, @@binlog_row_metadata, @@gtid_mode, @@server_uuid, @@lower_case_table_names")
			if got := []string{str(r, 0, 0), str(r, 0, 1), str(r, 0, 2), str(r, 0, 3), str(r, 0, 4)}; strings.Join(got, "|") != "utf8mb4_0900_ai_ci|MINIMAL|ON|"+sourceUUID+"|0" {
				t.Errorf("variables = %q", got)
			}
			if _, err := c.Execute("SELECT @@log_bin_compress"); err == nil {
				t.Error("SELECT @@log_bin_compress (MariaDB's) succeeded")
			} else if code, msg := myErr(t, err); code != mysql.ER_UNKNOWN_SYSTEM_VARIABLE || msg != "Unknown system variable 'log_bin_compress'" {
				t.Errorf("SELECT @@log_bin_compress: %d %s", code, msg)
			}

			const executed = sourceUUID + ":1-121"
			end := func(q string) {
				t.Helper()
				r := exec(t, c, q)
				if r.RowNumber() != 1 || str(r, 0, 0) != "binlog.000002" || str(r, 0, 4) != executed {
					t.Errorf("%s = %v", q, r.Values)
				}
				if pos, _ := r.GetUint(0, 1); pos != uint64(fileSize(t, s)) {
					t.Errorf("%s: position %d", q, pos)
				}
			}
			refused := func(q, near string) {
				t.Helper()
				_, err := c.Execute(q)
				if err == nil {
					t.Fatalf("%s succeeded on %s", q, v)
				}
				code, msg := myErr(t, err)
				if code != mysql.ER_PARSE_ERROR || !strings.Contains(msg, "near '"+near+"' at line 1") {
					t.Errorf("%s: %d %s", q, code, msg)
				}
			}
			if v == mysqlsource.Version80 {
				end("SHOW MASTER STATUS")
				refused("SHOW BINARY LOG STATUS", "LOG STATUS")
			} else {
				refused("SHOW MASTER STATUS", "MASTER STATUS")
				end("SHOW BINARY LOG STATUS")
			}

			r = exec(t, c, "SHOW BINARY LOGS")
			if r.RowNumber() != 2 || str(r, 0, 0) != "binlog.000001" || str(r, 1, 0) != "binlog.000002" || str(r, 0, 2) != "No" {
				t.Errorf("SHOW BINARY LOGS = %v", r.Values)
			}
			r = exec(t, c, "SHOW GLOBAL VARIABLES LIKE 'BINLOG_CHECKSUM'")
			if str(r, 0, 0) != "binlog_checksum" || str(r, 0, 1) != "CRC32" {
				t.Errorf("SHOW GLOBAL VARIABLES LIKE 'BINLOG_CHECKSUM' = %v", r.Values)
			}

			if err := s.SetVariable("binlog_row_image", "MINIMAL"); err != nil {
				t.Fatal(err)
			}
			exec(t, c, "SET SESSION time_zone = '+02:00'")
			r = exec(t, c, "SELECT @@binlog_row_image, TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), NOW())")
			if str(r, 0, 0) != "MINIMAL" || str(r, 0, 1) != "7200" {
				t.Errorf("after SetVariable and SET time_zone: %v", r.Values)
			}
			if _, err := c.Execute("SET GLOBAL log_bin = OFF"); err == nil {
				t.Error("SET GLOBAL log_bin succeeded: it is read-only")
			} else if code, _ := myErr(t, err); code != mysql.ER_INCORRECT_GLOBAL_LOCAL_VAR {
				t.Errorf("SET GLOBAL log_bin: error %d", code)
			}

			if _, err := c.Execute("INSERT INTO shop.t VALUES (4, 'd')"); err == nil {
				t.Error("INSERT succeeded: the server executes nothing")
			} else if code, _ := myErr(t, err); code != mysql.ER_NOT_SUPPORTED_YET {
				t.Errorf("INSERT: error %d, want %d", code, mysql.ER_NOT_SUPPORTED_YET)
			}
			if u := s.Unknown(); len(u) != 1 || u[0] != "INSERT INTO shop.t VALUES (4, 'd')" {
				t.Errorf("Unknown() = %q", u)
			}
		})
	}
}

// fileSize is the size of the server's last binlog file.
func fileSize(t testing.TB, s *mysqlsource.Server) uint32 {
	_, pos := s.End()
	return pos
}

// TestCatalogQueries: what braid's schema load, its information_schema
// fallback and its snapshot send, answered from the catalog in MySQL's
// spelling.
func TestCatalogQueries(t *testing.T) {
	s, _ := startShop(t, mysqlsource.Version84)
	c := connect(t, s)
	exec(t, c, "SET SESSION sql_mode = ''")

	r := exec(t, c, "SELECT schema_name, default_character_set_name FROM information_schema.schemata")
	found := false
	for i := range r.RowNumber() {
		if str(r, i, 0) == "shop" && str(r, i, 1) == "utf8mb4" {
			found = true
		}
	}
	if !found {
		t.Errorf("SCHEMATA has no shop utf8mb4: %v", r.Values)
	}
	if name := string(r.Fields[0].Name); name != "SCHEMA_NAME" {
		t.Errorf("column named %q, want SCHEMA_NAME (MySQL 8's views name their columns in upper case)", name)
	}

	r = exec(t, c, "SELECT table_schema, table_name FROM information_schema.tables WHERE table_type IN ('BASE TABLE', 'SYSTEM VERSIONED')")
	if r.RowNumber() != 1 || str(r, 0, 0) != "shop" || str(r, 0, 1) != "t" {
		t.Errorf("TABLES = %v", r.Values)
	}

	r = exec(t, c, "SHOW CREATE TABLE `shop`.`t`")
	want := "CREATE TABLE `t` (\n  `id` int NOT NULL,\n  `note` varchar(20) DEFAULT NULL,\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci"
	if str(r, 0, 0) != "t" || str(r, 0, 1) != want {
		t.Errorf("SHOW CREATE TABLE = %q\nwant %q", str(r, 0, 1), want)
	}
	if _, err := c.Execute("SHOW CREATE TABLE `shop`.`nope`"); err == nil {
		t.Error("SHOW CREATE TABLE of a missing table succeeded")
	} else if code, msg := myErr(t, err); code != mysql.ER_NO_SUCH_TABLE || msg != "Table 'shop.nope' doesn't exist" {
		t.Errorf("missing table: %d %s", code, msg)
	}

	// braid's information_schema fallback (schema_columns.go), verbatim.
	where := "TABLE_SCHEMA = 'shop' AND TABLE_NAME = 't'"
	r = exec(t, c, "SELECT t.TABLE_TYPE, COALESCE(cs.CHARACTER_SET_NAME, '') FROM information_schema.TABLES t "+
		"LEFT JOIN information_schema.COLLATIONS cs ON cs.COLLATION_NAME = t.TABLE_COLLATION WHERE t.TABLE_SCHEMA = 'shop' AND t.TABLE_NAME = 't'")
	if r.RowNumber() != 1 || str(r, 0, 0) != "BASE TABLE" || str(r, 0, 1) != "utf8mb4" {
		t.Errorf("TABLES join COLLATIONS = %v", r.Values)
	}
	r = exec(t, c, "SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COALESCE(CHARACTER_SET_NAME, ''), COALESCE(GENERATION_EXPRESSION, '') "+
		"FROM information_schema.COLUMNS WHERE "+where+" ORDER BY ORDINAL_POSITION")
	if r.RowNumber() != 2 || str(r, 0, 0) != "id" || str(r, 0, 1) != "int" || str(r, 0, 2) != "NO" || str(r, 0, 3) != "" ||
		str(r, 1, 0) != "note" || str(r, 1, 3) != "utf8mb4" {
		t.Errorf("COLUMNS = %v", r.Values)
	}
	if _, err := c.Execute("SELECT CONSTRAINT_NAME, CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = 'shop' AND TABLE_NAME = 't' AND LEVEL = 'Column'"); err == nil {
		t.Error("CHECK_CONSTRAINTS.LEVEL (MariaDB's) answered")
	} else if code, _ := myErr(t, err); code != mysql.ER_BAD_FIELD_ERROR {
		t.Errorf("CHECK_CONSTRAINTS.LEVEL: error %d, want %d", code, mysql.ER_BAD_FIELD_ERROR)
	}
	r = exec(t, c, "SELECT INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME, COALESCE(SUB_PART, 0) FROM information_schema.STATISTICS WHERE "+where+" AND NON_UNIQUE = 0")
	if r.RowNumber() != 1 || str(r, 0, 0) != "PRIMARY" || str(r, 0, 2) != "id" || str(r, 0, 3) != "0" {
		t.Errorf("STATISTICS = %v", r.Values)
	}

	// A snapshot chunk (snapshot.go's shape) and its estimate (a prepared
	// statement).
	r = exec(t, c, "SELECT `id`, `note` FROM `shop`.`t` WHERE (`id` > 1) AND NOT ((`id` > 3)) ORDER BY `id` LIMIT 10")
	if r.RowNumber() != 2 || str(r, 0, 0) != "2" || r.Values[0][1].Value() != nil || str(r, 1, 1) != "c" {
		t.Errorf("chunk = %v", r.Values)
	}
	r = exec(t, c, "SELECT `id` FROM `shop`.`t` ORDER BY `id` DESC LIMIT 1, 2")
	if r.RowNumber() != 2 || str(r, 0, 0) != "3" || str(r, 1, 0) != "2" {
		t.Errorf("ORDER BY DESC LIMIT 1, 2 = %v", r.Values)
	}
	r, err := c.Execute("SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", "shop", "t")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := r.GetInt(0, 0); r.RowNumber() != 1 || n != 4 {
		t.Errorf("prepared TABLE_ROWS = %v", r.Values)
	}
	if u := s.Unknown(); len(u) != 0 {
		t.Errorf("unknown statements: %q", u)
	}
}

// TestAuthentication: caching_sha2_password's fast path from a warm
// cache, its full authentication over TLS and with the RSA key on a cold
// one, a wrong password, and mysql_native_password where each version
// has it.
func TestAuthentication(t *testing.T) {
	users := []mysqlsource.User{{Name: "repl", Password: "s3cret"}, {Name: "old", Password: "pw", Plugin: mysql.AUTH_NATIVE_PASSWORD}}
	login := func(s *mysqlsource.Server, user, pw string, opts ...client.Option) error {
		c, err := client.Connect(s.Addr(), user, pw, "", opts...)
		if err == nil {
			c.Close()
		}
		return err
	}
	withTLS := func(s *mysqlsource.Server) client.Option {
		return func(c *client.Conn) error { c.SetTLSConfig(s.ClientTLS()); return nil }
	}

	s := mysqlsource.Start(t, mysqlsource.Config{Version: mysqlsource.Version80, Users: users})
	if err := login(s, "repl", "s3cret"); err != nil {
		t.Errorf("fast authentication (warm cache, no TLS): %v", err)
	}
	if err := login(s, "repl", "wrong"); err == nil {
		t.Error("a wrong password logged in")
	} else if code, _ := myErr(t, err); code != mysql.ER_ACCESS_DENIED_ERROR {
		t.Errorf("wrong password: error %d", code)
	}
	if err := login(s, "old", "pw"); err != nil {
		t.Errorf("mysql_native_password on 8.0: %v", err)
	}

	cold := mysqlsource.Start(t, mysqlsource.Config{Version: mysqlsource.Version84, Users: users, ColdAuthCache: true})
	if err := login(cold, "repl", "s3cret", withTLS(cold)); err != nil {
		t.Errorf("full authentication over TLS: %v", err)
	}
	cold.FlushAuthCache()
	if err := login(cold, "repl", "s3cret"); err != nil {
		t.Errorf("full authentication with the RSA key: %v", err)
	}
	if err := login(cold, "old", "pw"); err == nil {
		t.Error("mysql_native_password logged in on 8.4 without --mysql-native-password=ON")
	} else if code, _ := myErr(t, err); code != mysql.ER_PLUGIN_IS_NOT_LOADED {
		t.Errorf("native on 8.4: error %d, want %d", code, mysql.ER_PLUGIN_IS_NOT_LOADED)
	}
	cold.EnableNativePassword()
	if err := login(cold, "old", "pw"); err != nil {
		t.Errorf("mysql_native_password on 8.4 once enabled: %v", err)
	}

	if _, err := mysqlsource.New(mysqlsource.Config{Version: mysqlsource.Version9, Users: users}); err == nil {
		t.Error("a mysql_native_password user on 9.x was accepted")
	}
}

// TestKill: KILL ends another connection, as go-mysql's syncer does to
// the connection it replaces.
func TestKill(t *testing.T) {
	s, _ := startShop(t, mysqlsource.Version84)
	a, b := connect(t, s), connect(t, s)
	exec(t, b, "KILL "+strconv.FormatUint(uint64(a.GetConnectionID()), 10))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if _, err := a.Execute("SELECT 1"); err != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Error("the killed connection still answers")
}

// TestRequireSecureTransport: with require_secure_transport=ON a client
// without TLS is refused with MySQL's error 3159; one with TLS from the
// files TLSFiles writes (the CA, a client certificate) logs in.
func TestRequireSecureTransport(t *testing.T) {
	s := mysqlsource.Start(t, mysqlsource.Config{Version: mysqlsource.Version84, Users: []mysqlsource.User{{Name: "repl", Password: "pw"}}})
	if err := s.SetVariable("require_secure_transport", "ON"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Connect(s.Addr(), "repl", "pw", ""); err == nil {
		t.Fatal("a client without TLS logged in")
	} else if code, msg := myErr(t, err); code != 3159 || !strings.Contains(msg, "require_secure_transport=ON") {
		t.Errorf("without TLS: %d %s", code, msg)
	}
	caFile, certFile, keyFile := s.TLSFiles(t)
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	conf := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{pair}}
	c, err := client.Connect(s.Addr(), "repl", "pw", "", func(c *client.Conn) error { c.SetTLSConfig(conf); return nil })
	if err != nil {
		t.Fatalf("with TLS and a client certificate: %v", err)
	}
	c.Close()
}

// TestPreparedStatementsRunWhenExecuted: preparing a statement runs
// nothing but a SELECT's or SHOW's dry run (a dry run of PURGE with a
// NULL file failed the prepare); executing it runs it with its
// parameters.
func TestPreparedStatementsRunWhenExecuted(t *testing.T) {
	s, _ := startShop(t, mysqlsource.Version84)
	c := connect(t, s)
	st, err := c.Prepare("PURGE BINARY LOGS TO ?")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if files := s.Files(); len(files) != 2 {
		t.Fatalf("preparing the PURGE ran it: %v", files)
	}
	if _, err := st.Execute("binlog.000002"); err != nil {
		t.Fatal(err)
	}
	if files := s.Files(); len(files) != 1 || files[0] != "binlog.000002" {
		t.Errorf("after executing: %v", files)
	}
	if u := s.Unknown(); len(u) != 0 {
		t.Errorf("unknown statements: %q", u)
	}
}
