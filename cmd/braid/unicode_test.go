package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/braidproc"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
)

// unicodeTable is a shard table of the Unicode tests: a key and one text
// column, both named in Unicode, ids from base on.
type unicodeTable struct {
	name, col, colType string
	base               int
}

// unicodeTables are the tables the Unicode tests read: a CJK name with a
// CJK and Latin-1 column, and a name and column in combining marks (e +
// U+0301, not the precomposed é). Identifiers cannot hold 4-byte
// characters (MariaDB keeps them in utf8mb3); values can.
var unicodeTables = []unicodeTable{
	{name: "名前", col: "名前ü", colType: "VARCHAR(60)", base: 0},
	{name: "cafe\u0301", col: "e\u0301", colType: "TEXT", base: 1000},
}

// unicodeValues are the text values each table holds, once from the
// snapshot (ids base+1 …) and once from the binlog (ids base+101 …):
// CJK with Latin-1 and an emoji, a combining mark, a 4-byte character
// alone, all of them mixed with ASCII, and ASCII alone.
var unicodeValues = []string{"名前ü😀", "e\u0301", "𝄞", "ascii 名前 e\u0301 𝄞 😀 end", "plain"}

// startUnicodeShard starts a shard whose server default is latin1, as a
// MariaDB without configuration has it, holding schema u0 and its
// unicodeTables with the snapshot's rows; a session braid left in the
// server's default reads every name and value above as latin1. It checks
// that the rows are stored as the UTF-8 bytes of the Go strings.
func startUnicodeShard(t *testing.T) *mysqltest.Server {
	t.Helper()
	srv := mysqltest.Start(t, mysqltest.WithArgs("--character-set-server=latin1", "--collation-server=latin1_swedish_ci"))
	srv.Exec(t, "CREATE DATABASE u0 CHARACTER SET latin1")
	for _, tb := range unicodeTables {
		srv.Exec(t, fmt.Sprintf("CREATE TABLE u0.`%s` (id INT PRIMARY KEY, `%s` %s) DEFAULT CHARSET=utf8mb4", tb.name, tb.col, tb.colType))
	}
	insertUnicodeRows(t, srv, 1)
	for _, tb := range unicodeTables {
		got := srv.Query(t, fmt.Sprintf("SELECT HEX(`%s`) FROM u0.`%s` ORDER BY id", tb.col, tb.name))
		for i, v := range unicodeValues {
			if len(got) != len(unicodeValues) || got[i][0] != strings.ToUpper(hex.EncodeToString([]byte(v))) {
				t.Fatalf("the shard stored %s.%s as %v, not the UTF-8 of %q: the test's own session is not utf8mb4", tb.name, tb.col, got, unicodeValues)
			}
		}
	}
	return srv
}

// insertUnicodeRows inserts unicodeValues into each table, ids base+first
// on.
func insertUnicodeRows(t *testing.T, srv *mysqltest.Server, first int) {
	t.Helper()
	for _, tb := range unicodeTables {
		var vals []string
		for i, v := range unicodeValues {
			vals = append(vals, fmt.Sprintf("(%d, '%s')", tb.base+first+i, v))
		}
		srv.Exec(t, fmt.Sprintf("INSERT INTO u0.`%s` VALUES %s", tb.name, strings.Join(vals, ", ")))
	}
}

// unicodeWant is every row a table should arrive with, "id value",
// sorted: the snapshot's and the binlog's.
func (tb unicodeTable) want() []string {
	var out []string
	for _, first := range []int{1, 101} {
		for i, v := range unicodeValues {
			out = append(out, fmt.Sprintf("%d %s", tb.base+first+i, v))
		}
	}
	slices.Sort(out)
	return out
}

// unicodeRow is a row as the Unicode tests compare it, from the column
// values of a message or a target (nil: NULL or missing, as "NULL"): the
// column must be found by its Unicode name.
func (tb unicodeTable) row(data map[string]*string) string {
	id, v := "NULL", "NULL"
	if p := data["id"]; p != nil {
		id = *p
	}
	if p := data[tb.col]; p != nil {
		v = *p
	}
	return id + " " + v
}

// TestCaptureUnicodeExact: on a shard whose server default is latin1,
// `braid capture` with `snapshot: initial` prints the rows of a table
// named 名前 (column 名前ü) and one named cafe + U+0301 (column e +
// U+0301) byte-exact: the names in each message and the values, 4-byte
// characters and combining marks included, from the snapshot and from the
// binlog. Before every session braid opened was utf8mb4, the capture
// exited at start (SHOW CREATE TABLE u0.??) and the snapshot read
// 名前ü😀 as ??\ufffd?.
func TestCaptureUnicodeExact(t *testing.T) {
	srv := startUnicodeShard(t)
	specFile := writeSpec(t, fmt.Sprintf(`
name: uni
sources: [{name: a, address: '%s'}]
tables: ['u0\..*']
snapshot: initial
`, srv.Addr()))
	outPath := filepath.Join(t.TempDir(), "out.jsonl")
	out, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	var stderr strings.Builder
	cmd := exec.Command(braidproc.Binary(t), "capture", "-f", specFile)
	cmd.Stdout, cmd.Stderr = out, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		<-exited
	}()

	// The rows printed so far, by table, and how many: read whole lines
	// only.
	printed := func() (map[string][]string, int) {
		b, _ := os.ReadFile(outPath)
		b = b[:strings.LastIndexByte(string(b), '\n')+1]
		got, n := map[string][]string{}, 0
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			var m struct {
				Database, Table, Type string
				PkNames               []string
				Data                  []map[string]*string
			}
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("line is not JSON: %s", sc.Text())
			}
			if m.Database != "u0" || m.Type != "INSERT" || !slices.Equal(m.PkNames, []string{"id"}) {
				t.Fatalf("unexpected message: %s", sc.Text())
			}
			for _, tb := range unicodeTables {
				if m.Table != tb.name {
					continue
				}
				for _, d := range m.Data {
					if len(d) != 2 {
						t.Errorf("row of %s has columns other than id and %s: %s", tb.name, tb.col, sc.Text())
					}
					got[tb.name] = append(got[tb.name], tb.row(d))
				}
			}
			n += len(m.Data)
		}
		return got, n
	}
	waitRows := func(what string, want int) map[string][]string {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			got, n := printed()
			if n >= want {
				return got
			}
			select {
			case err := <-exited:
				exited <- err
				t.Fatalf("capture exited (%v) after %d rows; stderr:\n%s", err, n, stderr.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: capture printed %d rows, want %d; stderr:\n%s", what, n, want, stderr.String())
			}
		}
	}
	rows := len(unicodeTables) * len(unicodeValues)
	waitRows("the snapshot", rows)
	insertUnicodeRows(t, srv, 101)
	got := waitRows("the binlog", 2*rows)
	for _, tb := range unicodeTables {
		slices.Sort(got[tb.name])
		if want := tb.want(); !slices.Equal(got[tb.name], want) {
			t.Errorf("table %q: capture printed\n%q\nwant\n%q", tb.name, got[tb.name], want)
		}
	}
	if len(got) != len(unicodeTables) {
		t.Errorf("capture printed tables %v, want %d", slices.Collect(maps.Keys(got)), len(unicodeTables))
	}
}
