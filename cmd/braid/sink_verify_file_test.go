package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
)

// TestSinkVerifyHere: `braid sink verify -f spec.yaml DEST SINK` runs
// where it is, with no braid server or capture anywhere: it reads the
// spec, opens the sources (a real mariadbd with two shard tables routed
// to shop.orders) and the sink's target (the machine's MariaDB, filled by
// hand with the same rows), and compares them. Equal: exit 0 and a
// summary. A value planted in the target: exit 1, the differing key and
// both values named.
func TestSinkVerifyHere(t *testing.T) {
	tg := newTarget(t, "(id BIGINT PRIMARY KEY, note VARCHAR(40), amount DECIMAL(10,2))")
	srv := mysqltest.Start(t)
	var all []string
	for n := range 2 {
		var vals []string
		for k := range 20 {
			vals = append(vals, fmt.Sprintf("(%d, 'r%d', %d.25)", n*1000+k, k, k))
		}
		all = append(all, vals...)
		srv.Exec(t, fmt.Sprintf("CREATE DATABASE shop_%d", n),
			fmt.Sprintf("CREATE TABLE shop_%d.orders (id BIGINT PRIMARY KEY, note VARCHAR(40), amount DECIMAL(10,2))", n),
			fmt.Sprintf("INSERT INTO shop_%d.orders VALUES %s", n, strings.Join(vals, ", ")))
	}
	if _, err := tg.db.Exec("INSERT INTO " + tg.name + ".orders VALUES " + strings.Join(all, ", ")); err != nil {
		t.Fatal(err)
	}
	specFile := nodes.WriteSpec(t, fmt.Sprintf(`
name: shop
sources:
  - {name: a, address: '%s', start: earliest}
tables: ['shop_\d+\.orders']
route: [{match: 'shop_\d+\.(\w+)', to: 'shop.$1'}]
sinks:
  - {name: copy, type: mysql, address: '127.0.0.1:3306', workers: 2, meta_database: %s_meta,
     tables: [{from: shop.orders, to: %s.orders}]}
`, srv.Addr(), tg.name, tg.name))

	out, errs, code := cli("sink", "verify", "-f", specFile, "shop", "copy")
	if code != 0 || !strings.Contains(out, "sink copy of shop: 40 rows compared in shop.orders") || !strings.Contains(out, ": 0 differ") ||
		!strings.Contains(out, "compared here") {
		t.Fatalf("verify -f of a copy in step: exit %d:\n%s%s", code, out, errs)
	}

	if _, err := tg.db.Exec("UPDATE " + tg.name + ".orders SET note = 'planted' WHERE id = 1007"); err != nil {
		t.Fatal(err)
	}
	out, errs, code = cli("sink", "verify", "shop", "copy", "-f", specFile)
	for _, want := range []string{"id='1007'", "a/shop_1.orders", "note", "'r7'", "'planted'", ": 1 differ"} {
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("verify -f after a value planted: exit %d, no %q in:\n%s%s", code, want, out, errs)
		}
	}
	out, _, code = cli("sink", "verify", "shop", "copy", "-f", specFile, "--json")
	var rep wire.SinkVerify
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 1 || len(rep.Differences) != 1 || rep.Differences[0].Kind != wire.DiffValues ||
		len(rep.Differences[0].Key) != 1 || *rep.Differences[0].Key[0].Value != "1007" {
		t.Errorf("verify -f --json: exit %d, %v: %s", code, err, out)
	}

	// What -f refuses: another destination's name, a sink the spec lacks,
	// and a node to ask as well.
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"orders", "copy", "-f", specFile}, 1, "the spec is destination shop's, not orders's"},
		{[]string{"shop", "nope", "-f", specFile}, 1, "destination shop has no sink nope"},
		{[]string{"shop", "copy", "-f", specFile, "--server", "http://127.0.0.1:1"}, 2, "-f compares here, --server asks a node"},
		{[]string{"shop", "copy", "-f", specFile + ".missing"}, 2, "no such file"},
	} {
		out, errs, code := cli(append([]string{"sink", "verify"}, c.args...)...)
		if code != c.code || !strings.Contains(errs, c.want) || out != "" {
			t.Errorf("sink verify %q: exit %d, stdout %q, stderr %q; want %d and %q", c.args, code, out, errs, c.code, c.want)
		}
	}
}
