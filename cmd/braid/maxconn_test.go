package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/retry"
	"github.com/braid-cdc/braid/spec"
)

// TestServeMaxConnections: capture's HTTP port serves at most
// --max-connections at once; one past it is closed at once while the
// stream already served goes on.
func TestServeMaxConnections(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id INT PRIMARY KEY)", "INSERT INTO shop.orders VALUES (1)")
	ds, err := spec.Parse([]byte(fmt.Sprintf("name: shop\nsources: [{name: a, address: '%s', start: earliest}]\nheartbeat: 100ms\n", srv.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	port := nodes.FreePorts(t, 1)[0]
	serveForTest(t, ds, serveOptions{listen: "127.0.0.1", httpPort: port, maxConns: 1}, slog.New(slog.DiscardHandler))
	url := fmt.Sprintf("http://127.0.0.1:%d/v1/destinations/shop/stream?client-id=c", port)
	var resp *http.Response
	retry.Until(t, 10*time.Second, func() error {
		resp, err = http.Get(url)
		if err != nil {
			return fmt.Errorf("the port never served: %w", err)
		}
		return nil
	})
	defer resp.Body.Close()
	lines := bufio.NewReader(resp.Body)
	if l, err := lines.ReadString('\n'); err != nil || !strings.Contains(l, `"seq":1`) {
		t.Fatalf("first line %q, %v", l, err)
	}
	// The stream holds the one connection: another is closed unanswered.
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /v1/destinations HTTP/1.1\r\nHost: x\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	// EOF or a reset (the request was sent to a closed socket) both say so.
	if b, err := io.ReadAll(c); (err != nil && !errors.Is(err, syscall.ECONNRESET)) || len(b) != 0 {
		t.Fatalf("a connection past the cap got %q, %v; want it closed unanswered", b, err)
	}
	srv.Exec(t, "INSERT INTO shop.orders VALUES (2)")
	if l, err := lines.ReadString('\n'); err != nil || !strings.Contains(l, `"seq":2`) {
		t.Fatalf("the stream after a refused connection: %q, %v", l, err)
	}
}
