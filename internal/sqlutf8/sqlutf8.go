package sqlutf8

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	driver "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
)

// Charset is the MySQL character set of every session braid opens.
const Charset = "utf8mb4"

// Collation is the collation braid asks for in the MySQL handshake:
// utf8mb4_general_ci, id 45, the one utf8mb4 collation every MySQL (since
// 5.5.3) and every MariaDB knows. It only decides how the session compares
// literals with each other; a column's own collation still decides
// comparisons with the column.
const Collation = "utf8mb4_general_ci"

// setNames makes the session's character set utf8mb4, whatever the
// handshake gave it.
const setNames = "SET NAMES " + Charset

// dialTimeout bounds the TCP connect of Connect's default dialer, as
// go-mysql's client.Connect does.
const dialTimeout = 10 * time.Second

// Connect opens a go-mysql connection to addr through dialer (nil: TCP,
// connecting within 10 s) with a utf8mb4 session (see the package's
// invariants); opts apply as they do to client.ConnectWithDialer. A
// failing SET NAMES closes the connection.
func Connect(ctx context.Context, addr, user, password, db string, dialer client.Dialer, opts ...client.Option) (*client.Conn, error) {
	if dialer == nil {
		dialer = (&net.Dialer{Timeout: dialTimeout}).DialContext
	}
	opts = append([]client.Option{func(c *client.Conn) error { return c.SetCollation(Collation) }}, opts...)
	c, err := client.ConnectWithDialer(ctx, "", addr, user, password, db, dialer, opts...)
	if err != nil {
		return nil, err
	}
	if err := SetNames(c); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// SetNames makes c's session utf8mb4. It is for connections braid does not
// dial itself (go-mysql's BinlogSyncerConfig.Option): go-mysql's own
// SetCharset is a no-op there, as it believes the session utf8mb4 already.
func SetNames(c *client.Conn) error {
	r, err := c.Execute(setNames)
	if err != nil {
		return fmt.Errorf("set the session's character set to %s: %w", Charset, err)
	}
	r.Close()
	return nil
}

// MySQLDriver makes every connection of a go-sql-driver pool built from
// cfg utf8mb4: the handshake asks for Collation and each new connection
// sends SET NAMES utf8mb4 COLLATE Collation.
func MySQLDriver(cfg *driver.Config) error {
	return cfg.Apply(driver.Charset(Charset, Collation))
}

// Postgres makes every connection of cfg speak UTF-8 (client_encoding
// UTF8): PostgreSQL converts text between the database's encoding and the
// client's, and a role's or database's client_encoding default (LATIN1,
// SQL_ASCII, ...) would otherwise decide how braid's values are read.
func Postgres(cfg *pgx.ConnConfig) {
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["client_encoding"] = "UTF8"
}
