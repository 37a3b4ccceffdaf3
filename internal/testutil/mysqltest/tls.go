package mysqltest

import (
	"testing"

	"github.com/braid-cdc/braid/internal/pki"
)

// TLSFiles are a test's own CA and the certificates it signed, as PEM
// files in a directory of the test's (removed when it ends).
type TLSFiles struct {
	// Dir holds every file below.
	Dir string
	// CA is the CA's certificate (ca.pem).
	CA string
	// ServerCert and ServerKey are a server certificate for 127.0.0.1
	// and localhost.
	ServerCert, ServerKey string
	// ClientCert and ClientKey are a client certificate (CommonName
	// client), for users created REQUIRE X509.
	ClientCert, ClientKey string
}

// MakeTLS makes a new CA in a temporary directory and signs a server and
// a client certificate with it. Two calls make two CAs that do not trust
// each other's certificates.
func MakeTLS(t testing.TB) TLSFiles {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.InitCA(dir)
	if err != nil {
		t.Fatalf("mysqltest: make a test CA: %v", err)
	}
	f := TLSFiles{Dir: dir, CA: ca}
	if f.ServerCert, f.ServerKey, err = pki.IssueNode(dir, "server", []string{"127.0.0.1"}); err != nil {
		t.Fatalf("mysqltest: sign a server certificate: %v", err)
	}
	if f.ClientCert, f.ClientKey, err = pki.IssueNode(dir, "client", nil); err != nil {
		t.Fatalf("mysqltest: sign a client certificate: %v", err)
	}
	return f
}

// WithTLS starts the server with TLS on (--ssl-ca, --ssl-cert and
// --ssl-key of f): clients may connect with TLS; a user created REQUIRE
// SSL or REQUIRE X509 must.
func WithTLS(f TLSFiles) Option {
	return WithArgs("--ssl-ca="+f.CA, "--ssl-cert="+f.ServerCert, "--ssl-key="+f.ServerKey)
}
