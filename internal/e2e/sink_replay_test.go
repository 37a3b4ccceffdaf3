package e2e

import (
	"bufio"
	"bytes"
	"database/sql"
	"fmt"
	"maps"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/sinktest"
)

// binlogAuditedTarget is a MariaDB server of its own (mysqltest's: a
// binary log in ROW format) whose shop.orders has no trigger, so that the
// sink replays the binlog's row events into it. Its binary log, read back
// with mariadb-binlog, is the audit; it holds the transactions committed
// (one the sink was killed in the middle of is not there), each with its
// row events and the statements that made them:
//
//   - each row event of shop.orders is an application of the row its
//     image's first column names (a replayed INSERT of a row that is
//     there fails, and the SQL statement then applied changes nothing,
//     which no row event shows: the next two rules see that);
//   - a transaction that writes shop.orders claims its worker's
//     checkpoint (the UPDATE of braid_meta.sink_checkpoint that names
//     the range of changes it applies) once;
//   - a worker's claimed ranges, in commit order, never overlap: no
//     change applied twice.
type binlogAuditedTarget struct {
	t   *testing.T
	srv *mysqltest.Server
	db  *sql.DB
}

var _ auditedDB = (*binlogAuditedTarget)(nil)

func newBinlogAuditedTarget(t *testing.T, columns string) *binlogAuditedTarget {
	t.Helper()
	if _, err := exec.LookPath("mariadb-binlog"); err != nil {
		t.Skip("no mariadb-binlog to read the target's binary log with")
	}
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders "+columns)
	db, err := sql.Open("mysql", "root@tcp("+srv.Addr()+")/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &binlogAuditedTarget{t: t, srv: srv, db: db}
}

func (a *binlogAuditedTarget) sinkYAML() string {
	return fmt.Sprintf("{name: copy, type: mysql, address: '%s', workers: 4, batch: 20}", a.srv.Addr())
}

func (a *binlogAuditedTarget) orders() string { return "shop.orders" }

func (a *binlogAuditedTarget) read(q string) []string { return sinktest.Query(a.db, q) }

// audit reads the target's binary log (see binlogAuditedTarget), and
// fails the test when a transaction broke a rule.
func (a *binlogAuditedTarget) audit() (int, []string) {
	counts, err := a.readAudit()
	if err != nil {
		a.t.Fatal(err)
	}
	n := 0
	var notTwice []string
	for id, k := range counts {
		n += k
		if k != 2 {
			notTwice = append(notTwice, fmt.Sprintf("%s %d", id, k))
		}
	}
	slices.Sort(notTwice)
	return n, notTwice
}

// The claims of the checkpoint table, as the binary log annotates their
// row events: the UPDATE of a worker's transaction (its changes' range:
// from the point in its condition to the one it sets), or an INSERT that
// sets a worker's checkpoint (its first transaction's, or every worker's
// at a DDL).
var (
	claimRE = regexp.MustCompile(`^#Q> UPDATE \S+sink_checkpoint SET seq = (\d+), idx = (\d+) WHERE dest = 'shop' AND sink = 'copy' AND worker = (\d+) AND \(seq < (\d+) OR seq = \d+ AND idx < (\d+)\)`)
	setRE   = regexp.MustCompile(`^#Q> INSERT INTO \S+sink_checkpoint \(dest, sink, worker, seq, idx\) VALUES \('shop', 'copy', (\d+), (\d+), (\d+)\)`)
)

// point is a (seq, idx) of the stream.
type point [2]uint64

func (p point) less(q point) bool { return p[0] < q[0] || p[0] == q[0] && p[1] < q[1] }

func atoiPoint(seq, idx string) point {
	s, _ := strconv.ParseUint(seq, 10, 64)
	i, _ := strconv.ParseUint(idx, 10, 64)
	return point{s, i}
}

// readAudit counts the row events of shop.orders in the target's binary
// log by row id, and returns an error naming the first transaction that
// broke a rule.
func (a *binlogAuditedTarget) readAudit() (map[string]int, error) {
	first := a.read("SHOW BINARY LOGS")
	if len(first) == 0 {
		return nil, nil
	}
	host, port, _ := strings.Cut(a.srv.Addr(), ":")
	out, err := exec.Command("mariadb-binlog", "--read-from-remote-server", "--host="+host, "--port="+port, "--user=root",
		"--to-last-log", "--base64-output=decode-rows", "-v", strings.Fields(first[0])[0]).Output()
	if err != nil {
		return nil, fmt.Errorf("mariadb-binlog: %v", err)
	}
	counts := map[string]int{}
	checkpoint := map[string]point{} // each worker's, as committed
	var (
		rows, claims    int
		replayed        bool
		claimed         map[string]point // this transaction's new checkpoints
		inOrders, inSet bool
		tx              int
	)
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "START TRANSACTION" || line == "BEGIN":
			tx++
			rows, claims, replayed, claimed = 0, 0, false, map[string]point{}
		case strings.HasPrefix(line, "COMMIT"):
			if rows > 0 && claims != 1 {
				return nil, fmt.Errorf("transaction %d of the target's binary log writes %d rows of shop.orders with %d checkpoint claims, want 1", tx, rows, claims)
			}
			if rows > 0 && !replayed {
				return nil, fmt.Errorf("transaction %d wrote shop.orders with SQL statements, not BINLOG statements", tx)
			}
			maps.Copy(checkpoint, claimed)
		case strings.HasPrefix(line, "#Q> BINLOG"):
			replayed = true
		case claimRE.MatchString(line):
			m := claimRE.FindStringSubmatch(line)
			to, from, w := atoiPoint(m[1], m[2]), atoiPoint(m[4], m[5]), m[3]
			if prev, ok := checkpoint[w]; ok && !prev.less(from) {
				return nil, fmt.Errorf("transaction %d: worker %s claims the changes from %v, its checkpoint is at %v: applied twice", tx, w, from, prev)
			}
			claims++
			claimed[w] = to
		case setRE.MatchString(line):
			m := setRE.FindStringSubmatch(line)
			to, w := atoiPoint(m[2], m[3]), m[1]
			if prev, ok := checkpoint[w]; ok && to.less(prev) {
				return nil, fmt.Errorf("transaction %d: worker %s's checkpoint set back from %v to %v", tx, w, prev, to)
			}
			claims++
			claimed[w] = to
		case strings.HasPrefix(line, "### INSERT INTO ") || strings.HasPrefix(line, "### UPDATE ") || strings.HasPrefix(line, "### DELETE FROM "):
			inOrders = !strings.HasPrefix(line, "### DELETE") && strings.HasSuffix(line, "`shop`.`orders`")
			inSet = false
		case inOrders && line == "### SET":
			inSet = true
		case inOrders && inSet && strings.HasPrefix(line, "###   @1="):
			counts[strings.TrimPrefix(line, "###   @1=")]++
			rows++
			inOrders = false
		}
	}
	return counts, nil
}
