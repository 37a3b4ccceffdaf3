package mysqlauth_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	driver "github.com/go-sql-driver/mysql"

	"github.com/braid-cdc/braid/internal/mysqlauth"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/internal/testutil/roguemysql"
)

const password = "pw-Zq81-secret"

var asks = map[string]roguemysql.Ask{
	"clear": roguemysql.ClearText, "sha256": roguemysql.SHA256,
	"full": roguemysql.FullAuth, "dialog": roguemysql.Dialog,
}

// checkNothingSent: the rogue server got a handshake response without the
// password and nothing after its request.
func checkNothingSent(t *testing.T, rogue *roguemysql.Server) {
	t.Helper()
	var conns []roguemysql.Conn
	retry.Until(t, 5*time.Second, func() error {
		if conns = rogue.Conns(); len(conns) == 0 {
			return errors.New("no connection reached the rogue server")
		}
		return nil
	})
	for _, c := range conns {
		if bytes.Contains(c.Raw, []byte(password)) {
			t.Errorf("the password reached the server: %q", c.Raw)
		}
		if len(c.After) > 0 {
			t.Errorf("the client answered the server's request: %q", c.After)
		}
	}
}

// TestGoMySQLRefusesClearText: go-mysql, which follows a switch to
// mysql_clear_password and the others, sends nothing over a guarded
// connection, and the error says why.
func TestGoMySQLRefusesClearText(t *testing.T) {
	for name, ask := range asks {
		t.Run(name, func(t *testing.T) {
			rogue := roguemysql.Start(t, ask)
			var w mysqlauth.Watch
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			c, err := client.ConnectWithDialer(ctx, "", rogue.Addr(), "braid", password, "", w.Dial(nil))
			if err == nil {
				c.Close()
				t.Fatal("connected")
			}
			if !errors.Is(w.Err(), mysqlauth.ErrClearText) {
				t.Errorf("the watch has %v; the driver said %v", w.Err(), err)
			}
			checkNothingSent(t, rogue)
		})
	}
}

// TestGoSQLDriverRefusesPublicKey: go-sql-driver refuses clear text
// itself but sends the password encrypted with a key the server supplies
// (sha256_password, caching_sha2_password full authentication): guarded,
// it sends nothing.
func TestGoSQLDriverRefusesPublicKey(t *testing.T) {
	for name, ask := range asks {
		t.Run(name, func(t *testing.T) {
			rogue := roguemysql.Start(t, ask)
			var w mysqlauth.Watch
			cfg := driver.NewConfig()
			cfg.User, cfg.Passwd, cfg.Net, cfg.Addr = "braid", password, "tcp", rogue.Addr()
			cfg.DialFunc = w.Dial(nil)
			cfg.Logger = &driver.NopLogger{}
			connector, err := driver.NewConnector(cfg)
			if err != nil {
				t.Fatal(err)
			}
			db := sql.OpenDB(connector)
			defer db.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			if err := db.PingContext(ctx); err == nil {
				t.Fatal("connected")
			}
			if name != "clear" && name != "dialog" && !errors.Is(w.Err(), mysqlauth.ErrClearText) {
				t.Errorf("the watch has %v", w.Err())
			}
			checkNothingSent(t, rogue)
		})
	}
}

// TestGuardPassesRealServer: a guarded connection logs in to MariaDB
// with a password (mysql_native_password, then client_ed25519 if the
// server has it) and queries through both drivers.
func TestGuardPassesRealServer(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE USER 'nat'@'%' IDENTIFIED BY '"+password+"'")
	users := []string{"nat"}
	if _, err := srv.Conn(t).Execute("INSTALL SONAME 'auth_ed25519'"); err == nil {
		srv.Exec(t, "CREATE USER 'ed'@'%' IDENTIFIED VIA ed25519 USING PASSWORD('"+password+"')")
		users = append(users, "ed")
	} else {
		t.Logf("no ed25519 here: %v", err)
	}
	for _, user := range users {
		var w mysqlauth.Watch
		c, err := client.ConnectWithDialer(t.Context(), "", srv.Addr(), user, password, "", w.Dial(nil))
		if err != nil {
			t.Fatalf("go-mysql as %s: %v", user, err)
		}
		r, err := c.Execute("SELECT CURRENT_USER()")
		if err != nil {
			t.Fatalf("go-mysql as %s: %v", user, err)
		}
		got, _ := r.GetString(0, 0)
		c.Close()
		if !strings.HasPrefix(got, user+"@") {
			t.Errorf("go-mysql: logged in as %s", got)
		}
		cfg := driver.NewConfig()
		cfg.User, cfg.Passwd, cfg.Net, cfg.Addr = user, password, "tcp", srv.Addr()
		cfg.DialFunc = w.Dial(nil)
		connector, err := driver.NewConnector(cfg)
		if err != nil {
			t.Fatal(err)
		}
		db := sql.OpenDB(connector)
		if err := db.QueryRowContext(t.Context(), "SELECT CURRENT_USER()").Scan(&got); err != nil || !strings.HasPrefix(got, user+"@") {
			t.Errorf("go-sql-driver as %s: %q, %v", user, got, err)
		}
		db.Close()
		if w.Err() != nil {
			t.Errorf("%s: refused: %v", user, w.Err())
		}
	}
}
