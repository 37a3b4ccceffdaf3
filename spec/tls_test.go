package spec_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/braid-cdc/braid/spec"
)

// TestTLSSpec: a source's tls block parses with verify-identity as its
// default mode, and every problem of it is named at once: an unknown
// mode, verify-ca without a CA, a cert without its key, and required
// (which checks nothing of the server) with a password braid reads on the
// node.
func TestTLSSpec(t *testing.T) {
	s, err := spec.Parse([]byte("name: d\nsources: [{name: a, address: 'h:1', tls: {ca: ca.pem}}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tl := s.Sources[0].TLS; tl == nil || tl.CA != "ca.pem" || tl.EffectiveMode() != spec.TLSVerifyIdentity {
		t.Fatalf("tls %+v", s.Sources[0].TLS)
	}
	_, err = spec.Parse([]byte(`name: d
sources:
  - {name: a, address: 'h:1', tls: {mode: verify-full}}
  - {name: b, address: 'h:1', tls: {mode: verify-ca}}
  - {name: c, address: 'h:1', tls: {cert: c.pem}}
  - {name: e, address: 'h:1', password_file: pw, tls: {mode: required}}
  - {name: f, address: 'h:1', password: x, tls: {mode: required}}
`))
	if err == nil {
		t.Fatal("accepted")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{`sources[0].tls.mode: "verify-full"`, "sources[1].tls.ca: verify-ca", "sources[2].tls: give both cert and key", "sources[3].tls.mode: required checks nothing"}
	if len(lines) != len(want) {
		t.Fatalf("%d problems, want %d:\n%s", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("problem %d %q, want %q", i, lines[i], w)
		}
	}
}

// TestTLSResolve: Refs.Resolve reads a tls block's files only from the
// allowed directories, into the PEM fields of a copy (the caller's spec
// keeps its paths only); the PEMs are never in the spec's YAML or JSON,
// and the key prints as hidden.
func TestTLSResolve(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	for name, body := range map[string]string{"ca.pem": "CA", "c.pem": "CERT", "k.pem": "KEY-SECRET"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	refs, err := spec.NewRefs([]string{dir}, "")
	if err != nil {
		t.Fatal(err)
	}
	tl := &spec.TLS{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "c.pem"), Key: filepath.Join(dir, "k.pem")}
	s := spec.Spec{Name: "d", Sources: []spec.Source{{Name: "a", Address: "h:1", TLS: tl}}}
	got, err := refs.Resolve(s)
	if err != nil {
		t.Fatal(err)
	}
	r := got.Sources[0].TLS
	if string(r.CAPEM) != "CA" || string(r.CertPEM) != "CERT" || string(r.KeyPEM) != "KEY-SECRET" {
		t.Fatalf("resolved %q %q %q", r.CAPEM, r.CertPEM, []byte(r.KeyPEM))
	}
	if tl.CAPEM != nil || tl.KeyPEM != nil {
		t.Errorf("Resolve changed the caller's spec")
	}
	y, _ := yaml.Marshal(got)
	j, _ := json.Marshal(got)
	shown := fmt.Sprintf("%v %+v %#v", got, got, r)
	for what, text := range map[string]string{"yaml": string(y), "json": string(j), "fmt": shown} {
		if strings.Contains(text, "KEY-SECRET") || strings.Contains(text, "CERT\"") {
			t.Errorf("%s shows a PEM: %s", what, text)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "ca.pem"), []byte("CA"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Sources[0].TLS = &spec.TLS{CA: filepath.Join(outside, "ca.pem")}
	if _, err := refs.Resolve(s); err == nil || !strings.Contains(err.Error(), "tls.ca") || !strings.Contains(err.Error(), "secrets directories") {
		t.Errorf("a CA outside the secrets directories: %v", err)
	}
	// Unresolved, a connection cannot be configured from it.
	if _, err := (&spec.TLS{CA: "ca.pem"}).Config("h:1"); err == nil {
		t.Error("Config of an unresolved tls block succeeded")
	}
}
