package client_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/braid-cdc/braid/client"
)

// TestStreamNeverServed: a stream that no node ever served ends, when its
// context does, with an error wrapping ErrUnreachable (not nil), and a
// refused credential ends it at once with the server's 401.
func TestStreamNeverServed(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	c, err := client.New(dead, client.WithBackoff(10*time.Millisecond, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	err = c.Stream(ctx, "shop", "a", func(client.Message) error { return nil })
	if !errors.Is(err, client.ErrUnreachable) {
		t.Errorf("a dead node: %v, want ErrUnreachable", err)
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "app" || p != "right" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":"user \"app\": wrong name or password"}`))
			return
		}
		w.WriteHeader(http.StatusTeapot)
	}))
	defer srv.Close()
	c, err = client.New(srv.URL, client.WithToken("app", "wrong"))
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	err = c.Stream(t.Context(), "shop", "a", func(client.Message) error { return nil })
	var se *client.Error
	if !errors.As(err, &se) || se.Status != http.StatusUnauthorized || time.Since(began) > 5*time.Second {
		t.Errorf("a wrong credential: %v after %v, want the 401 at once", err, time.Since(began))
	}
}
