package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"text/tabwriter"
	"time"
)

// Row is one line of the results table `make bench` prints at the end and
// writes as JSON: one measure of one benchmark, with its peer and target
// where it has them.
type Row struct {
	// Section groups rows: "catch-up", "latency", "failover", "resources",
	// "decode", "merge", "consume", "raft", "shard-ddl", "sink".
	Section string `json:"section"`
	// Measure says what was measured, e.g. "merged stream over canal, rows/s".
	Measure string  `json:"measure"`
	Value   float64 `json:"value"`
	Unit    string  `json:"unit"`
	// Peer, when set, is what Value is compared with (PeerValue, same unit)
	// and Ratio is Value / PeerValue.
	Peer      string  `json:"peer,omitempty"`
	PeerValue float64 `json:"peerValue,omitempty"`
	Ratio     float64 `json:"ratio,omitempty"`
	// Target states the target in words ("ratio >= 1.0",
	// "<= 5 s"); Met says whether this run reached it.
	Target string `json:"target,omitempty"`
	Met    *bool  `json:"met,omitempty"`
}

var report struct {
	mu   sync.Mutex
	rows []Row
}

// Record adds a row to the results table, or replaces the row of the same
// section, measure and peer: go test calls a benchmark with b.N = 1 before
// the -benchtime count, and the later call's totals are the ones to keep.
func Record(r Row) {
	if r.Peer != "" && r.PeerValue != 0 && r.Ratio == 0 {
		r.Ratio = r.Value / r.PeerValue
	}
	report.mu.Lock()
	defer report.mu.Unlock()
	for i, old := range report.rows {
		if old.Section == r.Section && old.Measure == r.Measure && old.Peer == r.Peer {
			report.rows[i] = r
			return
		}
	}
	report.rows = append(report.rows, r)
}

// Met is a helper for Row.Met.
func Met(ok bool) *bool { return &ok }

// sectionOrder is the order sections print in.
var sectionOrder = map[string]int{"catch-up": 0, "latency": 1, "failover": 2, "resources": 3,
	"decode": 4, "merge": 5, "consume": 6, "raft": 7, "shard-ddl": 8, "sink": 9, "snapshot": 10}

// printReport writes the table of what was recorded, and the JSON next to
// it when path is set.
func printReport(w io.Writer, path string) error {
	report.mu.Lock()
	rows := append([]Row(nil), report.rows...)
	report.mu.Unlock()
	if len(rows) == 0 {
		return nil
	}
	sort.SliceStable(rows, func(i, j int) bool { return sectionOrder[rows[i].Section] < sectionOrder[rows[j].Section] })
	host, _ := os.Hostname()
	fmt.Fprintf(w, "\nbraid benchmark results, %s, on %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), host)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SECTION\tMEASURE\tVALUE\tPEER\tRATIO\tTARGET")
	for _, r := range rows {
		peer, ratio := "", ""
		if r.Peer != "" {
			peer = fmt.Sprintf("%s %s", r.Peer, formatValue(r.PeerValue, r.Unit))
			ratio = fmt.Sprintf("%.2fx", r.Ratio)
		}
		target := r.Target
		if r.Met != nil {
			verdict := "MISSED"
			if *r.Met {
				verdict = "met"
			}
			target = fmt.Sprintf("%s: %s", target, verdict)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Section, r.Measure, formatValue(r.Value, r.Unit), peer, ratio, target)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if path == "" {
		return nil
	}
	data, err := json.MarshalIndent(struct {
		Date string `json:"date"`
		Host string `json:"host"`
		Rows []Row  `json:"rows"`
	}{time.Now().UTC().Format(time.RFC3339), host, rows}, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\n(also written to %s)\n", path)
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

func formatValue(v float64, unit string) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f %s", v, unit)
	case v >= 1:
		return fmt.Sprintf("%.2f %s", v, unit)
	default:
		return fmt.Sprintf("%.3f %s", v, unit)
	}
}
