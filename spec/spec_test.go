package spec_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/braid-cdc/braid/spec"
)

// TestValidateReportsEverything: every problem of a spec comes at once,
// each naming the field a user wrote (Parse validates).
func TestValidateReportsEverything(t *testing.T) {
	_, err := spec.Parse([]byte(`
name: "bad name"
sources:
  - {name: a, address: "nohost"}
  - {name: a, address: "127.0.0.1:99999"}
tables: ['(']
route: [{match: 'x', to: ''}]
ordering: sideways
`))
	if err == nil {
		t.Fatal("a spec with seven problems validated")
	}
	for _, want := range []string{`line 2: name: "bad name"`, `line 4: sources[0].address: "nohost"`, `line 5: sources[1].name: "a" is used twice`,
		"line 5: sources[1].address: \"127.0.0.1:99999\": bad port", `line 6: tables[0]: regex "("`, "line 7: route[0].to: missing or empty", `line 8: ordering: "sideways"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
}

// TestValidateLimits: a spec may not make a node hold or dial without
// bound; the error is one line a user can act on.
func TestValidateLimits(t *testing.T) {
	ok := func() spec.Spec {
		return spec.Spec{Name: "shop", Sources: []spec.Source{{Name: "a", Address: "127.0.0.1:3306"}}}
	}
	plain := ok()
	if err := plain.Validate(); err != nil {
		t.Fatalf("a plain spec: %v", err)
	}
	long := ok()
	long.Name = strings.Repeat("x", spec.MaxNameBytes+1)
	if err := long.Validate(); err == nil || !strings.Contains(err.Error(), "at most 128") || strings.Contains(err.Error(), "xxxx") {
		t.Errorf("a %d-byte name: %v", len(long.Name), err)
	}
	edge := ok()
	edge.Name = strings.Repeat("x", spec.MaxNameBytes)
	edge.Sources[0].Name = strings.Repeat("y", spec.MaxNameBytes)
	if err := edge.Validate(); err != nil {
		t.Errorf("names of exactly %d bytes: %v", spec.MaxNameBytes, err)
	}
	many := ok()
	many.Sources = nil
	for i := range spec.MaxSources + 1 {
		many.Sources = append(many.Sources, spec.Source{Name: fmt.Sprintf("s%d", i), Address: "127.0.0.1:3306"})
	}
	err := many.Validate()
	if err == nil || !strings.Contains(err.Error(), "1025 sources: at most 1024") {
		t.Fatalf("%d sources: %v", len(many.Sources), err)
	}
	if n := strings.Count(err.Error(), "\n"); n != 0 {
		t.Errorf("%d sources gave %d lines of errors, want one", len(many.Sources), n+1)
	}
	many.Sources = many.Sources[:spec.MaxSources]
	if err := many.Validate(); err != nil {
		t.Errorf("%d sources: %v", spec.MaxSources, err)
	}
}

// TestRedacted: a shown spec hides every source password and leaves the
// spec it was made from as it was.
func TestRedacted(t *testing.T) {
	ds := spec.Spec{Name: "shop", Sources: []spec.Source{{Name: "a", Password: "pw-a"}, {Name: "b"}}}
	r := ds.Redacted()
	if r.Sources[0].Password != spec.Hidden || r.Sources[1].Password != "" {
		t.Errorf("redacted passwords %q, %q; want %q and none", r.Sources[0].Password, r.Sources[1].Password, spec.Hidden)
	}
	if ds.Sources[0].Password != "pw-a" {
		t.Errorf("Redacted changed the spec: password %q", ds.Sources[0].Password)
	}
}

// TestResolvePassword: a password may come from a file in a secrets
// directory or a variable under the prefix instead of the spec (Refs);
// anything else is refused with one message whether it exists or not;
// Validate refuses more than one way; an unresolved reference never
// reaches a connection.
func TestResolvePassword(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	file := filepath.Join(dir, "pw")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(other, "pw")
	if err := os.WriteFile(outside, []byte("outside\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link-out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(file, filepath.Join(other, "link-in")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BRAID_SECRET_PW", "from-env")
	t.Setenv("BRAID_TEST_PW", "outside")
	refs, err := spec.NewRefs([]string{dir}, spec.DefaultEnvPrefix)
	if err != nil {
		t.Fatal(err)
	}
	resolve := func(refs spec.Refs, src spec.Source) (string, error) {
		s, err := refs.Resolve(spec.Spec{Sources: []spec.Source{src}})
		if err != nil {
			return "", err
		}
		return s.Sources[0].ResolvePassword()
	}
	for _, c := range []struct {
		src  spec.Source
		want string
	}{
		{spec.Source{Name: "a", Password: "inline"}, "inline"},
		{spec.Source{Name: "a", PasswordFile: file}, "from-file"},
		{spec.Source{Name: "a", PasswordFile: filepath.Join(dir, "sub", "..", "pw")}, "from-file"},
		{spec.Source{Name: "a", PasswordFile: filepath.Join(other, "link-in")}, "from-file"}, // a link into dir
		{spec.Source{Name: "a", PasswordEnv: "BRAID_SECRET_PW"}, "from-env"},
	} {
		if got, err := resolve(refs, c.src); err != nil || got != c.want {
			t.Errorf("%+v: %q, %v; want %q", c.src, got, err, c.want)
		}
	}
	missing := filepath.Join(dir, "missing")
	_, want := resolve(refs, spec.Source{Name: "a", PasswordFile: missing})
	if want == nil || !strings.Contains(want.Error(), dir) {
		t.Fatalf("a missing file: %v", want)
	}
	for _, path := range []string{
		outside, "/etc/hostname", "/proc/self/environ",
		filepath.Join(dir, "..", filepath.Base(other), "pw"),
		filepath.Join(dir, "link-out"),
		filepath.Join(dir, "sub"), // not a file
	} {
		_, err := resolve(refs, spec.Source{Name: "a", PasswordFile: path})
		if err == nil || strings.ReplaceAll(err.Error(), path, missing) != want.Error() {
			t.Errorf("%s: %v\nwant the error of a missing file: %v", path, err, want)
		}
	}
	for _, name := range []string{"BRAID_TEST_PW", "BRAID_SECRET_UNSET", "BRAID_SECRET_", "HOME"} {
		_, err := resolve(refs, spec.Source{Name: "a", PasswordEnv: name})
		if err == nil || !strings.Contains(err.Error(), "BRAID_SECRET_") || strings.Contains(err.Error(), "outside") {
			t.Errorf("password_env %s: %v", name, err)
		}
	}
	for _, src := range []spec.Source{{Name: "a", PasswordFile: file}, {Name: "a", PasswordEnv: "BRAID_SECRET_PW"}} {
		if _, err := resolve(spec.Refs{}, src); err == nil || !strings.Contains(err.Error(), "refused") {
			t.Errorf("the zero Refs: %+v: %v", src, err)
		}
		if pw, err := src.ResolvePassword(); err == nil {
			t.Errorf("%+v: unresolved, read as %q", src, pw)
		}
	}
	sinks := spec.Spec{Sinks: []spec.Sink{{Name: "k", PasswordFile: outside}}}
	if err := refs.Check(sinks); err == nil || !strings.Contains(err.Error(), `sink "k"`) {
		t.Errorf("a sink's reference: %v", err)
	}
	if _, err := spec.NewRefs([]string{missing}, ""); err == nil {
		t.Error("a missing secrets directory accepted")
	}
	two := spec.Spec{Name: "shop", Sources: []spec.Source{{Name: "a", Address: "127.0.0.1:3306", Password: "x", PasswordEnv: "BRAID_TEST_PW"}}}
	if err := two.Validate(); err == nil || !strings.Contains(err.Error(), "give one of password, password_file and password_env") {
		t.Errorf("two ways at once: %v", err)
	}
}
