package group_test

import (
	"testing"
	"time"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/group/grouptest"
	"github.com/braid-cdc/braid/spec"
)

// TestStatsBeforeRun: a destination not yet running names its sources in
// spec order, none connected, none idle, with no lag: a status page or a
// scrape between New and the merge's first publish shows them down, not
// missing.
func TestStatsBeforeRun(t *testing.T) {
	ds := spec.Spec{Name: "shop", Sources: []spec.Source{
		{Name: "s0", Address: "127.0.0.1:1"}, {Name: "s1", Address: "127.0.0.1:2"},
	}}.WithDefaults()
	d, err := group.New(group.Config{Spec: &ds, Clock: grouptest.NewClock(time.Unix(1e9, 0))})
	if err != nil {
		t.Fatal(err)
	}
	st := d.Stats()
	if len(st.Sources) != 2 || st.Sources[0].Name != "s0" || st.Sources[1].Name != "s1" {
		t.Fatalf("sources %+v, want s0 and s1", st.Sources)
	}
	for _, s := range st.Sources {
		if s.Connected || s.Idle || s.Behind || s.Lag != 0 || s.LastError != "" {
			t.Errorf("source %s before Run: %+v", s.Name, s)
		}
	}
}
