package spec_test

import (
	"strings"
	"testing"

	"github.com/braid-cdc/braid/spec"
)

// TestSinkSpec: a sink's defaults, its problems with their paths, and a
// password the redacted spec does not show.
func TestSinkSpec(t *testing.T) {
	src := "sources: [{name: a, address: 'h:1'}]\n"
	s, err := spec.Parse([]byte("name: d\n" + src + "sinks: [{name: w, type: mysql, address: 'h:3306', password: pw, tables: [{from: shop.orders, to: wh.orders}]}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	sk := s.Sinks[0]
	if sk.Workers != spec.DefaultSinkWorkers || sk.Batch != spec.DefaultSinkBatch || sk.User != spec.DefaultUser || sk.DDL != "apply" {
		t.Errorf("defaults: %+v", sk)
	}
	if sk.Target("shop.orders") != "wh.orders" || sk.Target("shop.items") != "shop.items" {
		t.Errorf("targets: %q %q", sk.Target("shop.orders"), sk.Target("shop.items"))
	}
	if r := s.Redacted(); r.Sinks[0].Password != spec.Hidden || s.Sinks[0].Password != "pw" {
		t.Errorf("redacted sink password %q (spec's %q)", r.Sinks[0].Password, s.Sinks[0].Password)
	}
	_, err = spec.Parse([]byte("name: d\n" + src + "sinks:\n  - {name: w, type: oracle, address: 'h', workers: -1}\n  - {name: w, type: mysql, address: 'h:1', tables: [{from: orders, to: x}]}\n"))
	for _, want := range []string{`sinks[0].type: "oracle": want one of mysql`, "sinks[0].address", "sinks[0].workers", `sinks[1].name: "w" is used twice`, "sinks[1].tables[0].from", "sinks[1].tables[0].to"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("problems %v: want %q", err, want)
		}
	}
}
