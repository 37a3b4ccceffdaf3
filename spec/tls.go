package spec

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
)

// TLSMode is how much a TLS connection checks of the server.
type TLSMode string

// TLS modes, spelled as MySQL's --ssl-mode spells them.
const (
	// TLSRequired encrypts and checks nothing of the server's certificate.
	TLSRequired TLSMode = "required"
	// TLSVerifyCA also checks that the certificate is signed by the CA.
	TLSVerifyCA TLSMode = "verify-ca"
	// TLSVerifyIdentity also checks that it names the address's host.
	TLSVerifyIdentity TLSMode = "verify-identity"
)

// TLS is how braid reaches a server over TLS (a source's tls block):
//
//	tls: {ca: ca.pem, cert: client.pem, key: client-key.pem, mode: verify-identity}
//
// The files are read where the destination runs, as password_file is
// (Refs.Resolve): only from the directories the node's operator allows
// (braid capture: also the spec file's own directory).
type TLS struct {
	// Mode is required, verify-ca or verify-identity. Default:
	// verify-identity.
	Mode TLSMode `yaml:"mode,omitempty" json:"mode,omitempty"`
	// CA is a PEM file of the certificates that sign the server's.
	// Required for verify-ca; default for verify-identity: the system's
	// roots.
	CA string `yaml:"ca,omitempty" json:"ca,omitempty"`
	// Cert and Key are a PEM client certificate and its key, for a
	// server that asks for one (REQUIRE X509). Both or neither.
	Cert string `yaml:"cert,omitempty" json:"cert,omitempty"`
	Key  string `yaml:"key,omitempty" json:"key,omitempty"`

	// CAPEM, CertPEM and KeyPEM are the files' contents, read by
	// Refs.Resolve (or set by a program that builds a spec in Go). They
	// are never part of the spec's YAML or JSON, and KeyPEM prints as
	// Hidden.
	CAPEM   []byte `yaml:"-" json:"-"`
	CertPEM []byte `yaml:"-" json:"-"`
	KeyPEM  PEM    `yaml:"-" json:"-"`
}

// PEM is a private key's PEM text. It prints as Hidden, so that no log
// line or error that formats a spec shows it.
type PEM []byte

func (PEM) String() string   { return Hidden }
func (PEM) GoString() string { return Hidden }

// EffectiveMode is the mode, its default applied.
func (t *TLS) EffectiveMode() TLSMode {
	if t.Mode == "" {
		return TLSVerifyIdentity
	}
	return t.Mode
}

// problems are the tls block's problems, by YAML path under path.
// referenced tells whether the source's password is a reference
// (password_file, password_env).
func (t *TLS) problems(path string, referenced bool, bad func(path, format string, a ...any)) {
	switch t.Mode {
	case "", TLSRequired, TLSVerifyCA, TLSVerifyIdentity:
	default:
		bad(path+".mode", "%q: want required, verify-ca or verify-identity (the default)", t.Mode)
	}
	if t.EffectiveMode() == TLSVerifyCA && t.CA == "" && len(t.CAPEM) == 0 {
		bad(path+".ca", "verify-ca checks the server's certificate against a CA: give its PEM file as ca")
	}
	if (t.Cert == "" && len(t.CertPEM) == 0) != (t.Key == "" && len(t.KeyPEM) == 0) {
		bad(path, "give both cert and key (a client certificate and its key), or neither")
	}
	// mysqlauth cannot watch the authentication inside TLS: there the
	// server may have the password in clear. A password braid reads on
	// the node goes only to a server that proved its certificate.
	if t.EffectiveMode() == TLSRequired && referenced {
		bad(path+".mode", "required checks nothing of the server, and a password from password_file or password_env goes only to a server that proves its certificate: use verify-ca or verify-identity")
	}
}

// Config is the crypto/tls configuration for a connection to address
// (host:port), from the resolved PEMs. A file that was named but not read
// (Refs.Resolve) is an error, as is PEM text that holds no certificate or
// key; no error repeats a file's content.
func (t *TLS) Config(address string) (*tls.Config, error) {
	if (t.CA != "" && len(t.CAPEM) == 0) || (t.Cert != "" && len(t.CertPEM) == 0) || (t.Key != "" && len(t.KeyPEM) == 0) {
		return nil, fmt.Errorf("spec: tls: %w", errUnresolved)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	var roots *x509.CertPool
	if len(t.CAPEM) > 0 {
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(t.CAPEM) {
			return nil, fmt.Errorf("spec: tls.ca %s holds no PEM certificate: give the CA's certificate file", t.CA)
		}
	}
	if len(t.CertPEM) > 0 {
		pair, err := tls.X509KeyPair(t.CertPEM, t.KeyPEM)
		if err != nil {
			// crypto/tls's message names what is wrong, never the bytes.
			return nil, fmt.Errorf("spec: tls.cert %s and tls.key %s are not a certificate and its key: %v", t.Cert, t.Key, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		host = address
	}
	switch t.EffectiveMode() {
	case TLSRequired:
		cfg.InsecureSkipVerify = true
	case TLSVerifyCA:
		// The chain is checked against the CA; the name is not.
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the server sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			return err
		}
	default:
		cfg.RootCAs, cfg.ServerName = roots, host
	}
	return cfg, nil
}
