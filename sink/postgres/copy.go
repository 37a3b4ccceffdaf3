package postgres

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/braid-cdc/braid/sink"
)

// Runs of rows go through COPY, PostgreSQL's bulk path: in its binary
// format where copybin.go has an exact encoding of every value, else in
// its text format: each value as the text the server parses for the
// column's type, the same text a statement's parameter carries (so a
// value reads back the same whichever way it went), escaped as COPY's
// text format wants.
// Rows whose keys are known new go straight into the target table; rows
// that may find their key (an upsert) go into a staging table, a
// temporary table of the session with the target's columns, and are
// merged from there with INSERT ... SELECT ... ON CONFLICT.

// copyMinRows is the fewest changes a run has for its rows to go through
// COPY: fewer go as statements, which need no explicit transaction and no
// round trip of their own.
const copyMinRows = 8

// byteaOID is the OID of PostgreSQL's bytea type.
const byteaOID = 17

// appendCopyField appends v, a value pgValue converted, as a field of
// COPY's text format: \N for NULL, integers and floats as the digits
// their parameters would carry (a float's shortest text that reads back
// as the same float, as a float4 or a float8), bytes for a bytea column
// in its hex form and for any other column as they are, text escaped.
func appendCopyField(b []byte, v any, bytea bool) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, `\N`...), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case string:
		return appendCopyText(b, x), nil
	case []byte:
		if bytea {
			b = append(b, `\\x`...) // bytea's \x, its backslash escaped
			return hex.AppendEncode(b, x), nil
		}
		return appendCopyText(b, x), nil
	case float64:
		return strconv.AppendFloat(b, x, 'g', -1, 64), nil
	case float32:
		// The shortest text of the float64 it widens to: read as a float4
		// it is the same float32, as a float8 the same float64, which is
		// what its parameter gives either column.
		return strconv.AppendFloat(b, float64(x), 'g', -1, 64), nil
	}
	return b, fmt.Errorf("no COPY text for a value of type %T", v)
}

// appendCopyText appends s with the bytes COPY's text format gives a
// meaning escaped: the backslash, and the tab, newline and carriage
// return that end a field or a row.
func appendCopyText[S string | []byte](b []byte, s S) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			b = append(b, '\\', '\\')
		case '\t':
			b = append(b, '\\', 't')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, c)
		}
	}
	return b
}

// copyRows is the COPY text of the after-images of cs, converted
// (pgValue), each followed by its origin when the target has the column.
func (ts *tableStmts) copyRows(cs []sink.Change) ([]byte, error) {
	b := make([]byte, 0, 16*len(cs)*len(ts.cols))
	var err error
	for _, c := range cs {
		for i, v := range c.After {
			if i > 0 {
				b = append(b, '\t')
			}
			if b, err = appendCopyField(b, pgValue(&ts.columns[i], v), ts.bytea[i]); err != nil {
				return nil, fmt.Errorf("column %s: %w", ts.cols[i], err)
			}
		}
		if ts.origin {
			b = append(b, '\t')
			b = appendCopyText(b, c.Source+"/"+c.Origin)
		}
		b = append(b, '\n')
	}
	return b, nil
}

// loadTypes reads, once for the table version, which of the target's
// columns are bytea (their bytes go as hex; bytes for any other column
// as they are, as a parameter gives them).
func (ts *tableStmts) loadTypes(ctx context.Context, c *pgx.Conn) error {
	ts.typesMu.Lock()
	defer ts.typesMu.Unlock()
	if ts.bytea != nil {
		return nil
	}
	sd, err := c.PgConn().Prepare(ctx, "", "SELECT "+strings.Join(ts.cols, ", ")+" FROM "+ts.table, nil)
	if err != nil {
		return err
	}
	bytea := make([]bool, len(ts.cols))
	oids := make([]uint32, len(ts.cols))
	binary := true
	for i, f := range sd.Fields {
		bytea[i] = f.DataTypeOID == byteaOID
		oids[i] = f.DataTypeOID
		binary = binary && binaryOID(f.DataTypeOID)
	}
	ts.oids, ts.binary = oids, binary
	ts.bytea = bytea
	return nil
}

// copyData is the COPY data of the after-images of cs: in the binary
// format when every column of the target has an encoding there
// (copybin.go) and every value of cs has an exact one, else in the text
// format; binary says which.
func (ts *tableStmts) copyData(cs []sink.Change, tryBinary bool) (data []byte, binary bool, err error) {
	if tryBinary && ts.binary {
		if data, ok := ts.copyBinaryRows(cs); ok {
			return data, true, nil
		}
	}
	data, err = ts.copyRows(cs)
	return data, false, err
}

// copySQL is the COPY of ts's columns into table (the target's, or a
// staging table's).
func (ts *tableStmts) copySQL(table string, binary bool) string {
	if binary {
		return "COPY " + table + " (" + strings.Join(ts.cols, ", ") + ") FROM STDIN (FORMAT binary)"
	}
	return "COPY " + table + " (" + strings.Join(ts.cols, ", ") + ") FROM STDIN"
}

// stageName is the name of ts's staging table, in the session's
// temporary schema: one a target table and column list.
func stageName(ts *tableStmts) string {
	h := fnv.New64a()
	h.Write([]byte(ts.table + "\x00" + strings.Join(ts.cols, ",")))
	return fmt.Sprintf("pg_temp.braid_stage_%016x", h.Sum64())
}

// createStageSQL makes ts's staging table: the target's columns, their
// types and none of its constraints, emptied at every commit.
func (ts *tableStmts) createStageSQL() string {
	return "CREATE TEMPORARY TABLE " + strings.TrimPrefix(ts.stageTable, "pg_temp.") + " ON COMMIT DELETE ROWS AS SELECT " +
		strings.Join(ts.cols, ", ") + " FROM " + ts.table + " WITH NO DATA"
}

// mergeSQL upserts the staging table's rows into the target, answering
// how many it inserted, as the upsert statement does.
func mergeSQL(ts *tableStmts) string {
	cols := strings.Join(ts.cols, ", ")
	return "WITH r AS (INSERT INTO " + ts.table + " (" + cols + ") SELECT " + cols + " FROM " + ts.stageTable + ts.set +
		" RETURNING xmax = 0 AS inserted) SELECT count(*) FILTER (WHERE inserted) FROM r"
}

// stages are the staging tables made on one worker's connection.
type stages struct {
	conn *pgx.Conn
	made map[string]bool
}

// ensureStages makes, on worker's connection c, the staging tables of
// tss it has not made yet.
func (t *Target) ensureStages(ctx context.Context, c *pgx.Conn, worker int, tss []*tableStmts) error {
	t.mu.Lock()
	s := t.stages[worker]
	if s == nil || s.conn != c {
		s = &stages{conn: c, made: map[string]bool{}}
		t.stages[worker] = s
	}
	t.mu.Unlock()
	for _, ts := range tss {
		name := ts.stageTable
		if s.made[name] {
			continue
		}
		if _, err := c.Exec(ctx, ts.createStageSQL()); err != nil {
			return fmt.Errorf("sink %s: make the staging table of %s: %w", t.spec.Name, ts.table, err)
		}
		s.made[name] = true
	}
	return nil
}

// part is a part of a worker's transaction as sent: statements sent as
// one pgx batch (b), or one COPY (copySQL, data).
type part struct {
	b        *pgx.Batch
	ops      []op
	copySQL  string
	data     []byte
	copyOp   op
	isCopy   bool
	binary   bool        // data is in COPY's binary format
	stageFor *tableStmts // a COPY into ts's staging table
}

// txn is a worker's transaction being built: its parts in order.
type txn struct {
	parts []part
}

// queue queues a statement of o in the batch being filled.
func (x *txn) queue(o op, sql string, args ...any) {
	if n := len(x.parts); n == 0 || x.parts[n-1].isCopy {
		x.parts = append(x.parts, part{b: &pgx.Batch{}})
	}
	p := &x.parts[len(x.parts)-1]
	p.b.Queue(sql, args...)
	p.ops = append(p.ops, o)
}

// copy adds a COPY of o.
func (x *txn) copy(o op, sql string, data []byte, stageFor *tableStmts, binary bool) {
	x.parts = append(x.parts, part{isCopy: true, copySQL: sql, data: data, copyOp: o, stageFor: stageFor, binary: binary})
}

// hasCopy reports whether x holds a COPY: then it is sent as an explicit
// transaction, its parts one after another.
func (x *txn) hasCopy() bool {
	for _, p := range x.parts {
		if p.isCopy {
			return true
		}
	}
	return false
}

// stagedBefore reports whether x stages rows in ts's staging table
// already: its rows or another table version's of the same target table
// and columns (each shard table's version shares it).
func (x *txn) stagedBefore(ts *tableStmts) bool {
	for _, p := range x.parts {
		if p.stageFor != nil && p.stageFor.stageTable == ts.stageTable {
			return true
		}
	}
	return false
}

// staged are the tables x stages rows of.
func (x *txn) staged() []*tableStmts {
	var out []*tableStmts
	for _, p := range x.parts {
		if p.stageFor != nil {
			out = append(out, p.stageFor)
		}
	}
	return out
}

// explicit wraps x's parts, the transaction of cs, in BEGIN and COMMIT.
func (x *txn) explicit(cs []sink.Change) {
	if len(x.parts) == 0 || x.parts[0].isCopy {
		x.parts = append([]part{{b: &pgx.Batch{}}}, x.parts...)
	}
	first := &x.parts[0]
	begin := &pgx.Batch{}
	begin.Queue("BEGIN")
	first.b.QueuedQueries = append(begin.QueuedQueries, first.b.QueuedQueries...)
	first.ops = append([]op{{kind: 'b', changes: cs[:1]}}, first.ops...)
	x.queue(op{kind: 'b', changes: cs[:1]}, "COMMIT")
}

// results is what a transaction's statements answered: the counts, or
// the op that failed and its error.
type results struct {
	upserts, missing uint64
	failed           *op
	err              error
}

// send sends x's parts on c, one after another, reading each one's
// answers; a failure ends the transaction (ROLLBACK when it was an
// explicit one).
func (t *Target) send(ctx context.Context, c *pgx.Conn, x *txn) results {
	var r results
	for i := range x.parts {
		p := &x.parts[i]
		if p.isCopy {
			if _, err := c.PgConn().CopyFrom(ctx, bytes.NewReader(p.data), p.copySQL); err != nil {
				r.failed, r.err = &p.copyOp, err
			}
		} else {
			t.readBatch(ctx, c, p, &r)
		}
		if r.err != nil {
			break
		}
	}
	if r.err != nil && c.PgConn().TxStatus() != 'I' && !c.IsClosed() {
		if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
			c.Close(ctx) // never to be used in a transaction it left open
		}
	}
	return r
}

// readBatch sends p's batch and reads its answers into r.
func (t *Target) readBatch(ctx context.Context, c *pgx.Conn, p *part, r *results) {
	br := c.SendBatch(ctx, p.b)
	var err error
	for i := range p.ops {
		o := &p.ops[i]
		switch o.kind {
		case 'u':
			var inserted int64
			if err = br.QueryRow().Scan(&inserted); err == nil {
				if o.missingIfInserted {
					r.missing += uint64(inserted)
				} else if o.countFound {
					r.upserts += uint64(int64(len(o.changes)) - inserted)
				}
			}
		default:
			var ct pgconn.CommandTag
			if ct, err = br.Exec(); err == nil && (o.kind == 'd' || o.kind == 'k') {
				r.missing += uint64(int64(len(o.changes)) - ct.RowsAffected())
			}
		}
		if err != nil {
			r.failed = o
			break
		}
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	r.err = err
}
