package metrics

import (
	"sync"

	gometrics "github.com/hashicorp/go-metrics/compat"
	gmprometheus "github.com/hashicorp/go-metrics/compat/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// The process's go-metrics sink, installed once (see GoMetrics).
var goMetrics struct {
	once sync.Once
	sink prometheus.Collector
	err  error
}

// GoMetrics returns the collector of what the libraries that report
// through go-metrics report: hashicorp/raft (raft_*: commit and apply
// times, elections, replication to each peer) and memberlist
// (memberlist_*). The first call installs a Prometheus sink as the
// process's global go-metrics (through hashicorp/go-metrics/compat, so it
// is the go-metrics raft was built against: armon/go-metrics, or
// hashicorp/go-metrics with the hashicorpmetrics build tag); later calls
// return the same collector.
//
// The sink is the process's: several nodes in one process (tests) share
// it, and their raft_* values mix. Values stay as last reported (no
// expiry): a gauge raft stopped setting shows its last value.
func GoMetrics() (prometheus.Collector, error) {
	goMetrics.once.Do(func() {
		// The sink registers itself; with a registry of its own, not
		// Prometheus's global one, which braid does not serve.
		sink, err := gmprometheus.NewPrometheusSinkFrom(gmprometheus.PrometheusOpts{
			Registerer: prometheus.NewRegistry(),
			Name:       "braid_gometrics_sink",
		})
		if err != nil {
			goMetrics.err = err
			return
		}
		conf := gometrics.DefaultConfig("") // no service name: raft_*, not braid_raft_*
		conf.EnableHostname = false
		conf.EnableHostnameLabel = false
		// Go's collector shows the runtime; go-metrics' own would start a
		// goroutine that never ends.
		conf.EnableRuntimeMetrics = false
		if _, err := gometrics.NewGlobal(conf, sink); err != nil {
			goMetrics.err = err
			return
		}
		goMetrics.sink = sink
	})
	return goMetrics.sink, goMetrics.err
}
