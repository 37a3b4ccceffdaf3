package group

import (
	"slices"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/schema"
)

// RENAMEs of shard tables that are no online schema change's swap (those
// the reader turns into the ALTER the tool ran): a renamed shard table
// leaves its logical table's shard set, and the table it becomes joins
// the set its route names, if selected. Nothing goes out for consumers,
// but when the shard table was the only one of its logical table and its
// new name is the only one of another: then the logical table itself is
// renamed, and the RENAME goes out as that (sinks refuse to follow it on
// their own). A lock waiting for the shard table that left releases.

// renameDDL handles a RENAME of source src's tables; handled is false for
// any other DDL.
func (x *shardDDL) renameDDL(src int, ev *change.Event) (out *change.Event, handled bool) {
	mode := schema.SQLMode(ev.DDL.SQLMode)
	rns := schema.RenamedTables(ev.DDL.Schema, ev.DDL.SQL, mode)
	if len(rns) == 0 {
		return nil, false
	}
	d := x.d
	name := d.cfg.Spec.Sources[src].Name
	s := x.mut()
	defer x.rebuild()
	var renamed []string // logical tables renamed: from, to
	for _, rn := range rns {
		fromIn, toIn := slices.Contains(ev.DDL.Tables, rn.From), slices.Contains(ev.DDL.Tables, rn.To)
		lf, lt := x.logical(rn.From), x.logical(rn.To)
		from, to := ShardName(name, rn.From), ShardName(name, rn.To)
		switch {
		case fromIn && toIn && lf == lt:
			leave(s, lf, from)
			s.Join(lt, to)
			continue
		case fromIn && toIn && slices.Equal(s.Shards[lf], []string{from}) && len(s.Shards[lt]) == 0:
			leave(s, lf, from)
			s.Join(lt, to)
			if sig, ok := s.Created[lf]; ok {
				s.Created[lt] = sig
			}
			delete(s.Created, lf)
			renamed = append(renamed, lf, lt)
			continue
		}
		if fromIn {
			if v, l := s.Drop(lf, from); v == DDLRelease {
				x.release(s, l)
				d.log.Info("shard DDL lock released: a shard table it waited for was renamed out of the table", "lock", l.ID, "table", lf, "shard", from, "to", rn.To)
				out = logicalDDL(ev, l.SQL, l.SQLMode, lf)
			}
		}
		if toIn {
			s.Join(lt, to)
		}
		d.log.Info("shard table renamed: it moves between logical tables as the route says", "shard", from, "from", lf, "to", lt, "to_selected", toIn)
	}
	if out != nil || len(renamed) == 0 {
		return out, true
	}
	lds, err := schema.ShardDDL(ev.DDL.Schema, ev.DDL.SQL, mode, d.router.Rename)
	if err != nil || len(lds) != 1 {
		return ev, true
	}
	e := logicalDDL(ev, lds[0].Text, uint64(lds[0].SQLMode), renamed[0])
	e.DDL.Tables, e.DDL.LogicalTables = renamed, renamed
	return e, true
}

// leave takes shard out of logical's shard set, without a verdict.
func leave(s *ShardDDLState, logical, shard string) {
	if i, found := slices.BinarySearch(s.Shards[logical], shard); found {
		s.Shards[logical] = slices.Delete(s.Shards[logical], i, i+1)
	}
	if len(s.Shards[logical]) == 0 {
		delete(s.Shards, logical)
	}
}

// Migration is an online schema change under way on a shard table, as
// its source's reader last saw it (ahead of the merge): the tool's copy
// exists and has not been swapped in.
type Migration struct {
	// Shard is the shard table (ShardName), Logical its logical table.
	Shard   string `json:"shard"`
	Logical string `json:"logical"`
	// Shadow is the copy's name, Since where it was created.
	Shadow string          `json:"shadow"`
	Since  change.Position `json:"since"`
	// DDL are the statements run on the copy so far.
	DDL []string `json:"ddl,omitempty"`
}

// noteMigrations records source src's migrations under way from a
// schema snapshot its reader sent (on the source's reader goroutine).
func (d *Destination) noteMigrations(src int, snap *change.SchemaSnapshot) {
	d.migMu.Lock()
	defer d.migMu.Unlock()
	if d.migRouter == nil {
		// The merge's Router caches as it goes and belongs to the merge
		// loop: the readers' goroutines route with one of their own.
		d.migRouter, _ = NewRouter(d.cfg.Spec.Route) // New checked the rules
	}
	var ms []Migration
	for _, m := range snap.Online {
		if !m.Swapped.IsZero() {
			continue
		}
		table := m.Schema + "." + m.Table
		ls, lt := d.migRouter.Rename(m.Schema, m.Table)
		mg := Migration{Shard: ShardName(d.cfg.Spec.Sources[src].Name, table), Logical: ls + "." + lt, Shadow: m.Shadow, Since: m.Since}
		for _, st := range m.DDL {
			mg.DDL = append(mg.DDL, st.SQL)
		}
		ms = append(ms, mg)
	}
	d.migrations[src] = ms
}

// Migrations returns the online schema changes under way on the shard
// tables, by source. Safe for concurrent use.
func (d *Destination) Migrations() []Migration {
	d.migMu.Lock()
	defer d.migMu.Unlock()
	var out []Migration
	for _, ms := range d.migrations {
		out = append(out, ms...)
	}
	return out
}
