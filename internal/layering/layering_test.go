package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// TestLayering checks every package of the module against the table.
func TestLayering(t *testing.T) {
	mod := module(t)
	var pkgs []pkg
	for _, p := range goList(t, mod, "./...") {
		if p.Error != nil {
			t.Errorf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		rel, ok := mod.rel(p.ImportPath)
		if !ok {
			continue
		}
		checked := pkg{path: rel}
		for _, imp := range p.Imports {
			if r, ok := mod.rel(imp); ok {
				checked.imports = append(checked.imports, r)
			}
		}
		pkgs = append(pkgs, checked)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list ./... found no packages")
	}
	for _, problem := range check(table, pkgs) {
		t.Error(problem)
	}
}

// TestBinaryLinksNoTestHarness checks that cmd/braid, with everything it
// links, has no test harness among its dependencies.
func TestBinaryLinksNoTestHarness(t *testing.T) {
	mod := module(t)
	deps := goList(t, mod, "-deps", "./cmd/braid")
	importers := map[string][]string{} // braid package → braid packages importing it
	for _, p := range deps {
		from, ok := mod.rel(p.ImportPath)
		if !ok {
			continue
		}
		for _, imp := range p.Imports {
			if to, ok := mod.rel(imp); ok {
				importers[to] = append(importers[to], from)
			}
		}
	}
	found := false
	for _, p := range deps {
		rel, ok := mod.rel(p.ImportPath)
		if !ok {
			continue
		}
		if rel == "cmd/braid" {
			found = true
		}
		if matches(testHarnesses, rel) {
			t.Errorf("cmd/braid links the test harness %s (imported by %s)",
				rel, strings.Join(importers[rel], ", "))
		}
	}
	if !found {
		t.Fatal("go list -deps ./cmd/braid did not list cmd/braid")
	}
}

// modInfo is the module under test.
type modInfo struct {
	Path string // module path
	Dir  string // root directory
}

// rel returns importPath inside the module ("group" for
// github.com/braid-cdc/braid/group); ok is false for other modules.
func (m modInfo) rel(importPath string) (string, bool) {
	if importPath == m.Path {
		return ".", true
	}
	return strings.CutPrefix(importPath, m.Path+"/")
}

// module asks the go command for the main module's path and root.
func module(t *testing.T) modInfo {
	t.Helper()
	var m modInfo
	out := run(t, "", "list", "-m", "-json")
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("go list -m -json: %v", err)
	}
	if m.Path == "" || m.Dir == "" {
		t.Fatalf("go list -m -json: no module path or directory in %s", out)
	}
	return m
}

// listed is the part of `go list -json` the tests read.
type listed struct {
	ImportPath string
	Imports    []string // of the non-test files
	Error      *struct{ Err string }
}

// goList runs `go list -e -json` with args from the module root.
func goList(t *testing.T, mod modInfo, args ...string) []listed {
	t.Helper()
	args = append([]string{"list", "-e", "-json=ImportPath,Imports,Error"}, args...)
	out := run(t, mod.Dir, args...)
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("go %s: decoding its output: %v", strings.Join(args, " "), err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// run runs the go command (go test puts its own first on PATH) in dir and
// returns its standard output.
func run(t *testing.T, dir string, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}
