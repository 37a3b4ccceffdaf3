package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/braid-cdc/braid/api/native"
	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/cluster/statuspage"
)

// The status page, on every node (package cluster/statuspage holds the
// page itself):
//
//	GET /            the page (HTML), any user
//	GET /ui/{file}   its script and style sheet, any user
//	GET /v1/status   wire.Status, an admin
//
// The page fetches only /v1/status from the node that served it, so this
// node gathers everything: its cluster status (what GET /v1/cluster
// answers) and each destination's wire.State, asked of its owner over the
// node port (peerHTTP, as describe does), with its sinks and DDL locks
// and the lag history this node samples. The page and its files need no
// credential; /v1/status does, and a page that gets a 401 shows its login
// form, which opens a session (session.go) whose cookie its later fetches
// carry.
//
// The sampler asks every destination's owner for its state every
// statuspage.DefaultEvery and keeps each source's lag for
// statuspage.DefaultWindow, so that a page loaded now shows the last
// minutes, whichever node owned the destination then. Run runs it and
// waits for it.

// statusFetches bounds the owners asked at once for one answer.
const statusFetches = 8

// statusTimeout bounds one owner's answer.
const statusTimeout = 2 * time.Second

// statusPage serves the page and its data for one node.
type statusPage struct {
	n       *Node
	history *statuspage.History
	index   []byte
	assets  http.Handler
}

// newStatusPage serves the page of n; Run runs its sampler.
func (n *Node) newStatusPage() *statusPage {
	index, err := fs.ReadFile(statuspage.Assets, "index.html")
	if err != nil {
		panic(err) // embedded: it cannot be missing
	}
	p := &statusPage{n: n, history: statuspage.NewHistory(0, 0), index: index,
		assets: http.StripPrefix("/ui/", http.FileServerFS(statuspage.Assets))}
	return p
}

// pageHeaders are the page's and its files' headers: nothing but this
// node's own files and its API, no framing, no caching of live data.
func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
}

// page serves index.html at /.
func (p *statusPage) page(w http.ResponseWriter, r *http.Request) {
	pageHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(p.index)
}

// files serves the page's script and style sheet under /ui/.
func (p *statusPage) files(w http.ResponseWriter, r *http.Request) {
	pageHeaders(w)
	p.assets.ServeHTTP(w, r)
}

// status answers GET /v1/status.
func (p *statusPage) status(w http.ResponseWriter, r *http.Request) {
	cs, err := p.n.clusterStatus(r)
	if err != nil {
		native.Internal(w, r, p.n.log, fmt.Errorf("cluster status: %w", err))
		return
	}
	owners := make([]destOwner, len(cs.Destinations))
	for i, d := range cs.Destinations {
		owners[i] = destOwner{name: d.Name, owner: d.Owner}
	}
	states := p.n.ownerStates(r.Context(), owners, true)
	st := wire.Status{Time: time.Now(), Cluster: cs, Destinations: make([]wire.DestinationStatus, len(owners)),
		LagEveryMs: p.history.Every().Milliseconds(), LagWindowMs: p.history.Window().Milliseconds()}
	for i, o := range owners {
		ds := wire.DestinationStatus{Name: o.name, Owner: o.owner, State: states[i].state, Lag: p.history.Series(o.name),
			Sinks: states[i].sinks, DDL: states[i].ddl}
		if err := states[i].err; err != nil {
			ds.StateError = err.Error()
		}
		st.Destinations[i] = ds
	}
	writeJSON(w, http.StatusOK, st)
}

// sample adds every destination's lags to the history every interval,
// the first at once, until ctx ends.
func (p *statusPage) sample(ctx context.Context) {
	t := time.NewTicker(p.history.Every())
	defer t.Stop()
	for ctx.Err() == nil {
		var owners []destOwner
		keep := map[string]bool{}
		for _, d := range p.n.store.Destinations() {
			o := destOwner{name: d.Spec.Name}
			if a, err := p.n.store.Assignment(o.name); err == nil {
				o.owner = a.Owner
			}
			owners = append(owners, o)
			keep[o.name] = true
		}
		p.history.Keep(keep)
		for i, s := range p.n.ownerStates(ctx, owners, false) {
			if s.state != nil {
				p.history.Add(owners[i].name, s.at, s.state.Sources)
			}
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}

// destOwner is a destination and the node that owns it ("" for none).
type destOwner struct{ name, owner string }

// ownerState is an owner's answer for one destination.
type ownerState struct {
	state *wire.State // nil: err says why
	sinks []wire.SinkState
	ddl   *wire.DDLState
	err   error
	at    time.Time // when the answer came
}

// ownerStates asks each destination's owner for its state (with full, its
// sinks and DDL locks too), a few at a time, and returns the answers in
// dests' order.
func (n *Node) ownerStates(ctx context.Context, dests []destOwner, full bool) []ownerState {
	out := make([]ownerState, len(dests))
	sem := make(chan struct{}, statusFetches)
	var wg sync.WaitGroup
	for i, d := range dests {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				out[i].err = ctx.Err()
				return
			}
			defer func() { <-sem }()
			o := &out[i]
			o.err = n.askOwner(ctx, d, "", &o.state)
			if o.err == nil && full {
				if o.err = n.askOwner(ctx, d, "/sinks", &o.sinks); o.err == nil {
					o.err = n.askOwner(ctx, d, "/ddl", &o.ddl)
				}
				if o.err != nil {
					o.state, o.sinks, o.ddl = nil, nil, nil
				}
			}
			o.at = time.Now()
		})
	}
	wg.Wait()
	return out
}

// askOwner asks d's owner for GET /v1/destinations/{name}{sub} over its
// node port and decodes the answer into out.
func (n *Node) askOwner(ctx context.Context, d destOwner, sub string, out any) error {
	if d.owner == "" {
		return errors.New("no owner")
	}
	m, ok := n.ms.member(d.owner)
	if !ok {
		return fmt.Errorf("owner %s not reachable", d.owner)
	}
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.RaftAddr+"/v1/destinations/"+url.PathEscape(d.name)+sub, nil)
	if err != nil {
		return err
	}
	resp, err := n.peerClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e wire.ErrorBody
		json.NewDecoder(resp.Body).Decode(&e)
		return fmt.Errorf("owner %s answered %d: %s", d.owner, resp.StatusCode, e.Error)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("owner %s's answer: %w", d.owner, err)
	}
	return nil
}

// clusterStatus is what GET /v1/cluster answers r on this node (http.go's
// status handler), decoded.
func (n *Node) clusterStatus(r *http.Request) (wire.ClusterStatus, error) {
	var rec bufferedResponse
	n.status(&rec, r)
	var cs wire.ClusterStatus
	if rec.code != http.StatusOK {
		return cs, fmt.Errorf("answered %d: %s", rec.code, bytes.TrimSpace(rec.body.Bytes()))
	}
	err := json.Unmarshal(rec.body.Bytes(), &cs)
	return cs, err
}

// bufferedResponse keeps what a handler writes.
type bufferedResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header {
	if b.header == nil {
		b.header = http.Header{}
	}
	return b.header
}

func (b *bufferedResponse) WriteHeader(code int) {
	if b.code == 0 {
		b.code = code
	}
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return b.body.Write(p)
}
