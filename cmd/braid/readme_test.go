package main

// The doc test: what README.md shows a user is run or parsed as written, so
// that a renamed flag, a removed spec key or a moved section breaks a test
// and not a newcomer's first five minutes.
//
// What it checks, block by block (fenced with ```LANG):
//
//   - sh: every command line. `braid ...` (and `go run ./cmd/braid ...`,
//     which builds this package; the test runs the same package's binary)
//     is run with --help appended: every flag before it must be one the
//     command defines, or the flag package stops with exit 2 before it
//     reaches --help. `braid capture --sandbox ...` really runs, against
//     the MariaDB servers it starts (skipped without a mariadbd, failed
//     under CI=true, as the other server tests), and its lines must carry
//     every key the README's JSON example shows. With a server installed the
//     tour runs for real too (readme_tour_test.go): each spec block gets
//     real servers in place of its addresses, and the lines that read it
//     (-f NAME.yaml) and braid tail lines run as written, on free ports. `make TARGET` must name a
//     target of the Makefile (the test does not run make: `make test` runs
//     it). Any other line fails: the test must know how to check it.
//   - yaml: a destination spec, parsed and validated by spec.Parse, the
//     function `braid capture -f` and `braid destination create` use. In
//     docs/*.md a block whose top-level keys are spec keys is checked too;
//     one without name and sources is a fragment of a spec (sinks: ...) and
//     is checked inside a minimal spec.
//   - json: valid JSON.
//   - docs/*.md's sh blocks are synopses and cluster set-ups more than
//     commands to run here: TestDocsCommandFlags checks that every flag
//     their `braid ...` lines show is one the command defines.
//   - links: every relative link of README.md and docs/*.md names a file
//     that exists and, with #anchor, a heading in it.
//
// A block not meant to run says so after its language (```sh no-run), with
// the reason in a comment on its first line; the test logs the reason and
// leaves it.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/mariadb"
	"github.com/braid-cdc/braid/internal/testutil/braidproc"
	"github.com/braid-cdc/braid/spec"
	"gopkg.in/yaml.v3"
)

// repoRoot is where README.md and docs/ are, seen from this package.
const repoRoot = "../.."

// fence is one fenced code block of a markdown file.
type fence struct {
	file string   // path, for messages
	line int      // line of the opening fence, 1-based
	lang string   // the info string's first word: sh, yaml, json, ...
	tags []string // the info string's other words: no-run
	body []string // the block's lines, the fence's indentation removed
}

func (f fence) where() string { return fmt.Sprintf("%s:%d", f.file, f.line) }

func (f fence) noRun() bool { return slices.Contains(f.tags, "no-run") }

// parseFences returns the fenced blocks of a markdown text.
func parseFences(file string, text []byte) ([]fence, error) {
	var out []fence
	var cur *fence
	var indent string
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		trimmed := strings.TrimLeft(l, " ")
		if cur == nil {
			if strings.HasPrefix(trimmed, "```") {
				info := strings.Fields(strings.TrimPrefix(trimmed, "```"))
				cur = &fence{file: file, line: n}
				if len(info) > 0 {
					cur.lang, cur.tags = info[0], info[1:]
				}
				indent = l[:len(l)-len(trimmed)]
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") {
			out = append(out, *cur)
			cur = nil
			continue
		}
		cur.body = append(cur.body, strings.TrimPrefix(l, indent))
	}
	if cur != nil {
		return out, fmt.Errorf("%s: the block opened at line %d is never closed", file, cur.line)
	}
	return out, sc.Err()
}

// shellWords splits a command line as sh does for the simple lines the docs
// show: words separated by blanks, '…' and "…" quoting, \ escapes, and a
// comment from an unquoted # that starts a word. It refuses what it does
// not model (pipes, redirections, substitutions, variables), so that the
// test never checks a line other than the one a user runs.
func shellWords(line string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '#' && !inWord:
			return words, nil
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unclosed ' in %q", line)
			}
			w.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			j := strings.IndexByte(line[i+1:], '"')
			if j < 0 {
				return nil, fmt.Errorf("unclosed \" in %q", line)
			}
			s := line[i+1 : i+1+j]
			if strings.ContainsAny(s, "$`\\") {
				return nil, fmt.Errorf("the doc test does not expand %q", s)
			}
			w.WriteString(s)
			i += j + 1
			inWord = true
		case c == '\\' && i+1 < len(line):
			w.WriteByte(line[i+1])
			i++
			inWord = true
		case strings.IndexByte("|&;<>()$`*?[", c) >= 0:
			return nil, fmt.Errorf("the doc test does not model %q in %q: mark the block no-run and say why", c, line)
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// commandLines joins a shell block's continued lines (a trailing \) and
// returns each command with the line it starts on.
func commandLines(f fence) (lines []string, at []int) {
	var cur strings.Builder
	start := 0
	for i, l := range f.body {
		if cur.Len() == 0 {
			start = f.line + 1 + i
		}
		if s, ok := strings.CutSuffix(strings.TrimRight(l, " "), "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(l)
		if strings.TrimSpace(cur.String()) != "" {
			lines = append(lines, cur.String())
			at = append(at, start)
		}
		cur.Reset()
	}
	if strings.TrimSpace(cur.String()) != "" {
		lines = append(lines, cur.String())
		at = append(at, start)
	}
	return lines, at
}

// docChecker checks the blocks of the docs against the real binary, spec
// package and Makefile.
type docChecker struct {
	bin     string          // the braid binary of this package
	targets map[string]bool // the Makefile's targets
	// sandbox, if set, runs `braid capture --sandbox` lines for real; the
	// doc test sets it when a server binary is installed.
	sandbox func(args []string) error
	// tour, if set, runs the lines that read a spec the README shows
	// (-f NAME.yaml) and the braid tail lines for real (readme_tour_test.go).
	tour *tour
}

// braidArgs returns the braid arguments of a command line, or ok false
// when the line does not run braid.
func braidArgs(words []string) (args []string, ok bool) {
	switch {
	case len(words) > 0 && words[0] == "braid":
		return words[1:], true
	case len(words) > 2 && words[0] == "go" && words[1] == "run" && (words[2] == "./cmd/braid" || words[2] == "github.com/braid-cdc/braid/cmd/braid"):
		return words[3:], true
	}
	return nil, false
}

// shell checks one command line of a shell block.
func (c *docChecker) shell(line string) error {
	words, err := shellWords(line)
	if err != nil {
		return err
	}
	if len(words) == 0 {
		return nil
	}
	if args, ok := braidArgs(words); ok {
		if len(args) > 0 && args[0] == "capture" && slices.Contains(args, "--sandbox") && c.sandbox != nil {
			return c.sandbox(args)
		}
		if c.tour != nil && c.tour.runs(args) {
			return c.tour.run(args)
		}
		return c.dryRun(args)
	}
	if words[0] == "make" {
		for _, target := range words[1:] {
			if strings.HasPrefix(target, "-") || strings.Contains(target, "=") {
				return fmt.Errorf("make %s: the doc test checks targets only; give make no flags or variables here", target)
			}
			if !c.targets[target] {
				return fmt.Errorf("make %s: the Makefile has no target %q", target, target)
			}
		}
		return nil
	}
	return fmt.Errorf("the doc test does not know how to check %q: run braid, go run ./cmd/braid or make, or mark the block no-run and say why", words[0])
}

// dryRun runs braid with args and --help: the flag package reads every flag
// before --help, so a flag the command does not define ends it with exit 2
// and "flag provided but not defined", and one it defines reaches --help,
// which prints the usage and exits 0 without doing anything.
func (c *docChecker) dryRun(args []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, append(slices.Clone(args), "--help")...)
	cmd.WaitDelay = 5 * time.Second
	cmd.Dir = os.TempDir()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		return fmt.Errorf("braid %s --help did not stop at --help within 30s: a flag after a positional argument is not read as a flag", strings.Join(args, " "))
	}
	if err != nil {
		// The flag package's complaint is the first line, the usage after it.
		first, _, _ := strings.Cut(out.String(), "\n")
		return fmt.Errorf("braid %s --help: %v: %s", strings.Join(args, " "), err, first)
	}
	if !strings.Contains(out.String(), "Usage") {
		return fmt.Errorf("braid %s --help exited 0 without printing its usage:\n%s", strings.Join(args, " "), lastLines(out.String(), 5))
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// specKeys are the top-level keys of a destination spec, read from the
// yaml tags of spec.Spec, so that the test knows a spec when it sees one.
func specKeys() map[string]bool {
	keys := map[string]bool{}
	t := reflect.TypeFor[spec.Spec]()
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); name != "" && name != "-" {
			keys[name] = true
		}
	}
	return keys
}

// fragmentBase completes a fragment of a spec (a sinks: block, say) into
// one spec.Parse can take; it names no real server, since Parse connects
// to none.
const fragmentBase = "name: doc\nsources:\n  - {name: a, address: 127.0.0.1:3306}\n"

// yamlSpec checks a yaml block as a destination spec. isSpec is false, with
// no error, for a block whose top-level keys are not all spec keys, which
// the caller may allow (docs) or not (README).
func yamlSpec(f fence) (isSpec bool, err error) {
	text := strings.Join(f.body, "\n") + "\n"
	var top map[string]any
	if err := yaml.Unmarshal([]byte(text), &top); err != nil {
		return false, fmt.Errorf("not YAML: %w", err)
	}
	keys := specKeys()
	for k := range top {
		if !keys[k] {
			return false, nil
		}
	}
	offset := 0
	if _, named := top["name"]; !named {
		if _, ok := top["sources"]; !ok {
			text = fragmentBase + text
			offset = strings.Count(fragmentBase, "\n")
		}
	}
	if _, err := spec.Parse([]byte(text)); err != nil {
		if offset > 0 {
			return true, fmt.Errorf("as a fragment after %d lines of a minimal spec (subtract them from the line numbers): %w", offset, err)
		}
		return true, err
	}
	return true, nil
}

// makeTargets reads the targets of the Makefile.
func makeTargets(t *testing.T) map[string]bool {
	data, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([A-Za-z0-9_.-]+):`).FindAllSubmatch(data, -1) {
		targets[string(m[1])] = true
	}
	return targets
}

// docFiles are the files the doc test reads: README.md first.
func docFiles(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(repoRoot, "README.md")}, files...)
}

func readFences(t *testing.T, path string) []fence {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	name, _ := filepath.Rel(repoRoot, path)
	fs, err := parseFences(name, data)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// checkShellBlock checks every command line of a shell block and returns
// one error per failing line.
func (c *docChecker) checkShellBlock(f fence) []error {
	var errs []error
	lines, at := commandLines(f)
	for i, l := range lines {
		if err := c.shell(l); err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %w", f.file, at[i], err))
		}
	}
	return errs
}

// noRunReason is the comment on a no-run block's first line.
func noRunReason(f fence) string {
	if len(f.body) > 0 {
		if _, why, ok := strings.Cut(f.body[0], "#"); ok {
			return strings.TrimSpace(why)
		}
	}
	return "(no reason given on its first line)"
}

// TestReadmeBlocks runs or parses every shell, YAML and JSON block of
// README.md, and the spec blocks and JSON of docs/*.md.
func TestReadmeBlocks(t *testing.T) {
	c := &docChecker{bin: braidproc.Binary(t), targets: makeTargets(t)}
	readme := readFences(t, filepath.Join(repoRoot, "README.md"))
	var exampleKeys []string
	for _, f := range readme {
		if f.lang == "json" {
			var m map[string]any
			if json.Unmarshal([]byte(strings.Join(f.body, "\n")), &m) == nil {
				for k := range m {
					exampleKeys = append(exampleKeys, k)
				}
			}
		}
	}
	slices.Sort(exampleKeys)
	if err := mariadb.Prepare(t.Context()); err == nil {
		c.tour = newTour(t, c.bin)
		c.sandbox = func(args []string) error {
			t.Logf("running braid %s with the servers it starts", strings.Join(args, " "))
			return runSandbox(c.bin, args, exampleKeys)
		}
	} else if errors.Is(err, mariadb.ErrNoServer) && os.Getenv("CI") != "true" {
		t.Logf("the sandbox lines are only checked for their flags, not run: %v", err)
	} else {
		t.Fatal(err)
	}
	var shells int
	for _, f := range readme {
		switch {
		case f.noRun():
			t.Logf("%s: block marked no-run, not checked: %s", f.where(), noRunReason(f))
		case f.lang == "sh" || f.lang == "bash" || f.lang == "shell":
			shells++
			for _, err := range c.checkShellBlock(f) {
				t.Error(err)
			}
		case f.lang == "yaml" || f.lang == "yml":
			if isSpec, err := yamlSpec(f); err != nil {
				t.Errorf("%s: the spec does not parse (lines count from the block's first):\n%v", f.where(), err)
			} else if !isSpec {
				t.Errorf("%s: a YAML block that is no destination spec: the doc test cannot check it; mark it no-run and say why", f.where())
			}
			if _, err := spec.Parse([]byte(strings.Join(f.body, "\n"))); err == nil && c.tour != nil {
				if err := c.tour.addSpec(f); err != nil {
					t.Errorf("%s: the tour cannot set up this spec's servers: %v", f.where(), err)
				}
			}
		case f.lang == "json":
			if !json.Valid([]byte(strings.Join(f.body, "\n"))) {
				t.Errorf("%s: not valid JSON", f.where())
			}
		case f.lang == "":
			t.Logf("%s: a block without a language (output or a picture), not checked", f.where())
		default:
			t.Errorf("%s: a %s block the doc test does not know how to check; mark it no-run and say why", f.where(), f.lang)
		}
	}
	if shells == 0 {
		t.Error("README.md shows no shell block: the doc test found nothing to run")
	}
	for _, path := range docFiles(t)[1:] {
		for _, f := range readFences(t, path) {
			switch {
			case f.noRun():
				t.Logf("%s: block marked no-run, not checked: %s", f.where(), noRunReason(f))
			case f.lang == "yaml" || f.lang == "yml":
				if isSpec, err := yamlSpec(f); err != nil {
					t.Errorf("%s: the spec does not parse (lines count from the block's first):\n%v", f.where(), err)
				} else if !isSpec {
					t.Logf("%s: a YAML block that is no destination spec, not checked", f.where())
				}
			case f.lang == "json":
				if !json.Valid([]byte(strings.Join(f.body, "\n"))) {
					t.Errorf("%s: not valid JSON", f.where())
				}
			}
		}
	}
}

// runSandbox runs `braid capture --sandbox` as the README gives it (with a
// --timeout of its own when the line has none, so that a stuck run fails
// rather than hangs) and checks that it printed --max lines of flat
// messages, each with every key of the README's example.
func runSandbox(bin string, args, exampleKeys []string) error {
	want := 0
	for i, a := range args {
		if (a == "--max" || a == "-max") && i+1 < len(args) {
			want, _ = strconv.Atoi(args[i+1])
		}
	}
	if want == 0 {
		return fmt.Errorf("braid %s: the doc test runs the sandbox only with --max N, so that it ends", strings.Join(args, " "))
	}
	run := slices.Clone(args)
	if !slices.ContainsFunc(run, func(a string) bool { return strings.TrimLeft(a, "-") == "timeout" }) {
		run = append(run, "--timeout", "180s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, run...)
	cmd.WaitDelay = 5 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("braid %s: %v:\n%s", strings.Join(run, " "), err, lastLines(errb.String(), 10))
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != want {
		return fmt.Errorf("braid %s printed %d lines, want %d", strings.Join(run, " "), len(lines), want)
	}
	seen := map[string]bool{}
	for i, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			return fmt.Errorf("braid %s: line %d is not JSON: %v", strings.Join(run, " "), i+1, err)
		}
		for k := range m {
			seen[k] = true
		}
	}
	var missing []string
	for _, k := range exampleKeys {
		if !seen[k] {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("braid %s: the README's example line shows keys no printed line has: %s", strings.Join(run, " "), strings.Join(missing, ", "))
	}
	return nil
}

// anchor is GitHub's anchor of a heading: lower case, punctuation but - and
// _ dropped, spaces as -.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// headings returns the anchors of a markdown file's headings (outside code
// blocks), with GitHub's -1, -2 suffixes for repeats.
func headings(text []byte) map[string]bool {
	out := map[string]bool{}
	count := map[string]int{}
	inFence := false
	for l := range strings.SplitSeq(string(text), "\n") {
		if strings.HasPrefix(strings.TrimLeft(l, " "), "```") {
			inFence = !inFence
			continue
		}
		if inFence || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimLeft(l, "#")
		if !strings.HasPrefix(h, " ") {
			continue
		}
		a := anchor(h)
		if n := count[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		count[a]++
	}
	return out
}

// linkRE finds markdown links; code spans and blocks are removed first.
var (
	linkRE     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	codeSpanRE = regexp.MustCompile("`[^`\n]*`")
)

// brokenLinks returns the relative links of a markdown file that name no
// file, or no heading of it.
func brokenLinks(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var prose strings.Builder
	inFence := false
	for l := range strings.SplitSeq(string(data), "\n") {
		if strings.HasPrefix(strings.TrimLeft(l, " "), "```") {
			inFence = !inFence
			continue
		}
		if !inFence {
			prose.WriteString(codeSpanRE.ReplaceAllString(l, "") + "\n")
		}
	}
	var bad []string
	for _, m := range linkRE.FindAllStringSubmatch(prose.String(), -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		file, frag, _ := strings.Cut(target, "#")
		dest := path
		if file != "" {
			dest = filepath.Join(filepath.Dir(path), file)
		}
		text, err := os.ReadFile(dest)
		if err != nil {
			if info, serr := os.Stat(dest); serr == nil && info.IsDir() && frag == "" {
				continue
			}
			bad = append(bad, target+": no such file")
			continue
		}
		if frag != "" && strings.HasSuffix(dest, ".md") && !headings(text)[frag] {
			bad = append(bad, target+": no such heading")
		}
	}
	return bad, nil
}

// TestDocLinks checks that every relative link of README.md and docs/*.md
// resolves: the file exists and the #anchor is one of its headings.
func TestDocLinks(t *testing.T) {
	for _, path := range docFiles(t) {
		bad, err := brokenLinks(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bad {
			t.Errorf("%s: link %s", path, b)
		}
	}
}

// TestDocCheckerCatches shows the doc test failing where it must: a command
// with a flag braid does not define, a command of a subcommand that does
// not exist, a spec with a misspelt key, a make target that is missing, a
// line it cannot check, and a broken link; and leaving a no-run block and
// a good command alone.
func TestDocCheckerCatches(t *testing.T) {
	c := &docChecker{bin: braidproc.Binary(t), targets: makeTargets(t)}
	check := func(md string) []error {
		fs, err := parseFences("test.md", []byte(md))
		if err != nil {
			t.Fatal(err)
		}
		var errs []error
		for _, f := range fs {
			switch {
			case f.noRun():
			case f.lang == "sh":
				errs = append(errs, c.checkShellBlock(f)...)
			case f.lang == "yaml":
				if _, err := yamlSpec(f); err != nil {
					errs = append(errs, err)
				}
			}
		}
		return errs
	}
	for _, tc := range []struct {
		name, md, want string
	}{
		{"unknown flag", "```sh\nbraid capture -f shop.yaml --max-rows 5   # a flag capture lacks\n```\n", "flag provided but not defined: -max-rows"},
		{"unknown flag of go run", "```sh\ngo run ./cmd/braid capture --sandbox --maxx 20\n```\n", "flag provided but not defined: -maxx"},
		{"unknown flag after a name", "```sh\nbraid tail shop --server http://127.0.0.1:8081 --client me\n```\n", "flag provided but not defined: -client"},
		{"continued line", "```sh\nbraid capture -f shop.yaml \\\n    --no-such-flag\n```\n", "flag provided but not defined: -no-such-flag"},
		{"unknown command", "```sh\nbraid captur -f shop.yaml\n```\n", `unknown command "captur"`},
		{"misspelt spec key", "```yaml\nname: shop\nsources:\n  - name: a\n    adress: 127.0.0.1:3307\n```\n", `unknown key "adress"`},
		{"misspelt key in a fragment", "```yaml\nsinks:\n  - name: copy\n    type: mysql\n    adress: 127.0.0.1:3306\n```\n", `unknown key "adress"`},
		{"missing make target", "```sh\nmake tests\n```\n", `no target "tests"`},
		{"line it cannot check", "```sh\ncurl http://127.0.0.1:8081/healthz\n```\n", `does not know how to check "curl"`},
		{"pipe", "```sh\nbraid capture -f shop.yaml | head -5\n```\n", "does not model '|'"},
	} {
		errs := check(tc.md)
		if len(errs) == 0 || !strings.Contains(errors.Join(errs...).Error(), tc.want) {
			t.Errorf("%s: errors %v, want one saying %q", tc.name, errs, tc.want)
		}
	}
	for _, md := range []string{
		"```sh no-run\nbraid capture --no-such-flag   # shows a mistake on purpose\n```\n",
		"```sh\nbraid capture -f shop.yaml --max 5 --cursor-dir ./cursors\nbraid tail shop --server http://127.0.0.1:8081 --client-id me --max 10\nmake test lint\n```\n",
	} {
		if errs := check(md); len(errs) > 0 {
			t.Errorf("%q: %v, want no error", md, errs)
		}
	}

	dir := t.TempDir()
	md := filepath.Join(dir, "a.md")
	if err := os.WriteFile(md, []byte("# Top\n\n## Sub `part`\n\n[ok](#sub-part) [ok](a.md#top) [bad](#nowhere) [bad](b.md) `[not a link](c.md)`\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad, err := brokenLinks(md)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"#nowhere: no such heading", "b.md: no such file"}; !slices.Equal(bad, want) {
		t.Errorf("broken links %q, want %q", bad, want)
	}
}

// synopsisFlagRE finds the flags a synopsis line names: --name at a word's
// start or after [ or |, as in "[--max N]" or "[--from earliest|latest]".
var synopsisFlagRE = regexp.MustCompile(`(?:^|[\[|])(--?[a-z][a-z0-9-]*)`)

// synopsis reads a `braid ...` line of docs/*.md, which may be a synopsis
// rather than a command ("braid destination list|show shop [--json]"):
// the commands it names (one per |-alternative of its subcommand) and the
// flags it shows.
func synopsis(line string) (cmds [][]string, flags []string) {
	if i := strings.Index(line, " #"); i >= 0 {
		line = line[:i]
	}
	words := strings.Fields(line)
	if len(words) < 2 || words[0] != "braid" || strings.HasPrefix(words[1], "-") {
		return nil, nil
	}
	if len(words) > 2 && !strings.HasPrefix(words[2], "-") && !strings.HasPrefix(words[2], "[") {
		for alt := range strings.SplitSeq(words[2], "|") {
			cmds = append(cmds, []string{words[1], alt})
		}
	} else {
		cmds = [][]string{{words[1]}}
	}
	for _, w := range words[2:] {
		for _, m := range synopsisFlagRE.FindAllStringSubmatch(w, -1) {
			flags = append(flags, strings.TrimLeft(m[1], "-"))
		}
	}
	return cmds, flags
}

// TestDocsCommandFlags checks the `braid ...` lines of docs/*.md's shell
// blocks, which are synopses and cluster set-ups more than commands to run
// here: every flag they show must be one the command (or, for
// "list|show", one of the commands) prints in its --help.
func TestDocsCommandFlags(t *testing.T) {
	bin := braidproc.Binary(t)
	helps := map[string]string{}
	help := func(cmd []string) string {
		key := strings.Join(cmd, " ")
		if h, ok := helps[key]; ok {
			return h
		}
		out, _ := exec.Command(bin, append(slices.Clone(cmd), "--help")...).CombinedOutput()
		helps[key] = string(out)
		return helps[key]
	}
	var checked int
	for _, path := range docFiles(t)[1:] {
		for _, f := range readFences(t, path) {
			if f.lang != "sh" || f.noRun() {
				continue
			}
			lines, at := commandLines(f)
			for i, l := range lines {
				cmds, flags := synopsis(strings.TrimSpace(l))
				if cmds == nil {
					continue
				}
				checked++
				for _, fl := range flags {
					re := regexp.MustCompile(`(?m)^\s+-` + regexp.QuoteMeta(fl) + `(\s|$)`)
					if !slices.ContainsFunc(cmds, func(c []string) bool { return re.MatchString(help(c)) }) {
						t.Errorf("%s:%d: --%s is no flag of braid %s (see its --help)", f.file, at[i], fl, strings.Join(cmds[0], " "))
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Error("no braid line found in docs/*.md's shell blocks: the test checked nothing")
	}
}
