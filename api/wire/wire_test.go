package wire_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode"
)

// TestFieldsDocumented: every field of every shape has a doc comment and a
// lowerCamelCase json name, so that the package reads as the API's
// reference.
func TestFieldsDocumented(t *testing.T) {
	fset := token.NewFileSet()
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	shapes := 0
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			shapes++
			for _, field := range st.Fields.List {
				names := fieldNames(field)
				if field.Doc == nil {
					t.Errorf("%s.%s: no doc comment", ts.Name, names)
				}
				if field.Tag == nil {
					t.Errorf("%s.%s: no json tag", ts.Name, names)
					continue
				}
				tag := reflect.StructTag(strings.Trim(field.Tag.Value, "`")).Get("json")
				name, _, _ := strings.Cut(tag, ",")
				if name == "" || !unicode.IsLower(rune(name[0])) || strings.ContainsAny(name, "_-") {
					t.Errorf("%s.%s: json name %q, want lowerCamelCase", ts.Name, names, name)
				}
			}
			return true
		})
	}
	if shapes < 10 {
		t.Errorf("found %d shapes: is the test reading the package?", shapes)
	}
}

func fieldNames(f *ast.Field) string {
	var names []string
	for _, n := range f.Names {
		names = append(names, n.Name)
	}
	return strings.Join(names, ",")
}
