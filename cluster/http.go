package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/raftstore"
	"github.com/braid-cdc/braid/spec"
)

// The cluster's HTTP API, on every node. Destinations are stored in Raft
// and readable on any node; a destination's state and stream are served
// by its owner, and any other node answers them with a 307 redirect to the
// owner (the Go client and curl -L follow it), or 503 while it has none.
//
//	GET    /healthz, /readyz                    wire.Health (health.go; no credential)
//	GET    /metrics                             Prometheus exposition (metrics.go; any user)
//	GET    /, /ui/{file}                        the status page (status.go; no credential)
//	POST, GET, DELETE /v1/session               the page's login (session.go)
//	GET    /v1/status                           wire.Status (status.go): what the page shows
//	GET    /v1/cluster                          wire.ClusterStatus
//	GET    /v1/cluster/members                  wire.Members (members.go; any user)
//	GET    /v1/destinations                     names, from Raft
//	POST   /v1/destinations                     the spec (application/yaml or application/json) → wire.DestinationInfo
//	GET    /v1/destinations/{name}/spec         wire.DestinationInfo
//	DELETE /v1/destinations/{name}[?force=true] wire.Deleted
//	DELETE /v1/cluster/nodes/{name}             wire.NodeRemoved
//	GET    /v1/destinations/{name}              wire.State      } on the owner
//	GET    /v1/destinations/{name}/stream       NDJSON          } (api/native)
//	POST   /v1/destinations/{name}/ack          wire.AckResult  }
//	GET    /v1/destinations/{name}/consumers    []wire.ClientState }
//	DELETE /v1/destinations/{name}/consumers/{id} wire.ConsumerDropped }
//	GET    /v1/destinations/{name}/ddl          wire.DDLState   }
//	POST   /v1/destinations/{name}/ddl/{lock}?action=unlock|skip wire.DDLDecided }
//	POST   /v1/destinations/{name}/sources/{source}/accept-lost wire.LostAccepted }
//	GET    /v1/destinations/{name}/sinks        []wire.SinkState }
//	GET    /v1/destinations/{name}/sinks/{sink} wire.SinkDetail }
//	POST   /v1/destinations/{name}/sinks/{sink}/verify?sample=N wire.SinkVerify }
//
// Every JSON shape is package api/wire's; errors are wire.ErrorBody. The
// server wraps it all in native.Browsers: a Host that is not the node's
// gets 421, and a call that changes something without wire.RequestHeader
// or a JSON body, or with another site's Origin, 403.

func (n *Node) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", n.healthz)
	mux.HandleFunc("GET /readyz", n.readyz)
	// Any user, not none as for /healthz: like Consul's /v1/agent/metrics
	// (a token with agent:read once ACLs are on) and Vault's
	// /v1/sys/metrics (a token unless unauthenticated_metrics_access),
	// since the families name destinations, sources and client ids;
	// Prometheus scrapes with basic auth or a bearer token, and a
	// consumer account is enough (it sees the destinations it may read).
	mux.Handle("GET /metrics", n.guard(needUser, n.metricsHandler()))
	// The page and its files hold no data: anyone gets them, and the page
	// asks for a login (session.go) when /v1/status answers 401.
	mux.HandleFunc("GET /{$}", n.page.page)
	mux.HandleFunc("GET /ui/", n.page.files)
	mux.HandleFunc("POST /v1/session", n.login)
	mux.Handle("GET /v1/session", n.guard(needUser, n.whoami))
	mux.HandleFunc("DELETE /v1/session", n.logout)
	mux.Handle("GET /v1/status", n.guard(needAdmin, n.page.status))
	mux.Handle("GET /v1/cluster", n.guard(needAdmin, n.status))
	mux.Handle("GET /v1/cluster/members", n.guard(needUser, n.liveMembers))
	mux.Handle("DELETE /v1/cluster/nodes/{name}", n.guard(needAdmin, n.removeNode))
	mux.Handle("GET /v1/destinations", n.guard(needUser, n.list))
	mux.Handle("POST /v1/destinations", n.guard(needAdmin, n.create))
	mux.Handle("GET /v1/destinations/{name}/spec", n.guard(needRead, n.info))
	mux.Handle("DELETE /v1/destinations/{name}", n.guard(needAdmin, n.remove))
	owned := n.routed(n.local)
	mux.Handle("GET /v1/destinations/{name}", n.guard(needRead, owned))
	mux.Handle("GET /v1/destinations/{name}/stream", n.guard(needRead, owned))
	mux.Handle("POST /v1/destinations/{name}/ack", n.guard(needRead, owned))
	mux.Handle("GET /v1/destinations/{name}/consumers", n.guard(needRead, owned))
	mux.Handle("DELETE /v1/destinations/{name}/consumers/{id}", n.guard(needAdmin, owned))
	mux.Handle("GET /v1/destinations/{name}/ddl", n.guard(needRead, owned))
	mux.Handle("POST /v1/destinations/{name}/ddl/{lock}", n.guard(needAdmin, owned))
	mux.Handle("POST /v1/destinations/{name}/sources/{source}/accept-lost", n.guard(needAdmin, owned))
	mux.Handle("GET /v1/destinations/{name}/sinks", n.guard(needRead, owned))
	mux.Handle("GET /v1/destinations/{name}/sinks/{sink}", n.guard(needAdmin, owned))
	mux.Handle("POST /v1/destinations/{name}/sinks/{sink}/verify", n.guard(needAdmin, owned))
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, format string, a ...any) {
	writeJSON(w, status, wire.ErrorBody{Error: fmt.Sprintf(format, a...)})
}

// routed serves a destination's state and stream here when this node runs
// it, and redirects to its owner otherwise.
func (n *Node) routed(local http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if _, err := n.reg.Lookup(name); err == nil {
			local.ServeHTTP(w, r)
			return
		}
		m, err := n.owner(name)
		switch {
		case errors.Is(err, errUnknownDest):
			writeError(w, http.StatusNotFound, "unknown destination %q: the cluster has %s", name, n.names())
		case err != nil:
			writeError(w, http.StatusServiceUnavailable, "%v", err)
		default:
			http.Redirect(w, r, n.httpScheme()+"://"+m.HTTPAddr+r.URL.RequestURI(), http.StatusTemporaryRedirect)
		}
	}
}

// canalOwner is the canal server's Forward: the canal address of the
// node that owns dest, for a client that connected here.
func (n *Node) canalOwner(dest string) (string, error) {
	m, err := n.owner(dest)
	switch {
	case errors.Is(err, errUnknownDest):
		return "", nil // the canal server says it is unknown
	case err != nil:
		return "", err
	case m.CanalAddr == "":
		return "", fmt.Errorf("destination %s is owned by node %s, which serves no canal port", dest, m.Name)
	}
	return m.RaftAddr, nil // the relay goes to its node port (canalConfig's DialOwner)
}

// errUnknownDest: no destination of that name.
var errUnknownDest = errors.New("cluster: unknown destination")

// owner finds the live node, other than this one, that owns dest; the
// errors other than errUnknownDest are passing states, worth a retry.
func (n *Node) owner(dest string) (Member, error) {
	a, err := n.store.Assignment(dest)
	if err != nil {
		if _, derr := n.store.Destination(dest); derr != nil {
			// This node's state may lag (a node just restarted replays its
			// log): only a current read may say the destination is unknown.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			cerr := n.store.Consistent(ctx)
			cancel()
			if cerr != nil {
				return Member{}, fmt.Errorf("node %s cannot reach the cluster's leader to look destination %s up (%v): retry, or ask another node", n.cfg.Name, dest, cerr)
			}
			if _, derr := n.store.Destination(dest); derr != nil {
				return Member{}, errUnknownDest
			}
			a, _ = n.store.Assignment(dest)
		}
	}
	switch {
	case a.Owner == "":
		return Member{}, fmt.Errorf("destination %s has no owner yet: retry in a moment", dest)
	case a.Owner == n.cfg.Name:
		return Member{}, fmt.Errorf("destination %s is starting on node %s: retry in a moment", dest, n.cfg.Name)
	}
	m, ok := n.ms.member(a.Owner)
	if !ok {
		return Member{}, fmt.Errorf("destination %s is owned by node %s, which is not reachable now; it will be taken over: retry in a moment", dest, a.Owner)
	}
	return m, nil
}

// names lists the destinations for error messages.
func (n *Node) names() string {
	var names []string
	for _, d := range n.store.Destinations() {
		names = append(names, d.Spec.Name)
	}
	if len(names) == 0 {
		return "none (create one with `braid destination create -f SPEC`)"
	}
	return strings.Join(names, ", ")
}

func (n *Node) list(w http.ResponseWriter, r *http.Request) {
	names := []string{}
	u := requestUser(r)
	for _, d := range n.store.Destinations() {
		if u == nil || u.MayRead(d.Spec.Name) {
			names = append(names, d.Spec.Name)
		}
	}
	writeJSON(w, http.StatusOK, names)
}

// maxSpec bounds a spec's size in a create request.
const maxSpec = 1 << 20

// create stores a new destination after checking every source: reachable
// with the spec's credentials, binlog on in ROW format. A `latest` start
// is pinned to the source's current position, so that whichever node runs
// the destination, now or after a takeover, starts at the same point.
func (n *Node) create(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxSpec+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, "reading the spec: %v", err)
		return
	}
	if len(body) > maxSpec {
		writeError(w, http.StatusRequestEntityTooLarge, "the spec is over %d bytes", maxSpec)
		return
	}
	ds, err := parseSpec(r.Header.Get("Content-Type"), body)
	if err != nil {
		var mt *mediaTypeError
		if errors.As(err, &mt) {
			writeError(w, http.StatusUnsupportedMediaType, "%v", err)
			return
		}
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if _, err := n.store.Destination(ds.Name); err == nil {
		writeError(w, http.StatusConflict, "destination %q exists already: delete it first, or choose another name", ds.Name)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	// The spec's password references must be ones this node may read:
	// it is about to send what they name to the sources' addresses. The
	// spec is kept with its references, which the node that runs the
	// destination resolves again under its own rules.
	resolved, err := n.cfg.SecretRefs.Resolve(*ds)
	if err != nil {
		writeError(w, http.StatusBadRequest, "destination %q not created: %v", ds.Name, err)
		return
	}
	if err := group.PinStarts(ctx, &resolved); err != nil {
		writeError(w, http.StatusBadRequest, "destination %q not created: %v", ds.Name, err)
		return
	}
	for i := range ds.Sources {
		ds.Sources[i].Start = resolved.Sources[i].Start
	}
	// Raft keeps the spec with its passwords sealed: raft.db, snapshots
	// and every follower's copy hold none in clear. A node without a key
	// keeps them in clear, and says so each time.
	stored := 0
	sealed, _ := ds.MapPasswords(func(pw string) (string, error) { stored++; return n.box.Seal(pw), nil })
	d, err := n.store.CreateDestination(ctx, sealed)
	switch {
	case errors.Is(err, raftstore.ErrExists):
		writeError(w, http.StatusConflict, "destination %q exists already: delete it first, or choose another name", ds.Name)
		return
	case errors.Is(err, raftstore.ErrInvalid):
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, "destination %q not created: %v", ds.Name, err)
		return
	}
	if n.box == nil && stored > 0 {
		n.log.Warn(clearSecrets+": give every node the same secrets key (or gossip key), then create the destination again",
			"dest", ds.Name, "passwords", stored)
	}
	n.readYourWrite(ctx)
	n.log.Info("destination created", "dest", ds.Name, "sources", len(ds.Sources))
	writeJSON(w, http.StatusCreated, wire.DestinationInfo{Name: d.Spec.Name, Spec: specJSON(d.Spec)})
}

// mediaTypeError: a spec sent as a type create does not take.
type mediaTypeError struct{ got string }

func (e *mediaTypeError) Error() string {
	return fmt.Sprintf("a spec sent as %q: send it as application/yaml or application/json (Content-Type), which braid destination create does", e.got)
}

// parseSpec parses a spec by the type its request declares: JSON only as
// application/json, YAML (which holds JSON) as application/yaml. A body of
// any other type, as a form of another site sends it, is refused unread.
func parseSpec(contentType string, body []byte) (*spec.Spec, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	switch {
	case err != nil:
		return nil, &mediaTypeError{got: contentType}
	case mt == "application/json":
		if !json.Valid(body) {
			return nil, errors.New("the spec is not JSON, as its Content-Type application/json says: send YAML as application/yaml")
		}
	case mt == "application/yaml", mt == "application/x-yaml", mt == "text/yaml":
	default:
		return nil, &mediaTypeError{got: contentType}
	}
	return spec.Parse(body)
}

// readYourWrite waits until this node's state holds a write just made (on
// a follower, forwarded writes are applied here a moment later), so that
// the next request to this node sees it.
func (n *Node) readYourWrite(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := n.store.Consistent(ctx); err != nil {
		n.log.Debug("read-your-write barrier", "err", err)
	}
}

func (n *Node) info(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	d, err := n.store.Destination(name)
	if err != nil {
		writeError(w, http.StatusNotFound, "unknown destination %q: the cluster has %s", name, n.names())
		return
	}
	writeJSON(w, http.StatusOK, n.describe(r.Context(), d))
}

// specJSON is a spec as wire.DestinationInfo carries it, passwords hidden
// (spec.Redacted): no API answer returns a secret. (A spec holds
// strings, numbers and parsed times only: Marshal does not fail on it.)
func specJSON(s spec.Spec) json.RawMessage {
	b, _ := json.Marshal(s.Redacted())
	return b
}

// describe fills a wire.DestinationInfo, asking the owner for its state.
func (n *Node) describe(ctx context.Context, d raftstore.Destination) wire.DestinationInfo {
	info := wire.DestinationInfo{Name: d.Spec.Name, Spec: specJSON(d.Spec)}
	if a, err := n.store.Assignment(d.Spec.Name); err == nil {
		info.Owner, info.Epoch = a.Owner, a.Epoch
	}
	if info.Owner == "" {
		info.StateError = "no owner"
		return info
	}
	m, ok := n.ms.member(info.Owner)
	if !ok {
		info.StateError = "owner not reachable"
		return info
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.RaftAddr+"/v1/destinations/"+d.Spec.Name, nil)
	resp, err := n.peerClient.Do(req)
	if err != nil {
		info.StateError = err.Error()
		return info
	}
	defer resp.Body.Close()
	var st wire.State
	if resp.StatusCode != http.StatusOK {
		var e wire.ErrorBody
		json.NewDecoder(resp.Body).Decode(&e)
		info.StateError = fmt.Sprintf("owner answered %d: %s", resp.StatusCode, e.Error)
		return info
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		info.StateError = err.Error()
		return info
	}
	info.Seq, info.Sources, info.Clients = st.Seq, st.Sources, st.Clients
	return info
}

// remove deletes a destination; one its consumers have cursors of needs
// force=true, since they lose their place.
func (n *Node) remove(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if _, err := n.store.Destination(name); err != nil {
		writeError(w, http.StatusNotFound, "unknown destination %q: the cluster has %s", name, n.names())
		return
	}
	if r.URL.Query().Get("force") != "true" {
		// Consumers are the client ids with a cursor in Raft and those the
		// owner's store holds events for (whose cursors may not be
		// written yet).
		consumers := map[string]bool{}
		if cursors, err := n.store.Cursors(name); err == nil {
			for c := range cursors {
				if c != group.StartCursorID { // the destination's, no consumer's
					consumers[c] = true
				}
			}
		}
		d, _ := n.store.Destination(name)
		for _, c := range n.describe(r.Context(), d).Clients {
			consumers[c.ID] = true
		}
		if len(consumers) > 0 {
			clients := slices.Sorted(maps.Keys(consumers))
			writeError(w, http.StatusConflict, "destination %q has consumers (client ids %s) who would lose their place: stop them first, or delete it with force",
				name, strings.Join(clients, ", "))
			return
		}
	}
	if err := n.store.DeleteDestination(r.Context(), name); err != nil {
		writeError(w, http.StatusServiceUnavailable, "destination %q not deleted: %v", name, err)
		return
	}
	n.readYourWrite(r.Context())
	n.log.Info("destination deleted", "dest", name)
	writeJSON(w, http.StatusOK, wire.Deleted{Deleted: name})
}

func (n *Node) status(w http.ResponseWriter, r *http.Request) {
	st := wire.ClusterStatus{Node: n.cfg.Name, Nodes: []wire.NodeStatus{}, Destinations: []wire.DestinationInfo{}}
	st.Leader, _ = n.store.Leader()
	byName := map[string]*wire.NodeStatus{}
	node := func(name string) *wire.NodeStatus {
		ns, ok := byName[name]
		if !ok {
			ns = &wire.NodeStatus{Name: name, State: wire.NodeFailed}
			byName[name] = ns
		}
		return ns
	}
	servers, _ := n.store.Servers()
	members := n.ms.members()
	for _, s := range servers {
		ns := node(s.ID)
		ns.RaftAddr = s.Addr
		ns.Raft = wire.RaftVoter
		if s.NonVoter {
			ns.Raft = wire.RaftNonvoter
		}
		if s.ID == st.Leader {
			ns.Raft = wire.RaftLeader
		}
	}
	for _, m := range members {
		ns := node(m.Name)
		ns.State = wire.NodeAlive
		ns.HTTPAddr, ns.CanalAddr = m.HTTPAddr, m.CanalAddr
		if ns.RaftAddr == "" {
			ns.RaftAddr = m.RaftAddr
		}
	}
	for _, d := range n.store.Destinations() {
		info := n.describe(r.Context(), d)
		if info.Owner != "" {
			node(info.Owner).Destinations++
		}
		st.Destinations = append(st.Destinations, info)
	}
	for _, ns := range byName {
		st.Nodes = append(st.Nodes, *ns)
	}
	slices.SortFunc(st.Nodes, func(a, b wire.NodeStatus) int { return strings.Compare(a.Name, b.Name) })
	writeJSON(w, http.StatusOK, st)
}
