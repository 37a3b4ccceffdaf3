package mysqlsource

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// A MySQL 8 server has TLS on from its first start, with certificates it
// makes itself. The test source's come from one test CA per process (made
// once: an RSA key costs tens of milliseconds): a server certificate for
// 127.0.0.1 and localhost whose RSA key also serves
// caching_sha2_password's RSA exchange, and a client certificate for
// tests of client authentication.

// testPKI is the process's CA and the certificates it signed.
type testPKI struct {
	caPEM                 []byte
	server                tls.Certificate
	clientCert, clientKey []byte
	roots                 *x509.CertPool
	clientPair            tls.Certificate
}

var pki = sync.OnceValues(makePKI)

func makePKI() (*testPKI, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "mysqlsource test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	srvKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	cliKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	cliTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(3),
		Subject:      pkix.Name{CommonName: "braid"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	cliDER, err := x509.CreateCertificate(rand.Reader, cliTmpl, ca, &cliKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	cliKeyDER, err := x509.MarshalECPrivateKey(cliKey)
	if err != nil {
		return nil, err
	}
	p := &testPKI{
		caPEM:      pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		server:     tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey},
		clientCert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cliDER}),
		clientKey:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: cliKeyDER}),
		roots:      x509.NewCertPool(),
	}
	p.roots.AddCert(ca)
	if p.clientPair, err = tls.X509KeyPair(p.clientCert, p.clientKey); err != nil {
		return nil, err
	}
	return p, nil
}

// serverTLS is a server's TLS configuration: its certificate, and client
// certificates checked against the test CA when a client sends one.
func serverTLS() (*tls.Config, error) {
	p, err := pki()
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{p.server},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    p.roots,
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// CAPEM is the test CA's certificate (PEM), which signed the server's
// certificate (for 127.0.0.1 and localhost) and ClientCertPEM's.
func (s *Server) CAPEM() []byte {
	p, _ := pki()
	return p.caPEM
}

// ClientCertPEM is a client certificate and key (PEM) the test CA signed.
func (s *Server) ClientCertPEM() (cert, key []byte) {
	p, _ := pki()
	return p.clientCert, p.clientKey
}

// TLSFiles writes the test CA's certificate and a client certificate and
// key it signed to files in a directory of the test's, for a spec's
// tls: {ca, cert, key}.
func (s *Server) TLSFiles(tb testing.TB) (ca, cert, key string) {
	tb.Helper()
	dir := tb.TempDir()
	c, k := s.ClientCertPEM()
	for name, data := range map[string][]byte{"ca.pem": s.CAPEM(), "client.pem": c, "client-key.pem": k} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	return filepath.Join(dir, "ca.pem"), filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
}

// ClientTLS is a client configuration that verifies the server's
// certificate against the test CA, for 127.0.0.1.
func (s *Server) ClientTLS() *tls.Config {
	p, _ := pki()
	return &tls.Config{RootCAs: p.roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}
