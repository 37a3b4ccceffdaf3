package spec

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// DefaultEnvPrefix is the prefix a password_env variable needs by default:
// a spec may name BRAID_SECRET_SHOP_PW, never BRAID_TOKEN or HOME.
const DefaultEnvPrefix = "BRAID_SECRET_"

// maxPasswordFile bounds what a password_file may hold: a password, not
// a key ring.
const maxPasswordFile = 64 << 10

// Refs is what a spec's password references may reach on the machine that
// resolves them. A spec comes from whoever may create destinations; the
// node that runs it reads the file or variable a reference names and sends
// its content, as a password, to the address the same spec gives. Without
// bounds a spec could so read any file the node can (its TLS key, the
// users file, the gossip key) or any variable (BRAID_TOKEN) and have it
// sent wherever it likes: Refs keeps password_file to the directories the
// operator allows and password_env to the variables whose name starts with
// the operator's prefix.
//
// The zero Refs allows no reference at all. An error of Resolve never
// tells whether a file exists: a missing file, one outside the allowed
// directories (directly, through "..", or through a symbolic link), one
// that is not a regular file and one that cannot be read give the same
// message; an unset variable and one outside the prefix give the same
// message too.
//
// Refs is immutable and safe for concurrent use.
type Refs struct {
	dirs      []string // absolute, cleaned, symbolic links resolved
	envPrefix string   // "": no password_env
}

// NewRefs returns the Refs that allow password_file under each of dirs
// (each an existing directory; symbolic links in its path are resolved
// now) and password_env for the variables whose name starts with
// envPrefix ("" allows none).
func NewRefs(dirs []string, envPrefix string) (Refs, error) {
	r := Refs{envPrefix: envPrefix}
	var errs []error
	for _, d := range dirs {
		if d == "" {
			continue
		}
		abs, err := filepath.Abs(d)
		if err == nil {
			abs, err = filepath.EvalSymlinks(abs)
		}
		var fi os.FileInfo
		if err == nil {
			fi, err = os.Stat(abs)
		}
		if err == nil && !fi.IsDir() {
			err = errors.New("not a directory")
		}
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			errs = append(errs, fmt.Errorf("spec: secrets directory %s: %w: give an existing directory that holds the password files", d, err))
			continue
		}
		if !slices.Contains(r.dirs, abs) {
			r.dirs = append(r.dirs, abs)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Refs{}, err
	}
	return r, nil
}

// Dirs returns the directories a password_file may lie in, resolved.
func (r Refs) Dirs() []string { return slices.Clone(r.dirs) }

// EnvPrefix returns the prefix a password_env variable needs ("": none is
// allowed).
func (r Refs) EnvPrefix() string { return r.envPrefix }

// Resolve returns s with every password reference of its sources and sinks
// replaced by the password it names, read now: Password set, PasswordFile
// and PasswordEnv cleared. A reference Refs does not allow, or that names
// nothing, is an error (all of them joined); s is not changed.
func (r Refs) Resolve(s Spec) (Spec, error) {
	var errs []error
	s.Sources = slices.Clone(s.Sources)
	for i := range s.Sources {
		src := &s.Sources[i]
		errs = append(errs, r.resolveInto(fmt.Sprintf("source %q", src.Name), &src.Password, &src.PasswordFile, &src.PasswordEnv))
		if src.TLS != nil {
			t := *src.TLS // the caller's spec keeps its own
			src.TLS = &t
			errs = append(errs, r.resolveTLS(fmt.Sprintf("source %q", src.Name), &t))
		}
	}
	s.Sinks = slices.Clone(s.Sinks)
	for i := range s.Sinks {
		sk := &s.Sinks[i]
		errs = append(errs, r.resolveInto(fmt.Sprintf("sink %q", sk.Name), &sk.Password, &sk.PasswordFile, &sk.PasswordEnv))
	}
	if err := errors.Join(errs...); err != nil {
		return Spec{}, err
	}
	return s, nil
}

// Check says whether every password reference of s resolves here, as
// Resolve would, without keeping what it read.
func (r Refs) Check(s Spec) error {
	_, err := r.Resolve(s)
	return err
}

// resolveInto replaces the password reference of one source or sink
// (who, for errors) with the password it names: password set, file and
// env cleared. Without a reference it changes nothing.
func (r Refs) resolveInto(who string, password, file, env *string) error {
	var (
		pw  string
		err error
	)
	switch {
	case *file != "":
		pw, err = r.readFile(*file)
	case *env != "":
		pw, err = r.getenv(*env)
	default:
		return nil
	}
	if err != nil {
		return fmt.Errorf("spec: %s: %w", who, err)
	}
	*password, *file, *env = pw, "", ""
	return nil
}

// resolveTLS reads the files a tls block names (who, for errors) into
// its PEM fields, under the rules of password_file.
func (r Refs) resolveTLS(who string, t *TLS) error {
	var errs []error
	for _, f := range []struct {
		key, path string
		into      *[]byte
	}{{"tls.ca", t.CA, &t.CAPEM}, {"tls.cert", t.Cert, &t.CertPEM}, {"tls.key", t.Key, (*[]byte)(&t.KeyPEM)}} {
		if f.path == "" {
			continue
		}
		b, err := r.readAny(f.key, f.path, maxPEMFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("spec: %s: %w", who, err))
			continue
		}
		*f.into = b
	}
	return errors.Join(errs...)
}

// maxPEMFile bounds what a tls file may hold: a CA bundle, not a disk.
const maxPEMFile = 1 << 20

// readFile reads the password file at path if it lies in one of r's
// directories. Whatever the reason it cannot, the error is the same.
func (r Refs) readFile(path string) (string, error) {
	b, err := r.readAny("password_file", path, maxPasswordFile)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// readAny reads the file at path (the spec's key names it, for errors),
// at most max bytes, if it lies in one of r's directories. Whatever the
// reason it cannot, the error is the same.
func (r Refs) readAny(key, path string, max int) ([]byte, error) {
	refused := r.fileRefused(key, path)
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, refused
	}
	// The real path, every symbolic link resolved: a link inside an
	// allowed directory that points out of it is judged by its target.
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, refused
	}
	for _, dir := range r.dirs {
		rel, err := filepath.Rel(dir, real)
		if err != nil || rel == "." || !filepath.IsLocal(rel) {
			continue
		}
		// os.Root opens rel inside dir only: a link swapped in after
		// EvalSymlinks cannot lead out of it.
		b, err := readInRoot(dir, rel, max)
		if err != nil {
			return nil, refused
		}
		return b, nil
	}
	return nil, refused
}

// readInRoot reads the regular file rel under dir, at most max bytes.
func readInRoot(dir, rel string, max int) ([]byte, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	// A FIFO or a device would block or stream: only a regular file
	// (checked before the open, which a FIFO would hold, and after it).
	if fi, err := root.Lstat(rel); err != nil || !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	f, err := root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > max {
		return nil, errors.New("too large")
	}
	return b, nil
}

// fileRefused is readAny's one error for path, which the spec's key
// (password_file, tls.ca ...) names.
func (r Refs) fileRefused(key, path string) error {
	noun, instead := "password files", "use password, or ask the operator for a secrets directory"
	if key != "password_file" {
		noun, instead = "files a spec names", "ask the operator for a secrets directory"
	}
	if len(r.dirs) == 0 {
		return fmt.Errorf("%s %s: refused: the node reads %s only from the secrets directories its operator allows, and allows none: %s", key, path, noun, instead)
	}
	return fmt.Errorf("%s %s: no readable %s there in the node's secrets directories (%s): "+
		"put the file in one of them on every node that may run the destination", key, path, strings.TrimSuffix(strings.TrimSuffix(noun, " a spec names"), "s"), strings.Join(r.dirs, ", "))
}

// getenv returns the variable name if its name has r's prefix and it is
// set. Whatever the reason it cannot, the error is the same.
func (r Refs) getenv(name string) (string, error) {
	if r.envPrefix == "" {
		return "", fmt.Errorf("password_env %s: refused: the node reads no variables for a spec: use password or password_file", name)
	}
	if strings.HasPrefix(name, r.envPrefix) && len(name) > len(r.envPrefix) {
		if pw, ok := os.LookupEnv(name); ok {
			return pw, nil
		}
	}
	return "", fmt.Errorf("password_env %s: not set, or not a variable the node lets a spec read (their names start with %s): "+
		"set %s... on every node that may run the destination", name, r.envPrefix, r.envPrefix)
}
