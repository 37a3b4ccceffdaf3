package verify_test

import (
	"database/sql"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/sink/sinkrun"
	"github.com/braid-cdc/braid/sink/verify"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

func TestEqual(t *testing.T) {
	s := func(v string) *string { return &v }
	for _, c := range []struct {
		src, tgt *string
		want     bool
	}{
		{nil, nil, true},
		{s(""), nil, false},
		{nil, s("NULL"), false},
		{s("abc"), s("abc"), true},
		{s("abc"), s("abd"), false},
		{s("1.50"), s("1.5"), true},   // numeric without its scale
		{s("1000"), s("1e3"), true},   // a float's form
		{s("1.50"), s("1.51"), false}, // a number that differs
		{s("007"), s("7"), true},      // compared as numbers: the price of forgiving forms
		{s("0x10"), s("16"), false},   // but not in another base
		{s("1"), s("t"), true},        // PostgreSQL's boolean
		{s("0"), s("false"), true},    // likewise
		{s("1"), s("f"), false},       // likewise, differing
		{s("2026-01-02 03:04:05"), s("2026-01-02T03:04:05"), true},
		{s("2026-01-02 03:04:05.500000"), s("2026-01-02 03:04:05.5"), true},
		{s("2026-01-02 03:04:05"), s("2026-01-02 03:04:06"), false},
		{s(`{"a": 1, "b": [1, 2]}`), s(`{"b":[1,2],"a":1}`), true}, // JSON by value
		{s(`{"a": 1}`), s(`{"a": 2}`), false},
		{s("ab"), s(`\x6162`), true}, // bytea
		{s("ab"), s(`\x6163`), false},
	} {
		if got := verify.Equal(c.src, c.tgt); got != c.want {
			t.Errorf("Equal(%s, %s) = %v, want %v", show(c.src), show(c.tgt), got, c.want)
		}
	}
}

func show(s *string) string {
	if s == nil {
		return "NULL"
	}
	return fmt.Sprintf("%q", *s)
}

// targetAddr is the machine's MariaDB, the target of the tests; each test
// has a database of its own, dropped after.
const targetAddr = "127.0.0.1:3306"

// TestTwoSources: sources a and b each have a shop_0.orders with the
// same keys 1 to 30, routed to one logical table. Sink plain (no origin
// column) stops at the collision with an error that names the shard
// table of each source, a/shop_0.orders and b/shop_0.orders. Sink kept
// (origin_column) keeps both; verify finds it in step with a sample that
// is smaller than its tables (random points of the key: the sources by
// id, the target by id within each value of _shard), then names the row
// of b's shard table changed by hand and a row of an origin no source
// has.
func TestTwoSources(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test uses MariaDB on " + targetAddr)
	}
	db, err := sql.Open("mysql", "root@tcp("+targetAddr+")/")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Ping(); err != nil {
		t.Skipf("no MariaDB on %s to apply to: %v", targetAddr, err)
	}
	name := fmt.Sprintf("braid_verify_%d_%d", os.Getpid(), rand.IntN(1e6))
	t.Cleanup(func() {
		db.Exec("DROP DATABASE IF EXISTS " + name)
		db.Exec("DROP DATABASE IF EXISTS " + name + "_meta")
		db.Close()
	})
	srvs := mysqltest.StartN(t, 2)
	for i, srv := range srvs {
		var vals []string
		for k := 1; k <= 30; k++ {
			vals = append(vals, fmt.Sprintf("(%d, 'n%d-%d')", k, i, k))
		}
		srv.Exec(t, "CREATE DATABASE shop_0", "CREATE TABLE shop_0.orders (id INT PRIMARY KEY, note VARCHAR(20))",
			"INSERT INTO shop_0.orders VALUES "+strings.Join(vals, ", "))
	}
	ds := spec.Spec{Name: "shop", Tables: []string{`shop_\d+\.orders`}, Route: []spec.RouteRule{{Match: `shop_\d+\.(\w+)`, To: "shop.$1"}},
		Heartbeat: spec.Duration(100 * time.Millisecond),
		Sources: []spec.Source{{Name: "a", Address: srvs[0].Addr(), Start: spec.Start{Kind: spec.StartEarliest}},
			{Name: "b", Address: srvs[1].Addr(), Start: spec.Start{Kind: spec.StartEarliest}}},
		Sinks: []spec.Sink{
			{Name: "plain", Type: spec.SinkMySQL, Address: targetAddr, Workers: 2, MetaDatabase: name + "_meta", Tables: []spec.SinkTable{{From: "shop.orders", To: name + ".plain"}}},
			{Name: "kept", Type: spec.SinkMySQL, Address: targetAddr, Workers: 2, MetaDatabase: name + "_meta", OriginColumn: "_shard", Tables: []spec.SinkTable{{From: "shop.orders", To: name + ".kept"}}},
		}}
	ds = ds.WithDefaults()
	if err := ds.Validate(); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
	clients := map[string]*group.Cursor{}
	if err := sinkrun.Clients(&ds, clients, nil); err != nil {
		t.Fatal(err)
	}
	p, err := stream.StartPipeline(t.Context(), stream.PipelineConfig{Spec: &ds, Clients: clients, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	sinks := sinkrun.Start(t.Context(), p, &ds, nil, nil, log)
	t.Cleanup(sinks.Stop)

	state := func(sink string) stream.SinkStats {
		for _, s := range sinks.Stats() {
			if s.Name == sink {
				return s
			}
		}
		t.Fatalf("no sink %s", sink)
		return stream.SinkStats{}
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: plain %+v, kept %+v", what, state("plain"), state("kept"))
			}
		}
	}
	waitFor("a collision error naming both shard tables", func() bool {
		e := state("plain").LastError
		return strings.Contains(e, "a/shop_0.orders writes key id=") && strings.Contains(e, "written by b/shop_0.orders") ||
			strings.Contains(e, "b/shop_0.orders writes key id=") && strings.Contains(e, "written by a/shop_0.orders")
	})
	t.Logf("plain: %s", state("plain").LastError)

	count := func() int {
		var n int
		db.QueryRow("SELECT COUNT(*) FROM " + name + ".kept").Scan(&n)
		return n
	}
	waitFor("kept has both sources' rows", func() bool { return count() == 60 && state("kept").AppliedSeq >= p.Dest.Stats().Seq })

	rep, err := sinks.Verify(t.Context(), "kept", 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Differences) != 0 || rep.SourceRows != 10 || rep.TargetRows != 10 || !rep.Settled {
		t.Fatalf("a copy in step, sampled: %+v", rep)
	}

	for _, q := range []string{
		"UPDATE " + name + ".kept SET note = 'changed' WHERE _shard = 'b/shop_0.orders' AND id = 7",
		"INSERT INTO " + name + ".kept VALUES (7, 'stray', 'c/shop_9.orders')",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	rep, err = sinks.Verify(t.Context(), "kept", 100, []string{"shop.orders"})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, d := range rep.Differences {
		kinds = append(kinds, d.Kind+" "+d.Origin)
		switch d.Kind {
		case wire.DiffValues:
			if d.Origin != "b/shop_0.orders" || len(d.Columns) != 1 || *d.Columns[0].Source != "n1-7" || *d.Columns[0].Target != "changed" {
				t.Errorf("changed row: %+v", d)
			}
		case wire.DiffExtra:
			if d.Origin != "c/shop_9.orders" || *d.Key[0].Value != "7" {
				t.Errorf("stray row: %+v", d)
			}
		}
	}
	if len(rep.Differences) != 2 || rep.Compared != 61 {
		t.Fatalf("after two changes by hand: %d rows compared, differences %v", rep.Compared, kinds)
	}
	if _, err := sinks.Verify(t.Context(), "nope", 10, nil); err == nil || !strings.Contains(err.Error(), `no such sink "nope"`) {
		t.Errorf("verify of an unknown sink: %v", err)
	}
	if d, err := sinks.Detail(t.Context(), "kept"); err != nil || len(d.Checkpoints) != 2 || !strings.Contains(string(d.Spec), `"origin_column":"_shard"`) {
		t.Errorf("detail: %v, %+v", err, d)
	}
}

// TestColumnAnyCase: a target column is found by the source's name in
// any case (a PostgreSQL target's names are lower case), the exact name
// first.
func TestColumnAnyCase(t *testing.T) {
	a, b := "a", "b"
	row := map[string]*string{"orderid": &a, "Note": &b}
	if v, ok := verify.Column(row, "OrderId"); !ok || v != &a {
		t.Fatalf("OrderId: %v %v", v, ok)
	}
	if v, ok := verify.Column(row, "Note"); !ok || v != &b {
		t.Fatalf("Note: %v %v", v, ok)
	}
	if _, ok := verify.Column(row, "missing"); ok {
		t.Fatal("a column that is not there was found")
	}
}
