package engine

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// loadSchema builds the schema model at the start position.
//
// The server can only show its schema as it is now (at snapPos). When
// reading starts earlier, the binlog between the start and snapPos is first
// scanned for DDL (rows are not decoded). A selected table whose first DDL in
// that range creates it starts absent and is built from its CREATE TABLE as
// the stream replays it. A table changed in that range but created before it
// has columns nobody can know before its last change there (the live schema
// is what follows that change), so it is marked unknown until then: its rows
// before that point fail loudly unless the server logs column names
// (binlog_row_metadata=FULL). Tables without DDL in the range take the live
// schema.
func (p *Parser) loadSchema(ctx context.Context, c *client.Conn, snapPos Position) error {
	p.schema = NewSchemaTracker()
	live, err := p.liveTables(c)
	if err != nil {
		return fatal{fmt.Errorf("engine: source %s (%s): read table schemas: %v", p.spec.Name, p.spec.Address, err)}
	}
	var touches map[string][]touchAt
	// With binlog_row_metadata=FULL every table map names its columns, so
	// the live schema only serves tables whose names agree with it.
	if p.started && p.resume.Compare(snapPos) < 0 && !p.info.fullMeta {
		if touches, err = p.scanDDL(ctx, p.resume, snapPos, live); err != nil {
			return err
		}
	}
	for name, create := range live {
		schema, table, _ := strings.Cut(name, ".")
		ts := touches[name]
		if len(ts) == 0 {
			if err := p.schema.LoadCreate(p.resume, schema, create); err != nil {
				return fatal{fmt.Errorf("engine: source %s: %s: %w", p.spec.Name, name, err)}
			}
			continue
		}
		if ts[0].creates && !ts[0].drops {
			continue // replayed from its CREATE TABLE
		}
		// Parse the live schema into a scratch tracker to hand over as the
		// schema after the last DDL.
		scratch := NewSchemaTracker()
		if err := scratch.LoadCreate(snapPos, schema, create); err != nil {
			return fatal{fmt.Errorf("engine: source %s: %s: %w", p.spec.Name, name, err)}
		}
		after, _ := scratch.Table(schema, table)
		p.schema.MarkUnknownUntil(schema, table, ts[len(ts)-1].pos, after)
	}
	// Selected tables that no longer exist but were changed in the range.
	for name, ts := range touches {
		if _, ok := live[name]; ok || (ts[0].creates && !ts[0].drops) {
			continue
		}
		schema, table, _ := strings.Cut(name, ".")
		if p.filter.Match(schema, table) {
			p.schema.MarkUnknownUntil(schema, table, ts[len(ts)-1].pos, nil)
		}
	}
	return nil
}

// liveTables returns SHOW CREATE TABLE of every selected base table.
func (p *Parser) liveTables(c *client.Conn) (map[string]string, error) {
	r, err := c.Execute("SELECT table_schema, table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for i := 0; i < r.RowNumber(); i++ {
		schema, _ := r.GetString(i, 0)
		table, _ := r.GetString(i, 1)
		if !p.filter.Match(schema, table) {
			continue
		}
		cr, err := c.Execute(fmt.Sprintf("SHOW CREATE TABLE `%s`.`%s`", strings.ReplaceAll(schema, "`", "``"), strings.ReplaceAll(table, "`", "``")))
		if err != nil {
			return nil, fmt.Errorf("SHOW CREATE TABLE %s.%s: %v", schema, table, err)
		}
		create, _ := cr.GetString(0, 1)
		out[schema+"."+table] = create
	}
	return out, nil
}

// touchAt is one DDL's effect on one table, found by scanDDL.
type touchAt struct {
	pos            Position
	creates, drops bool
}

// scanDDL reads the binlog from start to end, decoding only query events,
// and returns the DDL touching each table, in binlog order.
// A DROP DATABASE touches every table of the schema known at that point:
// the live ones and those the scan has seen.
func (p *Parser) scanDDL(ctx context.Context, start, end Position, live map[string]string) (map[string][]touchAt, error) {
	began := time.Now()
	cfg := p.syncerConfig()
	cfg.ServerID = p.spec.ServerID ^ 0x20000000 // not to kick the streaming connection of the same id
	cfg.RowsEventDecodeFunc = func(*replication.RowsEvent, []byte) error { return nil }
	syncer := replication.NewBinlogSyncer(cfg)
	defer syncer.Close()
	st, err := syncer.StartSync(mysql.Position{Name: start.File, Pos: start.Pos})
	if err != nil {
		return nil, fatal{p.streamError(err)}
	}
	touches := map[string][]touchAt{}
	file := start.File
	events := 0
	for {
		e, err := st.GetEvent(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fatal{fmt.Errorf("engine: source %s: scanning the binlog for DDL: %w", p.spec.Name, p.streamError(err))}
		}
		events++
		if rot, ok := e.Event.(*replication.RotateEvent); ok {
			file = string(rot.NextLogName)
			continue
		}
		if e.Header.LogPos == 0 {
			continue
		}
		pos := Position{File: file, Pos: e.Header.LogPos - e.Header.EventSize}
		if q, ok := e.Event.(*replication.QueryEvent); ok && pos.Compare(end) < 0 {
			ts, err := DDLTables(string(q.Schema), string(q.Query))
			if err != nil {
				p.log.Warn("cannot parse DDL while scanning", "pos", pos.String(), "err", err)
			}
			for _, t := range ts {
				at := touchAt{pos: pos, creates: t.Creates, drops: t.Drops}
				if !t.Database {
					touches[t.Table] = append(touches[t.Table], at)
					continue
				}
				schema, _, _ := strings.Cut(t.Table, ".")
				for name := range live {
					if strings.HasPrefix(name, schema+".") && len(touches[name]) == 0 {
						touches[name] = append(touches[name], at)
					}
				}
				for name := range touches {
					if strings.HasPrefix(name, schema+".") && touches[name][len(touches[name])-1].pos != pos {
						touches[name] = append(touches[name], at)
					}
				}
			}
		}
		if (Position{File: file, Pos: e.Header.LogPos}).Compare(end) >= 0 {
			break
		}
	}
	p.log.Log(ctx, slog.LevelInfo, "scanned binlog for DDL", "from", start.String(), "to", end.String(), "events", events, "tables_changed", len(touches), "took", time.Since(began).Round(time.Millisecond))
	return touches, nil
}
