package sink

import (
	"fmt"
	"slices"
	"strings"
)

// A SQL target keeps its checkpoints in one table of its meta database
// (sink_checkpoint), shared by every sink that writes to that server: a
// row is a destination's sink's worker. An older braid keyed the rows by
// sink name alone, so two destinations with a sink of one name (the
// default meta database, and a name like copy) read and moved each
// other's checkpoints, and the second skipped every row the first had
// applied past. Its rows are migrated with the dest column set to
// Unowned, and AdoptCheckpoints says whose they are.

// Unowned is the dest of the checkpoint rows an older braid wrote, keyed
// by sink name alone.
const Unowned = ""

// AdoptCheckpoints decides about the Unowned checkpoint rows of sink name,
// opened by destination dest: rows counts the checkpoint rows of that sink
// name by destination (Unowned included). It adopts them (they become
// dest's) when no destination has rows of its own under that name: the
// one destination that had the sink wrote them. When another destination,
// or dest itself, has rows too, which destination wrote the old ones is
// unknown, and reading them as dest's could skip rows or apply them twice:
// an error that says how to give them to dest or delete them, table
// naming the checkpoint table as a statement names it.
func AdoptCheckpoints(dest, name, table string, rows map[string]int) (adopt bool, err error) {
	if rows[Unowned] == 0 {
		return false, nil
	}
	var owners []string
	for d, n := range rows {
		if d != Unowned && n > 0 {
			owners = append(owners, d)
		}
	}
	if len(owners) == 0 {
		return true, nil
	}
	slices.Sort(owners)
	who := "destination " + owners[0] + " has"
	if len(owners) > 1 {
		who = "destinations " + strings.Join(owners, ", ") + " have"
	}
	where := fmt.Sprintf("dest = '' AND sink = '%s'", name)
	return false, fmt.Errorf("sink %s of destination %s: %s holds checkpoints of a sink %s that an older braid wrote without a destination, and %s checkpoints of their own under that name, so whose the old ones are is unknown and none reads them: if they are %s's, run DELETE FROM %s WHERE dest = '%s' AND sink = '%s'; UPDATE %s SET dest = '%s' WHERE %s; else run DELETE FROM %s WHERE %s",
		name, dest, table, name, who, dest, table, dest, name, table, dest, where, table, where)
}
