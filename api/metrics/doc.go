// Package metrics renders what a braid process serves as Prometheus
// metrics (github.com/prometheus/client_golang): the destinations of a
// stream.Registry (Collector), hashicorp/raft's and memberlist's own
// go-metrics (GoMetrics), and whatever families a caller adds, such as a
// cluster node's (package cluster); Handler serves them as GET /metrics.
//
// The families are named braid_* after canal's canal_instance_* and TiDB
// DM's dm_syncer_*: per source (labels dest, source), per destination
// (dest) and per consumer (dest, client); docs/operations.md, "Metrics",
// lists every one. Go's runtime (go_*) and the process (process_*) come
// with every handler.
//
// Nothing here counts anything: the packages below keep plain snapshots
// (group.Stats, stream.Store's Stats and Clients, binlog.Stats), and a
// Collector reads them at scrape time, so a scrape costs the data path
// nothing between scrapes and shows each value as of the scrape.
//
// # Invariants
//
//   - Every family is described (Describe) before it is collected, with
//     fixed label names; a scrape never fails on a destination that
//     comes or goes between two scrapes.
//   - A destination is shown once per scrape, with all its families read
//     from one Stats snapshot: lags of one scrape are comparable.
//   - Counters (*_total) only grow while a destination runs here; a
//     destination restarted (a takeover, a failed source retried) starts
//     them again, which Prometheus's rate() treats as a reset.
//   - GoMetrics installs the process's go-metrics sink once, whoever
//     calls it first, and every later call returns the same collector.
//
// # Concurrency
//
// Collector, the GoMetrics collector and Handler are safe for concurrent
// use; a Collector holds no state of its own between scrapes and starts
// no goroutine.
package metrics
