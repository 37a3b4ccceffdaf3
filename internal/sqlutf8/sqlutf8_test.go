package sqlutf8_test

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/client"
	driver "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/braid-cdc/braid/internal/sqlutf8"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
)

// sample mixes CJK, Latin-1, a combining mark and 4-byte characters.
const sample = "名前ü😀 e\u0301 𝄞"

// sessionQuery asks what a MySQL session says of its character sets, and the
// hex of sample as it reached the server ("SELECT HEX(literal)").
const sessionQuery = "SELECT @@character_set_client, @@character_set_connection, @@character_set_results, HEX('" + sample + "')"

// wantSession is sessionQuery's answer in a utf8mb4 session.
var wantSession = "utf8mb4 utf8mb4 utf8mb4 " + strings.ToUpper(hex.EncodeToString([]byte(sample)))

// TestMySQLSessions: on a server whose default is latin1, and on one
// that ignores the charset a client asks for in its handshake
// (skip-character-set-client-handshake), a session from each MySQL helper
// is utf8mb4 and sends sample's bytes as they are. go-mysql's own
// handshake (collation 255, which MariaDB does not know) leaves the first
// in latin1, and even go-sql-driver's (collation 45) leaves the second.
func TestMySQLSessions(t *testing.T) {
	servers := []struct {
		name string
		args []string
	}{
		{"latin1 default", []string{"--character-set-server=latin1", "--collation-server=latin1_swedish_ci"}},
		{"handshake ignored", []string{"--character-set-server=latin1", "--collation-server=latin1_swedish_ci", "--skip-character-set-client-handshake"}},
	}
	helpers := []struct {
		name    string
		session func(t *testing.T, addr string) string
	}{
		{"Connect", func(t *testing.T, addr string) string {
			c, err := sqlutf8.Connect(t.Context(), addr, "root", "", "", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			return goMySQLSession(t, c)
		}},
		{"SetNames", func(t *testing.T, addr string) string {
			// As go-mysql's binlog syncer dials, then braid's Option.
			c, err := client.Connect(addr, "root", "", "")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := sqlutf8.SetNames(c); err != nil {
				t.Fatal(err)
			}
			return goMySQLSession(t, c)
		}},
		{"MySQLDriver", func(t *testing.T, addr string) string {
			cfg := driver.NewConfig()
			cfg.User, cfg.Net, cfg.Addr, cfg.InterpolateParams = "root", "tcp", addr, true
			if err := sqlutf8.MySQLDriver(cfg); err != nil {
				t.Fatal(err)
			}
			connector, err := driver.NewConnector(cfg)
			if err != nil {
				t.Fatal(err)
			}
			db := sql.OpenDB(connector)
			defer db.Close()
			var a, b, c, h string
			if err := db.QueryRowContext(t.Context(), sessionQuery).Scan(&a, &b, &c, &h); err != nil {
				t.Fatal(err)
			}
			return strings.Join([]string{a, b, c, h}, " ")
		}},
	}
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			srv := mysqltest.Start(t, mysqltest.WithArgs(s.args...))
			for _, h := range helpers {
				t.Run(h.name, func(t *testing.T) {
					if got := h.session(t, srv.Addr()); got != wantSession {
						t.Errorf("session: %s\nwant     %s", got, wantSession)
					}
				})
			}
		})
	}
}

// goMySQLSession is sessionQuery's answer on c.
func goMySQLSession(t *testing.T, c *client.Conn) string {
	t.Helper()
	r, err := c.Execute(sessionQuery)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var vals []string
	for i := range 4 {
		v, _ := r.GetString(0, i)
		vals = append(vals, v)
	}
	return strings.Join(vals, " ")
}

// TestPostgresSession: in a database whose own client_encoding default is
// LATIN1, a connection configured by Postgres is UTF8, and the server
// reads sample as the UTF-8 it is (in a LATIN1 session each byte would be
// a character of its own: 名 three).
func TestPostgresSession(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test uses PostgreSQL on 127.0.0.1:5432")
	}
	ctx := t.Context()
	admin, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:5432/postgres")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no PostgreSQL on 127.0.0.1:5432: %v", err)
		}
		t.Skipf("no PostgreSQL on 127.0.0.1:5432: %v", err)
	}
	name := fmt.Sprintf("braid_sqlutf8_%d_%d", os.Getpid(), rand.IntN(1e6))
	for _, q := range []string{"CREATE DATABASE " + name + " ENCODING 'UTF8' TEMPLATE template0", "ALTER DATABASE " + name + " SET client_encoding = 'LATIN1'"} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}
	t.Cleanup(func() {
		admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		admin.Close(context.Background())
	})
	cfg, err := pgx.ParseConfig("postgres://postgres@127.0.0.1:5432/" + name)
	if err != nil {
		t.Fatal(err)
	}
	sqlutf8.Postgres(cfg)
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var enc, got string
	if err := c.QueryRow(ctx, "SELECT current_setting('client_encoding'), encode(convert_to($1::text, 'UTF8'), 'hex')", sample).Scan(&enc, &got); err != nil {
		t.Fatal(err)
	}
	if want := hex.EncodeToString([]byte(sample)); enc != "UTF8" || got != want {
		t.Errorf("client_encoding %s, the server read %q as %s, want %s", enc, sample, got, want)
	}
}
