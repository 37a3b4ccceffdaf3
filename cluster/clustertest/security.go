package clustertest

import (
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"testing"

	"github.com/braid-cdc/braid/auth"
	"github.com/braid-cdc/braid/internal/pki"
)

// The harness's cluster is protected as a production one is: mutual TLS
// on the Raft port from a CA of its own, gossip encrypted, and a users
// file with these users. Its own HTTP calls (Create, Get, Post) are
// the admin's; a test's clients take a credential with client.WithToken.
const (
	AdminUser        = "admin"
	AdminPassword    = "clustertest-admin-password"
	ConsumerUser     = "app" // a consumer of every destination ("*")
	ConsumerPassword = "clustertest-app-password"
	NarrowUser       = "billing-app" // a consumer of NarrowDestination only
	NarrowPassword   = "clustertest-billing-password"
	// NarrowDestination is the one destination NarrowUser may read.
	NarrowDestination = "billing"
)

// usersOnce hashes the users once per test binary: a hash costs a
// slow key derivation.
var (
	usersOnce  sync.Once
	usersYAML  string
	usersError error
)

func harnessUsers() (*auth.Users, error) {
	usersOnce.Do(func() {
		admin, err := auth.HashPassword(AdminPassword)
		if err != nil {
			usersError = err
			return
		}
		app, err := auth.HashPassword(ConsumerPassword)
		if err != nil {
			usersError = err
			return
		}
		narrow, err := auth.HashPassword(NarrowPassword)
		if err != nil {
			usersError = err
			return
		}
		usersYAML = fmt.Sprintf("users:\n  - {name: %s, password_hash: %q, role: admin}\n"+
			"  - {name: %s, password_hash: %q, role: consumer, destinations: [\"*\"]}\n"+
			"  - {name: %s, password_hash: %q, role: consumer, destinations: [%s]}\n",
			AdminUser, admin, ConsumerUser, app, NarrowUser, narrow, NarrowDestination)
	})
	if usersError != nil {
		return nil, usersError
	}
	return auth.ParseUsers([]byte(usersYAML))
}

// security is what each node of one harness cluster shares: its CA's
// directory, the gossip key and the users.
type security struct {
	dir       string
	gossipKey []byte
	users     *auth.Users
}

func newSecurity(t testing.TB) (*security, error) {
	dir := filepath.Join(t.TempDir(), "certs")
	if _, err := pki.InitCA(dir); err != nil {
		return nil, err
	}
	k, err := pki.NewGossipKey()
	if err != nil {
		return nil, err
	}
	key, err := base64.StdEncoding.DecodeString(k)
	if err != nil {
		return nil, err
	}
	us, err := harnessUsers()
	if err != nil {
		return nil, err
	}
	return &security{dir: dir, gossipKey: key, users: us}, nil
}

// nodeTLS issues name a certificate of the harness's CA.
func (s *security) nodeTLS(name string) (*tls.Config, error) {
	cert, key, err := pki.IssueNode(s.dir, name, []string{"127.0.0.1"})
	if err != nil {
		return nil, err
	}
	return pki.LoadNodeTLS(filepath.Join(s.dir, "ca.pem"), cert, key)
}

// CADir is the directory of the cluster's CA (ca.pem, ca-key.pem): a test
// issues certificates of its own from it with pki.IssueNode.
func (c *Cluster) CADir() string { return c.sec.dir }

// GossipKey is the key the cluster's gossip is encrypted with.
func (c *Cluster) GossipKey() []byte { return c.sec.gossipKey }

// asAdmin adds the admin's credential to every request.
type asAdmin struct{ base http.RoundTripper }

func (t asAdmin) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.SetBasicAuth(AdminUser, AdminPassword)
	return t.base.RoundTrip(r)
}
