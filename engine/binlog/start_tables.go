package binlog

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/braid-cdc/braid/engine/change"
)

// The tables a source has at a start in the past are what its binlog
// says, not what the server holds now: the live tables are those at
// snapPos, and a CREATE, DROP or RENAME between the start and snapPos
// makes them differ. The shard-DDL merge counts each logical table's
// shard tables from the announcement (Config.AnnounceTables), so an
// announcement made from the live tables gave the same binlogs another
// stream whenever such a DDL ran between the start and the moment braid
// started: a RENAME that went out from one run did not from the other,
// and the seqs after it moved. With Config.ExactStartTables the reader
// lists the DDL of that range before it announces (one SHOW BINLOG EVENTS
// scan, what resolveProvisional would run at the first touch of a table
// anyway) and announces the tables the binlog says existed at the start.

// settleStart lists the DDL from the start to snapPos on c, settles the
// provisional tables with it (as resolveProvisional does) and records in
// startTables the selected tables that existed at the start: a live table
// unless the range creates it first; a table the server no longer has
// if the range touches it first by any other DDL (a DROP, a RENAME away,
// an ALTER). A table renamed away whose new name is live and untouched
// since takes that table's live schema at the start; another one has no
// model until the DDL that took it away (its rows need
// binlog_row_metadata=FULL, as before).
func (p *Reader) settleStart(ctx context.Context, c *client.Conn) error {
	live := p.provisional
	touches, err := p.scanDDL(ctx, c, p.resume, p.snapPos, live)
	if err != nil {
		return err
	}
	renamedLive := map[string]*change.Table{} // table at the start → the live table it became
	set := map[string]bool{}
	for name := range live {
		if ts := touches[name]; len(ts) == 0 || !createdFirst(ts) {
			set[name] = true
		}
	}
	for name, ts := range touches {
		if _, ok := live[name]; ok || createdFirst(ts) {
			continue
		}
		sn, tn, _ := strings.Cut(name, ".")
		if !p.filter.Match(sn, tn) {
			continue
		}
		set[name] = true
		if to := ts[0].to; len(ts) == 1 && to != "" && live[to] != nil && len(touches[to]) == 1 && touches[to][0].pos == ts[0].pos {
			renamedLive[name] = live[to]
		}
	}
	p.settleProvisional(touches)
	for name := range set {
		if _, ok := live[name]; ok || renamedLive[name] != nil {
			continue
		}
		// No model before its last DDL here, the one that took it away:
		// that DDL still names it (its DROP reaches the merge).
		sn, tn, _ := strings.Cut(name, ".")
		ts := touches[name]
		p.schema.MarkUnknownUntil(sn, tn, ts[len(ts)-1].pos, nil)
	}
	for name, t := range renamedLive {
		sn, tn, _ := strings.Cut(name, ".")
		if create, ok := p.liveCreate[t.Schema+"."+t.Name]; ok {
			if err := p.schema.LoadCreate(p.resume, sn, renameCreate(create, tn)); err != nil {
				p.log.Warn("cannot build a renamed table's schema at the start from its new name's", "table", name, "err", oneLine(err))
			}
		}
	}
	p.startTables = slices.Sorted(maps.Keys(set))
	return nil
}

// createdFirst reports whether a table's first DDL in a range (ts, in
// binlog order) creates it, so it did not exist before the range.
func createdFirst(ts []touchAt) bool { return ts[0].creates && !ts[0].drops }

// renameCreate is SHOW CREATE TABLE's text create with the table named
// table instead.
func renameCreate(create, table string) string {
	rest, ok := strings.CutPrefix(create, "CREATE TABLE `")
	if !ok {
		return create
	}
	for i := 0; i < len(rest); i++ {
		if rest[i] != '`' {
			continue
		}
		if i+1 < len(rest) && rest[i+1] == '`' {
			i++
			continue
		}
		return "CREATE TABLE `" + strings.ReplaceAll(table, "`", "``") + "`" + rest[i+1:]
	}
	return create
}

// settleProvisional settles every provisional table with the DDL touching it from
// some position to snapPos (scanDDL): untouched ones keep the live schema;
// one first created there is absent until then; one changed there has
// columns nobody can know before its last change there (the live schema
// is what follows it), so it is unknown until then and its rows before
// that point fail loudly.
func (p *Reader) settleProvisional(touches map[string][]touchAt) {
	for name, live := range p.provisional {
		ts := touches[name]
		if len(ts) == 0 {
			continue
		}
		schema, table, _ := strings.Cut(name, ".")
		if createdFirst(ts) {
			p.schema.Forget(schema, table)
			continue
		}
		p.schema.MarkUnknownUntil(schema, table, ts[len(ts)-1].pos, live)
	}
	p.provisional = nil
}
