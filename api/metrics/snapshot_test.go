package metrics_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/braid-cdc/braid/api/metrics"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/stream"
)

// TestScrapeSnapshot: a source's initial-snapshot progress is scraped as
// braid_snapshot_*, one series each for a source whose snapshot runs and
// one that is done; a source without a snapshot (spec snapshot: never)
// has none, so a dashboard does not show it stuck at 0.
func TestScrapeSnapshot(t *testing.T) {
	reg := stream.NewRegistry()
	reg.Add(&stream.Served{Name: "shop", Store: stream.NewStore(stream.Config{}), Stats: func() group.Stats {
		return group.Stats{Seq: 3, Sources: []group.SourceStats{
			{Name: "running", Snapshot: &group.SnapshotStats{Tables: 6, TablesDone: 3, Rows: 120000, EstimatedRows: 660000,
				RowsPerSecond: 45000, ETA: 12 * time.Second}},
			{Name: "done", Snapshot: &group.SnapshotStats{Tables: 2, TablesDone: 2, Rows: 500, Done: true}},
			{Name: "none"}}}
	}})
	web := httptest.NewServer(metrics.RegistryHandler(reg))
	t.Cleanup(web.Close)
	f := scrape(t, web.URL+"/metrics")

	for _, c := range []struct {
		source                              string
		rows, tables, tablesDone, done, eta float64
	}{
		{"running", 120000, 6, 3, 0, 12},
		{"done", 500, 2, 2, 1, 0},
	} {
		l := []string{"dest=shop", "source=" + c.source}
		for _, m := range []struct {
			name string
			want float64
		}{
			{"braid_snapshot_rows_total", c.rows},
			{"braid_snapshot_tables", c.tables},
			{"braid_snapshot_tables_done", c.tablesDone},
			{"braid_snapshot_done", c.done},
			{"braid_snapshot_eta_seconds", c.eta},
		} {
			if got := f.must(t, m.name, l...); got != m.want {
				t.Errorf("%s{source=%s} = %v, want %v", m.name, c.source, got, m.want)
			}
		}
	}
	if fam := f["braid_snapshot_rows_total"]; fam == nil || fam.GetType().String() != "COUNTER" {
		t.Errorf("braid_snapshot_rows_total is not a counter: %v", fam.GetType())
	}
	for _, name := range []string{"braid_snapshot_rows_total", "braid_snapshot_tables", "braid_snapshot_tables_done", "braid_snapshot_done", "braid_snapshot_eta_seconds"} {
		if _, ok := f.value(name, "dest=shop", "source=none"); ok {
			t.Errorf("%s shown for a source without a snapshot", name)
		}
	}
	if _, ok := f.value("braid_source_connected", "dest=shop", "source=none"); !ok {
		t.Errorf("the source without a snapshot lost its braid_source_* series")
	}
}
