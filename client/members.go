package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/braid-cdc/braid/api/wire"
)

// A client learns the cluster: the nodes given to New are where it
// starts, and any node of a cluster names the live ones (GET
// /v1/cluster/members, which any user may call). Stream asks before its
// first connection and again at every reconnect, in the background, so
// that a consumer given one node's address fails over to the others when
// that node dies. What it learned replaces what it learned before (a node
// that left is no longer tried); the nodes given to New are always kept.
//
// Learned nodes are taken with the scheme of the node that named them
// (a cluster serves its HTTP API alike on every node): an https node's
// list is never a way to send a credential in clear, and the client's CA
// (WithCA) and credential (WithToken) go to every node alike. A node that
// has no such endpoint (braid capture's single server answers 404) has
// nothing to teach, and the client goes on with the nodes it was given.

// nodes is the list of nodes a Client goes to, and the one in use.
type nodes struct {
	given []*url.URL

	mu      sync.Mutex
	learned []string   // the last answer's URLs, as the server wrote them
	all     []*url.URL // given, then learned ones that were not given
	cur     int        // the node in use: all[cur]
}

func newNodes(given []*url.URL) *nodes {
	return &nodes{given: given, all: slices.Clone(given)}
}

// current is the node in use.
func (ns *nodes) current() *url.URL {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	return ns.all[ns.cur]
}

// next moves to the next node, if there are several.
func (ns *nodes) next() {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	ns.cur = (ns.cur + 1) % len(ns.all)
}

// count is how many nodes the client knows.
func (ns *nodes) count() int {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	return len(ns.all)
}

// fromCurrent returns the nodes, the one in use first.
func (ns *nodes) fromCurrent() []*url.URL {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	return append(slices.Clone(ns.all[ns.cur:]), ns.all[:ns.cur]...)
}

// urls returns the nodes' base URLs, given ones first.
func (ns *nodes) urls() []string {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	out := make([]string, len(ns.all))
	for i, u := range ns.all {
		out[i] = u.String()
	}
	return out
}

// learn replaces the learned nodes with us, keeping the node in use in
// use when it is still known; it reports whether the list changed.
func (ns *nodes) learn(us []*url.URL) bool {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	learned := make([]string, len(us))
	for i, u := range us {
		learned[i] = u.String()
	}
	if slices.Equal(learned, ns.learned) {
		return false
	}
	ns.learned = learned
	inUse := ns.all[ns.cur].String()
	all := slices.Clone(ns.given)
	known := map[string]bool{}
	for _, u := range all {
		known[u.String()] = true
	}
	for _, u := range us {
		if !known[u.String()] {
			known[u.String()] = true
			all = append(all, u)
		}
	}
	// A node in use that is gone leaves its place to the one after it.
	cur := ns.cur % len(all)
	for i, u := range all {
		if u.String() == inUse {
			cur = i
		}
	}
	changed := !slices.EqualFunc(all, ns.all, func(a, b *url.URL) bool { return a.String() == b.String() })
	ns.all, ns.cur = all, cur
	return changed
}

// base is the node in use.
func (c *Client) base() *url.URL { return c.nodes.current() }

// nextNode moves to the next node, if there are several.
func (c *Client) nextNode() { c.nodes.next() }

// Nodes returns the base URLs of the nodes the client goes to: those given
// to New, then those it learned from the cluster (Members).
func (c *Client) Nodes() []string { return c.nodes.urls() }

// Members asks the cluster for its live nodes (GET /v1/cluster/members)
// and from then on also goes to them, as Stream does by itself. It asks
// the node in use and, while nodes do not answer (none listens, or one
// says nothing for the idle timeout), the next ones it knows; it does not
// change the node in use. A node's answer other than 200 is an *Error; a
// node that is not part of a cluster (braid capture) answers 404.
func (c *Client) Members(ctx context.Context) (*wire.Members, error) {
	var failed []error
	for _, base := range c.nodes.fromCurrent() {
		m, err := c.members(ctx, base)
		var se *Error
		switch {
		case err == nil:
			if c.nodes.learn(learnable(base, m)) {
				c.log.Info("cluster nodes learned", "node", m.Node, "nodes", strings.Join(c.Nodes(), ","))
			}
			return m, nil
		case errors.As(err, &se):
			return nil, err
		case ctx.Err() != nil:
			return nil, fmt.Errorf("client: %w", err)
		}
		failed = append(failed, err)
	}
	return nil, fmt.Errorf("%w: %w", ErrUnreachable, errors.Join(failed...))
}

// members asks base for the cluster's members, for at most the idle
// timeout.
func (c *Client) members(ctx context.Context, base *url.URL) (*wire.Members, error) {
	ctx, cancel := context.WithTimeout(ctx, c.idleTimeout)
	defer cancel()
	var m wire.Members
	if err := c.do(ctx, http.MethodGet, apiURL(base, nil, "cluster", "members"), &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// learnable returns the members' URLs that the client may go to: valid
// base URLs with the scheme of from, the node that named them.
func learnable(from *url.URL, m *wire.Members) []*url.URL {
	var out []*url.URL
	for _, mb := range m.Members {
		u, err := url.Parse(strings.TrimRight(mb.URL, "/"))
		if err != nil || u.Scheme != from.Scheme || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			continue
		}
		out = append(out, u)
	}
	return out
}

// learnLoop asks the cluster for its members at every kick until ctx
// ends: Stream's goroutine, which kicks it before each connection.
func (c *Client) learnLoop(ctx context.Context, kick <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		}
		if _, err := c.Members(ctx); err != nil && ctx.Err() == nil {
			c.log.Debug("cluster nodes not learned", "err", err)
		}
	}
}
