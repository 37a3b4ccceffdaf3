package binlog_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/spec"
)

// readPEM reads a test's PEM file.
func readPEM(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSourceTLS: a source reached over TLS, on a real mariadbd started
// with a CA made in the test. Users created REQUIRE SSL and REQUIRE X509
// read rows (so both the query and the binlog connections speak TLS, with
// the client certificate where asked); the same user without TLS is
// refused by the server; a CA that did not sign the server's certificate
// stops the reader with one line naming tls.ca; neither the password nor
// the client key reaches the log or the error.
func TestSourceTLS(t *testing.T) {
	files := mysqltest.MakeTLS(t)
	srv := mysqltest.Start(t, mysqltest.WithTLS(files))
	srv.Exec(t,
		"CREATE USER tls_only@'%' IDENTIFIED BY 'pw-secret-ssl' REQUIRE SSL",
		"GRANT REPLICATION SLAVE, BINLOG MONITOR, SELECT ON *.* TO tls_only@'%'",
		"CREATE USER tls_x509@'%' IDENTIFIED BY 'pw-secret-x509' REQUIRE X509",
		"GRANT REPLICATION SLAVE, BINLOG MONITOR, SELECT ON *.* TO tls_x509@'%'",
		"CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY)")
	ca, clientCert, clientKey := readPEM(t, files.CA), readPEM(t, files.ClientCert), readPEM(t, files.ClientKey)
	keyBody := strings.Split(strings.TrimSpace(string(clientKey)), "\n")[1] // a line of the key's base64

	read := func(t *testing.T, src spec.Source, rowID string) {
		t.Helper()
		var logBuf bytes.Buffer
		cfg := binlog.Config{Source: src, Logger: slog.New(slog.NewTextHandler(&logBuf, nil))}
		r := startReader(t, cfg, nil)
		srv.Exec(t, "INSERT INTO app.t VALUES ("+rowID+")")
		r.waitFor(20*time.Second, "the row "+rowID, func(evs []*change.Event) bool {
			for _, rc := range rows(evs) {
				if v := named(rc, rc.After())["id"]; fmt.Sprint(v) == rowID {
					return true
				}
			}
			return false
		})
		if err := r.stop(); err != nil {
			t.Fatalf("reader: %v", err)
		}
		for _, secret := range []string{src.Password, keyBody} {
			if strings.Contains(logBuf.String(), secret) {
				t.Errorf("the log holds a secret %q:\n%s", secret, logBuf.String())
			}
		}
	}
	t.Run("verify-identity, REQUIRE SSL", func(t *testing.T) {
		read(t, spec.Source{Name: "a", Address: srv.Addr(), User: "tls_only", Password: "pw-secret-ssl", Start: earliest,
			TLS: &spec.TLS{CA: files.CA, CAPEM: ca}}, "1")
	})
	t.Run("verify-ca with a client certificate, REQUIRE X509", func(t *testing.T) {
		read(t, spec.Source{Name: "a", Address: srv.Addr(), User: "tls_x509", Password: "pw-secret-x509", Start: earliest,
			TLS: &spec.TLS{Mode: spec.TLSVerifyCA, CA: files.CA, CAPEM: ca, Cert: files.ClientCert, CertPEM: clientCert, Key: files.ClientKey, KeyPEM: clientKey}}, "2")
	})
	t.Run("without TLS the server refuses the user", func(t *testing.T) {
		_, err := runOnce(t, spec.Source{Name: "a", Address: srv.Addr(), User: "tls_only", Password: "pw-secret-ssl"})
		if !errors.Is(err, binlog.ErrAccessDenied) {
			t.Fatalf("error %v, want ErrAccessDenied", err)
		}
	})
	t.Run("a CA that did not sign the server's certificate", func(t *testing.T) {
		other := mysqltest.MakeTLS(t)
		src := spec.Source{Name: "a", Address: srv.Addr(), User: "tls_x509", Password: "pw-secret-x509",
			TLS: &spec.TLS{CA: other.CA, CAPEM: readPEM(t, other.CA), Cert: files.ClientCert, CertPEM: clientCert, Key: files.ClientKey, KeyPEM: clientKey}}
		log, err := runOnce(t, src)
		if !errors.Is(err, binlog.ErrTLS) {
			t.Fatalf("error %v, want ErrTLS", err)
		}
		oneLineWith(t, err, "source a", srv.Addr(), "not trusted", "tls.ca")
		for _, secret := range []string{"pw-secret-x509", keyBody} {
			if strings.Contains(log+err.Error(), secret) {
				t.Errorf("a secret %q in the log or error", secret)
			}
		}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		if _, err := binlog.CheckSource(ctx, src); !errors.Is(err, binlog.ErrTLS) {
			t.Errorf("CheckSource: %v, want ErrTLS", err)
		}
	})
	t.Run("a server without TLS", func(t *testing.T) {
		plain := mysqltest.Start(t)
		_, err := runOnce(t, spec.Source{Name: "a", Address: plain.Addr(), TLS: &spec.TLS{CA: files.CA, CAPEM: ca}})
		if !errors.Is(err, binlog.ErrTLS) {
			t.Fatalf("error %v, want ErrTLS", err)
		}
		oneLineWith(t, err, "does not offer TLS")
	})
}
