package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrNoCA: the directory holds no CA to sign with.
var ErrNoCA = errors.New("no CA")

// The files of a CA directory.
const (
	caCertFile = "ca.pem"
	caKeyFile  = "ca-key.pem"
)

// Lifetimes. The CA outlives the nodes it signs so that re-issuing a node
// never needs a new CA first.
const (
	caYears   = 10
	nodeYears = 5
	// backdate starts a certificate before it was made, so that a node
	// whose clock runs a little behind the issuer's accepts it at once
	// instead of calling it "not yet valid".
	backdate = time.Hour
)

// InitCA makes a new CA in dir: ca.pem, the self-signed certificate every
// node trusts, and ca-key.pem, the private key IssueNode signs with. It
// creates dir (0700) if it is missing and returns the certificate's path.
// It never replaces a CA: if either file exists it fails and writes
// nothing.
func InitCA(dir string) (certFile string, err error) {
	return initCA(dir, time.Now())
}

func initCA(dir string, now time.Time) (string, error) {
	certFile, keyFile := filepath.Join(dir, caCertFile), filepath.Join(dir, caKeyFile)
	// Checked up front to fail with the friendly error; writeNew's
	// exclusive create is what keeps a racing InitCA from clobbering.
	for _, f := range []string{keyFile, certFile} {
		if _, err := os.Lstat(f); err == nil {
			return "", fmt.Errorf("pki: %s exists already: keep that CA, or choose another directory", f)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("pki: cannot make directory %s: %v", dir, pathCause(err))
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", fmt.Errorf("pki: make CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "braid CA"},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.AddDate(caYears, 0, 0),
		IsCA:                  true,
		BasicConstraintsValid: true,
		// The CA signs node certificates directly; a path length of zero
		// keeps anyone holding a node key from minting more.
		MaxPathLenZero: true,
		KeyUsage:       x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", fmt.Errorf("pki: make CA certificate: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return "", err
	}
	if err := writeNew(keyFile, keyPEM, 0o600); err != nil {
		return "", err
	}
	if err := writeNew(certFile, encodeCert(der), 0o644); err != nil {
		// A key without its certificate is no CA; take it back so that
		// InitCA can be run again.
		os.Remove(keyFile)
		return "", err
	}
	return certFile, nil
}

// IssueNode signs a certificate for node name with dir's CA and writes
// NAME.pem and NAME-key.pem (0600), replacing an older pair of that name.
// The certificate's CommonName is name, which is how the node is known to
// its peers (PeerName). Its SANs are DNS name and "localhost", each addr
// that is an IP as an IP SAN and each other addr as a DNS SAN; an addr may
// carry a port, which is dropped. name must be 1 to 64 of A-Z a-z 0-9 . _ -.
func IssueNode(dir, name string, addrs []string) (certFile, keyFile string, err error) {
	return issueNode(dir, name, addrs, time.Now())
}

func issueNode(dir, name string, addrs []string, now time.Time) (string, string, error) {
	if err := checkName(name); err != nil {
		return "", "", err
	}
	ca, caKey, err := loadCA(dir, now)
	if err != nil {
		return "", "", err
	}
	dns := []string{name}
	if name != "localhost" {
		dns = append(dns, "localhost")
	}
	var ips []net.IP
	for _, a := range addrs {
		host := strings.TrimSpace(a)
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		switch ip := net.ParseIP(host); {
		case host == "":
		case ip != nil:
			if !containsIP(ips, ip) {
				ips = append(ips, ip)
			}
		case validHost(host):
			if !containsFold(dns, host) {
				dns = append(dns, host)
			}
		default:
			return "", "", fmt.Errorf("pki: address %q is neither an IP nor a host name: give IPs or names such as 10.0.0.5 or n1.example.com", a)
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("pki: make key for %s: %w", name, err)
	}
	serial, err := newSerial()
	if err != nil {
		return "", "", err
	}
	notAfter := now.AddDate(nodeYears, 0, 0)
	if notAfter.After(ca.NotAfter) {
		// Past the CA's end the certificate no longer verifies; don't
		// claim longer than that.
		notAfter = ca.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    now.Add(-backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		// Both: a node accepts its peers' connections and dials them.
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		DNSNames:              dns,
		IPAddresses:           ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return "", "", fmt.Errorf("pki: sign certificate for %s: %w", name, err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := writeReplace(keyFile, keyPEM, 0o600); err != nil {
		return "", "", err
	}
	if err := writeReplace(certFile, encodeCert(der), 0o644); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// checkName admits the node names whose files cannot be another's.
func checkName(name string) error {
	if len(name) == 0 || len(name) > 64 {
		return fmt.Errorf("pki: node name %q must be 1 to 64 characters", name)
	}
	for _, c := range name {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("pki: node name %q may hold only A-Z a-z 0-9 . _ -", name)
		}
	}
	// Folded, for case-insensitive file systems: "ca" would write over
	// the CA's files, and "n1-key" over n1's key.
	if l := strings.ToLower(name); l == "ca" || strings.HasSuffix(l, "-key") {
		return fmt.Errorf("pki: node name %q would collide with the files of the CA or of another node: choose another", name)
	}
	return nil
}

// validHost reports whether h is a DNS name: dot-separated labels of
// letters, digits, '-' and '_'.
func validHost(h string) bool {
	if len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range label {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

func containsIP(ips []net.IP, ip net.IP) bool {
	for _, x := range ips {
		if x.Equal(ip) {
			return true
		}
	}
	return false
}

func containsFold(ss []string, s string) bool {
	for _, x := range ss {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// loadCA reads dir's CA certificate and key and checks they can sign.
func loadCA(dir string, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certFile, keyFile := filepath.Join(dir, caCertFile), filepath.Join(dir, caKeyFile)
	certPEM, err := os.ReadFile(certFile)
	if err == nil {
		_, err = os.Stat(keyFile)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("pki: %w in %s: make it first with braid certs init", ErrNoCA, dir)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("pki: cannot read the CA in %s: %v", dir, pathCause(err))
	}
	certs, err := parseCerts(certFile, certPEM)
	if err != nil {
		return nil, nil, err
	}
	ca := certs[0]
	signer, err := readKey(keyFile)
	if err != nil {
		return nil, nil, err
	}
	key, ok := signer.(*ecdsa.PrivateKey)
	if !ok || !key.PublicKey.Equal(ca.PublicKey) {
		return nil, nil, fmt.Errorf("pki: %s is not the key of %s: give the directory braid certs init wrote", keyFile, certFile)
	}
	if !ca.IsCA {
		return nil, nil, fmt.Errorf("pki: %s is not a CA certificate: give the directory braid certs init wrote", certFile)
	}
	if now.After(ca.NotAfter) {
		return nil, nil, fmt.Errorf("pki: the CA in %s expired on %s: make a new one with braid certs init in another directory and issue every node from it", dir, ca.NotAfter.Format(time.DateOnly))
	}
	return ca, key, nil
}

// newSerial is a random 128-bit serial number in [1, 2^128): RFC 5280
// wants serials positive and unique, and random ones need no counter kept
// beside the CA.
func newSerial() (*big.Int, error) {
	one := big.NewInt(1)
	limit := new(big.Int).Sub(new(big.Int).Lsh(one, 128), one)
	n, err := rand.Int(rand.Reader, limit)
	if err != nil {
		return nil, fmt.Errorf("pki: make serial number: %w", err)
	}
	return n.Add(n, one), nil
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("pki: encode private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
