package metrics_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/braid-cdc/braid/api/metrics"
	"github.com/braid-cdc/braid/stream"
)

// TestMount: `braid capture` serves GET /metrics beside the native API,
// which keeps every other request; with no destination the exposition
// still has the runtime's families and describes braid's without series.
func TestMount(t *testing.T) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "native "+r.Method+" "+r.URL.Path) })
	web := httptest.NewServer(metrics.Mount(next, metrics.RegistryHandler(stream.NewRegistry())))
	defer web.Close()
	f := scrape(t, web.URL+"/metrics")
	if _, ok := f["go_goroutines"]; !ok {
		t.Errorf("no go_goroutines in the exposition")
	}
	if _, ok := f["process_start_time_seconds"]; !ok {
		t.Errorf("no process_start_time_seconds in the exposition")
	}
	for name := range f {
		if strings.HasPrefix(name, "braid_") {
			t.Errorf("%s shown without a destination", name)
		}
	}
	for _, c := range []struct{ method, path string }{{"GET", "/v1/destinations"}, {"POST", "/metrics"}} {
		req, _ := http.NewRequest(c.method, web.URL+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := "native " + c.method + " " + c.path; string(b) != want {
			t.Errorf("%s %s answered %q, want %q", c.method, c.path, b, want)
		}
	}
}
