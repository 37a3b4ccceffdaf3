package binlog

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/internal/mysqlauth"
	"github.com/braid-cdc/braid/internal/sqlutf8"
	"github.com/braid-cdc/braid/spec"
)

// serverInfo is what the reader learns about a source before it streams.
type serverInfo struct {
	flavor   string // mysql.MariaDBFlavor or mysql.MySQLFlavor
	version  string
	location *time.Location // the server's time zone, for TIMESTAMP values
	fullMeta bool           // binlog_row_metadata=FULL
	// compressed: MariaDB compresses binlog events (log_bin_compress).
	compressed bool
}

// handshakeTimeout bounds each step of reaching a source before braid
// streams from it: the TCP connect and the MySQL handshake together, then
// the first queries (inspect) — and CheckSource as a whole. A listener that
// accepts and never answers (a wrong port, a proxy without a backend, a
// stalled server) would otherwise hold the caller as long as TCP lets it:
// POST /v1/destinations hung for over 90 s. A variable so that tests can
// shorten it.
var handshakeTimeout = 15 * time.Second

// dial opens a plain SQL connection to the source, its TCP connect and
// handshake bounded by handshakeTimeout and ctx, turning driver errors into
// braid's one-line errors. The connection it returns has no deadline.
func (p *Reader) dial(ctx context.Context) (*client.Conn, error) {
	c, stop, err := p.dialUntil(ctx, time.Now().Add(handshakeTimeout))
	if err != nil {
		return nil, err
	}
	stop()
	return c, nil
}

// dialUntil opens a plain SQL connection to the source whose TCP connect
// and MySQL handshake end by deadline, or when ctx ends. The connection
// keeps both bounds until the caller calls stop, which clears them: so the
// caller's first queries can share them.
func (p *Reader) dialUntil(ctx context.Context, deadline time.Time) (c *client.Conn, stop func(), err error) {
	if addrs := p.spec.Addresses(); len(addrs) > 1 {
		return p.dialFirst(ctx, deadline, addrs)
	}
	tlsCfg, err := p.tlsConfig()
	if err != nil {
		return nil, nil, err
	}
	var (
		conn     net.Conn
		guard    *mysqlauth.Conn
		stopCtx  = func() bool { return true }
		tcpReady bool
	)
	dialer := func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := net.Dialer{Deadline: deadline}
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tcpReady = true
		// go-mysql reads the handshake without a deadline of its own
		// (it sets one only with a ReadTimeout option, per read): this one
		// bounds the whole handshake.
		nc.SetDeadline(deadline)
		stopCtx = context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
		conn = nc
		if tlsCfg != nil {
			// The handshake's TLS hides the authentication from a
			// guard; the server proved its certificate instead (spec:
			// a referenced password needs verify-ca or verify-identity).
			return nc, nil
		}
		// No TLS: the server must not have the password in clear.
		guard = mysqlauth.Guard(nc)
		return guard, nil
	}
	var opts []client.Option
	if tlsCfg != nil {
		opts = append(opts, func(c *client.Conn) error { c.SetTLSConfig(tlsCfg); return nil })
	}
	// A utf8mb4 session: names and values arrive as the server stores them.
	c, err = sqlutf8.Connect(ctx, p.spec.Address, p.spec.User, p.spec.Password, "", dialer, opts...)
	if err != nil {
		stopCtx()
		if conn != nil {
			conn.Close() // go-mysql closes it on most failures; twice is harmless
		}
		if guard != nil && guard.Refused() != nil {
			return nil, nil, p.clearTextError(guard.Refused())
		}
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("%w: source %s: connect to %s: %w", ErrUnreachable, p.spec.Name, p.spec.Address, ctx.Err())
		}
		if terr := p.tlsError(err); terr != nil {
			return nil, nil, terr
		}
		// go-mysql reports a read that timed out as ErrBadConn: the
		// clock tells.
		if tcpReady && (isTimeout(err) || !time.Now().Before(deadline)) {
			return nil, nil, fmt.Errorf("%w: source %s: %s accepted the connection but did not complete the MySQL handshake within %v: "+
				"check that the address is the MySQL or MariaDB port (not a proxy without a backend or another service) and that the server is not stalled",
				ErrUnreachable, p.spec.Name, p.spec.Address, handshakeTimeout)
		}
		return nil, nil, p.connError(err)
	}
	return c, func() {
		stopCtx()
		conn.SetDeadline(time.Time{})
	}, nil
}

// dialFirst is dialUntil for a Reader whose spec lists several
// addresses (Check, CheckPosition, OpenSnapshot build such throwaway
// Readers; a streaming Reader holds one address at a time): it connects
// to the first listed that answers, each given an equal share of the time
// left, and sets the spec's address to it, so that later messages name
// it. None answering is every address's error.
func (p *Reader) dialFirst(ctx context.Context, deadline time.Time, addrs []string) (*client.Conn, func(), error) {
	var errs []error
	for i, a := range addrs {
		p.spec.Address = a
		share := time.Until(deadline) / time.Duration(len(addrs)-i)
		c, stop, err := p.dialUntil(ctx, time.Now().Add(share))
		if err == nil {
			return c, stop, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	p.spec.Address = strings.Join(addrs, ",")
	return nil, nil, errors.Join(errs...)
}

// tlsConfig is the TLS configuration of every connection to the source
// (nil: none), from its spec's tls block.
func (p *Reader) tlsConfig() (*tls.Config, error) {
	if p.spec.TLS == nil {
		return nil, nil
	}
	cfg, err := p.spec.TLS.Config(p.spec.Address)
	if err != nil {
		return nil, fatal{fmt.Errorf("%w: source %s (%s): %v", ErrTLS, p.spec.Name, p.spec.Address, err)}
	}
	return cfg, nil
}

// tlsError words a connection that failed in TLS: the server's
// certificate not trusted, or no TLS offered. Fatal: a retry meets the
// same certificate. nil when err is something else.
func (p *Reader) tlsError(err error) error {
	var (
		unknownCA *x509.UnknownAuthorityError
		badName   x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
		alert     tls.AlertError
	)
	switch {
	case errors.As(err, &unknownCA), errors.As(err, &verify), errors.As(err, &invalid):
		return fatal{fmt.Errorf("%w: source %s (%s): the server's certificate is not trusted (%v): give as tls.ca the CA that signed it, or check tls.mode",
			ErrTLS, p.spec.Name, p.spec.Address, rootCause(err))}
	case errors.As(err, &badName):
		return fatal{fmt.Errorf("%w: source %s (%s): the server's certificate does not name this host (%v): connect by a name the certificate holds, or set tls.mode to verify-ca",
			ErrTLS, p.spec.Name, p.spec.Address, badName.Error())}
	case errors.As(err, &alert):
		return fatal{fmt.Errorf("%w: source %s (%s): the server refused the TLS handshake (%v): check tls.cert and tls.key against what the server requires",
			ErrTLS, p.spec.Name, p.spec.Address, alert)}
	case p.spec.TLS != nil && strings.Contains(err.Error(), "does not support TLS"):
		return fatal{fmt.Errorf("%w: source %s (%s): the server does not offer TLS: start it with ssl-cert and ssl-key, or leave tls out of the source",
			ErrTLS, p.spec.Name, p.spec.Address)}
	}
	return nil
}

// clearTextError is the error of a connection mysqlauth refused because
// the server asked for the password in a form it could read: fatal, as a
// retry meets the same server.
func (p *Reader) clearTextError(refused error) error {
	user := p.spec.User
	if user == "" {
		user = spec.DefaultUser
	}
	return fatal{fmt.Errorf("%w: source %s (%s): %w: check that the address is the source's own, and give user %q an authentication "+
		"plugin that proves the password without sending it (mysql_native_password, ed25519, or caching_sha2_password once the server has cached it)",
		ErrClearText, p.spec.Name, p.spec.Address, refused, user)}
}

// isTimeout tells whether err is a deadline passing (a net.Error's Timeout).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded)
}

// queryError words a failed query of the first ones braid sends a source,
// saying what to check when the server did not answer in time.
func (p *Reader) queryError(what string, err error) error {
	if isTimeout(err) {
		return fmt.Errorf("%w: source %s (%s): %s: no answer within %v: check that the server is not stalled or overloaded",
			ErrUnreachable, p.spec.Name, p.spec.Address, what, handshakeTimeout)
	}
	return fmt.Errorf("binlog: source %s (%s): %s: %v", p.spec.Name, p.spec.Address, what, err)
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

// inspect reads the server's settings, within handshakeTimeout, and refuses
// a server braid cannot read correctly: every problem at once, one line
// each. The warnings are logged, and the report kept for Report.
func (p *Reader) inspect(c *client.Conn) (serverInfo, error) {
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	defer c.SetDeadline(time.Time{})
	info, rep, err := p.readSettings(c)
	p.statsMu.Lock()
	p.report = rep
	p.statsMu.Unlock()
	if err != nil {
		return info, err
	}
	if err := rep.Problems(); err != nil {
		return info, fatal{err}
	}
	p.logWarnings(rep)
	return info, nil
}

// logWarnings logs each setting of rep braid honours with a consequence.
func (p *Reader) logWarnings(rep SourceReport) {
	for _, w := range rep.Warnings() {
		p.log.Warn(w.Name+" is "+shown(w.Value)+": "+w.Note, w.Name, w.Value) // the logger names the source
	}
}

// Report is the start-up check of the reader's source as its last
// connection found it (zero before the first). Safe for concurrent use.
func (p *Reader) Report() SourceReport {
	p.statsMu.Lock()
	defer p.statsMu.Unlock()
	return p.report
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

// masterPosition is the server's current end of binlog, asked in the
// spelling the version c's server announced understands (statusStatement).
func masterPosition(c *client.Conn) (change.Position, error) {
	pos, _, err := masterStatus(c)
	return pos, err
}

// masterStatus is the server's end of binlog and, on MySQL, its
// Executed_Gtid_Set there ("" on MariaDB, which has no such column).
func masterStatus(c *client.Conn) (change.Position, string, error) {
	stmt := connVersion(c).statusStatement()
	r, err := c.Execute(stmt)
	if err != nil {
		return change.Position{}, "", fmt.Errorf("%s: %w", stmt, err)
	}
	if r.RowNumber() == 0 {
		return change.Position{}, "", fmt.Errorf("%s returned nothing: is log_bin on?", stmt)
	}
	f, _ := r.GetString(0, 0)
	pos, _ := r.GetUint(0, 1)
	set, _ := r.GetStringByName(0, "Executed_Gtid_Set")
	return change.Position{File: strings.Clone(f), Pos: uint32(pos)}, strings.Clone(set), nil
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

// CheckSource connects to a source as a destination's reader would and
// checks that braid can read it (reachable, credentials accepted, and
// every setting braid relies on: Check); it returns the server's current
// end of binlog. Its error holds every problem of the source, one line
// each. The cluster uses it to refuse a spec with an unusable shard before
// storing it, and to pin a `latest` start to a position.
//
// It takes handshakeTimeout (15 s) at most in all, less if ctx ends first:
// a source that accepts connections and never answers fails with an error
// (wrapping ErrUnreachable) naming the source and its address.
func CheckSource(ctx context.Context, src spec.Source) (change.Position, error) {
	rep := Check(ctx, src)
	return rep.Pos, rep.Problems()
}

// CheckPosition connects to a source and checks that its binlog still
// holds pos (its file is not purged): a replay from a cursor or from the
// spec's start fails at once, with an error wrapping ErrPurged that names
// the oldest binlog left, instead of after its reader has started.
func CheckPosition(ctx context.Context, src spec.Source, pos change.Position) error {
	return checkHolds(ctx, src, pos, nil, false)
}

// CheckResume is CheckPosition for a cursor that names the server whose
// binlog pos is in: the same server answering is checked as
// CheckPosition does; another is left to the reader, which resumes there
// by GTID after checking what it holds and purged.
func CheckResume(ctx context.Context, src spec.Source, pos change.Position, server *change.Server) error {
	return checkHolds(ctx, src, pos, server, true)
}

// checkHolds is CheckPosition, and with identified CheckResume: a server
// other than server passes, as does a zero pos.
func checkHolds(ctx context.Context, src spec.Source, pos change.Position, server *change.Server, identified bool) error {
	if addrs := src.Addresses(); len(addrs) > 1 {
		// One of several servers: the reader reads whichever holds
		// the position (servers.go); the check passes when one does.
		var errs []error
		for _, a := range addrs {
			one := src
			one.Address = a
			err := checkHolds(ctx, one, pos, server, identified)
			if err == nil {
				return nil
			}
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
		}
		return errors.Join(errs...)
	}
	pw, err := src.ResolvePassword()
	if err != nil {
		return err
	}
	src.Password, src.PasswordFile, src.PasswordEnv = pw, "", ""
	p := &Reader{spec: src, log: slog.New(slog.DiscardHandler)}
	c, stop, err := p.dialUntil(ctx, time.Now().Add(handshakeTimeout))
	if err != nil {
		return err
	}
	defer c.Close()
	defer stop()
	if identified {
		p.info.flavor = mysql.MySQLFlavor
		if connVersion(c).mariadb {
			p.info.flavor = mysql.MariaDBFlavor
		}
		a, err := p.identify(c)
		if err != nil {
			return err
		}
		if !a.server.Same(server) || pos.IsZero() {
			return nil
		}
	}
	files, err := binlogFiles(c)
	if err != nil {
		return p.queryError("list its binlogs", err)
	}
	if err := p.checkNotPurged(files, pos); err != nil {
		return errors.Unwrap(err) // not fatal{}: the caller decides
	}
	return nil
}

// watch runs beside Run's reading until ctx ends. Every progressEvery,
// unless a heartbeat came since the last time (it carries the server's
// position), it asks the server for its end of binlog on a connection of
// its own, so that Stats can tell a reader that is behind; and while the
// reader is behind by progressEvery or more, it logs the catch-up's
// progress, then one line once it has caught up.
func (p *Reader) watch(ctx context.Context) {
	t := time.NewTicker(progressEvery)
	defer t.Stop()
	var (
		c     *client.Conn
		cAddr string // the address c is connected to
	)
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	last, lastAt := p.Stats(), time.Now()
	var catchUpSince time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		s := p.Stats()
		if !s.Connected {
			// Down: the reconnect attempts' lines say so.
			last, lastAt = s, now
			continue
		}
		if !s.HeartbeatAt.After(lastAt) {
			if pos, err := p.serverPosition(ctx, &c, &cAddr); err == nil {
				p.setServer(pos, now, s.ReadPos)
				s = p.Stats()
			}
		}
		lag, _, behind := s.Lag(now)
		switch {
		case behind && lag >= progressEvery:
			if catchUpSince.IsZero() {
				catchUpSince = lastAt
			}
			rate := float64(s.Rows-last.Rows) / now.Sub(lastAt).Seconds()
			p.log.Info("catching up", "pos", s.ReadPos.String(), "server_pos", s.ServerPos.String(),
				"lag", lag.Round(100*time.Millisecond), "rows_per_s", int64(rate))
		case !catchUpSince.IsZero() && (!behind || lag < progressEvery):
			p.log.Info("caught up", "pos", s.ReadPos.String(), "took", now.Sub(catchUpSince).Round(time.Second))
			catchUpSince = time.Time{}
		}
		last, lastAt = s, now
	}
}

// serverPosition asks the server for its end of binlog on *c, opening it
// first when nil or connected to another address than the reader's now
// (*addr), and closing it (to nil) when the query fails. The query
// is bounded by handshakeTimeout and ctx.
func (p *Reader) serverPosition(ctx context.Context, c **client.Conn, addr *string) (change.Position, error) {
	p.statsMu.Lock()
	src := p.spec // the address moves on a switch of servers (setAddress)
	p.statsMu.Unlock()
	if *c != nil && *addr != src.Address {
		(*c).Close() // a server the reader no longer reads
		*c = nil
	}
	if *c == nil {
		q := &Reader{spec: src, log: p.log}
		conn, err := q.dial(ctx)
		if err != nil {
			return change.Position{}, err
		}
		*c, *addr = conn, src.Address
	}
	conn := *c
	conn.SetDeadline(time.Now().Add(handshakeTimeout))
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	pos, err := masterPosition(conn)
	stop()
	conn.SetDeadline(time.Time{})
	if err != nil {
		conn.Close()
		*c = nil
	}
	return pos, err
}
