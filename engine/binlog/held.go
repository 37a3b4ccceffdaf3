package binlog

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/braid-cdc/braid/spec"
)

// held keeps the connections of a start-up check (CheckAndHold) for the
// sources' readers: a reader whose source was checked a moment ago starts
// on the checked connection (startConn) instead of dialling and asking
// the server's settings again. A connection and three queries fewer
// before each source's first row, each a round trip that on a loaded
// machine waits for the server's thread and then for braid's: the check
// is a fixed cost that a replica client such as go-mysql's canal, which
// checks nothing, does not pay.
//
// The pool is the package's so that no layer between the check and the
// reader (capture, destination, stream, group) carries it. A reader takes
// only a connection checked for exactly its spec (as NewReader normalises
// it, server_id and password included), so a reader of another
// destination or source at the same address never takes one; a
// connection no reader took is closed heldFor after the check, or at the
// check's release.
var held heldPool

// heldPool is the checked connections waiting for their readers. Safe
// for concurrent use; its zero value is empty.
type heldPool struct {
	mu    sync.Mutex
	conns map[string][]*heldConn // by address, as the reader holds it
}

// heldConn is one checked connection and what the check learnt on it.
type heldConn struct {
	c     *client.Conn
	src   spec.Source // as the reader holds it (NewReader), password resolved
	info  serverInfo
	rep   SourceReport
	at    time.Time
	timer *time.Timer // drops it heldFor after the check
}

// heldFor is how long a checked connection stays fit for a reader's
// start: the check runs right before the readers start, and a connection
// idle for longer is closed rather than trusted. A variable for tests
// (SetHeldFor).
var heldFor = 5 * time.Second

// put holds hc for its reader until heldFor has passed.
func (h *heldPool) put(hc *heldConn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conns == nil {
		h.conns = map[string][]*heldConn{}
	}
	h.conns[hc.src.Address] = append(h.conns[hc.src.Address], hc)
	hc.timer = time.AfterFunc(heldFor, func() { h.drop(hc) })
}

// take removes and returns the connection held for a reader of src, nil
// if none is held for that spec or the one held is stale; it is the
// caller's to close.
func (h *heldPool) take(src spec.Source) *heldConn {
	h.mu.Lock()
	i := slices.IndexFunc(h.conns[src.Address], func(hc *heldConn) bool { return reflect.DeepEqual(hc.src, src) })
	if i < 0 {
		h.mu.Unlock()
		return nil
	}
	hc := h.conns[src.Address][i]
	h.remove(hc, i)
	h.mu.Unlock()
	hc.timer.Stop()
	if time.Since(hc.at) > heldFor { // its timer is late
		hc.c.Close()
		return nil
	}
	return hc
}

// drop closes hc unless a reader took it.
func (h *heldPool) drop(hc *heldConn) {
	h.mu.Lock()
	i := slices.Index(h.conns[hc.src.Address], hc)
	if i >= 0 {
		h.remove(hc, i)
	}
	h.mu.Unlock()
	if i >= 0 {
		hc.timer.Stop()
		hc.c.Close()
	}
}

// remove takes hc, the i-th held for its address, out of the pool. The
// caller holds h.mu.
func (h *heldPool) remove(hc *heldConn, i int) {
	rest := slices.Delete(h.conns[hc.src.Address], i, i+1)
	if len(rest) == 0 {
		delete(h.conns, hc.src.Address)
	} else {
		h.conns[hc.src.Address] = rest
	}
}

// CheckAndHold checks every source of srcs at once, as CheckAll does for
// the readers of destination dest (each source's server_id derived as
// its reader's is), and holds the connection of each source that passed
// and has a single address for that reader to start on (NewReader with
// the same Destination and Source, within heldFor). Its reports' Pos and
// GTIDs are not read (the readers read their start). release closes the
// connections no reader took; heldFor after the check they are closed
// anyway.
func CheckAndHold(ctx context.Context, dest string, srcs []spec.Source) (reports []SourceReport, release func()) {
	out := make([]SourceReport, len(srcs))
	kept := make([]*heldConn, len(srcs))
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
			kept[i] = &heldConn{c: c, src: p.spec, info: info, rep: rep, at: time.Now()}
			held.put(kept[i])
		})
	}
	wg.Wait()
	return out, func() {
		for _, hc := range kept {
			if hc != nil {
				held.drop(hc)
			}
		}
	}
}

// startConn returns the connection prepare starts on, the server's
// settings read and judged (inspect): the one the start-up check held
// for the reader's source (CheckAndHold), else a new one to the server
// it prefers (pickStart).
func (p *Reader) startConn(ctx context.Context) (*client.Conn, error) {
	if len(p.addrs) == 1 {
		if hc := held.take(p.spec); hc != nil {
			p.info = hc.info
			p.statsMu.Lock()
			p.report = hc.rep
			p.statsMu.Unlock()
			p.logWarnings(hc.rep)
			return hc.c, nil
		}
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
