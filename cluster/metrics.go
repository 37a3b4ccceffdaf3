package cluster

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/braid-cdc/braid/api/metrics"
	"github.com/braid-cdc/braid/api/native"
)

// GET /metrics: Prometheus's exposition of the node (below), of the
// destinations it runs (api/metrics: sources, destinations, consumers;
// only those the scraping user may read), of hashicorp/raft's and
// memberlist's own go-metrics (raft_*, memberlist_*), and of Go's
// runtime and the process.
//
// A node's families are read at scrape time from Raft and from the
// destinations it owns. A destination's families come from its owner
// only: scrape every node (Prometheus's `instance` label tells them
// apart), and a takeover shows as the series moving to another node and
// braid_node_destination_epoch changing (braid_node_takeovers_total
// counts them on the node that took over).

// The node's families.
var (
	nodeRaftState = prometheus.NewDesc("braid_node_raft_state",
		"1 for the node's Raft state now (leader, follower, candidate, shutdown), 0 for the others.", []string{"state"}, nil)
	nodeRaftTerm = prometheus.NewDesc("braid_node_raft_term",
		"The node's current Raft term.", nil, nil)
	nodeRaftCommit = prometheus.NewDesc("braid_node_raft_commit_index",
		"The last Raft log index the node knows committed.", nil, nil)
	nodeRaftApplied = prometheus.NewDesc("braid_node_raft_applied_index",
		"The last Raft log index applied to the node's state.", nil, nil)
	nodeRaftLast = prometheus.NewDesc("braid_node_raft_last_index",
		"The last index in the node's Raft log.", nil, nil)
	nodeRaftLeader = prometheus.NewDesc("braid_node_raft_leader_known",
		"1 while the node knows a Raft leader (itself included), else 0.", nil, nil)
	nodeRaftVoters = prometheus.NewDesc("braid_node_raft_servers",
		"Servers in the Raft configuration, as the node sees it.", nil, nil)
	nodeMembers = prometheus.NewDesc("braid_node_gossip_members",
		"Live nodes (alive or suspected) the node's gossip sees, itself included.", nil, nil)
	nodeOwned = prometheus.NewDesc("braid_node_destinations_owned",
		"Destinations Raft assigns to this node.", nil, nil)
	nodeEpoch = prometheus.NewDesc("braid_node_destination_epoch",
		"The epoch of a destination this node owns (the Raft index of its assignment): a change is a takeover.", []string{"dest"}, nil)
	nodeServing = prometheus.NewDesc("braid_node_destination_serving",
		"1 while the node hands a destination it owns out (taken over and its lease holds), else 0.", []string{"dest"}, nil)
	nodeTakeovers = prometheus.NewDesc("braid_node_takeovers_total",
		"Destinations this node has taken over (started to run for a new epoch) since it started.", nil, nil)
	nodeRenewals = prometheus.NewDesc("braid_node_lease_renewals_total",
		"Ownership lease renewals this node made (a linearizable read that found it still the owner).", nil, nil)
	nodeLease = prometheus.NewDesc("braid_node_lease_remaining_seconds",
		"How long the node's ownership lease of a destination it runs holds without another renewal (negative: run out).", []string{"dest"}, nil)
)

// raftStates are braid_node_raft_state's label values, as hashicorp/raft
// names its states (lowercased).
var raftStates = []string{"follower", "candidate", "leader", "shutdown"}

// nodeCollector renders the node's families at each scrape.
type nodeCollector struct{ n *Node }

var _ prometheus.Collector = nodeCollector{}

func (c nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{nodeRaftState, nodeRaftTerm, nodeRaftCommit, nodeRaftApplied, nodeRaftLast,
		nodeRaftLeader, nodeRaftVoters, nodeMembers, nodeOwned, nodeEpoch, nodeServing, nodeLease, nodeTakeovers, nodeRenewals} {
		ch <- d
	}
}

func (c nodeCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.n
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	st := n.store.Stats()
	for _, s := range raftStates {
		gauge(nodeRaftState, b2f(strings.EqualFold(st.State, s)), s)
	}
	gauge(nodeRaftTerm, float64(st.Term))
	gauge(nodeRaftCommit, float64(st.CommitIndex))
	gauge(nodeRaftApplied, float64(st.AppliedIndex))
	gauge(nodeRaftLast, float64(st.LastIndex))
	gauge(nodeRaftLeader, b2f(st.LeaderID != ""))
	gauge(nodeRaftVoters, float64(len(st.Servers)))
	gauge(nodeMembers, float64(len(n.ms.members())))
	owned := 0
	for _, a := range n.store.Assignments() {
		if a.Owner != n.cfg.Name {
			continue
		}
		owned++
		gauge(nodeEpoch, float64(a.Epoch), a.Destination)
		gauge(nodeServing, b2f(n.Serving(a.Destination) == nil), a.Destination)
	}
	gauge(nodeOwned, float64(owned))
	ch <- prometheus.MustNewConstMetric(nodeTakeovers, prometheus.CounterValue, float64(n.takeovers.Load()))
	ch <- prometheus.MustNewConstMetric(nodeRenewals, prometheus.CounterValue, float64(n.renewals.Load()))
	// ownerLoop holds n.mu while it stops a destination, which may take a
	// moment: a scrape then goes without the leases rather than wait.
	if n.mu.TryLock() {
		now := time.Now()
		for name, o := range n.owned {
			o.mu.Lock()
			until := o.leaseUntil
			o.mu.Unlock()
			gauge(nodeLease, until.Sub(now).Seconds(), name)
		}
		n.mu.Unlock()
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// metricsHandler serves GET /metrics (see above). The node's, raft's and
// the runtime's families are the same for every caller; the destinations'
// are those the caller may read (every one without Config.Users).
func (n *Node) metricsHandler() http.HandlerFunc {
	cs := []prometheus.Collector{nodeCollector{n}}
	if gm, err := metrics.GoMetrics(); err != nil {
		n.log.Warn("raft's own metrics are not served", "err", err)
	} else {
		cs = append(cs, gm)
	}
	base, err := metrics.NewRegistry(cs...)
	if err != nil {
		n.log.Error("metrics are not served", "err", err)
		return func(w http.ResponseWriter, r *http.Request) {
			native.Internal(w, r, n.log, fmt.Errorf("metrics: %w", err))
		}
	}
	return func(w http.ResponseWriter, r *http.Request) {
		var show func(string) bool
		if u := requestUser(r); u != nil {
			show = u.MayRead
		}
		dests := prometheus.NewRegistry()
		dests.MustRegister(metrics.NewCollector(n.reg, show)) // a new registry: cannot collide
		metrics.Handler(base, dests).ServeHTTP(w, r)
	}
}
