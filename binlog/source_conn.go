package binlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/braid-cdc/braid/change"
	"github.com/braid-cdc/braid/spec"
)

// serverInfo is what the parser learns about a source before it streams.
type serverInfo struct {
	flavor   string // mysql.MariaDBFlavor or mysql.MySQLFlavor
	version  string
	location *time.Location // the server's time zone, for TIMESTAMP values
	fullMeta bool           // binlog_row_metadata=FULL
	// compressed: MariaDB compresses binlog events (log_bin_compress).
	compressed bool
}

const connectTimeout = 5 * time.Second

// dial opens a plain SQL connection to the source, turning driver errors
// into braid's one-line errors.
func (p *Reader) dial(ctx context.Context) (*client.Conn, error) {
	c, err := client.ConnectWithContext(ctx, p.spec.Address, p.spec.User, p.spec.Password, "", connectTimeout)
	if err != nil {
		return nil, p.connError(err)
	}
	return c, nil
}

// connError classifies a connection failure.
func (p *Reader) connError(err error) error {
	var me *mysql.MyError
	if errors.As(err, &me) && me.Code == mysql.ER_ACCESS_DENIED_ERROR {
		return fatal{fmt.Errorf("%w: source %s (%s): user %q was refused (%s): check user and password in the spec",
			ErrAccessDenied, p.spec.Name, p.spec.Address, p.spec.User, me.Message)}
	}
	if errors.As(err, &me) {
		return fmt.Errorf("binlog: source %s (%s): %s (mysql error %d)", p.spec.Name, p.spec.Address, me.Message, me.Code)
	}
	var ne net.Error
	if errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: source %s: cannot connect to %s (%v): is the server running and the address right?",
			ErrUnreachable, p.spec.Name, p.spec.Address, rootCause(err))
	}
	return fmt.Errorf("%w: source %s: cannot connect to %s: %v", ErrUnreachable, p.spec.Name, p.spec.Address, rootCause(err))
}

// rootCause strips wrappers that repeat the address.
func rootCause(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}

// inspect reads the server's settings and refuses a server braid cannot read
// correctly.
func (p *Reader) inspect(c *client.Conn) (serverInfo, error) {
	var info serverInfo
	r, err := c.Execute("SELECT @@version, @@log_bin, @@binlog_format, @@binlog_row_image, @@global.time_zone, @@system_time_zone, TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), NOW())")
	if err != nil {
		return info, fmt.Errorf("binlog: source %s (%s): read server settings: %v", p.spec.Name, p.spec.Address, err)
	}
	get := func(i int) string { s, _ := r.GetString(0, i); return s }
	info.version = get(0)
	info.flavor = mysql.MySQLFlavor
	if strings.Contains(strings.ToLower(info.version), "mariadb") {
		info.flavor = mysql.MariaDBFlavor
	}
	if logBin := get(1); logBin != "1" && !strings.EqualFold(logBin, "ON") {
		return info, fatal{fmt.Errorf("%w on source %s (%s): start the server with --log-bin (and --binlog-format=ROW)", ErrBinlogDisabled, p.spec.Name, p.spec.Address)}
	}
	if f := get(2); !strings.EqualFold(f, "ROW") {
		return info, fatal{fmt.Errorf("%w on source %s (%s): it is %s; run SET GLOBAL binlog_format=ROW and put binlog_format=ROW in the server's config",
			ErrBinlogFormat, p.spec.Name, p.spec.Address, f)}
	}
	if img := get(3); !strings.EqualFold(img, "FULL") {
		p.log.Warn("binlog_row_image is not FULL: before images of updates and deletes will be partial; set binlog_row_image=FULL on the server",
			"source", p.spec.Name, "binlog_row_image", img)
	}
	info.location = change.ServerLocation(get(4), get(5), get(6))
	// Variables a server may not have; absent means off.
	if r, err := c.Execute("SELECT @@binlog_row_metadata"); err == nil {
		if s, _ := r.GetString(0, 0); strings.EqualFold(s, "FULL") {
			info.fullMeta = true
		}
	}
	if r, err := c.Execute("SELECT @@log_bin_compress"); err == nil {
		if s, _ := r.GetString(0, 0); s == "1" || strings.EqualFold(s, "ON") {
			info.compressed = true
		}
	}
	return info, nil
}

// binlogFiles lists the server's binlog files, oldest first.
func binlogFiles(c *client.Conn) ([]string, error) {
	r, err := c.Execute("SHOW BINARY LOGS")
	if err != nil {
		return nil, err
	}
	files := make([]string, 0, r.RowNumber())
	for i := 0; i < r.RowNumber(); i++ {
		s, _ := r.GetString(i, 0)
		files = append(files, s)
	}
	return files, nil
}

// masterPosition is the server's current end of binlog.
func masterPosition(c *client.Conn) (change.Position, error) {
	r, err := c.Execute("SHOW MASTER STATUS")
	if err != nil {
		return change.Position{}, err
	}
	if r.RowNumber() == 0 {
		return change.Position{}, errors.New("SHOW MASTER STATUS returned nothing")
	}
	f, _ := r.GetString(0, 0)
	pos, _ := r.GetUint(0, 1)
	return change.Position{File: f, Pos: uint32(pos)}, nil
}

// checkNotPurged refuses a start position whose file is gone.
func (p *Reader) checkNotPurged(files []string, pos change.Position) error {
	for _, f := range files {
		if f == pos.File {
			return nil
		}
	}
	oldest := "none"
	if len(files) > 0 {
		oldest = files[0]
	}
	return fatal{fmt.Errorf("%w: source %s (%s): start position %s is no longer on the server (oldest binlog is %s): start from earliest or a later position",
		ErrPurged, p.spec.Name, p.spec.Address, pos, oldest)}
}

// CheckSource connects to a source as a destination's parser would and
// checks that braid can read it (reachable, credentials accepted, binlog
// on, ROW format); it returns the server's current end of binlog. The
// cluster uses it to refuse a spec with an unusable shard before storing
// it, and to pin a `latest` start to a position.
func CheckSource(ctx context.Context, src spec.Source) (change.Position, error) {
	p := &Reader{spec: src, log: slog.New(slog.DiscardHandler)}
	c, err := p.dial(ctx)
	if err != nil {
		return change.Position{}, err
	}
	defer c.Close()
	if _, err := p.inspect(c); err != nil {
		return change.Position{}, err
	}
	pos, err := masterPosition(c)
	if err != nil {
		return change.Position{}, fmt.Errorf("binlog: source %s (%s): read its binlog position: %v", src.Name, src.Address, err)
	}
	return pos, nil
}
