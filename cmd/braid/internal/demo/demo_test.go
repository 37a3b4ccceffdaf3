package demo

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/braid-cdc/braid/client"
	"github.com/braid-cdc/braid/internal/mariadb"
	"github.com/braid-cdc/braid/internal/testutil/braidproc"
)

// TestDemo runs the demo as `braid demo --duration 20s --kill-after 8s`
// would: the shards and the cluster come up, rows stream, the demo kills
// the node that runs shop, another takes over, rows go on, and at
// --duration every committed transaction has arrived once; nothing is
// left running.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the demo starts mariadbd servers and braid nodes")
	}
	if err := mariadb.Prepare(t.Context()); errors.Is(err, mariadb.ErrNoServer) && os.Getenv("CI") != "true" {
		t.Skip(err)
	} else if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	o := Options{Duration: 20 * time.Second, KillAfter: 8 * time.Second, Rate: 15, Dir: dir, LogLevel: "info", Binary: braidproc.Binary(t)}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}

	leaks := goleak.IgnoreCurrent()
	var out, errb bytes.Buffer
	began := time.Now()
	logs, err := Run(t.Context(), o, &out, &errb)
	t.Logf("braid demo took %v", time.Since(began).Round(100*time.Millisecond))
	text := out.String()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stdout:\n%s\nstderr:\n%s", text, errb.String())
			for _, n := range []string{"n1", "n2", "n3"} {
				b, _ := os.ReadFile(filepath.Join(dir, n+".log"))
				lines := strings.Split(string(b), "\n")
				t.Logf("%s.log, last lines:\n%s", n, strings.Join(lines[max(0, len(lines)-30):], "\n"))
			}
		}
	})
	if err != nil {
		t.Fatalf("braid demo: %v (logs in %q)", err, logs)
	}

	killed := regexp.MustCompile(`--kill-after 8s: killing (n\d), which runs shop: kill -9 \d+`).FindStringSubmatch(text)
	takeover := regexp.MustCompile(`\*\*\* takeover: shop moved from (n\d) to (n\d)`).FindStringSubmatchIndex(text)
	if killed == nil || takeover == nil {
		t.Fatal("no kill and takeover in the output")
	}
	from, to := text[takeover[2]:takeover[3]], text[takeover[4]:takeover[5]]
	if from != killed[1] || to == from {
		t.Errorf("killed %s; the takeover went from %s to %s", killed[1], from, to)
	}
	rowLine := regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d\.\d{3}  seq \d+ +shop\.orders  (INSERT|UPDATE|DELETE)  id=\d+.*\(from shop_[0-5] on source [abc]\)$`)
	before, after := len(rowLine.FindAllString(text[:takeover[0]], -1)), len(rowLine.FindAllString(text[takeover[0]:], -1))
	if before < 20 || after < 20 {
		t.Errorf("%d row lines before the takeover and %d after, want 20 or more of each", before, after)
	}
	for _, want := range []string{
		"cluster up after", "registered destination shop", "kill -9 ", "cluster status --server http://127.0.0.1:",
		"*** the stream resumed after a", "every seq once, none skipped", "stopped; the nodes' and shards' logs",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	if !regexp.MustCompile(`\*\*\* restarting (n\d) on its data directory[^\n]*\n(?:[^\n]*\n)*?\*\*\* (n\d) is back \(pid \d+\)`).MatchString(text) {
		t.Error("the killed node was not restarted")
	}
	sums := regexp.MustCompile(`the workload committed (\d+) transactions \((\d+) row changes\)[^\n]*\nthe stream delivered (\d+) transactions \((\d+) row changes\)`).FindStringSubmatch(text)
	if sums == nil || sums[1] != sums[3] || sums[2] != sums[4] {
		t.Errorf("summary %q: want what was committed delivered", sums)
	}

	// Nothing is left running.
	goleak.VerifyNone(t, leaks)
	for _, m := range regexp.MustCompile(`pid (\d+)`).FindAllStringSubmatch(text, -1) {
		pid, _ := strconv.Atoi(m[1])
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d still there after the demo (signal 0: %v)", pid, err)
		}
	}
	for _, n := range []string{"n1.log", "n2.log", "n3.log", "consumer.log", "shop.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Errorf("--dir keeps the files: %v", err)
		}
	}
}

// A stream line shows the row change compactly: the columns of a new
// row, the changed ones of an update, and where the row came from.
func TestDemoFormat(t *testing.T) {
	s := func(v string) *string { return &v }
	at := time.Date(2026, 11, 29, 10, 0, 1, 234e6, time.Local)
	m := client.Message{Seq: 42, Database: "shop", Table: "orders", Type: "INSERT", Source: "b", OriginDatabase: "shop_3",
		Data: []map[string]*string{
			{"id": s("7"), "customer": s("3"), "amount": s("12.50"), "status": s("new"), "created_at": s("2026-11-29 10:00:01.200")},
			{"id": s("8"), "customer": s("4"), "amount": s("1.00"), "status": nil, "created_at": s("2026-11-29 10:00:01.200")},
		}}
	got := formatMessage(m, at)
	want := []string{
		"10:00:01.234  seq 42    shop.orders  INSERT  id=7 customer=3 amount=12.50 status=new       (from shop_3 on source b)",
		"10:00:01.234  seq 42    shop.orders  INSERT  id=8 customer=4 amount=1.00 status=NULL       (from shop_3 on source b)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("INSERT:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	m.Type, m.Data, m.Old = "UPDATE", m.Data[:1], []map[string]*string{{"status": s("paid")}}
	m.Data[0]["status"] = s("shipped")
	if got := formatMessage(m, at)[0]; !strings.Contains(got, "UPDATE  id=7 status=paid→shipped   ") {
		t.Errorf("UPDATE: %q", got)
	}
	m.Type, m.Old = "DELETE", nil
	if got := formatMessage(m, at)[0]; !strings.Contains(got, "DELETE  id=7 status=shipped   ") {
		t.Errorf("DELETE: %q", got)
	}
	m.Type, m.IsDdl, m.Data = "ALTER", true, nil
	m.SQL = "ALTER TABLE shop_3.orders\n  ADD COLUMN note VARCHAR(40) NOT NULL DEFAULT '' AFTER status"
	if got := formatMessage(m, at); len(got) != 1 || !strings.Contains(got[0], "ALTER   ALTER TABLE shop_3.orders ADD COLUMN note V…  (from shop_3") {
		t.Errorf("DDL: %q", got)
	}
}
