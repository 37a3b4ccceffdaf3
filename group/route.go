package group

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/braid-cdc/braid/spec"
)

// Router maps shard tables to logical tables by the spec's route rules: the
// first rule whose Match covers the whole "schema.table" rewrites it with To
// ($1-style groups); a table no rule matches keeps its name.
//
// A Router is safe for use by one goroutine (it caches answers).
type Router struct {
	rules []routeRule
	cache map[[2]string][2]string
}

type routeRule struct {
	re *regexp.Regexp
	to string
}

// NewRouter compiles route rules.
func NewRouter(rules []spec.RouteRule) (*Router, error) {
	r := &Router{cache: map[[2]string][2]string{}}
	for i, rule := range rules {
		re, err := regexp.Compile(`^(?:` + rule.Match + `)$`)
		if err != nil {
			return nil, fmt.Errorf("group: route[%d].match %q: %v", i, rule.Match, err)
		}
		r.rules = append(r.rules, routeRule{re: re, to: rule.To})
	}
	return r, nil
}

// Rename returns the logical schema and table of an origin table.
func (r *Router) Rename(schema, table string) (string, string) {
	if len(r.rules) == 0 {
		return schema, table
	}
	key := [2]string{schema, table}
	if v, ok := r.cache[key]; ok {
		return v[0], v[1]
	}
	out := key
	name := schema + "." + table
	for _, rule := range r.rules {
		if m := rule.re.FindStringSubmatchIndex(name); m != nil {
			logical := string(rule.re.ExpandString(nil, rule.to, name, m))
			if s, t, ok := strings.Cut(logical, "."); ok {
				out = [2]string{s, t}
			} else {
				out = [2]string{schema, logical}
			}
			break
		}
	}
	r.cache[key] = out
	return out[0], out[1]
}
