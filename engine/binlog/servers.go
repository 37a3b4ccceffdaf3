package binlog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/braid-cdc/braid/engine/change"
)

// A source's address may list several servers (spec address: [a, b, c]):
// its primary and replicas, in order of preference. The reader reads one
// of them at a time, p.spec.Address, and moves to another only when it
// loses the one it reads:
//
//   - at the start, the first listed server that answers and is of the
//     kind read_from prefers (primary: writable, read_only=OFF; replica:
//     read_only=ON), else the first that answers;
//   - after a lost connection (broken, or neither event nor heartbeat for
//     the read timeout), the same server again, with backoff, for
//     failover_after; then a pass over the list in order, the lost server
//     last: the first of the preferred kind that passes checkServer (it
//     holds the cursor's GTIDs and has purged none after them; a lagging
//     one is waited for up to failover_after) is read, else the first of
//     the other kind that passes, rather than stopping. A pass in which
//     none passes is retried with backoff; one in which every server
//     refused for good (purged binlogs, no GTIDs, a setting braid cannot
//     read) stops the source with every server's reason.
//
// Each server a pass refuses is logged once per reason, naming the
// server and why (the purged GTIDs, the settings); each switch is one
// line (old and new server, why, how long) and counted in Stats. The
// reader stays on the server it switched to: it does not move back when
// a server of the preferred kind returns, which would make a switch (and
// its wait) out of every flap.

// serverRole tells whether the server behind c is read-only
// (@@read_only: a replica, as failover tools leave them).
func serverRole(c *client.Conn) (readOnly bool, err error) {
	r, err := c.Execute("SELECT @@read_only")
	if err != nil {
		return false, err
	}
	defer r.Close()
	s, _ := r.GetString(0, 0)
	return isOn(s), nil
}

// setAddress makes addrs[i] the address the reader connects to. Under
// statsMu: watch copies the spec from another goroutine (watchSpec).
func (p *Reader) setAddress(i int) {
	p.statsMu.Lock()
	p.cur, p.spec.Address = i, p.addrs[i]
	p.statsMu.Unlock()
}

// probe connects to the address the reader is set to and asks whether
// the server is read-only, bounded by handshakeTimeout and ctx.
func (p *Reader) probe(ctx context.Context) (readOnly bool, err error) {
	c, stop, err := p.dialUntil(ctx, time.Now().Add(handshakeTimeout))
	if err != nil {
		return false, err
	}
	defer c.Close()
	defer stop()
	ro, err := serverRole(c)
	if err != nil {
		return false, p.queryError("read read_only", err)
	}
	return ro, nil
}

// pickStart chooses the server the reader starts on: the first listed
// that answers and is of the kind read_from prefers, else the first that
// answers. It returns a connection to it; none answering is fatal, with
// every address's error.
func (p *Reader) pickStart(ctx context.Context) (*client.Conn, error) {
	if len(p.addrs) < 2 {
		c, err := p.dial(ctx)
		if err != nil {
			return nil, fatal{err}
		}
		return c, nil
	}
	var errs []error
	first, chosen := -1, -1
	for i := range p.addrs {
		p.setAddress(i)
		ro, err := p.probe(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if first < 0 {
			first = i
		}
		if ro == p.wantReplica {
			chosen = i
			break
		}
	}
	if first < 0 {
		p.setAddress(0)
		return nil, fatal{fmt.Errorf("binlog: source %s: none of its servers answers: %w", p.spec.Name, errors.Join(errs...))}
	}
	if chosen < 0 {
		chosen = first
		p.log.Warn("no server of the source is of the kind read_from prefers; reading another until it is lost",
			"read_from", p.readFrom(), "addr", p.addrs[chosen])
	}
	p.setAddress(chosen)
	c, err := p.dial(ctx)
	if err != nil {
		return nil, fatal{err}
	}
	return c, nil
}

// readFrom names the kind of server the reader prefers.
func (p *Reader) readFrom() string {
	if p.wantReplica {
		return "replica"
	}
	return "primary"
}

// connectServer runs before each binlog connection: it settles which
// server to read and prepares the start there (checkServer). With one
// address it is checkServer. With several, the server read last is
// retried until failover_after has passed since it was lost (or it
// refused for good), then the others are tried (pass).
func (p *Reader) connectServer(ctx context.Context) error {
	if len(p.addrs) < 2 {
		return p.checkServer(ctx)
	}
	down := p.live.DownSince
	if down.IsZero() || time.Since(down) < p.failoverAfter {
		prev := p.connServer
		err := p.checkServer(ctx)
		if err == nil || ctx.Err() != nil || !isFatal(err) {
			return err // retried with backoff
		}
		// checkServer took the refused server for the one read.
		p.connServer, p.live.Server = prev, prev
		p.refused(p.spec.Address, err)
		return p.pass(ctx, p.spec.Address+" refused")
	}
	return p.pass(ctx, fmt.Sprintf("lost %s for %v", p.spec.Address, p.failoverAfter))
}

// retryWait is how long Run waits before it connects again: backoff,
// but no later than when failover_after ends for the server lost, so
// that the other servers are tried then, not a doubled backoff after.
func (p *Reader) retryWait(backoff time.Duration) time.Duration {
	down := p.live.DownSince
	if len(p.addrs) < 2 || down.IsZero() {
		return backoff
	}
	if left := time.Until(down.Add(p.failoverAfter)); left > 0 && left < backoff {
		return left
	}
	return backoff
}

// pass tries the source's servers in list order, the one read last at
// the end, and starts on the first that passes checkServer: of the kind
// read_from prefers if one does, else of the other. why says why the
// reader left the server it read, for the switch line.
func (p *Reader) pass(ctx context.Context, why string) error {
	from, prev, start := p.cur, p.connServer, time.Now()
	order := make([]int, 0, len(p.addrs))
	for i := range p.addrs {
		if i != from {
			order = append(order, i)
		}
	}
	order = append(order, from)
	var (
		errs     []error
		refused  = 0 // errs that are for good
		fallback []int
	)
	try := func(i int) bool {
		p.setAddress(i)
		if err := p.settle(ctx, why, prev, start); err != nil {
			// checkServer took the refused server for the one read.
			p.connServer, p.live.Server = prev, prev
			if ctx.Err() != nil {
				return false
			}
			errs = append(errs, err)
			if isFatal(err) {
				refused++
			}
			p.refused(p.addrs[i], err)
			return false
		}
		return true
	}
	for _, i := range order {
		p.setAddress(i)
		ro, err := p.probe(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			errs = append(errs, err)
			p.refused(p.addrs[i], err)
			continue
		}
		if ro != p.wantReplica {
			fallback = append(fallback, i)
			continue
		}
		if try(i) {
			return nil
		}
	}
	for _, i := range fallback {
		if try(i) {
			p.log.Warn("no server of the kind read_from prefers can be read; reading another until it is lost",
				"read_from", p.readFrom(), "addr", p.spec.Address)
			return nil
		}
	}
	p.setAddress(from)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	err := fmt.Errorf("%w: source %s: none of its servers can be read now (%s): %w",
		ErrUnreachable, p.spec.Name, strings.Join(p.addrs, ", "), errors.Join(errs...))
	if refused == len(p.addrs) {
		// Every server answered and refused for good: waiting fixes
		// none of it.
		return fatal{fmt.Errorf("binlog: source %s: every one of its servers refused: %w", p.spec.Name, errors.Join(errs...))}
	}
	return err
}

// settle checks the server at the address the reader is set to, its
// settings and then as checkServer does (of several servers, a lagging
// one is waited for up to failover_after, then the next is tried), for
// a switch from the server prev (why: why the reader left it). A switch
// of servers that checkServer did not log (a reader that has read
// nothing yet finds its place by GTID anywhere) is logged and counted
// here. start is when the pass began, for a reader that had not lost a
// connection yet.
func (p *Reader) settle(ctx context.Context, why string, prev *change.Server, start time.Time) error {
	switches := p.live.Switches
	p.switchWhy = why + "; " + p.spec.Address + " can be read"
	defer func() { p.switchWhy = "" }()
	if err := p.checkSettings(ctx); err != nil {
		return err
	}
	if err := p.checkServer(ctx); err != nil {
		return err
	}
	if p.live.Switches == switches && prev != nil && !prev.Same(p.connServer) {
		down := p.live.DownSince
		if down.IsZero() {
			down = start
		}
		p.log.Warn("source switched servers", "old_server", prev.String(), "new_server", p.connServer.String(),
			"why", p.switchWhy, "took", time.Since(down).Round(time.Millisecond))
		p.live.Switches++
		p.live.LastSwitchAt = time.Now()
	}
	delete(p.refusals, p.spec.Address)
	return nil
}

// checkSettings refuses, for good, a server whose settings braid cannot
// read (the start-up check's problems: binlog off, not ROW, ...).
func (p *Reader) checkSettings(ctx context.Context) error {
	c, stop, err := p.dialUntil(ctx, time.Now().Add(handshakeTimeout))
	if err != nil {
		return err
	}
	defer c.Close()
	defer stop()
	_, rep, err := p.readSettings(c)
	if err != nil {
		return err
	}
	if err := rep.Problems(); err != nil {
		return fatal{err}
	}
	return nil
}

// refused logs that the server at addr cannot be read now, once per
// reason (a pass retried every few seconds would repeat it).
func (p *Reader) refused(addr string, err error) {
	msg := err.Error()
	if p.refusals[addr] == msg {
		return
	}
	p.refusals[addr] = msg
	p.log.Warn("server of the source not read", "addr", addr, "why", oneLine(err), "for_good", isFatal(err))
}
