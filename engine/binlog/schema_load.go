package binlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/schema"
)

// loadSchema builds the schema model at the start position.
//
// The server can only show its schema as it is now (at snapPos). When
// reading starts earlier, each selected live table is loaded provisionally:
// its live schema holds at the start only if no DDL touches it between the
// start and snapPos. Most replays never need to find out: a table that the
// binlog creates (CREATE TABLE, CREATE TABLE ... LIKE, RENAME ... TO it) is
// built from that statement instead, and from snapPos on the live schema is
// right. Only when a row or a DDL of a provisional table comes first does
// the parser list the DDL from there to snapPos (resolveProvisional) and
// settle every provisional table at once.
//
// With binlog_row_metadata=FULL every table map names its columns, so a
// row never waits for that; a DDL of a provisional table still does, or
// it would be applied to a live schema that has it already (an ADD
// COLUMN of a column there) and be lost.
//
// SHOW CREATE TABLE runs after SHOW MASTER STATUS gave snapPos, so a DDL
// may land between them: the live schema holds from some point up to the
// position read again after it (bound), which is what provisional tables
// are settled against. A start at the latest position (moveStart) needs
// no provisional tables: when the binlog up to bound touches no selected
// table, the live schema holds from snapPos; when it does, the schema is
// read again and the start moves to bound. On a server running DDL on the
// selected tables back to back, every read may overlap one: the reads go
// on, each after a random pause that grows so as not to keep step with a
// periodic writer, for up to settleLatestFor; only then do the tables
// start provisional, and a row of one before the DDL fails loudly.
func (p *Reader) loadSchema(ctx context.Context, c *client.Conn, snapPos change.Position, moveStart bool) error {
	began := time.Now()
	for attempt := 1; ; attempt++ {
		bound, tables, err := p.loadLive(c)
		if err != nil {
			return err
		}
		if !moveStart || bound == snapPos || time.Since(began) > settleLatestFor {
			if p.started && p.resume.Compare(bound) < 0 && len(tables) > 0 {
				p.provisional, p.snapPos = tables, bound
			}
			return nil
		}
		touches, err := p.scanDDL(ctx, c, snapPos, bound, tables)
		if err != nil {
			return err
		}
		if len(touches) == 0 {
			return nil
		}
		p.log.Info("a DDL ran while the schema was read: reading it again", "from", snapPos.String(), "to", bound.String(), "attempt", attempt)
		pause := time.Duration(rand.Int64N(int64(min(time.Duration(attempt)*20*time.Millisecond, 500*time.Millisecond))))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		// The server has moved on during the pause: the schema is read at
		// its position now, not at bound, or bound to now would need a scan.
		if snapPos, err = masterPosition(c); err != nil {
			return fatal{fmt.Errorf("binlog: source %s (%s): read its binlog position: %v", p.spec.Name, p.spec.Address, err)}
		}
		p.resume = snapPos
	}
}

// settleLatestFor bounds how long a start at the latest position reads the
// schema again while DDL keeps landing beside the reads (loadSchema).
const settleLatestFor = 30 * time.Second

// loadLive builds the schema model from the server's live tables, and
// returns the server's position after reading them and the tables by
// name.
func (p *Reader) loadLive(c *client.Conn) (bound change.Position, tables map[string]*change.Table, err error) {
	live, err := p.liveTables(c)
	if err != nil {
		return bound, nil, fatal{fmt.Errorf("binlog: source %s (%s): read table schemas: %v", p.spec.Name, p.spec.Address, err)}
	}
	bound, err = masterPosition(c)
	if err != nil {
		return bound, nil, fatal{fmt.Errorf("binlog: source %s (%s): read its binlog position: %v", p.spec.Name, p.spec.Address, err)}
	}
	p.schema = schema.NewTracker()
	p.schema.SpellWithoutIntWidths(parseServerVersion(p.info.version).noIntWidths())
	server, databases, err := liveCharsets(c)
	if err != nil {
		return bound, nil, fatal{fmt.Errorf("binlog: source %s (%s): read the databases' default charsets: %v", p.spec.Name, p.spec.Address, err)}
	}
	p.schema.SetCharsets(server, databases)
	p.provisional = nil
	p.unparsed = map[string]string{}
	p.fromColumns = map[string]bool{}
	tables = map[string]*change.Table{}
	for name, create := range live {
		schema, table, _ := strings.Cut(name, ".")
		if err := p.loadLiveTable(c, schema, table, create); err != nil {
			return bound, nil, fatal{fmt.Errorf("binlog: source %s (%s): read %s's columns from information_schema: %v", p.spec.Name, p.spec.Address, name, err)}
		}
		if t, ok := p.schema.Table(schema, table); ok {
			tables[name] = t
		}
	}
	return bound, tables, nil
}

// loadLiveTable puts live table db.table in the model from create (its
// SHOW CREATE TABLE), or, when the model cannot parse that, from
// information_schema (columnsCreate). A table it can build neither way is
// left out of the model and recorded in p.unparsed, with one warning: its
// rows then take their columns from the table maps
// (binlog_row_metadata=FULL), or stop the reader with the reason
// (decoder.table). It never fails the load: only a failed query does.
func (p *Reader) loadLiveTable(c *client.Conn, db, table, create string) error {
	perr := p.schema.LoadCreate(p.resume, db, create)
	if perr == nil {
		return nil
	}
	name := db + "." + table
	alt, why, err := columnsCreate(c, db, table)
	if err != nil {
		return err
	}
	if why == "" {
		aerr := p.schema.LoadCreate(p.resume, db, alt)
		if aerr == nil {
			p.fromColumns[name] = true
			p.log.Warn("the schema model cannot parse the table's CREATE TABLE: its columns and keys are read from information_schema",
				"table", name, "err", oneLine(perr))
			return nil
		}
		why = "neither can its columns from information_schema: " + oneLine(aerr)
	}
	p.unparsed[name] = oneLine(perr) + "; " + why
	p.log.Warn("the schema model cannot parse the table's CREATE TABLE: its rows need binlog_row_metadata=FULL",
		"table", name, "err", p.unparsed[name])
	return nil
}

// unmodelled is the error of a reader that must announce its tables
// (Config.AnnounceTables) when a selected table exists at the start
// without a model (loadLiveTable): the announcement would leave it out,
// and the snapshot would then copy none of its rows and the shard-DDL
// merge not count it, without a word.
func (p *Reader) unmodelled() error {
	names := slices.Sorted(maps.Keys(p.unparsed))
	if len(names) == 0 {
		return nil
	}
	return fatal{fmt.Errorf("%w: source %s: %s: the table exists at the start and braid cannot build its columns, so it could neither copy its rows nor count it among its logical table's shards: its CREATE TABLE cannot be parsed (%s): leave the table out of the destination's tables",
		ErrSchemaUnknown, p.spec.Name, names[0], p.unparsed[names[0]])}
}

// anyProvisional reports whether some table's live schema is not yet known
// to hold at pos.
func (p *Reader) anyProvisional(pos change.Position) bool {
	if len(p.provisional) > 0 && pos.Compare(p.snapPos) >= 0 {
		p.provisional = nil // from snapPos on, the live schema is the schema
	}
	return len(p.provisional) > 0
}

// isProvisional reports whether schema.table's live schema is not yet known
// to hold at pos.
func (p *Reader) isProvisional(name string, pos change.Position) bool {
	if !p.anyProvisional(pos) {
		return false
	}
	_, ok := p.provisional[name]
	return ok
}

// definesTable reports whether a DDL creating a table gives its whole
// definition (so the table did not exist just before): CREATE TABLE without
// IF NOT EXISTS, CREATE OR REPLACE, or a RENAME onto it.
func definesTable(sql string) bool {
	f := strings.Fields(strings.ToUpper(sql))
	for i := 0; i+2 < len(f) && i < 8; i++ {
		if f[i] == "IF" && f[i+1] == "NOT" && f[i+2] == "EXISTS" {
			return false
		}
	}
	return true
}

// provisionalDDL settles what a DDL at pos means for provisional tables,
// before it is applied: a table it defines is built from it; any other
// touch of a provisional table resolves them all.
func (p *Reader) provisionalDDL(ctx context.Context, pos change.Position, db, sql string, mode uint64) error {
	if !p.anyProvisional(pos) {
		return nil
	}
	touches, err := schema.DDLTables(db, sql, schema.SQLMode(mode))
	if err != nil {
		return nil // ApplyDDL reports it
	}
	for _, t := range touches {
		names := []string{t.Table}
		if t.Database {
			names = names[:0]
			schema, _, _ := strings.Cut(t.Table, ".")
			for name := range p.provisional {
				// A table whose CREATE TABLE the model cannot parse keeps
				// its live columns until a scan settles it (the scan reads
				// past a DDL it cannot parse).
				if strings.HasPrefix(name, schema+".") && !(t.Creates && p.fromColumns[name]) {
					names = append(names, name)
				}
			}
		}
		for _, name := range names {
			if !p.isProvisional(name, pos) {
				continue
			}
			if t.Creates && !t.Drops && definesTable(sql) {
				schema, table, _ := strings.Cut(name, ".")
				p.schema.Forget(schema, table)
				delete(p.provisional, name)
				continue
			}
			return p.resolveProvisional(ctx, pos)
		}
	}
	return nil
}

// resolveProvisional lists the DDL from pos to snapPos and settles every
// provisional table: untouched ones keep the live schema; one first created
// there is absent until then; one changed there has columns nobody can know
// before its last change there (the live schema is what follows it), so it
// is unknown until then and its rows before that point fail loudly.
func (p *Reader) resolveProvisional(ctx context.Context, pos change.Position) error {
	c, err := p.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	touches, err := p.scanDDL(ctx, c, pos, p.snapPos, p.provisional)
	if err != nil {
		return err
	}
	for name, live := range p.provisional {
		ts := touches[name]
		if len(ts) == 0 {
			continue
		}
		schema, table, _ := strings.Cut(name, ".")
		if ts[0].creates && !ts[0].drops {
			p.schema.Forget(schema, table)
			continue
		}
		p.schema.MarkUnknownUntil(schema, table, ts[len(ts)-1].pos, live)
	}
	p.provisional = nil
	return nil
}

// liveCharsets returns the server's default charset and each database's,
// which tables created later without one take: one query, the server's
// beside each database's row (information_schema is always one).
func liveCharsets(c *client.Conn) (server string, databases map[string]string, err error) {
	r, err := c.Execute("SELECT schema_name, default_character_set_name, @@character_set_server FROM information_schema.schemata")
	if err != nil {
		return "", nil, err
	}
	databases = make(map[string]string, r.RowNumber())
	for i := 0; i < r.RowNumber(); i++ {
		name, _ := r.GetString(i, 0)
		cs, _ := r.GetString(i, 1)
		databases[strings.Clone(name)] = strings.Clone(cs)
	}
	if r.RowNumber() == 0 {
		if r, err = c.Execute("SELECT @@character_set_server"); err != nil {
			return "", nil, err
		}
	}
	server, _ = r.GetString(0, r.ColumnNumber()-1)
	return strings.Clone(server), databases, nil
}

// liveTables returns SHOW CREATE TABLE of every selected base table.
func (p *Reader) liveTables(c *client.Conn) (map[string]string, error) {
	// SHOW CREATE TABLE prints for the session's sql_mode ("names" under
	// ANSI_QUOTES); the model reads it in the default mode.
	if _, err := c.Execute("SET SESSION sql_mode = ''"); err != nil {
		return nil, err
	}
	// MariaDB lists a system-versioned table as such, not as a base table.
	// information_schema holds no base table (its tables are SYSTEM
	// VIEWs), but MariaDB builds each of them to learn its type: left
	// out, the listing takes about 1 ms instead of 20–60 on a loaded
	// machine, the largest wait of the start.
	r, err := c.Execute("SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema <> 'information_schema' AND table_type IN ('BASE TABLE', 'SYSTEM VERSIONED')")
	if err != nil {
		return nil, err
	}
	afterListingTables()
	out := map[string]string{}
	for i := 0; i < r.RowNumber(); i++ {
		schema, _ := r.GetString(i, 0)
		table, _ := r.GetString(i, 1)
		if !p.modelled(schema, table) {
			continue
		}
		cr, err := c.Execute(fmt.Sprintf("SHOW CREATE TABLE `%s`.`%s`", strings.ReplaceAll(schema, "`", "``"), strings.ReplaceAll(table, "`", "``")))
		var myErr *mysql.MyError
		if errors.As(err, &myErr) && myErr.Code == mysql.ER_NO_SUCH_TABLE {
			// Dropped or renamed since it was listed (a pt-osc swap during
			// the start): the live schema is read as of after that DDL,
			// whose event the reader meets like any other.
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("SHOW CREATE TABLE %s.%s: %v", schema, table, err)
		}
		create, _ := cr.GetString(0, 1)
		out[schema+"."+table] = create
	}
	return out, nil
}

// afterListingTables runs between liveTables' listing of the tables and
// their SHOW CREATE TABLEs: a test's hook for a DDL landing there.
var afterListingTables = func() {}

// touchAt is one DDL's effect on one table, found by scanDDL.
type touchAt struct {
	pos            change.Position
	creates, drops bool
}

// scanPage is how many events one SHOW BINLOG EVENTS returns.
const scanPage = 5000

// scanDDL lists the DDL between start and end and returns the DDL touching
// each table, in binlog order. It asks the server with SHOW BINLOG EVENTS,
// which sends one short row per event (the SQL text only for query events)
// instead of the events themselves, so the scan costs a fraction of reading
// the binlog.
//
// A DROP DATABASE touches every table of the schema known at that point:
// the live ones and those the scan has seen.
func (p *Reader) scanDDL(ctx context.Context, c *client.Conn, start, end change.Position, live map[string]*change.Table) (map[string][]touchAt, error) {
	began := time.Now()
	files, err := binlogFiles(c)
	if err != nil {
		return nil, fatal{fmt.Errorf("binlog: source %s: SHOW BINARY LOGS: %v", p.spec.Name, err)}
	}
	scan := &ddlScan{p: p, live: live, touches: map[string][]touchAt{}}
	for _, file := range files {
		if (change.Position{File: file, Pos: ^uint32(0)}).Compare(start) < 0 {
			continue // wholly before the start
		}
		from := uint32(4)
		if file == start.File {
			from = start.Pos
		}
		for {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			r, err := c.Execute(fmt.Sprintf("SHOW BINLOG EVENTS IN %s FROM %d LIMIT %d", schema.QuoteString(file), from, scanPage))
			if err != nil {
				return nil, fatal{fmt.Errorf("binlog: source %s: SHOW BINLOG EVENTS IN %s FROM %d: %v (the user needs REPLICATION CLIENT / BINLOG MONITOR)", p.spec.Name, file, from, err)}
			}
			n := r.RowNumber()
			for i := 0; i < n; i++ {
				pos, _ := r.GetUint(i, 1)
				at := change.Position{File: file, Pos: uint32(pos)}
				if at.Compare(end) >= 0 {
					n = -1
					break
				}
				scan.events++
				if typ, _ := r.GetString(i, 2); typ == "Query" || typ == "Query_compressed" {
					info, _ := r.GetString(i, 5)
					scan.query(at, info)
				}
				next, _ := r.GetUint(i, 4)
				from = uint32(next)
			}
			if n < scanPage {
				break
			}
		}
		if file == end.File {
			break
		}
	}
	p.log.Log(ctx, slog.LevelInfo, "scanned binlog for DDL", "from", start.String(), "to", end.String(), "events", scan.events,
		"tables_changed", len(scan.touches), "took", time.Since(began).Round(time.Millisecond))
	return scan.touches, nil
}

// ddlScan collects the DDL of a binlog range; see scanDDL.
type ddlScan struct {
	p       *Reader
	live    map[string]*change.Table
	events  int
	touches map[string][]touchAt
}

// query records the tables a query event's DDL touches. info is SHOW
// BINLOG EVENTS' text of the event: "use `db`; statement" when the session
// had a default database.
func (s *ddlScan) query(pos change.Position, info string) {
	db, sql := splitUse(info)
	// SHOW BINLOG EVENTS does not show the session's sql_mode: the scan
	// reads the text in the default mode. It only picks which tables to
	// load from the server; the events read later parse under theirs.
	ts, err := schema.DDLTables(db, sql, 0)
	if err != nil {
		s.p.log.Warn("cannot parse DDL while scanning", "pos", pos.String(), "err", err)
	}
	for _, t := range ts {
		at := touchAt{pos: pos, creates: t.Creates, drops: t.Drops}
		if !t.Database {
			s.touches[t.Table] = append(s.touches[t.Table], at)
			continue
		}
		schema, _, _ := strings.Cut(t.Table, ".")
		for name := range s.live {
			if t.Creates && s.p.fromColumns[name] {
				continue // its CREATE TABLE, which the scan cannot parse, is no touch either
			}
			if strings.HasPrefix(name, schema+".") && len(s.touches[name]) == 0 {
				s.touches[name] = append(s.touches[name], at)
			}
		}
		for name, list := range s.touches {
			if strings.HasPrefix(name, schema+".") && list[len(list)-1].pos != pos {
				s.touches[name] = append(list, at)
			}
		}
	}
}

// splitUse splits "use `db`; statement" into db and statement.
func splitUse(info string) (db, sql string) {
	rest, ok := strings.CutPrefix(info, "use `")
	if !ok {
		return "", info
	}
	var b strings.Builder
	for i := 0; i < len(rest); i++ {
		if rest[i] == '`' {
			if i+1 < len(rest) && rest[i+1] == '`' {
				b.WriteByte('`')
				i++
				continue
			}
			return b.String(), strings.TrimLeft(strings.TrimPrefix(rest[i+1:], ";"), " ")
		}
		b.WriteByte(rest[i])
	}
	return "", info
}
