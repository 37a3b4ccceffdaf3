package main

import (
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/braid-cdc/braid/spec"
)

// secretRefFlags are the flags that say what a spec's password_file and
// password_env may read on this machine (spec.Refs): braid server and
// braid capture both have them.
type secretRefFlags struct {
	dirs      dirList
	envPrefix string
}

// dirList is a repeatable flag of comma-separated paths.
type dirList []string

func (d *dirList) String() string { return strings.Join(*d, ",") }

func (d *dirList) Set(v string) error {
	for p := range strings.SplitSeq(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*d = append(*d, p)
		}
	}
	return nil
}

// add defines the flags on fs; dirsUsage says what --secrets-dir adds to.
func (f *secretRefFlags) add(fs *flag.FlagSet, dirsUsage string) {
	fs.Var(&f.dirs, "secrets-dir", dirsUsage)
	fs.StringVar(&f.envPrefix, "secrets-env-prefix", spec.DefaultEnvPrefix,
		"a spec's password_env may name only environment variables whose name starts with this (empty: none)")
}

// ownVariables are braid's own environment variables, which no
// --secrets-env-prefix may cover.
var ownVariables = []string{"BRAID_TOKEN", canalPasswordEnv}

// refs returns the spec.Refs of the flags, with extra directories allowed
// too. A prefix that covers one of braid's own variables (BRAID_TOKEN, or
// a flag's BRAID_<FLAG>) is refused: a spec could read it.
func (f *secretRefFlags) refs(fs *flag.FlagSet, extra ...string) (spec.Refs, error) {
	if p := f.envPrefix; p != "" {
		own := ownVariables
		fs.VisitAll(func(fl *flag.Flag) { own = append(own, flagEnv(fl.Name)) })
		for _, v := range own {
			if strings.HasPrefix(v, p) {
				return spec.Refs{}, fmt.Errorf("--secrets-env-prefix %s covers braid's own variable %s, which a spec could then read: choose a narrower prefix, e.g. %s", p, v, spec.DefaultEnvPrefix)
			}
		}
	}
	r, err := spec.NewRefs(append(append([]string(nil), f.dirs...), extra...), f.envPrefix)
	if err != nil {
		return spec.Refs{}, fmt.Errorf("--secrets-dir: %w", err)
	}
	return r, nil
}

// specDir is the directory of the spec file at path, which braid capture
// lets the spec's password_file read by default: the spec is the
// operator's own file, and its password files usually sit beside it.
func specDir(path string) string { return filepath.Dir(path) }

// loadSpec reads the spec file at path and resolves its secret
// references as f allows, and from the spec file's own directory; the
// error is the operator's to fix (exit 2).
func loadSpec(fs *flag.FlagSet, f *secretRefFlags, path string) (*spec.Spec, error) {
	ds, err := spec.Load(path)
	if err != nil {
		return nil, err
	}
	refs, err := f.refs(fs, specDir(path))
	if err != nil {
		return nil, err
	}
	resolved, err := refs.Resolve(*ds)
	if err != nil {
		return nil, err
	}
	return &resolved, nil
}
