package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/api/wire"
	"github.com/braid-cdc/braid/internal/localcluster"
	"github.com/braid-cdc/braid/internal/testutil/braidproc"
	"github.com/braid-cdc/braid/internal/testutil/nodes"
	"github.com/braid-cdc/braid/internal/testutil/retry"
)

// health asks n for path (/healthz or /readyz), without a credential.
func health(t *testing.T, n *nodes.Node, path string) (int, wire.Health) {
	t.Helper()
	resp, err := http.Get(n.URL() + path)
	if err != nil {
		return 0, wire.Health{Reasons: []string{err.Error()}}
	}
	defer resp.Body.Close()
	var h wire.Health
	json.NewDecoder(resp.Body).Decode(&h)
	return resp.StatusCode, h
}

// TestReadyzOnceJoined: a node waiting for a second one to form a
// cluster is healthy but not ready (503, saying why); once the second
// has come and Raft has a leader, both answer /readyz with 200.
func TestReadyzOnceJoined(t *testing.T) {
	dir := t.TempDir()
	sec, err := localcluster.NewSecurity(filepath.Join(dir, "security"))
	if err != nil {
		t.Fatal(err)
	}
	bin := braidproc.Binary(t)
	a := nodes.NewNode(t, sec, "n1", dir, "--bootstrap-expect", "2")
	b := nodes.NewNode(t, sec, "n2", dir, "--bootstrap-expect", "2")
	a.MustStart(t, bin, []string{fmt.Sprintf("127.0.0.1:%d", b.GossipPort)})
	retry.Until(t, 20*time.Second, func() error {
		if code, _ := health(t, a, "/healthz"); code != http.StatusOK {
			return fmt.Errorf("n1 not healthy: /healthz %d\n%s", code, a.Tail())
		}
		return nil
	})
	time.Sleep(time.Second)
	code, h := health(t, a, "/readyz")
	if code != http.StatusServiceUnavailable || h.Ready || len(h.Reasons) == 0 {
		t.Errorf("n1 alone: /readyz %d %+v, want 503 with reasons", code, h)
	}
	b.MustStart(t, bin, []string{fmt.Sprintf("127.0.0.1:%d", a.GossipPort)})
	for _, n := range []*nodes.Node{a, b} {
		retry.Until(t, 30*time.Second, func() error {
			code, h := health(t, n, "/readyz")
			if code == http.StatusOK && h.Ready {
				return nil
			}
			return fmt.Errorf("%s: /readyz %d %s\n%s", n.Name, code, strings.Join(h.Reasons, "; "), n.Tail())
		})
	}
}
