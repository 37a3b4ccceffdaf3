package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	canalclient "github.com/withlin/canal-go/client"
	pbe "github.com/withlin/canal-go/protocol/entry"
	"google.golang.org/protobuf/proto"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/spec"
)

// withoutTS parses flat-message lines and drops ts (the time each was
// written), which differs between two readings of one stream.
func withoutTS(t *testing.T, out string) []map[string]any {
	t.Helper()
	var msgs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %s", l)
		}
		delete(m, "ts")
		msgs = append(msgs, m)
	}
	return msgs
}

// TestTailEqualsCapture serves a two-shard destination over the native API
// and reads it with `braid tail`, twice with the same client id (the second
// goes on where the first stopped), and compares it with what `braid
// capture` prints of the same destination: row for row the same.
func TestTailEqualsCapture(t *testing.T) {
	srvs := mysqltest.StartN(t, 2)
	for i, s := range srvs {
		s.Exec(t, fmt.Sprintf("CREATE DATABASE shop_%d", i),
			fmt.Sprintf("CREATE TABLE shop_%d.orders (id INT PRIMARY KEY, note VARCHAR(20))", i))
		for k := 0; k < 5; k++ {
			s.Exec(t, fmt.Sprintf("INSERT INTO shop_%d.orders VALUES (%d, 'n%d')", i, 10*i+k, k))
		}
		s.Exec(t, fmt.Sprintf("UPDATE shop_%d.orders SET note = 'u' WHERE id %% 2 = 0", i))
	}
	specText := fmt.Sprintf("name: shop\nsources:\n  - {name: a, address: '%s', start: earliest}\n  - {name: b, address: '%s', start: earliest}\ntables: ['shop_\\d+\\.orders']\nroute: [{match: 'shop_\\d+\\.(\\w+)', to: 'shop.$1'}]\nheartbeat: 100ms\n", srvs[0].Addr(), srvs[1].Addr())
	specFile := nodes.WriteSpec(t, specText)
	const n = 13 // 1 CREATE TABLE (the second shard's is merged into it), 10 INSERT, 2 UPDATE

	var printed, errb bytes.Buffer
	if code := run([]string{"capture", "-f", specFile, "--max", fmt.Sprint(n), "--timeout", "60s"}, &printed, &errb); code != 0 {
		t.Fatalf("capture: exit %d: %s", code, errb.String())
	}

	spec, err := spec.Parse([]byte(specText))
	if err != nil {
		t.Fatal(err)
	}
	port := nodes.FreePorts(t, 1)[0]
	serveForTest(t, spec, serveOptions{listen: "127.0.0.1", httpPort: port}, slog.New(slog.NewTextHandler(t.Output(), nil)))
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	var tailed bytes.Buffer
	for _, max := range []int{9, n - 9} {
		var out, errb bytes.Buffer
		retry.Until(t, 10*time.Second, func() error { // the server may still be starting
			out.Reset()
			errb.Reset()
			if code := run([]string{"tail", "shop", "--server", url, "--client-id", "t1", "--max", fmt.Sprint(max), "--timeout", "60s"}, &out, &errb); code != 0 {
				return fmt.Errorf("tail: exit %d: %s", code, errb.String())
			}
			return nil
		})
		tailed.Write(out.Bytes())
	}
	want, got := withoutTS(t, printed.String()), withoutTS(t, tailed.String())
	if len(got) != len(want) {
		t.Fatalf("tail printed %d messages over two runs, capture %d:\n%s", len(got), len(want), tailed.String())
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("message %d differs:\ntail    %v\ncapture %v", i, got[i], want[i])
		}
	}
}

// TestCanalEqualsTail serves one destination over both protocols and reads
// it with canal-go's SimpleCanalConnector and with `braid tail`: the same
// transactions, in the same order, with the same rows.
func TestCanalEqualsTail(t *testing.T) {
	srvs := mysqltest.StartN(t, 2)
	for i, s := range srvs {
		s.Exec(t, fmt.Sprintf("CREATE DATABASE shop_%d", i),
			fmt.Sprintf("CREATE TABLE shop_%d.orders (id INT PRIMARY KEY, amount DECIMAL(8,2), note VARCHAR(20))", i))
		for k := 0; k < 4; k++ {
			s.Exec(t, fmt.Sprintf("INSERT INTO shop_%d.orders VALUES (%d, %d.50, NULL)", i, 10*i+k, k))
		}
		s.Exec(t, fmt.Sprintf("UPDATE shop_%d.orders SET note = 'paid' WHERE id %% 2 = 0", i),
			fmt.Sprintf("DELETE FROM shop_%d.orders WHERE id %% 4 = 3", i))
	}
	spec, err := spec.Parse([]byte(fmt.Sprintf("name: shop\nsources:\n  - {name: a, address: '%s', start: earliest}\n  - {name: b, address: '%s', start: earliest}\ntables: ['shop_\\d+\\.orders']\nroute: [{match: 'shop_\\d+\\.(\\w+)', to: 'shop.$1'}]\nheartbeat: 100ms\n", srvs[0].Addr(), srvs[1].Addr())))
	if err != nil {
		t.Fatal(err)
	}
	p := nodes.FreePorts(t, 2)
	httpPort, canalPort := p[0], p[1]
	serveForTest(t, spec, serveOptions{listen: "127.0.0.1", httpPort: httpPort, canalPort: canalPort}, slog.New(slog.NewTextHandler(t.Output(), nil)))
	// (seq, type, table, rows as column=value lists) from each protocol.
	type row = string
	type msg struct {
		seq        string
		typ, table string
		rows       []row
	}
	const n = 13 // 1 CREATE TABLE (the shards' two merged), 8 INSERT, 2 UPDATE, 2 DELETE: one message each
	// Both clients subscribe before either acks. tail is durable
	// (--client-id): an ephemeral one would start at latest.
	var tailed, errb bytes.Buffer
	tailDone := make(chan int, 1)
	go func() {
		tailDone <- run([]string{"tail", "shop", "--server", fmt.Sprintf("http://127.0.0.1:%d", httpPort), "--client-id", "tail", "--max", fmt.Sprint(n), "--timeout", "60s"}, &tailed, &errb)
	}()
	retry.Until(t, 10*time.Second, func() error {
		st, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/v1/destinations/shop", httpPort))
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(st.Body)
		st.Body.Close()
		if !strings.Contains(string(body), `"tail"`) {
			return fmt.Errorf("tail never subscribed: %s", body)
		}
		return nil
	})
	var fromCanal []msg
	var c *canalclient.SimpleCanalConnector
	retry.Until(t, 10*time.Second, func() error {
		c = canalclient.NewSimpleCanalConnector("127.0.0.1", canalPort, "", "", "shop", 60000, 60000)
		c.ClientIdentity.ClientId = 7
		if err := c.Connect(); err != nil {
			return fmt.Errorf("canal connect: %w", err)
		}
		return nil
	})
	defer c.DisConnection()
	if err := c.Subscribe(`.*\..*`); err != nil {
		t.Fatal(err)
	}
	wait, unit := int64(500), int32(2)
	retry.Until(t, 30*time.Second, func() error {
		m, err := c.GetWithOutAck(100, &wait, &unit)
		if err != nil {
			t.Fatal(err)
		}
		for i := range m.Entries {
			e := &m.Entries[i]
			if e.GetEntryType() != pbe.EntryType_ROWDATA {
				continue
			}
			var rc pbe.RowChange
			if err := proto.Unmarshal(e.StoreValue, &rc); err != nil {
				t.Fatal(err)
			}
			var seq string
			for _, p := range e.Header.GetProps() {
				if p.Key == "seq" {
					seq = p.Value
				}
			}
			out := msg{seq: seq, typ: rc.GetEventType().String(), table: e.Header.GetSchemaName() + "." + e.Header.GetTableName()}
			if rc.GetIsDdl() {
				out.typ = "DDL"
			}
			for _, rd := range rc.RowDatas {
				cols := rd.AfterColumns
				if rc.GetEventType() == pbe.EventType_DELETE {
					cols = rd.BeforeColumns
				}
				var r []string
				for _, col := range cols {
					v := col.Value
					if col.GetIsNull() {
						v = "NULL"
					}
					r = append(r, col.Name+"="+v)
				}
				out.rows = append(out.rows, strings.Join(r, ","))
			}
			fromCanal = append(fromCanal, out)
		}
		if m.Id > 0 {
			c.Ack(m.Id)
		}
		if len(fromCanal) < n {
			return fmt.Errorf("canal gave %d of %d messages", len(fromCanal), n)
		}
		return nil
	})

	tailCode := <-tailDone
	if tailCode != 0 {
		t.Fatalf("tail: exit %d: %s", tailCode, errb.String())
	}
	var fromTail []msg
	for _, m := range withoutTS(t, tailed.String()) {
		out := msg{seq: fmt.Sprint(m["seq"]), typ: m["type"].(string), table: m["database"].(string) + "." + m["table"].(string)}
		if m["isDdl"] == true {
			out.typ = "DDL"
		}
		if data, ok := m["data"].([]any); ok {
			for _, d := range data {
				d := d.(map[string]any)
				var r []string
				for _, name := range []string{"id", "amount", "note"} {
					v, _ := d[name].(string)
					if d[name] == nil {
						v = "NULL"
					}
					r = append(r, name+"="+v)
				}
				out.rows = append(out.rows, strings.Join(r, ","))
			}
		}
		fromTail = append(fromTail, out)
	}
	if !reflect.DeepEqual(fromCanal, fromTail) {
		t.Errorf("canal and tail differ:\ncanal %v\ntail  %v", fromCanal, fromTail)
	}
	if len(fromCanal) != n {
		t.Errorf("only %d messages", len(fromCanal))
	}
}

// TestTailNeverReachedExits1: braid tail against a server that is not
// there exits 1 at its --timeout, saying so, instead of 0.
func TestTailNeverReachedExits1(t *testing.T) {
	port := nodes.FreePorts(t, 1)[0]
	_, errs, code := cli("tail", "shop", "--server", fmt.Sprintf("http://127.0.0.1:%d", port), "--timeout", "1s", "--log-level", "error")
	if code != 1 || !strings.Contains(errs, "never served") {
		t.Errorf("tail of a dead server: exit %d: %s", code, errs)
	}
}

// TestTailBadFromExits2: a --from braid cannot send is a usage error,
// named with the forms it takes, before any node is asked.
func TestTailBadFromExits2(t *testing.T) {
	for _, from := range []string{"oldest", "seq:x", "time:yesterday"} {
		_, errs, code := cli("tail", "shop", "--server", "http://127.0.0.1:1", "--from", from)
		if code != 2 || !strings.Contains(errs, "--from") || !strings.Contains(errs, "seq:N") || strings.Count(errs, "\n") != 1 {
			t.Errorf("--from %s: exit %d: %s", from, code, errs)
		}
	}
}

// TestCreateBadSpecExits2: an invalid spec is refused by the CLI itself,
// before any node is asked, with exit code 2 and the spec's error.
func TestCreateBadSpecExits2(t *testing.T) {
	port := nodes.FreePorts(t, 1)[0]
	bad := nodes.WriteSpec(t, "name: shop\nsources:\n  - {name: a, adress: '127.0.0.1:1'}\n")
	_, errs, code := cli("destination", "create", "-f", bad, "--server", fmt.Sprintf("http://127.0.0.1:%d", port))
	if code != 2 || !strings.Contains(errs, "adress") || strings.Count(errs, "\n") != 1 {
		t.Errorf("bad spec: exit %d: %s", code, errs)
	}
}
