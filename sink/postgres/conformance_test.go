package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/braid-cdc/braid/sink/conformance"
	"github.com/braid-cdc/braid/spec"
)

// TestConformance runs the sinks' suite against the machine's
// PostgreSQL, each case in a database of its own, its tables created from
// the stream's CREATE TABLE.
func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Harness{New: newPlace, AtLeastOnce: true})
}

// place is a database of the target's, for one case.
type place struct {
	db   *pgx.Conn
	name string
}

func newPlace(t *testing.T) conformance.Target {
	db, name := targetDB(t)
	return &place{db: db, name: name}
}

func (p *place) Sink(name string, tables []string) spec.Sink {
	return spec.Sink{Name: name, Type: "postgres", Address: targetAddr, Database: p.name}
}

func (p *place) HasCheckpoints(sk spec.Sink) (bool, error) {
	var n int
	err := p.db.QueryRow(context.Background(), "SELECT count(*) FROM pg_namespace WHERE nspname = $1", sk.MetaDatabase).Scan(&n)
	return n > 0, err
}

// Rows reads each row as JSON (to_jsonb), its values as PostgreSQL
// writes them there: numbers exact, timestamps in ISO 8601, jsonb
// as JSON.
func (p *place) Rows(sk spec.Sink, table string) ([]map[string]*string, error) {
	schema, name, _ := strings.Cut(table, ".")
	rows, err := p.db.Query(context.Background(), fmt.Sprintf("SELECT to_jsonb(t)::text FROM %s AS t",
		pgx.Identifier{schema, name}.Sanitize()))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []map[string]*string
	for rows.Next() {
		var text string
		if err := rows.Scan(&text); err != nil {
			return nil, err
		}
		var vals map[string]json.RawMessage
		if err := json.Unmarshal([]byte(text), &vals); err != nil {
			return nil, err
		}
		r := map[string]*string{}
		for c, v := range vals {
			var s string
			switch {
			case string(v) == "null":
				continue
			case json.Unmarshal(v, &s) == nil:
			default:
				s = string(v) // a number, or a jsonb value
			}
			r[c] = &s
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
