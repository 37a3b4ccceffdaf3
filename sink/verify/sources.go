package verify

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/mysqlauth"
	"github.com/braid-cdc/braid/internal/sqlutf8"
	"github.com/braid-cdc/braid/sink"
	"github.com/braid-cdc/braid/sink/mysql"
	"github.com/braid-cdc/braid/spec"
)

// Shard is one shard table at one source.
type Shard struct {
	// Source is the source's index in the spec, SourceName its name.
	Source     int
	SourceName string
	Schema     string
	Table      string
}

// String is the shard table as the sink names it: "source/schema.table"
// (a collision error's, and the origin column's, form).
func (s Shard) String() string { return s.SourceName + "/" + s.Schema + "." + s.Table }

// Sources reads a destination's sources for verify: which shard tables
// each logical table has, and their rows. Not safe for concurrent use.
type Sources struct {
	ds     *spec.Spec
	dbs    []*sql.DB // by source index; nil until used
	filter *spec.TableFilter
	router *group.Router
	info   map[Shard]*mysql.TableInfo
}

// OpenSources returns the sources of ds (its passwords as the sink's
// node has them); it connects to each when first asked. Close it.
func OpenSources(ds *spec.Spec) (*Sources, error) {
	filter, err := spec.CompileTableFilter(ds.Tables)
	if err != nil {
		return nil, err
	}
	router, err := group.NewRouter(ds.Route)
	if err != nil {
		return nil, err
	}
	return &Sources{ds: ds, dbs: make([]*sql.DB, len(ds.Sources)), filter: filter, router: router, info: map[Shard]*mysql.TableInfo{}}, nil
}

// Close closes the connections to the sources.
func (s *Sources) Close() {
	for _, db := range s.dbs {
		if db != nil {
			db.Close()
		}
	}
}

// db is the connection pool of source i.
func (s *Sources) db(i int) (*sql.DB, error) {
	if s.dbs[i] != nil {
		return s.dbs[i], nil
	}
	src := s.ds.Sources[i]
	pw, err := src.ResolvePassword()
	if err != nil {
		return nil, err
	}
	cfg := driver.NewConfig()
	// A source of several servers (address: [a, b]) is compared on the
	// first listed: its primary, by the usual order.
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr = src.User, pw, "tcp", src.Addresses()[0]
	if cfg.User == "" {
		cfg.User = spec.DefaultUser
	}
	cfg.InterpolateParams = true // the text protocol: each value as the server prints it
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = 10*time.Second, time.Minute, time.Minute
	if err := sqlutf8.MySQLDriver(cfg); err != nil {
		return nil, fmt.Errorf("source %s: %w", src.Name, err)
	}
	if src.TLS != nil {
		if cfg.TLS, err = src.TLS.Config(cfg.Addr); err != nil {
			return nil, fmt.Errorf("source %s: %w", src.Name, err)
		}
	}
	// No TLS: the server must not have the password in clear. (A refusal
	// fails the comparison's first query; its error is the driver's.)
	if cfg.TLS == nil {
		cfg.DialFunc = (&mysqlauth.Watch{}).Dial(nil)
	}
	connector, err := driver.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", src.Name, err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(2)
	s.dbs[i] = db
	return db, nil
}

// Shards lists the shard tables of each logical table ("schema.table"),
// as the spec's table filter and route rules make them, from each
// source's information_schema.
func (s *Sources) Shards(ctx context.Context) (map[string][]Shard, error) {
	out := map[string][]Shard{}
	for i, src := range s.ds.Sources {
		db, err := s.db(i)
		if err != nil {
			return nil, err
		}
		rows, err := db.QueryContext(ctx, "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_SCHEMA, TABLE_NAME")
		if err != nil {
			return nil, fmt.Errorf("source %s (%s): list its tables: %w", src.Name, src.Address, err)
		}
		for rows.Next() {
			var schema, table string
			if err := rows.Scan(&schema, &table); err != nil {
				rows.Close()
				return nil, err
			}
			if !s.filter.Match(schema, table) {
				continue
			}
			ls, lt := s.router.Rename(schema, table)
			out[ls+"."+lt] = append(out[ls+"."+lt], Shard{Source: i, SourceName: src.Name, Schema: schema, Table: table})
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("source %s (%s): list its tables: %w", src.Name, src.Address, err)
		}
	}
	return out, nil
}

// Describe returns a shard table's columns and key (read once).
func (s *Sources) Describe(ctx context.Context, sh Shard) (*mysql.TableInfo, error) {
	if info, ok := s.info[sh]; ok {
		return info, nil
	}
	db, err := s.db(sh.Source)
	if err != nil {
		return nil, err
	}
	info, err := mysql.Describe(ctx, db, sh.Schema, sh.Table)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", sh.SourceName, err)
	}
	s.info[sh] = info
	return info, nil
}

// Sample returns up to n rows of a shard table drawn at random
// (mysql.SampleRows).
func (s *Sources) Sample(ctx context.Context, sh Shard, n int, rng *rand.Rand) ([]map[string]*string, error) {
	info, err := s.Describe(ctx, sh)
	if err != nil {
		return nil, err
	}
	db, err := s.db(sh.Source)
	if err != nil {
		return nil, err
	}
	rows, err := mysql.SampleRows(ctx, db, info, n, rng)
	if err != nil {
		return nil, fmt.Errorf("source %s: sample %s.%s: %w", sh.SourceName, sh.Schema, sh.Table, err)
	}
	return rows, nil
}

// Lookup returns the row of a shard table whose columns cols hold vals
// (nil is NULL).
func (s *Sources) Lookup(ctx context.Context, sh Shard, cols []string, vals []any) (map[string]*string, bool, error) {
	db, err := s.db(sh.Source)
	if err != nil {
		return nil, false, err
	}
	row, found, err := mysql.LookupRow(ctx, db, sh.Schema, sh.Table, cols, vals)
	if err != nil {
		return nil, false, fmt.Errorf("source %s: look a key up in %s.%s: %w", sh.SourceName, sh.Schema, sh.Table, err)
	}
	return row, found, nil
}

// holdersTimeout bounds Holders.
const holdersTimeout = 30 * time.Second

// Holders returns the shard tables ("source/schema.table") of the
// collision's logical table that hold its key at the sources of ds: the
// sink.Runner's Holders, so that a collision error names both writers.
// A source that cannot be read is an error, with the holders found at the
// others.
func Holders(ctx context.Context, ds *spec.Spec, e *sink.CollisionError) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, holdersTimeout)
	defer cancel()
	srcs, err := OpenSources(ds)
	if err != nil {
		return nil, err
	}
	defer srcs.Close()
	shards, err := srcs.Shards(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	var errs []error
	for _, sh := range shards[e.Logical] {
		_, found, err := srcs.Lookup(ctx, sh, e.Columns, e.Values)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if found {
			out = append(out, sh.String())
		}
	}
	slices.Sort(out)
	return out, errors.Join(errs...)
}
