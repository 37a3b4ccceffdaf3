package spec_test

import (
	"strings"
	"testing"

	"github.com/braid-cdc/braid/spec"
)

// TestStartGTID: a start GTID is MariaDB's GTID position or a MySQL GTID
// set, tags (8.3+) included, kept as written (the source's reader
// normalises it); one built in Go is checked as one read from YAML.
func TestStartGTID(t *testing.T) {
	for _, gtid := range []string{
		"0-1-42",
		"0-1-42, 1-2-7",
		"3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5",
		"3E11FA47-71CA-11E1-9E33-C80AA9429562:SHOP:1-5,\n3e11fa47-71ca-11e1-9e33-c80aa9429562:7-9:_b2:1",
	} {
		y := "name: d\nsources:\n  - name: a\n    address: 'h:1'\n    start: {gtid: '" + strings.ReplaceAll(gtid, "\n", "\n\n") + "'}\n"
		d, err := spec.Parse([]byte(y))
		if err != nil {
			t.Errorf("%q: %v", gtid, err)
			continue
		}
		if st := d.Sources[0].Start; st.Kind != spec.StartGTID || st.GTID != gtid {
			t.Errorf("%q read as %+v", gtid, st)
		}
		built := &spec.Spec{Name: "d", Sources: []spec.Source{{Name: "a", Address: "h:1", Start: spec.Start{Kind: spec.StartGTID, GTID: gtid}}}}
		if err := built.Validate(); err != nil {
			t.Errorf("%q built in Go: %v", gtid, err)
		}
	}
	built := &spec.Spec{Name: "d", Sources: []spec.Source{{Name: "a", Address: "h:1",
		Start: spec.Start{Kind: spec.StartGTID, GTID: "3e11fa47-71ca-11e1-9e33-c80aa9429562:shop"}}}}
	if err := built.Validate(); err == nil || !strings.Contains(err.Error(), `tag "shop" has no interval after it`) {
		t.Errorf("a set with a tag and no interval, built in Go: %v", err)
	}
}
