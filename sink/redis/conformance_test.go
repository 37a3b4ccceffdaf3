package redis_test

import (
	"context"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/braid-cdc/braid/internal/testutil/redistest"
	"github.com/braid-cdc/braid/sink/conformance"
	"github.com/braid-cdc/braid/spec"
)

// TestConformance runs the sinks' suite against the machine's Redis, in
// each format, each case under a key prefix of its own.
func TestConformance(t *testing.T) {
	for _, format := range []string{"json", "hash"} {
		t.Run(format, func(t *testing.T) {
			conformance.Run(t, conformance.Harness{
				New: func(t *testing.T) conformance.Target {
					c, prefix := redistest.Prefix(t)
					return &place{c: c, prefix: prefix, format: format}
				},
				Cannot: map[conformance.Case]string{
					conformance.Collision: "a key holds one row ({table}:{pk}) and the later write of it wins; origin_column is for mysql and postgres",
				},
			})
		})
	}
}

// place is a key prefix of the test's own.
type place struct {
	c      *goredis.Client
	prefix string
	format string
}

func (p *place) Sink(name string, tables []string) spec.Sink {
	return spec.Sink{Name: name, Type: "redis", Address: redistest.Addr, Key: p.prefix + "{database}:{table}:{pk}", Format: p.format}
}

// Rows reads every row key of table as a cache reader does.
func (p *place) Rows(sk spec.Sink, table string) ([]map[string]*string, error) {
	db, name, _ := strings.Cut(table, ".")
	ctx := context.Background()
	var out []map[string]*string
	iter := p.c.Scan(ctx, 0, p.prefix+db+":"+name+":*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		if strings.HasSuffix(k, ":seq") {
			continue
		}
		row, err := redistest.Row(ctx, p.c, k, p.format)
		if err != nil {
			return nil, err
		}
		if row != nil { // nil: deleted since the SCAN
			out = append(out, row)
		}
	}
	return out, iter.Err()
}
