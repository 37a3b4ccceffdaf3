package statuspage

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/braid-cdc/braid/api/wire"
)

// TestHistoryDatadriven runs the scripts in testdata/history: each case
// says why it matters. Times are seconds after an epoch. Commands:
//
//	init every=5 window=20        a new History (seconds)
//	add dest=shop at=0 a=1500 b=- each source's lag in ms ("-": none); prints added or skipped
//	keep shop billing             forgets the other destinations
//	series dest=shop              one line a source: at:lag ...
func TestHistoryDatadriven(t *testing.T) {
	epoch := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var h *History
	datadriven.RunTest(t, "testdata/history", func(t *testing.T, d *datadriven.TestData) string {
		secs := func(name string) time.Duration {
			var v int
			d.ScanArgs(t, name, &v)
			return time.Duration(v) * time.Second
		}
		switch d.Cmd {
		case "init":
			h = NewHistory(secs("every"), secs("window"))
			return ""
		case "add":
			var dest string
			d.ScanArgs(t, "dest", &dest)
			var sources []wire.SourceState
			for _, a := range d.CmdArgs {
				if a.Key == "dest" || a.Key == "at" {
					continue
				}
				s := wire.SourceState{Name: a.Key}
				if v := a.Vals[0]; v != "-" {
					ms, err := strconv.ParseInt(v, 10, 64)
					if err != nil {
						t.Fatalf("%s: %v", a.Key, err)
					}
					s.BehindMs, s.Connected = ms, true
				}
				sources = append(sources, s)
			}
			if h.Add(dest, epoch.Add(secs("at")), sources) {
				return "added"
			}
			return "skipped"
		case "keep":
			keep := map[string]bool{}
			for _, a := range d.CmdArgs {
				keep[a.Key] = true
			}
			h.Keep(keep)
			return ""
		case "series":
			var dest string
			d.ScanArgs(t, "dest", &dest)
			var b strings.Builder
			for _, s := range h.Series(dest) {
				fmt.Fprintf(&b, "%s:", s.Source)
				for _, p := range s.Samples {
					lag := "-"
					if p.LagMs != nil {
						lag = strconv.FormatInt(*p.LagMs, 10)
					}
					fmt.Fprintf(&b, " %d:%s", int(p.Time.Sub(epoch).Seconds()), lag)
				}
				b.WriteString("\n")
			}
			if b.Len() == 0 {
				return "none"
			}
			return b.String()
		}
		t.Fatalf("unknown command %q", d.Cmd)
		return ""
	})
}

// TestHistoryDefaults: a zero interval or window takes the defaults the
// page is described with.
func TestHistoryDefaults(t *testing.T) {
	h := NewHistory(0, 0)
	if h.Every() != DefaultEvery || h.Window() != DefaultWindow {
		t.Errorf("every %v, window %v; want %v, %v", h.Every(), h.Window(), DefaultEvery, DefaultWindow)
	}
}
