package mysql_test

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/braid-cdc/braid/sink/conformance"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// TestConformance runs the sinks' suite against the machine's MariaDB,
// each case in a database of its own (and its _meta for checkpoints).
// Replaying the binlog's row events, it applies a minimal image as the
// source wrote it; every change of the shop's tables, with an origin
// column too, is replayed.
func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Harness{New: newPlace, PartialApplied: true, AtLeastOnce: true,
		Check: func(t *testing.T, c conformance.Case, st stream.SinkStats) {
			if (c == conformance.Apply || c == conformance.Collision) && st.Replayed != st.Rows {
				t.Errorf("%d row changes of %d replayed as the binlog's row events, want all", st.Replayed, st.Rows)
			}
		}})
}

// place is a database of the target's, for one case.
type place struct {
	db   *sql.DB
	name string
}

func newPlace(t *testing.T) conformance.Target {
	db, name := targetDB(t)
	return &place{db: db, name: name}
}

func (p *place) Sink(name string, tables []string) spec.Sink {
	sk := spec.Sink{Name: name, Type: "mysql", Address: targetAddr, MetaDatabase: p.name + "_meta"}
	for _, tb := range tables {
		_, table, _ := strings.Cut(tb, ".")
		sk.Tables = append(sk.Tables, spec.SinkTable{From: tb, To: p.name + "." + table})
	}
	return sk
}

func (p *place) HasCheckpoints(sk spec.Sink) (bool, error) {
	var n int
	err := p.db.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?", sk.MetaDatabase).Scan(&n)
	return n > 0, err
}

func (p *place) Rows(sk spec.Sink, table string) ([]map[string]*string, error) {
	_, table, _ = strings.Cut(table, ".")
	rows, err := p.db.Query("SELECT * FROM " + p.name + "." + table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []map[string]*string
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		r := map[string]*string{}
		for i, v := range vals {
			if v.Valid {
				s := v.String
				r[cols[i]] = &s
			}
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
