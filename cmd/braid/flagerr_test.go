package main

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/braid-cdc/braid/cluster"
)

// TestLibrariesNameNoFlag: no string in the packages below cmd/braid
// names a flag of a braid command (--secrets-dir, --force): a library has
// no command line, and its error would be wrong for any other caller.
// The command adds the flag (flagerr.go). Left out: the packages that
// write braid command lines to run (internal/localcluster, the test
// harnesses, bench, chaos), and tests.
func TestLibrariesNameNoFlag(t *testing.T) {
	flags := map[string]bool{}
	for _, fl := range leafFlags {
		for _, f := range fl {
			flags[f] = true
		}
	}
	flagRE := regexp.MustCompile(`--([a-z][a-z0-9-]*)`)
	root := filepath.Join("..", "..")
	skip := []string{"cmd", "bench", "chaos", ".git", filepath.Join("internal", "localcluster"), filepath.Join("internal", "testutil")}
	var files int
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if slices.Contains(skip, rel) || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			for _, m := range flagRE.FindAllStringSubmatch(s, -1) {
				if flags[m[1]] {
					t.Errorf("%s: %q names braid's flag --%s: say the setting, and let cmd/braid name the flag", fset.Position(lit.Pos()), s, m[1])
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d Go files under %s: the walk missed the module", files, root)
	}
}

// TestServerErrorFlags: braid server names the flags of the Config
// fields a cluster.SettingError names, and every one is a flag of braid
// server.
func TestServerErrorFlags(t *testing.T) {
	for field, fl := range serverFlags {
		for _, f := range fl {
			if !slices.Contains(leafFlags["server"], strings.TrimPrefix(f, "--")) {
				t.Errorf("Config.%s: %s is no flag of braid server", field, f)
			}
		}
	}
	err := &cluster.SettingError{Fields: []string{"TLS", "GossipKey", "Insecure"},
		Err: errors.New("cluster: refusing to start unprotected: gossip would take any node")}
	want := "refusing to start unprotected: gossip would take any node (flags: --tls-ca, --tls-cert, --tls-key, --gossip-key-file, --insecure)"
	if got := serverError(err); got != want {
		t.Errorf("serverError = %q, want %q", got, want)
	}
	// End to end: cluster says what a node lacks, braid server its flags.
	_, errs, code := cli("server", "--data-dir", t.TempDir())
	if want := "braid server: a node needs a name and a data directory (flags: --name, --data-dir)\n"; code != 1 || errs != want {
		t.Errorf("braid server without --name: exit %d, %q; want 1 and %q", code, errs, want)
	}
}
