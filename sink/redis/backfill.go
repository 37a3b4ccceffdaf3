package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	goredis "github.com/redis/go-redis/v9"
)

var backfill = goredis.NewScript(BackfillScript)

// Backfill writes row (column → text, nil for NULL, as the sink writes
// them) to key in format json or hash, when a cache reader missed key and
// read the row from the database: only if key has no value and no
// tombstone (BackfillScript). written is false when the sink has a value
// there or deleted the row, newer than anything the reader may have read:
// the reader should read the cache again, or use what it read just once.
//
// It is seed 003's SETNX made safe: SETNX alone lets a row read before an
// UPDATE or a DELETE (and written after the sink applied it) win over the
// newer value, or bring back a deleted row.
func Backfill(ctx context.Context, c goredis.UniversalClient, key string, format string, row map[string]*string) (written bool, err error) {
	args := []any{format}
	switch format {
	case "json":
		b, err := json.Marshal(row)
		if err != nil {
			return false, err
		}
		args = append(args, string(b))
	case "hash":
		cols := make([]string, 0, len(row))
		for c, v := range row {
			if v != nil {
				cols = append(cols, c)
			}
		}
		slices.Sort(cols)
		for _, c := range cols {
			args = append(args, c, *row[c])
		}
	default:
		return false, fmt.Errorf("redis backfill: format %q: want json or hash", format)
	}
	n, err := backfill.Run(ctx, c, []string{key, VersionKey(key)}, args...).Int()
	if err != nil {
		return false, fmt.Errorf("redis backfill of %s: %w", key, err)
	}
	return n == 1, nil
}
