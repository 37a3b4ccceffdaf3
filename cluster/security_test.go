package cluster_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/braid-cdc/braid/cluster"
	"github.com/braid-cdc/braid/cluster/clustertest"
	"github.com/braid-cdc/braid/internal/pki"
	"github.com/braid-cdc/braid/internal/ports"
	"github.com/braid-cdc/braid/internal/testutil/logline"
	"github.com/braid-cdc/braid/raftstore"
)

// TestRaftPortRefusesStrangers: a dialer without a certificate of the
// cluster's CA gets nothing from the Raft port: a raw forward is refused
// at the TLS handshake, as is a TLS client with another CA's certificate,
// and the destination is still there.
func TestRaftPortRefusesStrangers(t *testing.T) {
	src := startSource(t)
	c := clustertest.Start(t, 3)
	c.Create(destSpec("shop", src))
	c.Owner("shop")
	leader := c.Leader()

	// A raw forward: the marker byte and a frame, in clear.
	conn, err := net.Dial("tcp", leader.RaftAddr())
	if err != nil {
		t.Fatal(err)
	}
	conn.Write(append([]byte{'F'}, []byte("\x00\x00\x00\x10delete shop now!")...))
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, _ := io.ReadAll(conn)
	conn.Close()
	if len(got) > 0 && got[0] != 0x15 { // a TLS alert is all it may say
		t.Errorf("the raft port answered a raw forward with %q", got)
	}

	// TLS with a certificate from a CA of another cluster.
	other := filepath.Join(t.TempDir(), "other")
	if _, err := pki.InitCA(other); err != nil {
		t.Fatal(err)
	}
	cert, key, err := pki.IssueNode(other, "n9", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	otherTLS, err := pki.LoadNodeTLS(filepath.Join(other, "ca.pem"), cert, key)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := tls.Dial("tcp", leader.RaftAddr(), otherTLS)
	if err == nil {
		tc.Write([]byte{'F'})
		tc.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = tc.Read(make([]byte, 1))
		tc.Close()
	}
	if err == nil {
		t.Error("a node of another CA was served on the raft port")
	}

	c.EnsureSame()
	for _, n := range c.Nodes() {
		if _, err := n.Raft().Destination("shop"); err != nil {
			t.Errorf("%s lost the destination: %v", n.Name, err)
		}
	}
}

// TestGossipRefusesNodesWithoutTheKey: a memberlist node without the
// cluster's gossip key (none, or another) never becomes a member, and the
// Raft configuration is the same 5 s later.
func TestGossipRefusesNodesWithoutTheKey(t *testing.T) {
	c := clustertest.Start(t, 3)
	before := voters(t, c.Leader().Raft())
	p, err := ports.FreeLoopback(2)
	if err != nil {
		t.Fatal(err)
	}
	for i, key := range [][]byte{nil, []byte("another key, 32 bytes long......")} {
		cfg := memberlist.DefaultLANConfig()
		cfg.Name = []string{"intruder", "intruder2"}[i]
		cfg.BindAddr, cfg.BindPort = "127.0.0.1", p[i]
		cfg.AdvertiseAddr, cfg.AdvertisePort = "127.0.0.1", p[i]
		cfg.SecretKey = key
		cfg.Logger = log.New(io.Discard, "", 0)
		ml, err := memberlist.Create(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ml.Shutdown() })
		if n, err := ml.Join([]string{c.Nodes()[0].GossipAddr()}); err == nil && n > 0 {
			t.Errorf("%s joined the cluster's gossip", cfg.Name)
		}
	}
	time.Sleep(5 * time.Second)
	for _, n := range c.Nodes() {
		if m := n.Members(); slices.ContainsFunc(m, func(s string) bool { return strings.HasPrefix(s, "intruder") }) {
			t.Errorf("%s sees %v", n.Name, m)
		}
	}
	if after := voters(t, c.Leader().Raft()); !slices.Equal(before, after) {
		t.Errorf("raft configuration %v became %v", before, after)
	}
}

func voters(t *testing.T, s *raftstore.Store) []string {
	t.Helper()
	servers, err := s.Servers()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, sv := range servers {
		ids = append(ids, sv.ID)
	}
	slices.Sort(ids)
	return ids
}

// TestHTTPNeedsAUser: without a credential every call gets 401, with a
// wrong one too; a consumer may read what it is listed for and gets 403
// for admin calls and other destinations.
func TestHTTPNeedsAUser(t *testing.T) {
	src := startSource(t)
	c := clustertest.Start(t, 3)
	c.Create(destSpec("shop", src))
	owner, _ := c.Owner("shop")
	base := owner.URL()
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	call := func(method, path, user, pw string) int {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader("name: x\n"))
		req.Header.Set("X-Braid-Request", "1") // as the CLI: auth is what this test is about
		if user != "" {
			req.SetBasicAuth(user, pw)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, r := range []struct{ method, path string }{
		{"DELETE", "/v1/destinations/shop?force=true"}, {"POST", "/v1/destinations"},
		{"GET", "/v1/destinations/shop/stream?client-id=x"}, {"POST", "/v1/destinations/shop/ack?client-id=x&seq=1"},
		{"GET", "/v1/cluster"}, {"GET", "/v1/destinations"},
	} {
		if got := call(r.method, r.path, "", ""); got != http.StatusUnauthorized {
			t.Errorf("%s %s without a credential: %d, want 401", r.method, r.path, got)
		}
		if got := call(r.method, r.path, clustertest.AdminUser, "wrong"); got != http.StatusUnauthorized {
			t.Errorf("%s %s with a wrong password: %d, want 401", r.method, r.path, got)
		}
	}
	if got := call("DELETE", "/v1/destinations/shop?force=true", clustertest.ConsumerUser, clustertest.ConsumerPassword); got != http.StatusForbidden {
		t.Errorf("a consumer's DELETE: %d, want 403", got)
	}
	if got := call("GET", "/v1/destinations/shop", clustertest.ConsumerUser, clustertest.ConsumerPassword); got != http.StatusOK {
		t.Errorf("a consumer reading its destination's state: %d, want 200", got)
	}
	for _, path := range []string{"/v1/destinations/shop", "/v1/destinations/shop/stream?client-id=b", "/v1/destinations/shop/spec"} {
		if got := call("GET", path, clustertest.NarrowUser, clustertest.NarrowPassword); got != http.StatusForbidden {
			t.Errorf("a consumer not listed for shop: GET %s: %d, want 403", path, got)
		}
	}
	if got := call("POST", "/v1/destinations/shop/ack?client-id=b&seq=1", clustertest.NarrowUser, clustertest.NarrowPassword); got != http.StatusForbidden {
		t.Errorf("a consumer not listed for shop: ack: %d, want 403", got)
	}
	if _, err := owner.Raft().Destination("shop"); err != nil {
		t.Errorf("the destination is gone: %v", err)
	}
}

// TestInsecureNodeWarnsEveryInterval: a node let run unprotected with
// Insecure says so at start and again every InsecureWarnEvery.
func TestInsecureNodeWarnsEveryInterval(t *testing.T) {
	p, err := ports.FreeLoopback(3)
	if err != nil {
		t.Fatal(err)
	}
	var logs logline.Buffer
	cfg := cluster.Config{Name: "n1", DataDir: t.TempDir(), RaftPort: p[0], GossipPort: p[1], HTTPPort: p[2],
		Join: []string{"127.0.0.1:1"}, Insecure: true, InsecureWarnEvery: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	n, err := cluster.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	time.Sleep(time.Second)
	cancel()
	<-done
	if got := strings.Count(logs.String(), "running insecure"); got < 3 {
		t.Errorf("%d warnings in a second at one per 200ms:\n%s", got, logs.String())
	}
	cfg.Insecure = false
	if _, err := cluster.Start(cfg); !errors.Is(err, cluster.ErrUnprotected) {
		t.Errorf("without Insecure: %v, want ErrUnprotected", err)
	}
}
