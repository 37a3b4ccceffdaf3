package localcluster

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/braid-cdc/braid/auth"
	"github.com/braid-cdc/braid/internal/pki"
)

// Security is what a local cluster's nodes are protected with, as a
// production cluster is: a CA and a certificate per node (mutual TLS on
// the Raft port), a gossip key, and a users file with an admin and a
// consumer of every destination. NewSecurity makes it all in Dir; the
// passwords are random, kept in token files there (mode 0600), and never
// on a command line.
type Security struct {
	// Dir holds ca.pem, ca-key.pem, NAME.pem and NAME-key.pem per node,
	// gossip.key, users.yaml, admin.token and app.token.
	Dir string
	// Admin is the users file's admin, Consumer ("app") a consumer of
	// every destination: the HTTP API's and canal's logins.
	Admin, Consumer Credential
}

// Credential is a user of the users file and its password.
type Credential struct{ User, Password string }

// Token is the credential as $BRAID_TOKEN and --token-file take it.
func (c Credential) Token() string { return c.User + ":" + c.Password }

// NewSecurity makes a CA, a gossip key and a users file in dir.
func NewSecurity(dir string) (*Security, error) {
	s := &Security{Dir: dir, Admin: Credential{"admin", randomPassword()}, Consumer: Credential{"app", randomPassword()}}
	if _, err := pki.InitCA(dir); err != nil {
		return nil, fmt.Errorf("localcluster: %w", err)
	}
	key, err := pki.NewGossipKey()
	if err != nil {
		return nil, fmt.Errorf("localcluster: %w", err)
	}
	admin, err := auth.HashPassword(s.Admin.Password)
	if err != nil {
		return nil, fmt.Errorf("localcluster: %w", err)
	}
	app, err := auth.HashPassword(s.Consumer.Password)
	if err != nil {
		return nil, fmt.Errorf("localcluster: %w", err)
	}
	users := fmt.Sprintf("users:\n  - name: %s\n    password_hash: %q\n    role: admin\n  - name: %s\n    password_hash: %q\n    role: consumer\n    destinations: [\"*\"]\n",
		s.Admin.User, admin, s.Consumer.User, app)
	for name, content := range map[string]string{
		"gossip.key": key + "\n", "users.yaml": users,
		"admin.token": s.Admin.Token() + "\n", "app.token": s.Consumer.Token() + "\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			return nil, fmt.Errorf("localcluster: %w", err)
		}
	}
	return s, nil
}

// AdminTokenFile is the file holding Admin's token (--token-file).
func (s *Security) AdminTokenFile() string { return filepath.Join(s.Dir, "admin.token") }

// CAFile is the CA's certificate.
func (s *Security) CAFile() string { return filepath.Join(s.Dir, "ca.pem") }

// NodeArgs are the flags that protect node name (its certificate is
// issued the first time): --tls-ca/--tls-cert/--tls-key,
// --gossip-key-file and --users-file.
func (s *Security) NodeArgs(name string) ([]string, error) {
	cert, key := filepath.Join(s.Dir, name+".pem"), filepath.Join(s.Dir, name+"-key.pem")
	if _, err := os.Stat(cert); err != nil {
		if cert, key, err = pki.IssueNode(s.Dir, name, []string{"127.0.0.1"}); err != nil {
			return nil, fmt.Errorf("localcluster: %w", err)
		}
	}
	return []string{"--tls-ca", s.CAFile(), "--tls-cert", cert, "--tls-key", key,
		"--gossip-key-file", filepath.Join(s.Dir, "gossip.key"), "--users-file", filepath.Join(s.Dir, "users.yaml")}, nil
}

func randomPassword() string {
	b := make([]byte, 16)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
