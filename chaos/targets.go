package chaos

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"
)

// The final comparison reads each row as "id v amount note", from the
// sources and from each target directly (not through the proxies).

// queryRows reads rows of (id, v, amount, note) from a MySQL server.
func queryRows(ctx context.Context, addr string, tables ...string) ([]TargetRow, error) {
	db, err := sql.Open("mysql", dsn(addr))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var out []TargetRow
	for _, t := range tables {
		rows, err := db.QueryContext(ctx, "SELECT id, v, amount, note FROM "+t)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t, err)
		}
		for rows.Next() {
			var id, v int64
			var amount, note string
			if err := rows.Scan(&id, &v, &amount, &note); err != nil {
				rows.Close()
				return nil, err
			}
			out = append(out, TargetRow{ID: id, Line: line(id, v, amount, note)})
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func line(id, v int64, amount, note string) string {
	return fmt.Sprintf("%d %d %s %s", id, v, amount, note)
}

// sourceRows is every shard table's rows.
func (d *deployment) sourceRows(ctx context.Context) ([]TargetRow, error) {
	var out []TargetRow
	for i := range d.sources {
		rows, err := queryRows(ctx, d.vips[i].Addr(), schemaOf(2*i)+".orders", schemaOf(2*i+1)+".orders")
		if err != nil {
			return nil, fmt.Errorf("source %s: %w", sourceNames[i], err)
		}
		out = append(out, rows...)
	}
	return out, nil
}

func (d *deployment) mysqlRows(ctx context.Context) ([]TargetRow, error) {
	return queryRows(ctx, mariadbTarget, d.tag+".orders")
}

func (d *deployment) postgresRows(ctx context.Context) ([]TargetRow, error) {
	c, err := pgx.Connect(ctx, "postgres://postgres@"+postgresTarget+"/"+d.tag)
	if err != nil {
		return nil, err
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, "SELECT id, v, amount::text, note FROM public.orders")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []TargetRow
	for rows.Next() {
		var id, v int64
		var amount, note string
		if err := rows.Scan(&id, &v, &amount, &note); err != nil {
			return nil, err
		}
		out = append(out, TargetRow{ID: id, Line: line(id, v, amount, note)})
	}
	return out, rows.Err()
}

// redisRows reads every row the redis sink keeps under the run's prefix
// (its versions, KEY:seq, and its own keys left out).
func (d *deployment) redisRows(ctx context.Context) ([]TargetRow, error) {
	c := goredis.NewClient(&goredis.Options{Addr: redisTarget})
	defer c.Close()
	var out []TargetRow
	iter := c.Scan(ctx, 0, d.tag+":*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		if strings.HasSuffix(k, ":seq") || strings.Contains(k, "braid:sink:") {
			continue
		}
		s, err := c.Get(ctx, k).Result()
		if err == goredis.Nil {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		var row map[string]*string
		if err := json.Unmarshal([]byte(s), &row); err != nil {
			continue // a tombstone or a value of another shape: not a row
		}
		id, err1 := strconv.ParseInt(deref(row["id"]), 10, 64)
		v, err2 := strconv.ParseInt(deref(row["v"]), 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s holds %s: no id and v", k, s)
		}
		out = append(out, TargetRow{ID: id, Line: line(id, v, deref(row["amount"]), deref(row["note"]))})
	}
	return out, iter.Err()
}
