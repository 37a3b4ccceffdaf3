package pki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// newCA makes a CA in a fresh directory and returns the directory.
func newCA(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "certs")
	if _, err := InitCA(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// nodeTLS issues node name from dir's CA and loads its node config.
func nodeTLS(t *testing.T, dir, name string, addrs ...string) *tls.Config {
	t.Helper()
	certFile, keyFile, err := IssueNode(dir, name, addrs)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadNodeTLS(filepath.Join(dir, "ca.pem"), certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

type side struct {
	state tls.ConnectionState
	err   error
}

// handshake connects a client to a server over loopback TCP and sends a
// byte each way. The byte matters: in TLS 1.3 the client's handshake ends
// before the server has judged the client's certificate, so a refusal
// reaches the client only when it reads.
func handshake(t *testing.T, server, client *tls.Config) (srv, cli side) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan side, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- side{err: err}
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		tc := tls.Server(c, server)
		err = tc.Handshake()
		var b [1]byte
		if err == nil {
			_, err = io.ReadFull(tc, b[:])
		}
		if err == nil {
			_, err = tc.Write(b[:])
		}
		done <- side{tc.ConnectionState(), err}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	tc := tls.Client(c, client)
	err = tc.Handshake()
	b := []byte{'x'}
	if err == nil {
		_, err = tc.Write(b)
	}
	if err == nil {
		_, err = io.ReadFull(tc, b)
	}
	cli = side{tc.ConnectionState(), err}
	c.Close()
	return <-done, cli
}

func TestNodesHandshakeBothWays(t *testing.T) {
	dir := newCA(t)
	n1, n2 := nodeTLS(t, dir, "n1"), nodeTLS(t, dir, "n2")
	for _, c := range []struct{ server, client, srvName, cliName string }{
		{"n1", "n2", "n1", "n2"},
		{"n2", "n1", "n2", "n1"},
	} {
		cfgs := map[string]*tls.Config{"n1": n1, "n2": n2}
		srv, cli := handshake(t, cfgs[c.server], cfgs[c.client])
		if srv.err != nil || cli.err != nil {
			t.Fatalf("%s dialing %s: server: %v; client: %v", c.client, c.server, srv.err, cli.err)
		}
		if got := PeerName(srv.state); got != c.cliName {
			t.Errorf("server %s: PeerName = %q, want %q", c.server, got, c.cliName)
		}
		if got := PeerName(cli.state); got != c.srvName {
			t.Errorf("client %s: PeerName = %q, want %q", c.client, got, c.srvName)
		}
		if v := cli.state.Version; v != tls.VersionTLS13 {
			t.Errorf("version %x, want TLS 1.3", v)
		}
	}
}

// A node of one cluster must not talk to a node of another, whichever
// side holds the foreign certificate; the configs are spliced so that
// only one side has a reason to refuse.
func TestOtherCARefused(t *testing.T) {
	ours := nodeTLS(t, newCA(t), "n1")
	theirs := nodeTLS(t, newCA(t), "x1")

	t.Run("server refuses client", func(t *testing.T) {
		client := ours.Clone() // trusts our CA, shows theirs
		client.Certificates = theirs.Certificates
		srv, cli := handshake(t, ours, client)
		if srv.err == nil {
			t.Fatal("server accepted a client certificate from another CA")
		}
		if cli.err == nil {
			t.Fatal("client was not told it was refused")
		}
		if got := PeerName(srv.state); got != "" {
			t.Errorf("PeerName of a refused peer = %q, want empty", got)
		}
	})
	t.Run("client refuses server", func(t *testing.T) {
		server := ours.Clone() // trusts our CA, shows theirs
		server.Certificates = theirs.Certificates
		_, cli := handshake(t, server, ours)
		if cli.err == nil || !strings.Contains(cli.err.Error(), "pki: the peer's certificate") {
			t.Fatalf("client error = %v, want its own refusal of the server", cli.err)
		}
	})
	t.Run("two clusters", func(t *testing.T) {
		srv, cli := handshake(t, ours, theirs)
		if srv.err == nil || cli.err == nil {
			t.Fatalf("server: %v; client: %v; want both refused", srv.err, cli.err)
		}
	})
}

func TestClientWithoutCertificateRefused(t *testing.T) {
	n1 := nodeTLS(t, newCA(t), "n1")
	client := n1.Clone()
	client.Certificates = nil
	srv, cli := handshake(t, n1, client)
	if srv.err == nil || cli.err == nil {
		t.Fatalf("server: %v; client: %v; want the server to refuse", srv.err, cli.err)
	}
}

// Go's server refuses such a client before VerifyConnection runs; this is
// the check behind it, for the client side and for any config that asks
// less of a client.
func TestVerifyPeerWithoutCertificate(t *testing.T) {
	pool, err := LoadCAPool(filepath.Join(newCA(t), "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyPeer(pool, tls.ConnectionState{}); err == nil {
		t.Fatal("verifyPeer accepted a peer without a certificate")
	}
}

// Nodes are dialed at advertised addresses the certificate need not name.
func TestNoHostNameCheck(t *testing.T) {
	dir := newCA(t)
	server := nodeTLS(t, dir, "n1", "10.9.9.9")
	if err := server.Certificates[0].Leaf.VerifyHostname("127.0.0.1"); err == nil {
		t.Fatal("the certificate names 127.0.0.1: the test proves nothing")
	}
	client := nodeTLS(t, dir, "n2")
	client.ServerName = "127.0.0.1"
	srv, cli := handshake(t, server, client)
	if srv.err != nil || cli.err != nil {
		t.Fatalf("server: %v; client: %v", srv.err, cli.err)
	}
	if got := PeerName(cli.state); got != "n1" {
		t.Errorf("PeerName = %q, want n1", got)
	}
}

func TestPeerNameWithoutHandshake(t *testing.T) {
	if got := PeerName(tls.ConnectionState{}); got != "" {
		t.Errorf("PeerName of no connection = %q", got)
	}
}

func TestServerTLS(t *testing.T) {
	dir := newCA(t)
	certFile, keyFile, err := IssueNode(dir, "api", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	server, err := LoadServerTLS(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := LoadCAPool(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	// An ordinary HTTPS client: no certificate, host name checked.
	client := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MaxVersion: tls.VersionTLS12}
	srv, cli := handshake(t, server, client)
	if srv.err != nil || cli.err != nil {
		t.Fatalf("server: %v; client: %v", srv.err, cli.err)
	}
	if _, err := LoadServerTLS(certFile, filepath.Join(dir, "ca-key.pem")); err == nil {
		t.Error("LoadServerTLS accepted a key of another certificate")
	}
}

func TestCAAndNodeCertificates(t *testing.T) {
	dir := newCA(t)
	ca := readCert(t, filepath.Join(dir, "ca.pem"))
	if !ca.IsCA || ca.Subject.CommonName != "braid CA" || ca.KeyUsage != x509.KeyUsageCertSign|x509.KeyUsageCRLSign {
		t.Errorf("CA: IsCA %v, CN %q, key usage %b", ca.IsCA, ca.Subject.CommonName, ca.KeyUsage)
	}
	if y := ca.NotAfter.Sub(ca.NotBefore).Hours() / 24 / 365; y < 9.9 || y > 10.1 {
		t.Errorf("CA lasts %.1f years, want 10", y)
	}
	if n := ca.SerialNumber; n.Sign() <= 0 || n.BitLen() > 128 {
		t.Errorf("CA serial %v", n)
	}
	certFile, _, err := IssueNode(dir, "n1", []string{"10.0.0.5", " n1.example.com ", "[::1]:7001", "10.0.0.5:7001", ""})
	if err != nil {
		t.Fatal(err)
	}
	leaf := readCert(t, certFile)
	if leaf.Subject.CommonName != "n1" {
		t.Errorf("CN %q", leaf.Subject.CommonName)
	}
	if want := []string{"n1", "localhost", "n1.example.com"}; !slices.Equal(leaf.DNSNames, want) {
		t.Errorf("DNS SANs %q, want %q", leaf.DNSNames, want)
	}
	var ips []string
	for _, ip := range leaf.IPAddresses {
		ips = append(ips, ip.String())
	}
	if want := []string{"10.0.0.5", "::1"}; !slices.Equal(ips, want) {
		t.Errorf("IP SANs %q, want %q", ips, want)
	}
	if want := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}; !slices.Equal(leaf.ExtKeyUsage, want) {
		t.Errorf("ext key usage %v", leaf.ExtKeyUsage)
	}
	if y := leaf.NotAfter.Sub(leaf.NotBefore).Hours() / 24 / 365; y < 4.9 || y > 5.1 {
		t.Errorf("node certificate lasts %.1f years, want 5", y)
	}
	if _, _, err := IssueNode(dir, "n2", []string{"bad host!"}); err == nil || !strings.Contains(err.Error(), `"bad host!"`) {
		t.Errorf("bad address: %v", err)
	}
}

func readCert(t *testing.T, file string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	certs, err := parseCerts(file, data)
	if err != nil {
		t.Fatal(err)
	}
	return certs[0]
}

func TestInitCARefusesOverwrite(t *testing.T) {
	dir := newCA(t)
	before := readAll(t, dir, "ca.pem", "ca-key.pem")
	_, err := InitCA(dir)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "ca-key.pem")+" exists already") {
		t.Fatalf("second InitCA: %v", err)
	}
	if after := readAll(t, dir, "ca.pem", "ca-key.pem"); !bytes.Equal(before, after) {
		t.Fatal("the second InitCA changed the CA")
	}

	// A directory holding only ca.pem (a node's copy) is no place for a
	// new CA either: the nodes that trust that ca.pem would lose it.
	dir2 := t.TempDir()
	os.WriteFile(filepath.Join(dir2, "ca.pem"), before, 0o644)
	if _, err := InitCA(dir2); err == nil {
		t.Fatal("InitCA replaced a lone ca.pem")
	}
	if _, err := os.Stat(filepath.Join(dir2, "ca-key.pem")); err == nil {
		t.Fatal("the refused InitCA left a ca-key.pem")
	}
}

func readAll(t *testing.T, dir string, names ...string) []byte {
	t.Helper()
	var all []byte
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

func TestIssueNodeWithoutCA(t *testing.T) {
	dir := t.TempDir()
	_, _, err := IssueNode(dir, "n1", nil)
	want := "pki: no CA in " + dir + ": make it first with braid certs init"
	if err == nil || err.Error() != want || !errors.Is(err, ErrNoCA) {
		t.Fatalf("err = %v, want %s", err, want)
	}
}

func TestIssueNodeNames(t *testing.T) {
	dir := newCA(t)
	for _, name := range []string{"n1", "node_1.prod-A", strings.Repeat("a", 64)} {
		if _, _, err := IssueNode(dir, name, nil); err != nil {
			t.Errorf("%q: %v", name, err)
		}
	}
	// "ca" and "*-key" would write over the CA's or another node's files.
	for _, name := range []string{"", "a b", "../n1", "n1/x", "é", strings.Repeat("a", 65), "ca", "CA", "n1-key", "ca-key"} {
		if _, _, err := IssueNode(dir, name, nil); err == nil {
			t.Errorf("%q: accepted", name)
		}
	}
	if _, err := LoadCAPool(filepath.Join(dir, "ca.pem")); err != nil {
		t.Fatalf("the CA did not survive: %v", err)
	}
}

func TestFileModes(t *testing.T) {
	dir := newCA(t)
	if _, _, err := IssueNode(dir, "n1", nil); err != nil {
		t.Fatal(err)
	}
	first := readAll(t, dir, "n1.pem", "n1-key.pem")
	// Re-issuing replaces the pair and keeps the modes.
	if _, _, err := IssueNode(dir, "n1", nil); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(first, readAll(t, dir, "n1.pem", "n1-key.pem")) {
		t.Error("re-issue kept the old pair")
	}
	want := map[string]os.FileMode{
		"":           0o700 | os.ModeDir,
		"ca.pem":     0o644,
		"ca-key.pem": 0o600,
		"n1.pem":     0o644,
		"n1-key.pem": 0o600,
	}
	for name, mode := range want {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != mode {
			t.Errorf("%s: mode %v, want %v", filepath.Join(dir, name), fi.Mode(), mode)
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != len(want)-1 {
		t.Errorf("%d files in %s, want %d (a temporary file left?)", len(ents), dir, len(want)-1)
	}
}

func TestLoadNodeTLSErrors(t *testing.T) {
	dir := newCA(t)
	ca := filepath.Join(dir, "ca.pem")
	cert, key, err := IssueNode(dir, "n1", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, key2, err := IssueNode(dir, "n2", nil)
	if err != nil {
		t.Fatal(err)
	}
	other := newCA(t)
	otherCert, otherKey, err := IssueNode(other, "x1", nil)
	if err != nil {
		t.Fatal(err)
	}
	old, oldKey, err := issueNode(dir, "old", nil, time.Now().AddDate(-6, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(t.TempDir(), "junk.pem")
	os.WriteFile(junk, []byte("not pem\n"), 0o600)
	missing := filepath.Join(t.TempDir(), "missing.pem")

	for _, c := range []struct {
		what           string
		ca, cert, key  string
		file, fragment string
	}{
		{"CA missing", missing, cert, key, missing, "does not exist"},
		{"CA not PEM", junk, cert, key, junk, "not a PEM certificate"},
		{"CA is a node's", cert, cert, key, cert, "no CA"},
		{"cert missing", ca, missing, key, missing, "does not exist"},
		{"cert not PEM", ca, junk, key, junk, "not a PEM certificate"},
		{"cert is a key", ca, key, key, key, "holds a private key"},
		{"key missing", ca, cert, missing, missing, "does not exist"},
		{"key not PEM", ca, cert, junk, junk, "not a PEM private key"},
		{"key of another", ca, cert, key2, key2, "does not match"},
		{"other CA", ca, otherCert, otherKey, otherCert, "not signed by the CA in " + ca},
		{"expired", ca, old, oldKey, old, "expired"},
	} {
		_, err := LoadNodeTLS(c.ca, c.cert, c.key)
		if err == nil {
			t.Errorf("%s: accepted", c.what)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, c.file) || !strings.Contains(msg, c.fragment) || strings.Contains(msg, "\n") {
			t.Errorf("%s: error %q, want one line naming %s and saying %q", c.what, msg, c.file, c.fragment)
		}
	}
}

func TestGossipKey(t *testing.T) {
	dir := t.TempDir()
	k, err := NewGossipKey()
	if err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "gossip.key")
	os.WriteFile(good, []byte(k+"\n"), 0o600)
	key, err := LoadGossipKey(good)
	if err != nil || len(key) != 32 {
		t.Fatalf("LoadGossipKey of NewGossipKey's output: %d bytes, %v", len(key), err)
	}
	if k2, _ := NewGossipKey(); k2 == k {
		t.Fatal("two gossip keys alike")
	}

	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o600)
		return p
	}
	for _, c := range []struct{ what, path, fragment string }{
		{"10 bytes", write("short.key", base64.StdEncoding.EncodeToString(make([]byte, 10))), "is 10 bytes"},
		{"not base64", write("bad.key", "not base64!"), "not base64"},
		{"empty", write("empty.key", " \n"), "is empty"},
		{"missing", filepath.Join(dir, "none.key"), "does not exist"},
	} {
		_, err := LoadGossipKey(c.path)
		if err == nil {
			t.Errorf("%s: accepted", c.what)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, c.path) || !strings.Contains(msg, c.fragment) || !strings.Contains(msg, "braid certs gossip-key > "+c.path) {
			t.Errorf("%s: error %q, want it to name %s, say %q and give the fix", c.what, msg, c.path, c.fragment)
		}
	}
}
