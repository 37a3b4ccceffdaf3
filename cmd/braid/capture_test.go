package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/shoptest"
)

// TestCaptureCLI runs `braid capture -f spec.yaml --max N` against a real
// server and checks the flat-message lines it prints.
func TestCaptureCLI(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop_0", "CREATE DATABASE shop_1",
		"CREATE TABLE shop_0.orders (id INT PRIMARY KEY, amount DECIMAL(10,2), note VARCHAR(20))",
		"CREATE TABLE shop_1.orders (id INT PRIMARY KEY, amount DECIMAL(10,2), note VARCHAR(20))",
		"CREATE TABLE shop_0.audit (id INT PRIMARY KEY)",
		"INSERT INTO shop_0.orders VALUES (1, 9.99, 'a'), (2, 19.99, NULL)",
		"INSERT INTO shop_0.audit VALUES (1)",
		"UPDATE shop_1.orders SET note = 'x'",
		"INSERT INTO shop_1.orders VALUES (3, 5.00, 'c')",
		"UPDATE shop_1.orders SET note = 'd' WHERE id = 3",
		"DELETE FROM shop_0.orders WHERE id = 1")
	spec := nodes.WriteSpec(t, fmt.Sprintf(`
name: shop
sources:
  - name: a
    address: %s
    start: earliest
tables: ['shop_\d+\.orders']
`, srv.Addr()))
	var out, errb bytes.Buffer
	code := run([]string{"capture", "-f", spec, "--max", "6", "--timeout", "60s"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 6 {
		t.Fatalf("%d lines, want 6:\n%s", len(lines), out.String())
	}
	type msg struct {
		Database, Table, Type, Source, Position string
		IsDdl                                   bool
		Seq                                     uint64
		Data, Old                               []map[string]*string
	}
	var msgs []msg
	for _, l := range lines {
		var m msg
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line is not JSON: %s", l)
		}
		msgs = append(msgs, m)
	}
	// Two CREATE TABLEs of selected tables, then the changes; audit is not
	// selected, and the UPDATE of no rows wrote nothing.
	wantTypes := []string{"CREATE", "CREATE", "INSERT", "INSERT", "UPDATE", "DELETE"}
	for i, m := range msgs {
		if m.Type != wantTypes[i] {
			t.Errorf("line %d type %s, want %s: %s", i, m.Type, wantTypes[i], lines[i])
		}
		if m.Seq != uint64(i+1) {
			t.Errorf("line %d seq %d, want %d", i, m.Seq, i+1)
		}
		if m.Source != "a" || m.Position == "" {
			t.Errorf("line %d lacks source or position: %s", i, lines[i])
		}
	}
	if d := msgs[2].Data; len(d) != 2 || *d[0]["amount"] != "9.99" || d[1]["note"] != nil {
		t.Errorf("first insert data = %s", lines[2])
	}
	if o := msgs[4].Old; len(o) != 1 || *o[0]["note"] != "c" || len(o[0]) != 1 {
		t.Errorf("update old = %s", lines[4])
	}
	if msgs[3].Database != "shop_1" || msgs[5].Database != "shop_0" {
		t.Errorf("databases wrong: %s / %s", lines[3], lines[5])
	}
}

func TestCaptureCLIErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
		code int
	}{
		{"no spec", []string{"capture"}, "-f spec.yaml", 2},
		{"missing file", []string{"capture", "-f", "/nonexistent/x.yaml"}, "no such file", 2},
		{"broken yaml", []string{"capture", "-f", nodes.WriteSpec(t, "name: [\n")}, "invalid spec", 2},
		{"bad regex", []string{"capture", "-f", nodes.WriteSpec(t, "name: d\nsources: [{name: a, address: '127.0.0.1:1'}]\ntables: ['(']\n")}, "regex", 2},
		{"unreachable", []string{"capture", "-f", nodes.WriteSpec(t, "name: d\nsources: [{name: a, address: '127.0.0.1:1'}]\n")}, "cannot connect to 127.0.0.1:1", 1},
		{"unknown command", []string{"nope"}, "unknown command", 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(c.args, &out, &errb)
			if code != c.code || !strings.Contains(errb.String(), c.want) {
				t.Errorf("exit %d, stderr %q; want exit %d mentioning %q", code, errb.String(), c.code, c.want)
			}
		})
	}
	var out bytes.Buffer
	if code := run([]string{"capture", "--help"}, &out, &out); code != 0 || !strings.Contains(out.String(), "--max") && !strings.Contains(out.String(), "-max") {
		t.Errorf("capture --help: exit %d, %s", code, out.String())
	}
}

// TestCaptureTimeout: --timeout ends a capture of an idle server with exit 0
// after printing what there was.
func TestCaptureTimeout(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id INT PRIMARY KEY)", "INSERT INTO shop.orders VALUES (1)")
	spec := nodes.WriteSpec(t, fmt.Sprintf("name: shop\nsources: [{name: a, address: '%s', start: earliest}]\n", srv.Addr()))
	var out, errb bytes.Buffer
	began := time.Now()
	code := run([]string{"capture", "-f", spec, "--timeout", "2s"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errb.String())
	}
	if took := time.Since(began); took < 2*time.Second || took > 15*time.Second {
		t.Errorf("capture --timeout 2s ran %v", took)
	}
	if n := strings.Count(out.String(), "\n"); n != 2 {
		t.Errorf("%d lines, want 2 (CREATE TABLE, INSERT):\n%s", n, out.String())
	}
}

// TestCaptureSandbox runs the README's first command: a throwaway MariaDB
// with a workload, captured until --max messages.
func TestCaptureSandbox(t *testing.T) {
	mysqltest.Start(t) // skips (or fails under CI) without a server binary, as the sandbox needs one
	var out, errb bytes.Buffer
	code := run([]string{"capture", "--sandbox", "--max", "6", "--timeout", "60s"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 6 {
		t.Fatalf("%d lines, want 6:\n%s", len(lines), out.String())
	}
	var inserts int
	for _, l := range lines {
		var m struct{ Type, Table string }
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %s", l)
		}
		if m.Type == "INSERT" && m.Table == "orders" {
			inserts++
		}
	}
	if inserts == 0 {
		t.Errorf("no order inserts in the sandbox stream:\n%s", out.String())
	}
	if !strings.Contains(errb.String(), "sandbox: MariaDB ready") {
		t.Errorf("stderr does not say the sandbox is ready:\n%s", errb.String())
	}
}

// TestCaptureMultiSource runs a destination of three servers with a route
// rule from the CLI, then again with --cursor-dir: the second run goes on
// after what the first printed, with the next seqs.
func TestCaptureMultiSource(t *testing.T) {
	srvs := mysqltest.StartN(t, 3)
	for i, s := range srvs {
		s.Exec(t, fmt.Sprintf("CREATE DATABASE shop_%d", i),
			fmt.Sprintf("CREATE TABLE shop_%d.orders (id INT PRIMARY KEY)", i),
			fmt.Sprintf("INSERT INTO shop_%d.orders VALUES (%d)", i, i))
	}
	spec := nodes.WriteSpec(t, shoptest.SpecYAML(srvs, ""))
	cursors := t.TempDir()
	type msg struct {
		Seq                    uint64
		Type, Database, Table  string
		OriginDatabase, Source string
	}
	runCapture := func(max int) []msg {
		var out, errb bytes.Buffer
		if code := run([]string{"capture", "-f", spec, "--cursor-dir", cursors, "--max", fmt.Sprint(max), "--timeout", "60s"}, &out, &errb); code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", code, errb.String())
		}
		var msgs []msg
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var m msg
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("not JSON: %s", l)
			}
			msgs = append(msgs, m)
		}
		return msgs
	}
	// Within one second every key ties, so the order is by source index:
	// a's CREATE TABLE and INSERT, then b's, then c's; the shard-DDL merge
	// lets the first CREATE TABLE out, as shop.orders's, and no other.
	all := append(runCapture(3), runCapture(1)...)
	want := []struct{ typ, source string }{{"CREATE", "a"}, {"INSERT", "a"}, {"INSERT", "b"}, {"INSERT", "c"}}
	if len(all) != len(want) {
		t.Fatalf("%d messages over two runs, want %d: %+v", len(all), len(want), all)
	}
	for i, m := range all {
		if m.Seq != uint64(i+1) || m.Type != want[i].typ || m.Source != want[i].source || m.Database != "shop" || m.Table != "orders" {
			t.Errorf("message %d: %+v, want seq %d %v", i, m, i+1, want[i])
		}
		if m.Type != "CREATE" && m.OriginDatabase != "shop_"+map[string]string{"a": "0", "b": "1", "c": "2"}[m.Source] {
			t.Errorf("origin of %+v", m)
		}
	}
}

// TestCaptureReaderGone is `braid capture | head -5`: once the reader of
// its standard output has gone, capture exits at once (not at --timeout)
// with code 1 and the reason on stderr, though nothing more is written.
func TestCaptureReaderGone(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id INT PRIMARY KEY)")
	for i := range 8 {
		srv.Exec(t, fmt.Sprintf("INSERT INTO shop.orders VALUES (%d)", i))
	}
	spec := nodes.WriteSpec(t, fmt.Sprintf("name: shop\nsources: [{name: a, address: '%s', start: earliest}]\n", srv.Addr()))
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- run([]string{"capture", "-f", spec, "--timeout", "60s"}, pw, &errb) }()
	lines := bufio.NewScanner(pr)
	for i := range 5 {
		if !lines.Scan() {
			t.Fatalf("the stream ended after %d lines: %v", i, lines.Err())
		}
	}
	pr.Close()
	closed := time.Now()
	select {
	case code := <-done:
		if code != 1 || !strings.Contains(errb.String(), "output") {
			t.Errorf("exit %d, stderr %q; want exit 1 naming the output", code, errb.String())
		}
		t.Logf("exited %v after its reader went away", time.Since(closed))
	case <-time.After(5 * time.Second):
		t.Fatal("capture still runs 5 s after the reader of its output went away")
	}
}

// TestCapturePipelineFails: a source that refuses replication fails the
// pipeline; capture exits with code 1 within 5 s, naming the privilege.
func TestCapturePipelineFails(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE USER 'norepl'@'%' IDENTIFIED BY 'pw'", "GRANT SELECT ON *.* TO 'norepl'@'%'")
	spec := nodes.WriteSpec(t, fmt.Sprintf("name: shop\nsources: [{name: a, address: '%s', user: norepl, password: pw, start: earliest}]\n", srv.Addr()))
	var out, errb bytes.Buffer
	began := time.Now()
	code := run([]string{"capture", "-f", spec, "--timeout", "60s"}, &out, &errb)
	if took := time.Since(began); code != 1 || took > 5*time.Second {
		t.Fatalf("exit %d after %v; want 1 within 5 s; stderr:\n%s", code, took, errb.String())
	}
	if !strings.Contains(errb.String(), "privilege") {
		t.Errorf("stderr does not name the missing privilege:\n%s", errb.String())
	}
}

// TestCapturePasswordReference: a source's password can stay out of the
// spec, in a file beside the spec or in a --secrets-dir, or in a variable
// under --secrets-env-prefix, read where capture runs; any other file or
// variable is refused before capture connects, a file with one message
// whether it exists or not.
func TestCapturePasswordReference(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE USER 'braid'@'%' IDENTIFIED BY 'pw-9z'",
		"GRANT REPLICATION SLAVE, REPLICATION CLIENT, BINLOG MONITOR, SELECT ON *.* TO 'braid'@'%'",
		"CREATE DATABASE shop", "CREATE TABLE shop.orders (id INT PRIMARY KEY)", "INSERT INTO shop.orders VALUES (1)")
	secrets := t.TempDir()
	file := filepath.Join(secrets, "pw")
	if err := os.WriteFile(file, []byte("pw-9z\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BRAID_SECRET_TEST_SOURCE_PW", "pw-9z")
	t.Setenv("BRAID_TEST_SOURCE_PW", "pw-9z")
	specWith := func(ref string) string {
		return nodes.WriteSpec(t, fmt.Sprintf("name: shop\nsources: [{name: a, address: '%s', user: braid, %s, start: earliest}]\n", srv.Addr(), ref))
	}
	// Beside the spec: allowed without a flag.
	beside := specWith("password_file: pw")
	if err := os.WriteFile(filepath.Join(filepath.Dir(beside), "pw"), []byte("pw-9z\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Dir(beside))
	for _, c := range []struct {
		spec  string
		flags []string
	}{
		{beside, nil},
		{specWith("password_file: '" + file + "'"), []string{"--secrets-dir", secrets}},
		{specWith("password_env: BRAID_SECRET_TEST_SOURCE_PW"), nil},
		{specWith("password_env: BRAID_TEST_SOURCE_PW"), []string{"--secrets-env-prefix", "BRAID_TEST_"}},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"capture", "-f", c.spec, "--max", "2", "--timeout", "30s"}, c.flags...)
		if code := run(args, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		if n := strings.Count(out.String(), "\n"); n != 2 {
			t.Errorf("%v: %d lines, want 2", args, n)
		}
	}
	// Outside the allowed directories: a file that exists and one that
	// does not get the same line.
	other := t.TempDir()
	for name, to := range map[string]string{"out": "/etc/hostname", "side": file} {
		if err := os.Symlink(to, filepath.Join(other, name)); err != nil {
			t.Fatal(err)
		}
	}
	refused := func(ref string, flags ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		spec := specWith(ref)
		args := append([]string{"capture", "-f", spec, "--timeout", "30s"}, flags...)
		if code := run(args, &out, &errb); code != 2 {
			t.Errorf("%s: exit %d, want 2: %s", ref, code, errb.String())
		}
		if strings.Contains(errb.String(), "pw-9z") || strings.Contains(errb.String(), "no such file") {
			t.Errorf("%s: the refusal tells what the file holds or whether it exists: %s", ref, errb.String())
		}
		dir, _ := filepath.EvalSymlinks(filepath.Dir(spec))
		return strings.ReplaceAll(strings.ReplaceAll(errb.String(), dir, "DIR"), filepath.Dir(spec), "DIR")
	}
	const missingPath = "/etc/no-such-file"
	missing := refused("password_file: "+missingPath, "--secrets-dir", other)
	for _, path := range []string{
		"/etc/hostname",
		file, // in a directory not allowed
		other + "/../" + filepath.Base(secrets) + "/pw", // .. out of an allowed one
		other + "/out",  // a link out of it
		other + "/side", // a link to a directory not allowed
	} {
		got := refused("password_file: '"+path+"'", "--secrets-dir", other)
		if strings.ReplaceAll(got, path, missingPath) != missing {
			t.Errorf("%s:\n%s\nwant the line of a missing file:\n%s", path, got, missing)
		}
	}
	if !strings.Contains(missing, "secrets directories") {
		t.Errorf("the refusal does not say where password files may be: %s", missing)
	}
	for _, ref := range []string{"password_env: BRAID_TEST_SOURCE_PW", "password_env: BRAID_SECRET_NOT_SET", "password_env: HOME", "password_env: BRAID_TOKEN"} {
		if got := refused(ref); !strings.Contains(got, "BRAID_SECRET_") {
			t.Errorf("%s: %s", ref, got)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"capture", "-f", beside, "--secrets-env-prefix", "BRAID_"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "BRAID_TOKEN") {
		t.Errorf("a prefix covering BRAID_TOKEN: exit %d: %s", code, errb.String())
	}
}
