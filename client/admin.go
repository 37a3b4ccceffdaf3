package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/braid-cdc/braid/api/wire"
)

// The admin calls: a cluster node's API (package cluster) for operators,
// the CLI, the demo and the test harnesses. Each goes to the node in use
// and, while nodes cannot be reached at all (nothing listens), on to the
// next of those given to New. A node's answer other than 2xx is an *Error
// carrying its message, and is not retried: any node gives the same answer.

// ErrUnreachable: no node given to New could be reached; it wraps each
// node's connection error.
var ErrUnreachable = errors.New("client: no node could be reached")

// ClusterStatus returns the cluster's nodes and destinations as the node
// that answers sees them (GET /v1/cluster). Each destination's progress
// comes from its owner; DestinationInfo.StateError says why it is missing.
func (c *Client) ClusterStatus(ctx context.Context) (*wire.ClusterStatus, error) {
	var st wire.ClusterStatus
	if err := c.admin(ctx, http.MethodGet, nil, nil, &st, "cluster"); err != nil {
		return nil, err
	}
	return &st, nil
}

// CreateDestination stores a new destination from its spec, YAML or JSON
// (POST /v1/destinations), and returns its name and spec as stored. The
// node first checks every source (reachable with the spec's credentials,
// binlog on in ROW format), which takes up to 15 seconds for a source that
// does not answer, and pins each `latest` start to the source's current
// position. A spec with errors, an unreachable source or a name in use is
// an *Error (400, 400, 409); 503 means the cluster has no leader now: retry.
func (c *Client) CreateDestination(ctx context.Context, spec []byte) (*wire.DestinationInfo, error) {
	var info wire.DestinationInfo
	if err := c.admin(ctx, http.MethodPost, nil, spec, &info, "destinations"); err != nil {
		return nil, err
	}
	return &info, nil
}

// Destination returns a destination as the cluster stores it, with its
// owner, epoch and the owner's view of its progress (GET
// /v1/destinations/{name}/spec). An unknown name is an *Error with status
// 404 naming the destinations there are.
func (c *Client) Destination(ctx context.Context, name string) (*wire.DestinationInfo, error) {
	var info wire.DestinationInfo
	if err := c.admin(ctx, http.MethodGet, nil, nil, &info, "destinations", name, "spec"); err != nil {
		return nil, err
	}
	return &info, nil
}

// DeleteDestination deletes a destination (DELETE
// /v1/destinations/{name}). One whose consumers have cursors is refused
// with an *Error (409) naming them, unless force: then they lose their
// place.
func (c *Client) DeleteDestination(ctx context.Context, name string, force bool) error {
	var q url.Values
	if force {
		q = url.Values{"force": {"true"}}
	}
	var res wire.Deleted
	return c.admin(ctx, http.MethodDelete, q, nil, &res, "destinations", name)
}

// admin makes one admin call under /v1/path... and decodes its 2xx answer
// into out; it moves on to the next node while one cannot be reached.
func (c *Client) admin(ctx context.Context, method string, query url.Values, body []byte, out any, path ...string) error {
	var unreachable []error
	for range c.nodes.count() {
		base := c.base()
		err := c.call(ctx, method, apiURL(base, query, path...), body, out)
		var se *Error
		switch {
		case err == nil, errors.As(err, &se):
			return err
		case !isDialError(err) || ctx.Err() != nil:
			return fmt.Errorf("client: %w", err)
		}
		unreachable = append(unreachable, err)
		c.nextNode()
	}
	return fmt.Errorf("%w: %w", ErrUnreachable, errors.Join(unreachable...))
}

// call sends one request and decodes a 2xx answer into out; any other
// status is an *Error. Its other errors lack the package's prefix, which
// admin adds.
func (c *Client) call(ctx context.Context, method, u string, body []byte, out any) error {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/yaml") // YAML holds JSON
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return readError(resp)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decoding the answer: %w", method, u, err)
	}
	return nil
}

// isDialError reports whether err is a failure to connect: the request
// never reached a node, so it may go to another without being made twice.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// apiURL is the URL of base's endpoint /v1/path..., each path element
// escaped.
func apiURL(base *url.URL, query url.Values, path ...string) string {
	esc := strings.TrimRight(base.EscapedPath(), "/") + "/v1"
	for _, s := range path {
		esc += "/" + url.PathEscape(s)
	}
	u := *base
	u.Path, _ = url.PathUnescape(esc)
	u.RawPath = esc
	u.RawQuery = query.Encode()
	return u.String()
}

// RemoveNode takes a dead node out of the cluster's Raft configuration
// (braid cluster remove), so that the cluster's quorum no longer counts
// it. The cluster refuses a node that is alive.
func (c *Client) RemoveNode(ctx context.Context, name string) (wire.NodeRemoved, error) {
	var res wire.NodeRemoved
	err := c.admin(ctx, http.MethodDelete, nil, nil, &res, "cluster", "nodes", name)
	return res, err
}

// Consumers lists a destination's client ids as its owner sees them (GET
// /v1/destinations/{name}/consumers): cursor, acked seq, whether detached,
// replaying or ephemeral, when last seen.
func (c *Client) Consumers(ctx context.Context, dest string) ([]wire.ClientState, error) {
	var out []wire.ClientState
	if err := c.admin(ctx, http.MethodGet, nil, nil, &out, "destinations", dest, "consumers"); err != nil {
		return nil, err
	}
	return out, nil
}

// DropConsumer forgets a client id of a destination, its cursor included
// (DELETE /v1/destinations/{name}/consumers/{id}): the stream no longer
// waits or keeps history for it. An unknown one is an *Error (404), one
// with a stream open too (409: stop it first).
func (c *Client) DropConsumer(ctx context.Context, dest, id string) (wire.ConsumerDropped, error) {
	var out wire.ConsumerDropped
	err := c.admin(ctx, http.MethodDelete, nil, nil, &out, "destinations", dest, "consumers", id)
	return out, err
}

// DDL returns a destination's shard-DDL merge as its owner sees it (GET
// /v1/destinations/{name}/ddl): its mode and open locks.
func (c *Client) DDL(ctx context.Context, dest string) (wire.DDLState, error) {
	var out wire.DDLState
	err := c.admin(ctx, http.MethodGet, nil, nil, &out, "destinations", dest, "ddl")
	return out, err
}

// DecideDDL decides about an open shard-DDL lock (POST
// /v1/destinations/{name}/ddl/{lock}?action=): "unlock" emits its DDL
// now, "skip" emits nothing; both release the rows it held. The decision
// is kept with the destination (in Raft, or with capture's cursor), so
// every later owner and replay applies it at the same point. A lock that
// is not open is an *Error (404).
func (c *Client) DecideDDL(ctx context.Context, dest string, lock int, action string) (wire.DDLDecided, error) {
	var out wire.DDLDecided
	err := c.admin(ctx, http.MethodPost, url.Values{"action": {action}}, nil, &out, "destinations", dest, "ddl", strconv.Itoa(lock))
	return out, err
}

// AcceptLost accepts the loss of transactions source of dest waits on
// (POST /v1/destinations/{name}/sources/{source}/accept-lost): a
// promoted server lacks transactions braid emitted, lost in a failover;
// the source goes on without them, with a marker in the stream. It
// accepts exactly the loss reported now; none reported is an error.
func (c *Client) AcceptLost(ctx context.Context, dest, source string) (wire.LostAccepted, error) {
	var out wire.LostAccepted
	err := c.admin(ctx, http.MethodPost, nil, nil, &out, "destinations", dest, "sources", source, "accept-lost")
	return out, err
}

// Sinks lists a destination's sinks as its owner runs them (GET
// /v1/destinations/{name}/sinks): applied seq, lag, rows, upserts,
// missing rows, last error.
func (c *Client) Sinks(ctx context.Context, dest string) ([]wire.SinkState, error) {
	var out []wire.SinkState
	if err := c.admin(ctx, http.MethodGet, nil, nil, &out, "destinations", dest, "sinks"); err != nil {
		return nil, err
	}
	return out, nil
}

// Sink is one sink of a destination in full (GET
// /v1/destinations/{name}/sinks/{sink}): its state, its spec (password
// hidden) and its workers' checkpoints.
func (c *Client) Sink(ctx context.Context, dest, sink string) (wire.SinkDetail, error) {
	var out wire.SinkDetail
	err := c.admin(ctx, http.MethodGet, nil, nil, &out, "destinations", dest, "sinks", sink)
	return out, err
}

// VerifySink compares sample random rows (0: the server's default) of
// each logical table (tables; none: all) at the sources with a sink's
// target and as many of the target with the sources, on the node that
// runs the sink (POST /v1/destinations/{name}/sinks/{sink}/verify). It
// may take a while: give ctx a minute or more.
func (c *Client) VerifySink(ctx context.Context, dest, sink string, sample int, tables ...string) (wire.SinkVerify, error) {
	q := url.Values{}
	if sample > 0 {
		q.Set("sample", strconv.Itoa(sample))
	}
	for _, t := range tables {
		q.Add("table", t)
	}
	var out wire.SinkVerify
	err := c.admin(ctx, http.MethodPost, q, nil, &out, "destinations", dest, "sinks", sink, "verify")
	return out, err
}
