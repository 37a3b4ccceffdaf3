package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/braid-cdc/braid/stream"
)

// NewRegistry returns a registry of cs and of Go's runtime (go_*) and the
// process's (process_*) collectors. It fails only when two collectors
// describe the same family.
func NewRegistry(cs ...prometheus.Collector) (*prometheus.Registry, error) {
	r := prometheus.NewRegistry()
	all := append([]prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}, cs...)
	for _, c := range all {
		if err := r.Register(c); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Handler serves the families of gs, merged, in the exposition format the
// scraper asks for (Prometheus text by default, OpenMetrics or protobuf).
// A collector that fails leaves its families out; the rest are served.
func Handler(gs ...prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(prometheus.Gatherers(gs), promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// RegistryHandler serves reg's destinations (a Collector showing every
// one) and the runtime's families: `braid capture`'s /metrics.
func RegistryHandler(reg *stream.Registry) http.Handler {
	r, err := NewRegistry(NewCollector(reg, nil))
	if err != nil {
		panic(err) // fixed families that do not collide: a bug here
	}
	return Handler(r)
}

// Mount serves GET /metrics with metrics and every other request with
// next.
func Mount(next, metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	mux.Handle("/", next)
	return mux
}
