package layering

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
)

// rule is what one package (or package tree) of the table may import.
type rule struct {
	// may are the braid packages its non-test files may import (patterns as
	// described at the table).
	may []string
	// mayNot are exceptions to may: "..." but not "internal/testutil/...".
	mayNot []string
}

// pkg is what the checker needs of one package.
type pkg struct {
	// path is the package's path inside the module ("group", "api/wire").
	path string
	// imports are the braid packages its non-test files import, as paths
	// inside the module.
	imports []string
}

// matches reports whether pattern names path: the same path, a path at or
// below p for "p/...", any path for "...".
func matches(pattern, path string) bool {
	if pattern == "..." {
		return true
	}
	if dir, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == dir || strings.HasPrefix(path, dir+"/")
	}
	return pattern == path
}

// ruleFor finds path's entry in table: its exact key, else the longest
// "/..." key covering it. ok is false when no key covers path.
func ruleFor(table map[string]rule, path string) (key string, r rule, ok bool) {
	if r, ok := table[path]; ok {
		return path, r, true
	}
	for k, kr := range table {
		if !strings.HasSuffix(k, "...") || !matches(k, path) {
			continue
		}
		if !ok || len(k) > len(key) {
			key, r, ok = k, kr, true
		}
	}
	return key, r, ok
}

// allows reports whether r lets a package import imp.
func (r rule) allows(imp string) bool {
	match := func(p string) bool { return matches(p, imp) }
	return slices.ContainsFunc(r.may, match) && !slices.ContainsFunc(r.mayNot, match)
}

// String lists what r allows, for a failure message.
func (r rule) String() string {
	s := "nothing in braid"
	if len(r.may) > 0 {
		s = strings.Join(r.may, ", ")
	}
	if len(r.mayNot) > 0 {
		s += " except " + strings.Join(r.mayNot, ", ")
	}
	return s
}

// check returns one line per package missing from table and per import a
// package's entry does not allow, sorted.
func check(table map[string]rule, pkgs []pkg) []string {
	var problems []string
	for _, p := range pkgs {
		key, r, ok := ruleFor(table, p.path)
		if !ok {
			problems = append(problems, fmt.Sprintf(
				"%s is not in the table: add it to the table in internal/layering with the imports DESIGN.md allows", p.path))
			continue
		}
		for _, imp := range p.imports {
			if !r.allows(imp) {
				problems = append(problems, fmt.Sprintf(
					"%s imports %s; the table (%s) allows it %s", p.path, imp, key, r))
			}
		}
	}
	sort.Strings(problems)
	return problems
}

// TestCheck runs the checker over a made-up module: a bottom, a middle that
// reaches up, a binary with an exception, a tree key and a newcomer.
func TestCheck(t *testing.T) {
	fake := map[string]rule{
		"low":          {},
		"mid":          {may: []string{"low"}},
		"top":          {may: []string{"mid", "low"}},
		"plug/...":     {may: []string{"mid"}},
		"cmd/x":        {may: []string{"..."}, mayNot: []string{"testutil/..."}},
		"testutil/...": {may: []string{"top", "testutil/..."}},
	}
	for _, tc := range []struct {
		name string
		pkgs []pkg
		want []string
	}{{
		name: "downward imports pass",
		pkgs: []pkg{
			{path: "low"},
			{path: "mid", imports: []string{"low"}},
			{path: "top", imports: []string{"mid", "low"}},
			{path: "plug", imports: []string{"mid"}},
			{path: "plug/a", imports: []string{"mid"}},
			{path: "cmd/x", imports: []string{"top", "plug/a"}},
			{path: "testutil/h", imports: []string{"top", "testutil/g"}},
		},
	}, {
		name: "an upward import is named",
		pkgs: []pkg{
			{path: "low"},
			{path: "mid", imports: []string{"low", "top"}},
			{path: "top", imports: []string{"mid"}},
		},
		want: []string{"mid imports top; the table (mid) allows it low"},
	}, {
		name: "a package with nothing allowed",
		pkgs: []pkg{{path: "low", imports: []string{"mid"}}},
		want: []string{"low imports mid; the table (low) allows it nothing in braid"},
	}, {
		name: "a tree key governs the packages below it",
		pkgs: []pkg{{path: "plug/a/b", imports: []string{"top"}}},
		want: []string{"plug/a/b imports top; the table (plug/...) allows it mid"},
	}, {
		name: "an exception beats anything",
		pkgs: []pkg{{path: "cmd/x", imports: []string{"top", "testutil/h"}}},
		want: []string{"cmd/x imports testutil/h; the table (cmd/x) allows it ... except testutil/..."},
	}, {
		name: "a package missing from the table",
		pkgs: []pkg{{path: "new"}, {path: "lower", imports: []string{"low"}}},
		want: []string{
			"lower is not in the table: add it to the table in internal/layering with the imports DESIGN.md allows",
			"new is not in the table: add it to the table in internal/layering with the imports DESIGN.md allows",
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := check(fake, tc.pkgs)
			if !slices.Equal(got, tc.want) {
				t.Errorf("check reported\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
