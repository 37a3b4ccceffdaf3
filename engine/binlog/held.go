package binlog

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/braid-cdc/braid/spec"
)

// Held keeps the connections of a start-up check (CheckAndHold) for the
// sources' readers: a reader whose source was checked a moment ago starts
// on the checked connection (Config.Held) instead of dialling and asking
// the server's settings again. A connection and three queries fewer
// before each source's first row, each a round trip that on a loaded
// machine waits for the server's thread and then for braid's: the check
// is a fixed cost that a replica client such as go-mysql's canal, which
// checks nothing, does not pay.
//
// Safe for concurrent use; the zero or nil Held holds nothing.
type Held struct {
	mu    sync.Mutex
	conns map[string]*heldConn // by source name
	timer *time.Timer          // closes what no reader took after heldFor
}

// heldConn is one checked connection and what the check learnt on it.
type heldConn struct {
	c    *client.Conn
	src  spec.Source // as the reader holds it (NewReader), password resolved
	info serverInfo
	rep  SourceReport
	at   time.Time
}

// heldFor is how long a checked connection stays fit for a reader's
// start: the check runs right before the readers start, and a connection
// idle for longer is left to close rather than trusted.
const heldFor = 5 * time.Second

// CheckAndHold checks every source of srcs at once, as CheckAll does for
// the readers of destination dest (each source's server_id derived as
// its reader's is), and keeps the connection of each source that passed
// and has a single address for that reader to start on. Its reports'
// Pos and GTIDs are not read (the readers read their start). The caller
// closes the Held once the readers have started.
func CheckAndHold(ctx context.Context, dest string, srcs []spec.Source) ([]SourceReport, *Held) {
	out := make([]SourceReport, len(srcs))
	h := &Held{conns: map[string]*heldConn{}}
	var wg sync.WaitGroup
	for i, src := range srcs {
		wg.Go(func() {
			rep := SourceReport{Source: src.Name, Address: src.Address}
			p, err := NewReader(Config{Destination: dest, Source: src})
			if err != nil {
				rep.Err = err
				out[i] = rep
				return
			}
			several := len(p.addrs) > 1
			if several {
				// Checked as Check does, on the first that answers; its
				// reader starts on the one it prefers (pickStart).
				p.spec.Address = strings.Join(p.addrs, ",")
			}
			rep, c, info := p.check(ctx, false)
			out[i] = rep
			if c == nil {
				return
			}
			if rep.Problems() != nil || several {
				c.Close()
				return
			}
			h.mu.Lock()
			h.conns[src.Name] = &heldConn{c: c, src: p.spec, info: info, rep: rep, at: time.Now()}
			h.mu.Unlock()
		})
	}
	wg.Wait()
	h.mu.Lock()
	h.timer = time.AfterFunc(heldFor, h.Close)
	h.mu.Unlock()
	return out, h
}

// take hands p the connection held for its source, if one is held for
// the same spec and fresh enough; it is p's to close.
func (h *Held) take(p *Reader) (*heldConn, bool) {
	if h == nil {
		return nil, false
	}
	h.mu.Lock()
	hc, ok := h.conns[p.spec.Name]
	if ok {
		delete(h.conns, p.spec.Name)
	}
	h.mu.Unlock()
	if !ok {
		return nil, false
	}
	if time.Since(hc.at) > heldFor || len(p.addrs) > 1 || !reflect.DeepEqual(hc.src, p.spec) {
		hc.c.Close()
		return nil, false
	}
	return hc, true
}

// Close closes the connections no reader took; heldFor after
// CheckAndHold they are closed anyway.
func (h *Held) Close() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.timer != nil {
		h.timer.Stop()
	}
	for name, hc := range h.conns {
		hc.c.Close()
		delete(h.conns, name)
	}
}

// startConn returns the connection prepare starts on, the server's
// settings read and judged (inspect): the one the start-up check held
// for the source (Config.Held), else a new one to the server it prefers
// (pickStart).
func (p *Reader) startConn(ctx context.Context) (*client.Conn, error) {
	if hc, ok := p.cfg.Held.take(p); ok {
		p.info = hc.info
		p.statsMu.Lock()
		p.report = hc.rep
		p.statsMu.Unlock()
		p.logWarnings(hc.rep)
		return hc.c, nil
	}
	c, err := p.pickStart(ctx)
	if err != nil {
		return nil, err
	}
	if p.info, err = p.inspect(c); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}
