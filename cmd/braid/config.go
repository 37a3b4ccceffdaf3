package main

import (
	"bytes"
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// envPrefix starts the environment variable of each flag: BRAID_HTTP_PORT
// for --http-port.
const envPrefix = "BRAID_"

// flagEnv is the environment variable of the flag name: BRAID_ and the
// name upper-cased, '-' made '_'.
func flagEnv(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// applyConfig sets the flags of fs that the command line did not set, from
// the environment and then from the YAML file at configPath ("": none). It
// runs after fs is parsed, so a flag on the command line wins; else
// $BRAID_<FLAG> (getenv; empty is unset); else the file's key, the flag's
// name (http-port, or http_port); else the flag keeps its default.
//
// The file is one mapping of flag names to scalars; a list is accepted
// for a flag whose usage says it takes a comma-separated list, and joined
// with commas. The keys config and help are refused. A value the command
// line or the environment overrides is not parsed. Only the variables of
// flags of fs are read, so BRAID_TOKEN, BRAID_CANAL_PASSWORD and the like
// keep their own meaning; the flag config has no variable.
//
// The error joins every problem, each one line that names the file and
// the key's line or the variable, and says what to do.
func applyConfig(fs *flag.FlagSet, configPath string, getenv func(string) string) error {
	cmd := "braid " + fs.Name()
	var file *configFile
	if configPath != "" {
		var err error
		if file, err = readConfigFile(fs, cmd, configPath); err != nil {
			return err
		}
	}
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	var envErrs []error
	fs.VisitAll(func(f *flag.Flag) {
		if onCommandLine[f.Name] {
			return
		}
		if env := flagEnv(f.Name); f.Name != "config" {
			if v := getenv(env); v != "" {
				if err := fs.Set(f.Name, v); err != nil {
					envErrs = append(envErrs, fmt.Errorf("$%s=%q: %s", env, v, refusal(f, err, cmd)))
				}
				return
			}
		}
		if file == nil {
			return
		}
		e, ok := file.settings[f.Name]
		if !ok {
			return
		}
		if err := fs.Set(f.Name, e.value); err != nil {
			file.fail(e.line, "%s: %q: %s", e.key, e.value, refusal(f, err, cmd))
		}
	})
	var errs []error
	if file != nil {
		errs = file.sorted()
	}
	return errors.Join(append(errs, envErrs...)...)
}

// configFile is a config file read: the flag each key sets, and the
// problems found, by line.
type configFile struct {
	path     string
	settings map[string]configSetting // by flag name
	problems []configProblem
}

// configSetting is one key of the file.
type configSetting struct {
	key   string // as written: http-port or http_port
	line  int
	value string // as fs.Set takes it
}

type configProblem struct {
	line int
	err  error
}

func (c *configFile) fail(line int, format string, args ...any) {
	c.problems = append(c.problems, configProblem{line, fmt.Errorf("--config %s:%d: "+format, append([]any{c.path, line}, args...)...)})
}

// sorted is the problems in the order of the file's lines.
func (c *configFile) sorted() []error {
	slices.SortStableFunc(c.problems, func(a, b configProblem) int { return cmp.Compare(a.line, b.line) })
	errs := make([]error, len(c.problems))
	for i, p := range c.problems {
		errs[i] = p.err
	}
	return errs
}

// readConfigFile reads the file at path and maps its keys to the flags of
// fs. A file it cannot read or parse is the error; problems of keys and
// values are kept in the configFile.
func readConfigFile(fs *flag.FlagSet, cmd, path string) (*configFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("--config %s: %v: give a YAML file braid can read", path, err)
	}
	c := &configFile{path: path, settings: map[string]configSetting{}}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return c, nil // empty: no settings
		}
		return nil, fmt.Errorf("--config %s: %s: write a YAML mapping of flag names to values (http-port: 8081)", path, yamlError(err))
	}
	var more yaml.Node
	switch err := dec.Decode(&more); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, fmt.Errorf("--config %s: %s: write a YAML mapping of flag names to values (http-port: 8081)", path, yamlError(err))
	default:
		return nil, fmt.Errorf("--config %s:%d: a second YAML document: keep one mapping of flag names to values", path, more.Line)
	}
	m := &doc
	if m.Kind == yaml.DocumentNode {
		if len(m.Content) == 0 {
			return c, nil // only comments
		}
		m = m.Content[0]
	}
	if m.Kind != yaml.MappingNode {
		if m.Tag == "!!null" {
			return c, nil // a lone ~ or null
		}
		c.fail(m.Line, "not a mapping of flag names to values but %s: write one key a line (http-port: 8081)", nodeKind(m))
		return c, nil
	}
	lineOf := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], resolveAlias(m.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			c.fail(k.Line, "a key that is %s: keys are flag names (http-port)", nodeKind(k))
			continue
		}
		name := k.Value
		f := fs.Lookup(name)
		if f == nil {
			if name = strings.ReplaceAll(k.Value, "_", "-"); name != k.Value {
				f = fs.Lookup(name)
			}
		}
		switch {
		case name == "config":
			c.fail(k.Line, "%s: a config file cannot name another: give --config on the command line", k.Value)
			continue
		case name == "help":
			c.fail(k.Line, "%s: not a setting: run %s --help", k.Value, cmd)
			continue
		case f == nil:
			c.fail(k.Line, "%s: not a flag of %s: see %s --help", k.Value, cmd, cmd)
			continue
		}
		if first, dup := lineOf[name]; dup {
			c.fail(k.Line, "%s: given twice (also line %d): keep one", k.Value, first)
			continue
		}
		lineOf[name] = k.Line
		value, err := settingValue(f, v)
		if err != nil {
			c.fail(v.Line, "%s: %v", k.Value, err)
			continue
		}
		c.settings[name] = configSetting{key: k.Value, line: k.Line, value: value}
	}
	return c, nil
}

// settingValue is the string fs.Set takes for the YAML value v of flag f.
func settingValue(f *flag.Flag, v *yaml.Node) (string, error) {
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag == "!!null" {
			return "", fmt.Errorf("no value: give one, or remove the key")
		}
		return v.Value, nil
	case yaml.SequenceNode:
		if !takesList(f) {
			return "", fmt.Errorf("a list, but --%s takes one value", f.Name)
		}
		items := make([]string, 0, len(v.Content))
		for _, it := range v.Content {
			it = resolveAlias(it)
			if it.Kind != yaml.ScalarNode || it.Tag == "!!null" {
				return "", fmt.Errorf("a list item that is %s: give a list of values (host:port)", nodeKind(it))
			}
			items = append(items, it.Value)
		}
		return strings.Join(items, ","), nil
	default:
		return "", fmt.Errorf("%s, but --%s takes one value", nodeKind(v), f.Name)
	}
}

// takesList says whether flag f takes a comma-separated list, as its
// usage says (--join).
func takesList(f *flag.Flag) bool { return strings.Contains(f.Usage, "comma-separated") }

func resolveAlias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "empty"
		}
		return "a single value"
	}
	return "not a value"
}

// yamlError is err of the YAML parser without its "yaml: " prefix, on one
// line.
func yamlError(err error) string {
	s := strings.TrimPrefix(err.Error(), "yaml: ")
	return strings.Join(strings.Fields(s), " ")
}

// refusal says why flag f refused a value (err, of fs.Set) and what it
// takes.
func refusal(f *flag.Flag, err error, cmd string) string {
	msg := "invalid value (" + strings.Join(strings.Fields(err.Error()), " ") + ")"
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return msg + ": give true or false"
	}
	switch kind, _ := flag.UnquoteUsage(f); kind {
	case "int", "uint":
		return msg + ": give a whole number"
	case "float":
		return msg + ": give a number"
	case "duration":
		return msg + ": give a duration such as 10s or 1m30s"
	}
	return msg + ": see " + cmd + " --help"
}
