package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Bad flags are reported all at once, before anything starts; --help
// names every flag.
func TestDemoFlags(t *testing.T) {
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"--help"}, 0, []string{"--duration", "--rate", "--kill-after", "--dir", "--json", "--log-level", "kill -9", "mariadbd"}},
		{[]string{"--rate", "0", "--kill-after", "30s", "--duration", "10s", "--log-level", "loud", "--dir", full},
			2, []string{"--rate 0", "--kill-after 30s: want less than --duration 10s", `--log-level "loud"`, "is not empty"}},
		{[]string{"now"}, 2, []string{`unexpected argument "now"`}},
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{"demo"}, tc.args...), &out, &errb)
		if code != tc.code {
			t.Errorf("demo %v: exit %d, want %d\n%s", tc.args, code, tc.code, errb.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(errb.String(), w) {
				t.Errorf("demo %v: stderr lacks %q:\n%s", tc.args, w, errb.String())
			}
		}
	}
}
