package spec

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

// decoder reads a parsed YAML (or JSON) document into a Spec, field by
// field along the yaml tags, collecting every problem instead of stopping
// at the first, each with its YAML path and line. It knows the lines of
// what it read, so that Validate's problems can be given theirs too.
type decoder struct {
	problems []*FieldError
	// lines is the line each path was written on (a key's line; a list
	// item's line).
	lines map[string]int
	// failed are the paths with a problem reported already, and the
	// fields an unknown key was probably meant to be: a problem Validate
	// finds there (or below) would only repeat it.
	failed map[string]bool
	// budget is how many more nodes the decoder visits: aliases can make
	// a small document expand into a huge one.
	budget int
	// merged are the keys and values of each mapping read (pairs), merge
	// keys resolved, so that one merged into many is resolved once.
	merged map[*yaml.Node][][2]*yaml.Node
}

// nodeBudget bounds the nodes one spec may expand to.
const nodeBudget = 1 << 20

func newDecoder() *decoder {
	return &decoder{lines: map[string]int{}, failed: map[string]bool{}, budget: nodeBudget, merged: map[*yaml.Node][][2]*yaml.Node{}}
}

// nodeValue is a spec type that reads its YAML itself (Start, Duration),
// reporting its problems to d under path.
type nodeValue interface {
	decodeNode(d *decoder, path string, n *yaml.Node)
}

// exampler is a spec type that can show how it is written, for messages
// that say what to write instead.
type exampler interface{ example() string }

// bad reports a problem with the value at path.
func (d *decoder) bad(path string, line int, format string, a ...any) {
	d.failed[path] = true
	d.note(path, line, format, a...)
}

// note reports a problem in the mapping at path that leaves the rest of
// it good (an unknown key).
func (d *decoder) note(path string, line int, format string, a ...any) {
	d.problems = append(d.problems, &FieldError{Path: path, Line: line, Msg: fmt.Sprintf(format, a...)})
}

// err is the problems found, joined; nil for none.
func (d *decoder) err() error { return joinProblems(d.problems) }

// line is the line path was written on, or the line of the nearest
// enclosing path that was (the source a missing field is missing from);
// 0 when none was.
func (d *decoder) line(path string) int {
	for {
		if l, ok := d.lines[path]; ok {
			return l
		}
		if path == "" {
			return 0
		}
		path = parentPath(path)
	}
}

// covered reports whether a problem at path was reported already: at
// path itself or at a path enclosing it.
func (d *decoder) covered(path string) bool {
	for {
		if d.failed[path] {
			return true
		}
		if path == "" {
			return false
		}
		path = parentPath(path)
	}
}

// decodeOne reads n into v with a decoder of its own: for the
// UnmarshalYAML methods, which yaml.Unmarshal calls.
func decodeOne(n *yaml.Node, v nodeValue) error {
	d := newDecoder()
	v.decodeNode(d, "", n)
	return d.err()
}

// value reads n into v (addressable), the field at path.
func (d *decoder) value(path string, n *yaml.Node, v reflect.Value) {
	if d.budget--; d.budget < 0 {
		if d.budget == -1 {
			d.bad("", n.Line, "the spec expands to over %d values (through aliases?): write it out without them", nodeBudget)
		}
		return
	}
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return // as yaml.v3 does: an empty value leaves the default
	}
	if nv, ok := v.Addr().Interface().(nodeValue); ok {
		nv.decodeNode(d, path, n)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.value(path, n, v.Elem())
	case reflect.Struct:
		if d.want(path, n, yaml.MappingNode, v.Type()) {
			d.fields(path, n, v)
		}
	case reflect.Slice:
		if !d.want(path, n, yaml.SequenceNode, v.Type()) {
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			d.lines[p] = item.Line
			d.value(p, item, s.Index(i))
		}
		v.Set(s)
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			d.bad(path, n.Line, "cannot be read") // no spec field is such a map
			return
		}
		if !d.want(path, n, yaml.MappingNode, v.Type()) {
			return
		}
		m := reflect.MakeMap(v.Type())
		for _, kv := range d.pairs(path, n) {
			k, val := kv[0], kv[1]
			p := joinPath(path, k.Value)
			d.lines[p] = k.Line
			e := reflect.New(v.Type().Elem()).Elem()
			d.value(p, val, e)
			m.SetMapIndex(reflect.ValueOf(k.Value).Convert(v.Type().Key()), e)
		}
		v.Set(m)
	case reflect.String:
		if d.want(path, n, yaml.ScalarNode, v.Type()) {
			v.SetString(n.Value)
		}
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		if !d.want(path, n, yaml.ScalarNode, v.Type()) {
			return
		}
		if err := n.Decode(v.Addr().Interface()); err != nil {
			hint := ""
			if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
				hint = ", without quotes"
			}
			d.bad(path, n.Line, "%q: write %s%s", n.Value, scalarWant(v.Type()), hint)
		}
	default:
		d.bad(path, n.Line, "cannot be read") // no spec field is of such a type
	}
}

// want reports whether n is of the kind a value of type t is written as,
// and reports a problem if it is not.
func (d *decoder) want(path string, n *yaml.Node, kind yaml.Kind, t reflect.Type) bool {
	if n.Kind == kind {
		return true
	}
	var want string
	switch kind {
	case yaml.MappingNode:
		want = "want keys and values (key: value)"
		if ex, ok := reflect.New(t).Interface().(exampler); ok {
			want += ", e.g. " + ex.example()
		}
	case yaml.SequenceNode:
		want = "want a list (one '- item' per line, or [a, b])"
		if ex, ok := reflect.New(t.Elem()).Interface().(exampler); ok {
			want = "want a list, e.g. [" + ex.example() + "]"
		}
	default:
		want = "want " + scalarWant(t)
	}
	d.bad(path, n.Line, "%s: %s", shape(n), want)
	return false
}

// shape says what n is, for a message saying it is the wrong thing.
func shape(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "keys and values here"
	case yaml.SequenceNode:
		return "a list here"
	}
	return strconv.Quote(n.Value)
}

// scalarWant says what a scalar of type t is, in a user's words.
func scalarWant(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("a whole number from 0 to %d", uint64(1)<<(t.Bits())-1)
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a single value"
}

// fields reads the mapping n into the struct v: each key into the field
// of that yaml name, each unknown or repeated key a problem.
func (d *decoder) fields(path string, n *yaml.Node, v reflect.Value) {
	fs := fieldsOf(v.Type())
	seen := map[string]int{}
	for _, kv := range d.pairs(path, n) {
		k, val := kv[0], kv[1]
		if first, dup := seen[k.Value]; dup {
			d.bad(joinPath(path, k.Value), k.Line, "given twice (first on line %d): keep one", first)
			continue
		}
		seen[k.Value] = k.Line
		f, ok := fs.byName[k.Value]
		if !ok {
			d.unknown(path, k, fs.names)
			continue
		}
		p := joinPath(path, k.Value)
		d.lines[p] = k.Line
		if fs.lists[k.Value] {
			if seq := resolve(val); seq.Kind == yaml.SequenceNode {
				d.stringList(p, seq, v.FieldByIndex(f))
				continue
			}
		}
		d.value(p, val, v.FieldByIndex(f))
	}
}

// resolve follows n's aliases.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// stringList reads the list n into the string field v (a field tagged
// spec:"list", which takes one value or a list) as its items joined
// with commas, the form in which the field keeps a list.
func (d *decoder) stringList(path string, n *yaml.Node, v reflect.Value) {
	items := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		item = resolve(item)
		if item.Kind != yaml.ScalarNode || item.ShortTag() == "!!null" {
			d.bad(path, item.Line, "item %d: %s: want a single value, e.g. 127.0.0.1:3306", i+1, shape(item))
			return
		}
		if strings.Contains(item.Value, ",") {
			d.bad(path, item.Line, "item %d: %q holds a comma: write one value per item", i+1, item.Value)
			return
		}
		d.lines[p] = item.Line
		items = append(items, item.Value)
	}
	if len(items) == 0 {
		d.bad(path, n.Line, "an empty list: write one value or a list of them, e.g. [127.0.0.1:3306, 127.0.0.1:3307]")
		return
	}
	v.SetString(strings.Join(items, ","))
}

// unknown reports the key k of the mapping at path that is no field's
// name, with the name it was probably meant to be.
func (d *decoder) unknown(path string, k *yaml.Node, names []string) {
	if s := suggest(k.Value, names); s != "" {
		d.note(path, k.Line, "unknown key %q (did you mean %q?)", k.Value, s)
		d.failed[joinPath(path, s)] = true
		return
	}
	if elsewhere := keyPlaces()[k.Value]; len(elsewhere) > 0 {
		d.note(path, k.Line, "unknown key %q here (did you mean %s?)", k.Value, strings.Join(elsewhere, " or "))
		return
	}
	d.note(path, k.Line, "unknown key %q: the keys here are %s", k.Value, strings.Join(names, ", "))
}

// pairs are the keys and values of the mapping n, those of YAML merge
// keys (<<: *defaults) included after the ones given explicitly, which
// win. Keys that are not names are problems, and left out.
func (d *decoder) pairs(path string, n *yaml.Node) [][2]*yaml.Node {
	if ps, ok := d.merged[n]; ok {
		return ps // a mapping merged into many is read once
	}
	var own, merged [][2]*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Value == "<<" && (k.Tag == "" || k.Tag == "!" || k.ShortTag() == "!!merge") {
			for _, m := range d.mergeSources(path, v) {
				merged = append(merged, d.pairs(path, m)...)
			}
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.note(path, k.Line, "%s as a key: a key is a name, e.g. name:", shape(k))
			continue
		}
		own = append(own, [2]*yaml.Node{k, v})
	}
	have := map[string]bool{}
	for _, kv := range own {
		have[kv[0].Value] = true
	}
	for _, kv := range merged {
		if !have[kv[0].Value] {
			have[kv[0].Value] = true
			own = append(own, kv)
		}
	}
	d.merged[n] = own
	return own
}

// mergeSources are the mappings a merge key's value v names: one alias
// of a mapping, or a list of them.
func (d *decoder) mergeSources(path string, v *yaml.Node) []*yaml.Node {
	items := []*yaml.Node{v}
	if v.Kind == yaml.SequenceNode {
		items = v.Content
	}
	var out []*yaml.Node
	for _, it := range items {
		for it.Kind == yaml.AliasNode && it.Alias != nil {
			it = it.Alias
		}
		if it.Kind != yaml.MappingNode {
			d.bad(path, it.Line, "<<: %s: want an alias of keys and values, e.g. <<: *defaults", shape(it))
			continue
		}
		out = append(out, it)
	}
	return out
}

// structFields are a struct type's fields by yaml name.
type structFields struct {
	names  []string         // in declaration order
	byName map[string][]int // field index path (inline structs flattened)
	// lists are the string fields tagged spec:"list": written as one
	// value or a list, kept joined with commas.
	lists map[string]bool
}

var fieldCache sync.Map // reflect.Type → *structFields

func fieldsOf(t reflect.Type) *structFields {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.(*structFields)
	}
	fs := &structFields{byName: map[string][]int{}, lists: map[string]bool{}}
	var walk func(t reflect.Type, index []int)
	walk = func(t reflect.Type, index []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			tag := f.Tag.Get("yaml")
			name, opts, _ := strings.Cut(tag, ",")
			if name == "-" {
				continue
			}
			idx := append(append([]int(nil), index...), i)
			if strings.Contains(","+opts+",", ",inline,") && f.Type.Kind() == reflect.Struct {
				walk(f.Type, idx)
				continue
			}
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			fs.names = append(fs.names, name)
			fs.byName[name] = idx
			if f.Tag.Get("spec") == "list" && f.Type.Kind() == reflect.String {
				fs.lists[name] = true
			}
		}
	}
	walk(t, nil)
	fieldCache.Store(t, fs)
	return fs
}

// keyPlaces is, for each key of the spec, the paths where it belongs
// ("sources[i].start", "consumers.start"), for a key written at the wrong
// level.
var keyPlaces = sync.OnceValue(func() map[string][]string {
	places := map[string][]string{}
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			if t.Kind() == reflect.Slice {
				path += "[i]"
			}
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(reflect.TypeFor[nodeValue]()) {
			return
		}
		fs := fieldsOf(t)
		for _, name := range fs.names {
			p := joinPath(path, name)
			places[name] = append(places[name], p)
			walk(t.FieldByIndex(fs.byName[name]).Type, p)
		}
	}
	walk(reflect.TypeFor[Spec](), "")
	return places
})

// yamlLineRE finds the line in a yaml.v3 syntax error.
var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError is a YAML (or JSON) syntax error as a FieldError.
func syntaxError(err error) *FieldError {
	msg := err.Error()
	line := 0
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	return &FieldError{Line: line, Msg: "invalid spec: not YAML or JSON: " + msg + "; check the indentation, quotes and brackets there"}
}
