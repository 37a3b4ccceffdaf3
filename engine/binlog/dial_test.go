package binlog

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/spec"
)

// silentListener accepts TCP connections and never writes to them, as a
// wrong port, a proxy without a backend or a stalled server does; it
// closes them when the test ends.
func silentListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// TestCheckSourceSilentServer: CheckSource against a server that accepts
// and never answers the MySQL handshake fails within handshakeTimeout,
// naming the source and its address and what to check; and so does
// Reader's dial. A context that ends first ends it first.
func TestCheckSourceSilentServer(t *testing.T) {
	defer func(d time.Duration) { handshakeTimeout = d }(handshakeTimeout)
	handshakeTimeout = time.Second
	addr := silentListener(t)
	src := spec.Source{Name: "s0", Address: addr, User: "root"}

	start := time.Now()
	_, err := CheckSource(t.Context(), src)
	took := time.Since(start)
	t.Logf("CheckSource: %v after %v", err, took)
	if err == nil {
		t.Fatal("CheckSource of a silent server succeeded")
	}
	if took > 5*time.Second {
		t.Fatalf("CheckSource returned after %v with a 1s handshake timeout", took)
	}
	if !errors.Is(err, ErrUnreachable) {
		t.Errorf("error %v does not wrap ErrUnreachable", err)
	}
	for _, want := range []string{"s0", addr, "handshake", "check"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}

	p := &Reader{spec: src}
	start = time.Now()
	if _, err := p.dial(t.Context()); err == nil || !strings.Contains(err.Error(), addr) {
		t.Errorf("Reader's dial of a silent server: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Reader's dial returned after %v with a 1s handshake timeout", took)
	}

	handshakeTimeout = time.Minute
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := CheckSource(ctx, src); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), addr) {
		t.Errorf("CheckSource with a context ending first: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("CheckSource returned %v after its context ended", took)
	}
}
