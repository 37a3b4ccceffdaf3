package sink

import (
	"errors"
	"fmt"
	"strings"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/schema"
)

// ErrDDLRefused is wrapped by the error of a DDL a SQL target will not
// run (schema.ErrUnsafeDDL: a subquery, CREATE … SELECT, a function
// outside the allowed ones, a table not of the destination, DROP
// DATABASE) or cannot parse (schema.ErrDDLParse). Trying it again cannot
// help: the runner stops the sink with one line instead of retrying.
var ErrDDLRefused = errors.New("DDL refused")

// TargetDDLs rebuilds ev's DDL for a SQL target whose table of logical
// table L is target(L) ("schema.table"): see schema.TargetDDLs. The
// tables the DDL may name are those the stream says it changes
// (DDL.Tables, as its text names them), each mapped through its logical
// name (DDL.LogicalTables); any other name is not the destination's, and the DDL is
// refused (an error wrapping ErrDDLRefused that names the sink, seq and
// statement, and says what to do).
func TargetDDLs(sinkName string, ev *change.Event, target func(logical string) string) ([]schema.TargetDDL, error) {
	d := ev.DDL
	rename := func(s, t string) (string, string, bool) {
		for i, name := range d.Tables {
			ns, nt, _ := strings.Cut(name, ".")
			if !(ns == s && nt == t) && !(strings.EqualFold(ns, s) && strings.EqualFold(nt, t)) {
				continue
			}
			logical := name
			switch {
			case len(d.LogicalTables) == len(d.Tables):
				logical = d.LogicalTables[i]
			case i == 0:
				ls, lt := d.Logical()
				logical = ls + "." + lt
			}
			ts, tt, _ := strings.Cut(target(logical), ".")
			return ts, tt, true
		}
		return "", "", false
	}
	if rn := schema.RenamedTables(d.Schema, d.SQL, schema.SQLMode(d.SQLMode)); len(rn) > 0 {
		// The target table holds what the stream calls by its logical
		// name; renaming it is the operator's call (issue 43). A RENAME
		// between two names the sink's tables map to one target table
		// has nothing to do there: that mapping is the way past it.
		same := true
		for _, r := range rn {
			fs, ft, _ := strings.Cut(r.From, ".")
			ts, tt, _ := strings.Cut(r.To, ".")
			s1, t1, ok1 := rename(fs, ft)
			s2, t2, ok2 := rename(ts, tt)
			same = same && ok1 && ok2 && strings.EqualFold(s1, s2) && strings.EqualFold(t1, t2)
		}
		if same {
			return nil, nil
		}
		return nil, fmt.Errorf("sink %s: %w at seq %d from %s: %.200q renames %s to %s, and a sink never renames its target table on its own: map %s and %s to one target table in the sink's tables (from/to; rename the table by hand first if it should have the new name) and restart the sink, which then goes past it, or set the sink's ddl: ignore until it is past seq %d",
			sinkName, ErrDDLRefused, ev.Seq, ev.Source, strings.Join(strings.Fields(d.SQL), " "), rn[0].From, rn[0].To, rn[0].From, rn[0].To, ev.Seq)
	}
	out, err := schema.TargetDDLs(d.Schema, d.SQL, schema.SQLMode(d.SQLMode), rename)
	if err != nil {
		// Unsafe or unparsable, the same text under the same mode fails
		// the same way again: no retry helps.
		return nil, fmt.Errorf("sink %s: %w at seq %d from %s: %w: the sink stops here; make the change on the target by hand if it should have it, then set the sink's ddl: ignore until it is past seq %d",
			sinkName, ErrDDLRefused, ev.Seq, ev.Source, err, ev.Seq)
	}
	return out, nil
}
