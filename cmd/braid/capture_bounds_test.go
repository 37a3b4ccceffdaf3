package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/braid-cdc/braid/api/native"
	"github.com/braid-cdc/braid/auth"
	"github.com/braid-cdc/braid/stream"
)

// TestCaptureClientIDsPerUser: behind capture's --users-file guard, the
// client ids a user opens count toward that user's cap, not one shared
// by every user; a sink's id is refused to all.
func TestCaptureClientIDsPerUser(t *testing.T) {
	a, err := auth.HashPassword("apw")
	if err != nil {
		t.Fatal(err)
	}
	b, err := auth.HashPassword("bpw")
	if err != nil {
		t.Fatal(err)
	}
	us, err := auth.ParseUsers(fmt.Appendf(nil, "users:\n  - {name: a, password_hash: %q, role: consumer, destinations: ['*']}\n  - {name: b, password_hash: %q, role: consumer, destinations: ['*']}\n", a, b))
	if err != nil {
		t.Fatal(err)
	}
	reg := stream.NewRegistry()
	store := stream.NewStore(stream.Config{MaxClientsPerOwner: 2})
	defer store.Close()
	reg.Add(&stream.Served{Name: "shop", Store: store})
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	srv := httptest.NewServer(usersGuard(us, native.NewHandler(reg, log), log))
	defer srv.Close()
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	open := func(user, pw, id string) int {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/destinations/shop/stream?client-id="+id, nil)
		req.SetBasicAuth(user, pw)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		user, pw, id string
		want         int
	}{
		{"a", "apw", "a1", 200}, {"a", "apw", "a2", 200}, {"a", "apw", "a3", 429},
		{"b", "bpw", "b1", 200}, {"b", "bpw", "b2", 200}, {"b", "bpw", "b3", 429},
		{"a", "apw", "sink:copy", 403},
	} {
		if got := open(c.user, c.pw, c.id); got != c.want {
			t.Errorf("user %s opening %s: %d, want %d", c.user, c.id, got, c.want)
		}
	}
}
