package spec

import (
	"fmt"
	"regexp"
)

// OnlineDDLMode is which online schema-change tools' helper tables braid
// recognises (the spec's online_ddl:; see Spec.OnlineDDL).
type OnlineDDLMode string

// The online_ddl modes.
const (
	// OnlineDDLAuto recognises both gh-ost's and pt-online-schema-change's
	// helper tables.
	OnlineDDLAuto OnlineDDLMode = "auto"
	// OnlineDDLGhost recognises gh-ost's: _T_gho (the shadow), _T_ghc
	// (its changelog) and _T_del (the old table after the swap).
	OnlineDDLGhost OnlineDDLMode = "gh-ost"
	// OnlineDDLPtOSC recognises pt-online-schema-change's: _T_new (the
	// shadow) and _T_old (the old table after the swap).
	OnlineDDLPtOSC OnlineDDLMode = "pt-osc"
	// OnlineDDLOff recognises none: helper tables are tables like any
	// other, and the swap a RENAME TABLE.
	OnlineDDLOff OnlineDDLMode = "off"
)

// The default helper-table rules of each tool: regular expressions on a
// table's name (not its schema) whose first group is the name of the
// table the tool changes. pt-online-schema-change puts more underscores
// in front when the name is taken; gh-ost's --timestamp-old-table puts a
// timestamp before _del.
var (
	ghostShadowRules = []string{`^_(.+)_gho$`}
	ghostTrashRules  = []string{`^_(.+?)(?:_\d{14})?_(?:ghc|del)$`}
	ptoscShadowRules = []string{`^_+(.+)_new$`}
	ptoscTrashRules  = []string{`^_+(.+)_old$`}
)

// OnlineDDLRules returns the helper-table rules in force: shadow rules
// name the copies a tool alters and swaps in, trash rules the tables it
// swaps out or keeps beside (changelogs). The spec's shadow_table_rules and
// trash_table_rules replace the mode's defaults; online_ddl: off has none.
func (s *Spec) OnlineDDLRules() (shadow, trash []string) {
	mode := s.OnlineDDL
	if mode == "" {
		mode = OnlineDDLAuto
	}
	switch mode {
	case OnlineDDLOff:
		return nil, nil
	case OnlineDDLGhost:
		shadow, trash = ghostShadowRules, ghostTrashRules
	case OnlineDDLPtOSC:
		shadow, trash = ptoscShadowRules, ptoscTrashRules
	default:
		shadow = append(append([]string{}, ghostShadowRules...), ptoscShadowRules...)
		trash = append(append([]string{}, ghostTrashRules...), ptoscTrashRules...)
	}
	if len(s.ShadowTableRules) > 0 {
		shadow = s.ShadowTableRules
	}
	if len(s.TrashTableRules) > 0 {
		trash = s.TrashTableRules
	}
	return shadow, trash
}

// onlineDDLProblems adds the problems of online_ddl and its rules.
func (s *Spec) onlineDDLProblems(bad func(path, format string, a ...any)) {
	switch s.OnlineDDL {
	case "", OnlineDDLAuto, OnlineDDLGhost, OnlineDDLPtOSC, OnlineDDLOff:
	default:
		bad("online_ddl", "%q: want auto (the default), gh-ost, pt-osc or off", s.OnlineDDL)
	}
	for _, f := range []struct {
		name  string
		rules []string
	}{{"shadow_table_rules", s.ShadowTableRules}, {"trash_table_rules", s.TrashTableRules}} {
		for i, p := range f.rules {
			path := fmt.Sprintf("%s[%d]", f.name, i)
			re, err := regexp.Compile(p)
			switch {
			case err != nil:
				bad(path, "%s", regexProblem(p))
			case re.NumSubexp() < 1:
				bad(path, "regex %q has no group: write one whose first group is the changed table's name, e.g. '^_(.+)_new$'", p)
			}
		}
	}
}

// Without returns a filter that selects what f does but the tables skip
// names (an online schema change's helper tables). f is not changed.
func (f *TableFilter) Without(skip func(schema, table string) bool) *TableFilter {
	c := *f
	if prev := f.skip; prev != nil {
		c.skip = func(schema, table string) bool { return prev(schema, table) || skip(schema, table) }
	} else {
		c.skip = skip
	}
	return &c
}
