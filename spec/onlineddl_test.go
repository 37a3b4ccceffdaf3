package spec_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/braid-cdc/braid/spec"
)

// TestOnlineDDLSpec: online_ddl defaults to auto with both tools' rules;
// a mode picks its tool's; rules given replace them; a wrong mode and a
// rule without the group naming the table are refused by field.
func TestOnlineDDLSpec(t *testing.T) {
	s, err := spec.Parse([]byte("name: shop\nsources: [{name: a, address: '127.0.0.1:3306'}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.OnlineDDL != spec.OnlineDDLAuto {
		t.Fatalf("online_ddl default %q, want auto", s.OnlineDDL)
	}
	shadow, trash := s.OnlineDDLRules()
	if len(shadow) != 2 || len(trash) != 2 {
		t.Fatalf("auto rules: %q %q", shadow, trash)
	}
	s.OnlineDDL = spec.OnlineDDLPtOSC
	if shadow, _ := s.OnlineDDLRules(); !slices.Equal(shadow, []string{`^_+(.+)_new$`}) {
		t.Fatalf("pt-osc shadow rules %q", shadow)
	}
	s.OnlineDDL, s.ShadowTableRules = spec.OnlineDDLOff, nil
	if shadow, trash := s.OnlineDDLRules(); shadow != nil || trash != nil {
		t.Fatal("online_ddl: off has rules")
	}
	s.OnlineDDL, s.ShadowTableRules = spec.OnlineDDLAuto, []string{`^(.+)_shadow$`}
	if shadow, _ := s.OnlineDDLRules(); !slices.Equal(shadow, []string{`^(.+)_shadow$`}) {
		t.Fatalf("shadow_table_rules did not replace the defaults: %q", shadow)
	}

	_, err = spec.Parse([]byte("name: shop\nsources: [{name: a, address: '127.0.0.1:3306'}]\nonline_ddl: ghost\nshadow_table_rules: ['^_x_new$']\ntrash_table_rules: ['(']\n"))
	if err == nil {
		t.Fatal("a bad online_ddl block was accepted")
	}
	for _, want := range []string{`line 3: online_ddl: "ghost": want auto`, "line 4: shadow_table_rules[0]: regex \"^_x_new$\" has no group", "line 5: trash_table_rules[0]: regex"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
