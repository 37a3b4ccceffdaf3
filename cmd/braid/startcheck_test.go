package main

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
)

// TestStartupCheckEverySource: braid capture and braid destination create
// print the start-up check's problems of every source at once, one line
// each, naming the source and what to change: before, capture stopped at
// the first reader's error and create at the first source's.
func TestStartupCheckEverySource(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "SET GLOBAL binlog_format = 'STATEMENT'")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	spec := nodes.WriteSpec(t, fmt.Sprintf("name: shop\nsources:\n  - {name: a, address: '%s'}\n  - {name: b, address: '%s'}\n", srv.Addr(), closed))
	check := func(what, errs string, code int) {
		t.Helper()
		lines := strings.Split(strings.TrimSpace(errs), "\n")
		if code != 1 || len(lines) != 2 ||
			!strings.Contains(lines[0], "source a") || !strings.Contains(lines[0], "binlog_format=ROW") ||
			!strings.Contains(lines[1], "source b") || !strings.Contains(lines[1], closed) {
			t.Errorf("%s: exit %d, want 1 and a line for each source:\n%s", what, code, errs)
		}
	}
	_, errs, code := cli("capture", "-f", spec, "--timeout", "30s")
	check("capture", errs, code)
	c := startNode(t)
	_, errs, code = cli("destination", "create", "-f", spec, "--server", c.Nodes[0].URL())
	check("destination create", errs, code)
	t.Logf("destination create:\n%s", errs)
}
