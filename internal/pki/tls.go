package pki

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"time"
)

// LoadCAPool reads the CA certificates in caFile (PEM, one or more) into a
// pool. It fails if the file holds none, or a certificate that is not a
// CA's: a node's certificate given by mistake would trust only that node.
func LoadCAPool(caFile string) (*x509.CertPool, error) {
	data, err := os.ReadFile(caFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("pki: CA certificate %s does not exist: give the cluster's ca.pem (braid certs init makes one)", caFile)
	}
	if err != nil {
		return nil, fmt.Errorf("pki: cannot read CA certificate %s: %v", caFile, pathCause(err))
	}
	certs, err := parseCerts(caFile, data)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		if !c.IsCA {
			return nil, fmt.Errorf("pki: %s holds %q's certificate, which is no CA: give the cluster's ca.pem", caFile, c.Subject.CommonName)
		}
		pool.AddCert(c)
	}
	return pool, nil
}

// LoadNodeTLS is a node's TLS configuration for the connections between
// nodes, the same *tls.Config for tls.Server and tls.Client: it shows the
// node's certificate (certFile, keyFile) and requires the peer's, and
// either side completes a handshake only with a peer whose certificate
// chains to the CA in caFile. TLS 1.3 only: both ends are braid.
//
// It checks the files first: each must exist and be PEM, the key must be
// the certificate's, and the certificate must be signed by the CA, valid
// now and have a CommonName (the node's name, see PeerName).
//
// The client side does not check the server's host name. A node dials
// another at the address that node advertised, which behind a proxy, NAT
// or a container's port mapping is not one the certificate could name,
// and what matters is not the address but that the peer holds a key the
// cluster's CA vouched for. So Go's own check, which is chain and host
// name together, is off (InsecureSkipVerify) and VerifyConnection does
// the chain alone, on both sides. Who the peer is, the caller learns from
// PeerName and compares with whom it meant to reach.
func LoadNodeTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	pool, err := LoadCAPool(caFile)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	cert, err := loadPair(certFile, keyFile, now)
	if err != nil {
		return nil, err
	}
	leaf := cert.Leaf
	if leaf.Subject.CommonName == "" {
		return nil, fmt.Errorf("pki: certificate %s has no CommonName, which names a node: issue one with braid certs node", certFile)
	}
	_, err = leaf.Verify(x509.VerifyOptions{
		Roots:         pool,
		Intermediates: poolOf(cert.Certificate[1:]),
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	})
	var ua x509.UnknownAuthorityError
	switch {
	case errors.As(err, &ua):
		return nil, fmt.Errorf("pki: certificate %s is not signed by the CA in %s: give the CA that issued it, or issue it from this one with braid certs node", certFile, caFile)
	case err != nil:
		return nil, fmt.Errorf("pki: certificate %s does not verify against the CA in %s: %v", certFile, caFile, err)
	}
	// A peer's own check of our certificate, when we dial it, is Go's
	// server-side one, which wants client authentication among the
	// certificate's uses.
	if len(leaf.ExtKeyUsage) > 0 && !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageClientAuth) && !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageAny) {
		return nil, fmt.Errorf("pki: certificate %s is not for client authentication, and nodes also dial each other: issue one with braid certs node", certFile)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		RootCAs:      pool,
		// Not insecure: VerifyConnection checks the chain; see above.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyPeer(pool, cs)
		},
	}, nil
}

// verifyPeer checks that the peer of cs showed a certificate that chains
// to pool. On the server side Go has checked it already
// (RequireAndVerifyClientCert); on the client side this is the only check.
func verifyPeer(pool *x509.CertPool, cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("pki: the peer showed no certificate: every node needs one from the cluster's CA")
	}
	leaf := cs.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := leaf.Verify(x509.VerifyOptions{
		Roots:         pool,
		Intermediates: inter,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	})
	if err != nil {
		return fmt.Errorf("pki: the peer's certificate (%q) is refused: %v", leaf.Subject.CommonName, err)
	}
	return nil
}

// PeerName is the CommonName of the certificate the peer of cs proved it
// holds: the peer's node name. It is "" before a handshake completes or
// when the peer showed none.
//
// cs must come from a connection whose config is LoadNodeTLS's. The client
// side of that config leaves VerifiedChains empty (VerifyConnection does
// the checking), so there PeerName reads PeerCertificates, which a
// completed handshake means were verified; under a config that accepts
// certificates unverified, it would name whatever the peer claimed.
func PeerName(cs tls.ConnectionState) string {
	if len(cs.VerifiedChains) > 0 && len(cs.VerifiedChains[0]) > 0 {
		return cs.VerifiedChains[0][0].Subject.CommonName
	}
	if cs.HandshakeComplete && len(cs.PeerCertificates) > 0 {
		return cs.PeerCertificates[0].Subject.CommonName
	}
	return ""
}

// LoadServerTLS is a plain server configuration for the HTTP API, whose
// clients (operators, consumers, the Go client) show no certificate: it
// shows certFile's chain, with keyFile, over TLS 1.2 or later. The pair
// is checked as for LoadNodeTLS, except that any CA may have signed it.
func LoadServerTLS(certFile, keyFile string) (*tls.Config, error) {
	cert, err := loadPair(certFile, keyFile, time.Now())
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
	}, nil
}

// loadPair reads a certificate chain and its private key, checking that
// they belong together and that the certificate is valid at now.
func loadPair(certFile, keyFile string, now time.Time) (tls.Certificate, error) {
	data, err := os.ReadFile(certFile)
	if errors.Is(err, fs.ErrNotExist) {
		return tls.Certificate{}, fmt.Errorf("pki: certificate %s does not exist: issue one with braid certs node", certFile)
	}
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("pki: cannot read certificate %s: %v", certFile, pathCause(err))
	}
	chain, err := parseCerts(certFile, data)
	if err != nil {
		return tls.Certificate{}, err
	}
	key, err := readKey(keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf := chain[0]
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(leaf.PublicKey) {
		return tls.Certificate{}, fmt.Errorf("pki: private key %s does not match certificate %s: give the key written with that certificate", keyFile, certFile)
	}
	switch {
	case now.After(leaf.NotAfter):
		return tls.Certificate{}, fmt.Errorf("pki: certificate %s expired on %s: issue a new one with braid certs node", certFile, leaf.NotAfter.Format(time.DateOnly))
	case now.Before(leaf.NotBefore):
		return tls.Certificate{}, fmt.Errorf("pki: certificate %s is valid only from %s: check this machine's clock", certFile, leaf.NotBefore.Format(time.RFC3339))
	}
	cert := tls.Certificate{PrivateKey: key, Leaf: leaf}
	for _, c := range chain {
		cert.Certificate = append(cert.Certificate, c.Raw)
	}
	return cert, nil
}

// poolOf is a pool of the DER certificates ders; they were parsed once
// already, so an unparsable one is skipped.
func poolOf(ders [][]byte) *x509.CertPool {
	pool := x509.NewCertPool()
	for _, d := range ders {
		if c, err := x509.ParseCertificate(d); err == nil {
			pool.AddCert(c)
		}
	}
	return pool
}
