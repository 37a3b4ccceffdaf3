package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// What braid sink verify reads of a Redis target (package sink/verify's
// Target): a row is its key's value, the JSON object's strings or the
// hash's fields. A hash has no field for a NULL column, and a row written
// before an ADD COLUMN has none for the new one: the columns of the table
// version the sink last applied a row of are filled in as NULL. The sink
// saves them in the target too (columnsKey, once per table version and
// process), so that a sink that has applied nothing since it started
// knows them.

// Lookup returns the row of logical's key (keyCols hold key, as the
// source's text; origin is ignored: a redis sink has no origin column);
// found is false when the key has no value.
func (t *Target) Lookup(ctx context.Context, logical string, keyCols []string, key []*string, origin string) (map[string]*string, bool, error) {
	db, name, _ := strings.Cut(logical, ".")
	pk := make([]string, len(keyCols))
	order := t.keyOrder(t.columns(ctx, logical), keyCols)
	for i, j := range order {
		if key[j] != nil {
			pk[i] = *key[j]
		}
	}
	k := KeyFor(t.spec.Key, db, name, pk)
	row, err := t.read(ctx, logical, k)
	return row, row != nil, err
}

// keyOrder is the order of keyCols (the source's, as its primary key
// lists them) in which {pk} joins them: the table's column order, as the
// sink knows it from the rows it applied; keyCols' own otherwise.
func (t *Target) keyOrder(names, keyCols []string) []int {
	order := make([]int, len(keyCols))
	for i := range order {
		order[i] = i
	}
	pos := func(c string) int {
		for i, n := range names {
			if strings.EqualFold(n, c) {
				return i
			}
		}
		return len(names)
	}
	for i := 1; i < len(order); i++ { // few columns: insertion sort
		for j := i; j > 0 && pos(keyCols[order[j]]) < pos(keyCols[order[j-1]]); j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	return order
}

// read returns key's row, nil when it has no value.
func (t *Target) read(ctx context.Context, logical, key string) (map[string]*string, error) {
	if !t.hash {
		s, err := t.c.Get(ctx, key).Result()
		if errors.Is(err, goredis.Nil) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("GET %s: %w", key, err)
		}
		row, err := parseJSONRow(key, s)
		return t.fill(ctx, logical, row), err
	}
	h, err := t.c.HGetAll(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("HGETALL %s: %w", key, err)
	}
	return t.fill(ctx, logical, hashRow(h)), nil
}

// parseJSONRow is a JSON value's row; a value that is not a string is
// its JSON text (the sink writes none).
func parseJSONRow(key, s string) (map[string]*string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("the value of %s is not a JSON object: %w", key, err)
	}
	row := make(map[string]*string, len(m))
	for c, raw := range m {
		var v *string
		if err := json.Unmarshal(raw, &v); err != nil {
			text := string(raw)
			v = &text
		}
		row[c] = v
	}
	return row, nil
}

// columns are logical's columns: those of the table version the sink
// last applied a row of, or else those a sink saved in the target
// (columnsKey); nil when neither is known.
func (t *Target) columns(ctx context.Context, logical string) []string {
	if v, ok := t.logical.Load(logical); ok {
		return v.(*tableInfo).names
	}
	s, err := t.c.Get(ctx, t.columnsKey(logical)).Result()
	if err != nil {
		return nil
	}
	var names []string
	if json.Unmarshal([]byte(s), &names) != nil {
		return nil
	}
	v, _ := t.logical.LoadOrStore(logical, &tableInfo{names: names})
	return v.(*tableInfo).names
}

// columnsKey is where the sink keeps the column names of logical's
// latest table version it applied, a JSON array: under
// {prefix}braid:sink:{sink}:, which Sample leaves out.
func (t *Target) columnsKey(logical string) string {
	return t.prefix + "braid:sink:" + t.id + ":columns:" + logical
}

// hashRow is a hash's row (nil when it is empty).
func hashRow(h map[string]string) map[string]*string {
	if len(h) == 0 {
		return nil
	}
	row := make(map[string]*string, len(h))
	for c, v := range h {
		row[c] = &v
	}
	return row
}

// fill adds to row the columns of logical's table (as the sink last
// applied a row of it) that row lacks, as NULL: a hash's NULL columns,
// and the columns added since the row was written.
func (t *Target) fill(ctx context.Context, logical string, row map[string]*string) map[string]*string {
	if row == nil {
		return nil
	}
	for _, c := range t.columns(ctx, logical) {
		if _, ok := row[c]; !ok {
			row[c] = nil
		}
	}
	return row
}

// Sample returns up to n rows of logical table's keys: SCAN for the
// key template's patterns gathers up to 3n keys (the version keys left
// out), of which n are drawn at random. SCAN's order is that of Redis's
// hash table, which has nothing to do with the keys' values, but a big
// cache's sample comes from the part of it SCAN visits first. The
// sink's checkpoint keys are left out too.
func (t *Target) Sample(ctx context.Context, logical string, n int) ([]map[string]*string, error) {
	if n <= 0 {
		return nil, nil
	}
	db, name, _ := strings.Cut(logical, ".")
	ckpt := t.prefix + ownPrefix
	var keys []string
	for _, pattern := range t.key.patterns(db, name) {
		var cursor uint64
		for {
			var page []string
			var err error
			page, cursor, err = t.c.Scan(ctx, cursor, pattern, 1000).Result()
			if err != nil {
				return nil, fmt.Errorf("SCAN %s: %w", pattern, err)
			}
			for _, k := range page {
				if !strings.HasSuffix(k, versionSuffix) && !strings.HasPrefix(k, ckpt) {
					keys = append(keys, k)
				}
			}
			if cursor == 0 || len(keys) >= 3*n {
				break
			}
		}
	}
	rand.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	keys = keys[:min(n, len(keys))]
	var out []map[string]*string
	for _, k := range keys {
		row, err := t.read(ctx, logical, k)
		if err != nil {
			return nil, err
		}
		if row != nil {
			out = append(out, row)
		}
	}
	return out, nil
}
