package spec

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// A FieldError is one problem of a spec: the field it concerns, named by
// its YAML path as a user wrote it ("sources[1].address"; "" for the spec
// as a whole), the line it is on (0 when the spec was built in Go rather
// than parsed), and what is wrong and what to write instead.
//
// Parse and Validate return every FieldError of a spec at once, joined
// with errors.Join: one problem per line. errors.As finds each.
type FieldError struct {
	Path string
	Line int
	Msg  string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// maxProblems is how many problems one error lists; the rest are counted
// on a last line, so that a spec of a thousand broken sources is still
// readable.
const maxProblems = 20

// joinProblems is the problems as one error, one per line, nil for none.
// Problems with a line come in line order (stable), the others after
// them in the order found.
func joinProblems(ps []*FieldError) error {
	if len(ps) == 0 {
		return nil
	}
	ps = append([]*FieldError(nil), ps...)
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i].Line, ps[j].Line
		return a != 0 && (b == 0 || a < b)
	})
	errs := make([]error, 0, min(len(ps), maxProblems)+1)
	for i, p := range ps {
		if i == maxProblems {
			errs = append(errs, fmt.Errorf("and %d more problems: fix these first", len(ps)-maxProblems))
			break
		}
		errs = append(errs, p)
	}
	return errors.Join(errs...)
}

// joinPath is the YAML path of key under path.
func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// parentPath is the path one level up: "sources[1]" for
// "sources[1].address", "sources" for "sources[1]", "" at the top.
func parentPath(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}

// suggest is the name among names that key was most likely meant to be,
// or "": the same name spelled with other case, '-' or '_'; then the
// closest by edit distance (at most 2, and under half the name); then a
// name key is a prefix of, or that is a prefix of key (4 letters at least).
func suggest(key string, names []string) string {
	norm := func(s string) string {
		return strings.NewReplacer("_", "", "-", "", " ", "").Replace(strings.ToLower(s))
	}
	k := norm(key)
	for _, n := range names {
		if norm(n) == k {
			return n
		}
	}
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(strings.ToLower(key), n); d < bestD && 2*d < len(n) {
			best, bestD = n, d
		}
	}
	if best != "" {
		return best
	}
	for _, n := range names {
		nn := norm(n)
		if len(k) >= 4 && len(nn) >= 4 && (strings.HasPrefix(nn, k) || strings.HasPrefix(k, nn)) {
			return n
		}
	}
	return ""
}

// editDistance is the optimal-string-alignment distance between a and b:
// insertions, deletions, substitutions and swaps of neighbours.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
