package postgres_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/braid-cdc/braid/sink/postgres"
	"github.com/braid-cdc/braid/spec"
)

// roguePostgres is a server that answers every startup with
// AuthenticationCleartextPassword and records what the client sends.
type roguePostgres struct {
	ln  net.Listener
	mu  sync.Mutex
	got bytes.Buffer
	wg  sync.WaitGroup
}

func startRoguePostgres(t *testing.T) *roguePostgres {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &roguePostgres{ln: ln}
	r.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.wg.Go(func() { r.serve(c) })
		}
	})
	t.Cleanup(func() { ln.Close(); r.wg.Wait() })
	return r
}

func (r *roguePostgres) serve(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	for {
		var n uint32
		if binary.Read(c, binary.BigEndian, &n) != nil || n < 8 || n > 1<<16 {
			return
		}
		b := make([]byte, n-4)
		if _, err := io.ReadFull(c, b); err != nil {
			return
		}
		r.keep(b)
		if code := binary.BigEndian.Uint32(b); code == 80877103 || code == 80877104 { // SSL, GSS encryption
			c.Write([]byte{'N'})
			continue
		}
		break
	}
	c.Write([]byte{'R', 0, 0, 0, 8, 0, 0, 0, 3}) // AuthenticationCleartextPassword
	b := make([]byte, 4096)
	for {
		n, err := c.Read(b)
		r.keep(b[:n])
		if err != nil {
			return
		}
	}
}

func (r *roguePostgres) keep(b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got.Write(b)
}

// TestNoClearTextPasswordToRoguePostgres: a PostgreSQL "target" that asks
// for the password in clear text (password authentication) gets none, and
// the sink's error says why.
func TestNoClearTextPasswordToRoguePostgres(t *testing.T) {
	const password = "pw-Pg5-not-for-rogues"
	rogue := startRoguePostgres(t)
	s := spec.Sink{Name: "pg", Type: "postgres", Address: rogue.ln.Addr().String(), User: "braid", Password: password, Database: "shop",
		Mode: spec.SinkAtLeastOnce}
	_, err := postgres.Open(t.Context(), s, "shop", nil)
	if err == nil || !strings.Contains(err.Error(), "clear text") || !strings.Contains(err.Error(), "sink pg") {
		t.Errorf("open: %v", err)
	}
	rogue.mu.Lock()
	defer rogue.mu.Unlock()
	if bytes.Contains(rogue.got.Bytes(), []byte(password)) {
		t.Errorf("the rogue server received the password: %q", rogue.got.Bytes())
	}
	if !bytes.Contains(rogue.got.Bytes(), []byte("braid")) {
		t.Errorf("no startup reached the rogue server: %q", rogue.got.Bytes())
	}
}
