package native_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/api/native"
	"github.com/braid-cdc/braid/stream"
)

// TestServerBounds: braid's HTTP server cuts off an idle keep-alive
// connection and a request whose body never finishes, yet a stream lives
// on past the read timeout. The bounds are shortened from 30 s and 2 min.
func TestServerBounds(t *testing.T) {
	defer native.SetTimeouts(200*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond)()
	reg := stream.NewRegistry()
	store := stream.NewStore(stream.Config{})
	reg.Add(&stream.Served{Name: "shop", Store: store})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The logs are discarded: srv.Close does not wait for the stream's
	// handler, whose last line would otherwise reach a finished test.
	srv := native.NewServer(native.NewHandler(reg, slog.New(slog.DiscardHandler)))
	go srv.Serve(l)
	defer srv.Close()
	addr := l.Addr().String()

	// closedWithin reports whether the server closes conn within d.
	closedWithin := func(conn net.Conn, d time.Duration) bool {
		conn.SetReadDeadline(time.Now().Add(d))
		_, err := io.Copy(io.Discard, conn)
		return err == nil // EOF: the server closed it; a timeout is an error
	}
	t.Run("idle keep-alive", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "GET /v1/destinations HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("first request: %v %v", resp, err)
		}
		if !closedWithin(conn, 3*time.Second) {
			t.Error("an idle keep-alive connection is still open 3 s after its last answer")
		}
	})
	t.Run("half-sent body", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /v1/destinations/shop/ack?client-id=a&seq=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly ten b")
		if !closedWithin(conn, 3*time.Second) {
			t.Error("a request whose body never finishes is still open after 3 s")
		}
	})
	t.Run("stream outlives the read timeout", func(t *testing.T) {
		store.Subscribe("c")
		resp, err := http.Get("http://" + addr + "/v1/destinations/shop/stream?client-id=c")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream: %d", resp.StatusCode)
		}
		time.Sleep(time.Second) // three read timeouts
		put(t, store, 1)
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil || !strings.Contains(line, `"seq":1`) {
			t.Fatalf("after a second of quiet: %q, %v; want the transaction", line, err)
		}
	})
}
