package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/logline"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/sink"
)

// lineSink is a capture's standard output that a test can read while the
// capture runs.
type lineSink struct{ logline.Buffer }

// seqs returns the seq of every whole line written so far.
func (l *lineSink) seqs(t *testing.T) []uint64 {
	t.Helper()
	var seqs []uint64
	for line := range strings.Lines(l.String()) {
		if !strings.HasSuffix(line, "\n") {
			break
		}
		var m struct{ Seq uint64 }
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not JSON: %s", line)
		}
		seqs = append(seqs, m.Seq)
	}
	return seqs
}

// TestCaptureKeepsCursorOnSourceError: a capture that stops because its
// source fails (here a row of a table changed by a DDL the binlog does
// not hold, which braid refuses) keeps its cursor after exactly what it
// printed, so a restart prints nothing twice (issue 42, point 4: the
// cursor file was left 14 seqs behind the output). The transactions come
// in a burst just before the error, well within capture's periodic save
// interval, which is what left the cursor behind.
func TestCaptureKeepsCursorOnSourceError(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id INT PRIMARY KEY, v INT)",
		"INSERT INTO shop.orders VALUES (1, 1)")
	spec := nodes.WriteSpec(t, fmt.Sprintf("name: shop\nsources: [{name: a, address: '%s', start: earliest}]\n", srv.Addr()))
	cursors := t.TempDir()
	capture := func(out *lineSink, errb *bytes.Buffer) <-chan int {
		code := make(chan int, 1)
		go func() {
			code <- run([]string{"capture", "-f", spec, "--cursor-dir", cursors, "--timeout", "60s"}, out, errb)
		}()
		return code
	}

	var out lineSink
	var errb bytes.Buffer
	code := capture(&out, &errb)
	// The first batch is printed and saved (the first save comes with it).
	retry.Until(t, 30*time.Second, func() error {
		if n := len(out.seqs(t)); n < 2 {
			return fmt.Errorf("%d lines printed, want the CREATE TABLE and the first INSERT", n)
		}
		return nil
	})
	stmts := []string{}
	for id := 2; id <= 20; id++ {
		stmts = append(stmts, fmt.Sprintf("INSERT INTO shop.orders VALUES (%d, %d)", id, id))
	}
	stmts = append(stmts, "SET sql_log_bin = 0", "ALTER TABLE shop.orders ADD COLUMN extra INT",
		"SET sql_log_bin = 1", "INSERT INTO shop.orders VALUES (99, 99, 99)")
	srv.Exec(t, stmts...)

	var exit int
	select {
	case exit = <-code:
	case <-time.After(60 * time.Second):
		t.Fatal("capture did not stop on the source error")
	}
	if exit != 1 || !strings.Contains(errb.String(), "column") {
		t.Fatalf("exit %d, want 1 with the column count error; stderr:\n%s", exit, errb.String())
	}
	seqs := out.seqs(t)
	if len(seqs) != 21 || seqs[len(seqs)-1] != 21 {
		t.Fatalf("printed seqs %v, want 1..21 (CREATE TABLE and 20 inserts)", seqs)
	}
	kept, err := group.NewFileKeeper(cursors, "shop").Cursors()
	if err != nil {
		t.Fatal(err)
	}
	if c := kept[printerID]; c == nil || c.Seq != 21 {
		t.Fatalf("kept cursor %+v, want seq 21, the last printed", c)
	}

	// A restart goes on after what was printed: nothing before the error
	// is printed again, and it stops on the same row.
	var again lineSink
	errb.Reset()
	select {
	case exit = <-capture(&again, &errb):
	case <-time.After(60 * time.Second):
		t.Fatal("restarted capture did not stop on the source error")
	}
	if exit != 1 {
		t.Fatalf("restart: exit %d, want 1; stderr:\n%s", exit, errb.String())
	}
	if s := again.seqs(t); len(s) != 0 {
		t.Errorf("restart printed seqs %v again, want none", s)
	}
}

// failingOutput accepts its first allow writes, then fails every write,
// as a full disk does.
type failingOutput struct {
	lineSink
	mu     sync.Mutex
	allow  int
	writes int
}

func (f *failingOutput) Write(b []byte) (int, error) {
	f.mu.Lock()
	if f.writes >= f.allow {
		f.mu.Unlock()
		return 0, errors.New("no space left on device")
	}
	f.writes++
	f.mu.Unlock()
	return f.lineSink.Write(b)
}

// written is how many writes succeeded.
func (f *failingOutput) written() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writes
}

// TestCaptureKeepsCursorOnOutputError: a capture whose standard output
// fails stops at once and keeps its cursor after the last transaction it
// wrote, even when that write came soon after the last periodic save.
func TestCaptureKeepsCursorOnOutputError(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id INT PRIMARY KEY)", "INSERT INTO shop.orders VALUES (1)")
	spec := nodes.WriteSpec(t, fmt.Sprintf("name: shop\nsources: [{name: a, address: '%s', start: earliest}]\n", srv.Addr()))
	cursors := t.TempDir()
	out := &failingOutput{allow: 2}
	var errb bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"capture", "-f", spec, "--cursor-dir", cursors, "--timeout", "60s"}, out, &errb)
	}()
	// One write per batch: the second comes right after the first (and
	// its save), the third fails.
	for id := 2; id <= 3; id++ {
		retry.Until(t, 30*time.Second, func() error {
			if n := out.written(); n < id-1 {
				return fmt.Errorf("%d writes, want %d", n, id-1)
			}
			return nil
		})
		srv.Exec(t, fmt.Sprintf("INSERT INTO shop.orders VALUES (%d)", id))
	}
	// It stops on the failed write, not at the next batch or --timeout.
	var exit int
	select {
	case exit = <-code:
	case <-time.After(20 * time.Second):
		t.Fatal("capture did not stop on the output error within 20s")
	}
	if exit != 1 || !strings.Contains(errb.String(), "no space left") {
		t.Fatalf("exit %d, want 1 naming the output error; stderr:\n%s", exit, errb.String())
	}
	seqs := out.seqs(t)
	// How the first messages fall into the two allowed writes depends on
	// timing (the CREATE TABLE and the first INSERT may come together or
	// apart); what matters is that the third write failed and the cursor
	// is the last seq written.
	if out.written() != 2 || len(seqs) < 2 {
		t.Fatalf("%d writes of seqs %v; want 2 writes", out.written(), seqs)
	}
	kept, err := group.NewFileKeeper(cursors, "shop").Cursors()
	if err != nil {
		t.Fatal(err)
	}
	if c, last := kept[printerID], seqs[len(seqs)-1]; c == nil || c.Seq != last {
		t.Fatalf("kept cursor %+v, want seq %d, the last written", c, last)
	}
}

// TestCaptureKeepsSinkCursorOnSourceError: `braid capture --quiet`
// applying a sink stops on a source error with the sink's kept cursor
// exactly where the target's checkpoint is: what the sink applied, not
// the last periodic save.
func TestCaptureKeepsSinkCursorOnSourceError(t *testing.T) {
	servers := mysqltest.StartN(t, 2)
	src, dst := servers[0], servers[1]
	src.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id INT PRIMARY KEY, v INT)",
		"INSERT INTO shop.orders VALUES (1, 1)")
	dst.Exec(t, "CREATE DATABASE copy", "CREATE TABLE copy.orders (id INT PRIMARY KEY, v INT)")
	spec := nodes.WriteSpec(t, fmt.Sprintf(`
name: shop
sources: [{name: a, address: '%s', start: earliest}]
sinks: [{name: copy, type: mysql, address: '%s', workers: 1, tables: [{from: shop.orders, to: copy.orders}]}]
`, src.Addr(), dst.Addr()))
	cursors := t.TempDir()
	var errb bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"capture", "-f", spec, "--quiet", "--cursor-dir", cursors, "--timeout", "60s"}, io.Discard, &errb)
	}()
	retry.Until(t, 30*time.Second, func() error {
		if got := dst.Query(t, "SELECT COUNT(*) FROM copy.orders"); got[0][0] != "1" {
			return fmt.Errorf("%s rows applied, want the first", got[0][0])
		}
		return nil
	})
	stmts := []string{}
	for id := 2; id <= 20; id++ {
		stmts = append(stmts, fmt.Sprintf("INSERT INTO shop.orders VALUES (%d, %d)", id, id))
	}
	stmts = append(stmts, "SET sql_log_bin = 0", "ALTER TABLE shop.orders ADD COLUMN extra INT",
		"SET sql_log_bin = 1", "INSERT INTO shop.orders VALUES (99, 99, 99)")
	src.Exec(t, stmts...)

	var exit int
	select {
	case exit = <-code:
	case <-time.After(60 * time.Second):
		t.Fatal("capture did not stop on the source error")
	}
	if exit != 1 || !strings.Contains(errb.String(), "column") {
		t.Fatalf("exit %d, want 1 with the column count error; stderr:\n%s", exit, errb.String())
	}
	checkpoint := dst.Query(t, "SELECT MAX(seq) FROM braid_meta.sink_checkpoint WHERE dest = 'shop' AND sink = 'copy' AND worker >= 0")
	kept, err := group.NewFileKeeper(cursors, "shop").Cursors()
	if err != nil {
		t.Fatal(err)
	}
	c := kept[sink.ClientID("copy")]
	if c == nil || strconv.FormatUint(c.Seq, 10) != checkpoint[0][0] {
		t.Fatalf("kept sink cursor %+v, want the target's checkpoint seq %s", c, checkpoint[0][0])
	}
	t.Logf("sink applied and kept seq %d", c.Seq)
}
