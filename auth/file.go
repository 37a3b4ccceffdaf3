package auth

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"gopkg.in/yaml.v3"
)

// LoadUsers reads and checks the users file at path; see ParseUsers. The
// file should be readable by braid's user alone (see the package doc).
func LoadUsers(path string) (*Users, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: reading the users file: %w", err)
	}
	return parse(path, b)
}

// ParseUsers checks a users file's content and returns its users. Its
// error holds every problem of the file (errors.Join), one a line, each
// naming the line, the user and the field.
func ParseUsers(b []byte) (*Users, error) {
	return parse("", b)
}

// userKeys are the keys of one user, in the order the errors list them.
var userKeys = []string{"name", "password_hash", "role", "destinations"}

// notFound is yaml.v3's message for a key its KnownFields decoder does not
// know.
var notFound = regexp.MustCompile(`^line (\d+): field (.*) not found in type `)

// parse is ParseUsers for the file named file ("" when it has no name).
func parse(file string, b []byte) (*Users, error) {
	at := func(line int) string {
		switch {
		case file == "" && line == 0:
			return "auth: users file"
		case file == "":
			return fmt.Sprintf("auth: line %d", line)
		case line == 0:
			return "auth: " + file
		}
		return fmt.Sprintf("auth: %s:%d", file, line)
	}
	type lineErr struct {
		line int
		err  error
	}
	var errs []lineErr
	fail := func(line int, format string, args ...any) {
		errs = append(errs, lineErr{line, fmt.Errorf("%s: "+format, append([]any{at(line)}, args...)...)})
	}

	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		// yaml.v3's syntax errors name a line and a token class, not
		// the file's text.
		return nil, fmt.Errorf("%s: not YAML: %v", at(0), err)
	}
	items := userItems(&root, fail)
	unknownKeys(b, items, fail)

	var list []*User
	first := map[string]int{} // a user's name → the index of its first item
	for i, item := range items {
		if name := nameOf(item); name != "" {
			if j, dup := first[name]; dup {
				fail(item.Line, "user %d %q: user %d (line %d) has that name too: names must be unique", i+1, name, j+1, items[j].Line)
			} else {
				first[name] = i
			}
		}
		if u, ok := parseUser(i, item, fail); ok {
			list = append(list, u)
		}
	}
	if len(items) == 0 && len(errs) == 0 {
		fail(0, "no users: list at least one under users:")
	}
	if len(errs) > 0 {
		// In the file's order, though unknown keys were found first.
		slices.SortStableFunc(errs, func(a, b lineErr) int { return cmp.Compare(a.line, b.line) })
		var all []error
		for _, e := range errs {
			all = append(all, e.err)
		}
		return nil, errors.Join(all...)
	}
	return newUsers(list), nil
}

// userItems returns the nodes of the file's users list.
func userItems(root *yaml.Node, fail func(int, string, ...any)) []*yaml.Node {
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return nil // an empty file
	}
	top := root.Content[0]
	if top.Kind == yaml.ScalarNode && top.Tag == "!!null" {
		return nil
	}
	if top.Kind != yaml.MappingNode {
		fail(top.Line, "want a mapping with users: at the top")
		return nil
	}
	var users *yaml.Node
	for i := 0; i+1 < len(top.Content); i += 2 {
		if k := top.Content[i]; k.Value == "users" {
			if users != nil {
				fail(k.Line, "users: is given twice: make it one list")
				return nil
			}
			users = top.Content[i+1]
		}
	}
	switch {
	case users == nil:
		return nil
	case users.Kind == yaml.ScalarNode && users.Tag == "!!null":
		return nil
	case users.Kind != yaml.SequenceNode:
		fail(users.Line, "users must be a list, each item a user with name:, password_hash: and role:")
		return nil
	}
	return users.Content
}

// unknownKeys reports the keys the file should not hold, found by a
// KnownFields decoder. yaml.v3 names each by its line only, so the user is
// found by the line and key among items.
func unknownKeys(b []byte, items []*yaml.Node, fail func(int, string, ...any)) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var doc struct {
		Users []struct {
			Name         string   `yaml:"name"`
			PasswordHash string   `yaml:"password_hash"`
			Role         string   `yaml:"role"`
			Destinations []string `yaml:"destinations"`
		} `yaml:"users"`
	}
	var te *yaml.TypeError
	if err := dec.Decode(&doc); err == nil || errors.Is(err, io.EOF) || !errors.As(err, &te) {
		return
	}
	type key struct {
		line int
		name string
	}
	owner := map[key]int{} // an item's key → the item's index
	for i, item := range items {
		if item.Kind != yaml.MappingNode {
			continue
		}
		for j := 0; j < len(item.Content); j += 2 {
			k := key{item.Content[j].Line, item.Content[j].Value}
			if _, ok := owner[k]; !ok {
				owner[k] = i
			}
		}
	}
	// Type errors are parseUser's to report, where the field is known.
	for _, msg := range te.Errors {
		m := notFound.FindStringSubmatch(msg)
		if m == nil {
			continue
		}
		var line int
		fmt.Sscan(m[1], &line)
		name := m[2]
		if i, ok := owner[key{line, name}]; ok {
			fail(line, "%s: unknown key %q: a user has %s", userLabel(i, items[i]), name, strings.Join(userKeys, ", "))
			continue
		}
		fail(line, "unknown key %q: the file holds only users:", name)
	}
}

// nameOf is the name the item gives, "" if none.
func nameOf(item *yaml.Node) string {
	if item.Kind != yaml.MappingNode {
		return ""
	}
	for j := 0; j+1 < len(item.Content); j += 2 {
		if k, v := item.Content[j], item.Content[j+1]; k.Value == "name" && v.Kind == yaml.ScalarNode {
			return v.Value
		}
	}
	return ""
}

// userLabel names the i'th user for an error: its number and, when it has
// one, its name.
func userLabel(i int, item *yaml.Node) string {
	if name := nameOf(item); name != "" {
		return fmt.Sprintf("user %d %q", i+1, name)
	}
	return fmt.Sprintf("user %d", i+1)
}

// parseUser checks the i'th user of the file, reporting every problem; ok
// is false if there was one.
func parseUser(i int, item *yaml.Node, fail func(int, string, ...any)) (u *User, ok bool) {
	ok = true
	label := userLabel(i, item)
	bad := func(line int, format string, args ...any) {
		fail(line, "%s: "+format, append([]any{label}, args...)...)
		ok = false
	}
	if item.Kind != yaml.MappingNode {
		bad(item.Line, "is not a mapping: give it name:, password_hash: and role: (and destinations: for a consumer)")
		return nil, false
	}
	var name, hash, role string
	var dests []string
	line := map[string]int{}       // a key → the line of its value
	wrongType := map[string]bool{} // keys already reported
	for j := 0; j+1 < len(item.Content); j += 2 {
		k, v := item.Content[j], item.Content[j+1]
		var err error
		switch k.Value {
		case "name", "password_hash", "role", "destinations":
		default:
			continue // unknownKeys reports it
		}
		if prev, dup := line[k.Value]; dup {
			bad(k.Line, "%s is given twice (lines %d and %d): keep one", k.Value, prev, v.Line)
			continue
		}
		line[k.Value] = v.Line
		switch k.Value {
		case "name":
			err = v.Decode(&name)
		case "password_hash":
			err = v.Decode(&hash)
		case "role":
			err = v.Decode(&role)
		case "destinations":
			if err = v.Decode(&dests); err != nil {
				bad(v.Line, "destinations must be a list of destination names, e.g. [shop]")
				wrongType[k.Value] = true
				continue
			}
		}
		if err != nil {
			bad(v.Line, "%s must be a string", k.Value)
			wrongType[k.Value] = true
		}
	}
	at := func(key string) int {
		if l, ok := line[key]; ok {
			return l
		}
		return item.Line
	}

	switch {
	case wrongType["name"]:
	case name == "":
		bad(at("name"), "name is missing: give each user a name")
	case strings.ContainsFunc(name, func(r rune) bool { return r == ':' || unicode.IsSpace(r) || unicode.IsControl(r) }):
		bad(at("name"), "name %q holds a colon, a space or a control character: logins send NAME:PASSWORD, so choose a name without them", name)
	}

	var h *passwordHash
	switch {
	case wrongType["password_hash"]:
	case hash == "":
		bad(at("password_hash"), "password_hash is missing: make one with `braid users hash`")
	default:
		var err error
		if h, err = parseHash(hash); err != nil {
			// err says which part is wrong, never what it holds.
			bad(at("password_hash"), "password_hash is not a braid password hash (%v): make one with `braid users hash`", err)
		}
	}

	switch Role(role) {
	case Admin:
		if len(dests) > 0 {
			bad(at("destinations"), "an admin may read every destination: drop destinations:, or make the role consumer")
		}
	case Consumer:
		switch {
		case wrongType["destinations"]:
		case len(dests) == 0:
			bad(at("destinations"), "a consumer needs destinations: list those it may read, or \"*\" for all")
		case hasBlank(dests):
			bad(at("destinations"), "destinations holds an empty name: remove it")
		}
	default:
		switch {
		case wrongType["role"]:
		case role == "":
			bad(at("role"), "role is missing: use admin or consumer")
		default:
			bad(at("role"), "role %q is unknown: use admin or consumer", role)
		}
	}
	if !ok {
		return nil, false
	}
	return &User{Name: name, Role: Role(role), Destinations: dests, hash: h}, true
}

// hasBlank reports whether a name of s is empty or only spaces.
func hasBlank(s []string) bool {
	for _, x := range s {
		if strings.TrimSpace(x) == "" {
			return true
		}
	}
	return false
}
