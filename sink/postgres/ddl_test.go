package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/braid-cdc/braid/sink/postgres"
	"github.com/braid-cdc/braid/spec"
)

// TestTranslateDDL: the common MySQL DDL, one statement after another on
// one table, translated to PostgreSQL, each translation run on the
// machine's PostgreSQL in turn (so each is valid there, and the table
// ends as the MySQL statements left it); what has no translation is an
// error that says so.
func TestTranslateDDL(t *testing.T) {
	db, name := targetDB(t)
	sk := spec.Sink{Name: "t", Type: "postgres", Database: name}
	steps := []struct{ mysql, pg string }{
		{"CREATE TABLE `ddl`.`t` (id INT NOT NULL, a VARCHAR(10), b INT UNSIGNED DEFAULT 3, PRIMARY KEY (id), UNIQUE KEY ua (a)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
			`CREATE TABLE IF NOT EXISTS "ddl"."t" ("id" integer NOT NULL, "a" varchar(10), "b" bigint, PRIMARY KEY ("id")); CREATE UNIQUE INDEX IF NOT EXISTS "t_ua" ON "ddl"."t" ("a")`},
		{"ALTER TABLE `ddl`.`t` ADD COLUMN c INT NOT NULL DEFAULT 0, ADD COLUMN d DATETIME(3) NULL AFTER a",
			`ALTER TABLE "ddl"."t" ADD COLUMN IF NOT EXISTS "c" integer NOT NULL DEFAULT 0; ALTER TABLE "ddl"."t" ADD COLUMN IF NOT EXISTS "d" timestamp(3)`},
		{"ALTER TABLE `ddl`.`t` MODIFY COLUMN a VARCHAR(40) NOT NULL DEFAULT 'it''s'",
			`ALTER TABLE "ddl"."t" ALTER COLUMN "a" TYPE varchar(40) USING "a"::varchar(40); ALTER TABLE "ddl"."t" ALTER COLUMN "a" SET NOT NULL; ALTER TABLE "ddl"."t" ALTER COLUMN "a" SET DEFAULT 'it''s'`},
		{"ALTER TABLE `ddl`.`t` CHANGE COLUMN b Bb BIGINT NULL",
			`ALTER TABLE "ddl"."t" ALTER COLUMN "b" TYPE bigint USING "b"::bigint; ALTER TABLE "ddl"."t" ALTER COLUMN "b" DROP NOT NULL; ALTER TABLE "ddl"."t" ALTER COLUMN "b" DROP DEFAULT; ALTER TABLE "ddl"."t" RENAME COLUMN "b" TO "bb"`},
		{"ALTER TABLE `ddl`.`t` RENAME COLUMN bb TO b2",
			`ALTER TABLE "ddl"."t" RENAME COLUMN "bb" TO "b2"`},
		{"ALTER TABLE `ddl`.`t` ADD INDEX by_c (c), ADD UNIQUE KEY u_d (d), ADD UNIQUE (b2)",
			`CREATE INDEX IF NOT EXISTS "t_by_c" ON "ddl"."t" ("c"); CREATE UNIQUE INDEX IF NOT EXISTS "t_u_d" ON "ddl"."t" ("d"); CREATE UNIQUE INDEX IF NOT EXISTS "t_b2" ON "ddl"."t" ("b2")`},
		{"ALTER TABLE `ddl`.`t` ALTER COLUMN c SET DEFAULT 5, ENGINE=InnoDB, ALGORITHM=INPLACE, LOCK=NONE",
			`ALTER TABLE "ddl"."t" ALTER COLUMN "c" SET DEFAULT 5`},
		{"/*!40000 ALTER TABLE `ddl`.`t` DISABLE KEYS */", ``}, // mysqldump's, around its INSERTs
		{"ALTER TABLE `ddl`.`t` ENABLE KEYS", ``},
		{"ALTER TABLE `ddl`.`t` DROP INDEX by_c, DROP COLUMN d, ADD COLUMN e DATETIME DEFAULT CURRENT_TIMESTAMP",
			`DROP INDEX IF EXISTS "ddl"."t_by_c"; ALTER TABLE "ddl"."t" DROP COLUMN IF EXISTS "d"; ALTER TABLE "ddl"."t" ADD COLUMN IF NOT EXISTS "e" timestamp(0) DEFAULT LOCALTIMESTAMP`},
		{"CREATE UNIQUE INDEX ic ON `ddl`.`t` (c, e)", `CREATE UNIQUE INDEX IF NOT EXISTS "t_ic" ON "ddl"."t" ("c", "e")`},
		{"DROP INDEX ic ON `ddl`.`t`", `DROP INDEX IF EXISTS "ddl"."t_ic"`},
		{"ALTER TABLE `ddl`.`t` RENAME INDEX ua TO ua2", `ALTER INDEX IF EXISTS "ddl"."t_ua" RENAME TO "t_ua2"`},
		{"ALTER TABLE `ddl`.`t` DROP PRIMARY KEY, ADD PRIMARY KEY (id, c)",
			`ALTER TABLE "ddl"."t" DROP CONSTRAINT IF EXISTS "t_pkey"; ALTER TABLE "ddl"."t" ADD PRIMARY KEY ("id", "c")`},
	}
	ctx := context.Background()
	if _, err := db.Exec(ctx, "CREATE SCHEMA ddl"); err != nil { // the sink's ensureSchema, before a CREATE TABLE
		t.Fatal(err)
	}
	for _, s := range steps {
		got, err := postgres.TranslateDDL(sk, s.mysql)
		if err != nil {
			t.Fatalf("%s: %v", s.mysql, err)
		}
		if strings.Join(got, "; ") != s.pg {
			t.Errorf("%s:\n got %s\nwant %s", s.mysql, strings.Join(got, "; "), s.pg)
		}
		for _, q := range got {
			if _, err := db.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	cols := query(db, "SELECT attnum, attname, format_type(atttypid, atttypmod), attnotnull, coalesce(pg_get_expr(adbin, adrelid), '-') FROM pg_attribute LEFT JOIN pg_attrdef ON adrelid = attrelid AND adnum = attnum WHERE attrelid = 'ddl.t'::regclass AND attnum > 0 AND NOT attisdropped")
	want := []string{"1 id integer true -", "2 a character varying(40) true 'it''s'::character varying", "3 b2 bigint false -",
		"4 c integer true 5", "6 e timestamp(0) without time zone false LOCALTIMESTAMP"}
	if strings.Join(cols, "\n") != strings.Join(want, "\n") {
		t.Errorf("the table ends as\n%s\nwant\n%s", strings.Join(cols, "\n"), strings.Join(want, "\n"))
	}
	keys := query(db, "SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = 'ddl.t'::regclass")
	wantKeys := []string{ // t_u_d went with column d, as in MySQL
		"CREATE UNIQUE INDEX t_b2 ON ddl.t USING btree (b2)",
		"CREATE UNIQUE INDEX t_pkey ON ddl.t USING btree (id, c)",
		"CREATE UNIQUE INDEX t_ua2 ON ddl.t USING btree (a)",
	}
	if strings.Join(keys, "\n") != strings.Join(wantKeys, "\n") {
		t.Errorf("the table's keys are\n%s\nwant\n%s", strings.Join(keys, "\n"), strings.Join(wantKeys, "\n"))
	}
	if got, _ := postgres.TranslateDDL(sk, "DROP TABLE `ddl`.`t`, `ddl`.`u`"); strings.Join(got, "; ") != `DROP TABLE IF EXISTS "ddl"."t"; DROP TABLE IF EXISTS "ddl"."u"` {
		t.Errorf("DROP TABLE: %q", got)
	}

	// With an origin column, every unique key and the primary key start
	// with it.
	origin := spec.Sink{Name: "t", Type: "postgres", OriginColumn: "_Shard"}
	for _, s := range []struct{ mysql, pg string }{
		{"CREATE TABLE `o`.`t` (id INT PRIMARY KEY, a INT, UNIQUE KEY ua (a))",
			`CREATE TABLE IF NOT EXISTS "o"."t" ("_shard" text NOT NULL, "id" integer NOT NULL, "a" integer, PRIMARY KEY ("_shard", "id")); CREATE UNIQUE INDEX IF NOT EXISTS "t_ua" ON "o"."t" ("_shard", "a")`},
		{"ALTER TABLE `o`.`t` ADD UNIQUE KEY ub (a, id), ADD KEY k (a)",
			`CREATE UNIQUE INDEX IF NOT EXISTS "t_ub" ON "o"."t" ("_shard", "a", "id"); CREATE INDEX IF NOT EXISTS "t_k" ON "o"."t" ("a")`},
	} {
		got, err := postgres.TranslateDDL(origin, s.mysql)
		if err != nil || strings.Join(got, "; ") != s.pg {
			t.Errorf("%s:\n got %s (%v)\nwant %s", s.mysql, strings.Join(got, "; "), err, s.pg)
		}
	}

	for _, bad := range []string{
		"RENAME TABLE `ddl`.`t` TO `ddl`.`u`",
		"ALTER TABLE `ddl`.`t` RENAME TO `ddl`.`u`",
		"ALTER TABLE `ddl`.`t` ADD CONSTRAINT fk FOREIGN KEY (c) REFERENCES `ddl`.`p` (id)",
		"ALTER TABLE `ddl`.`t` ADD COLUMN f INT DEFAULT (c + 1)",
		"ALTER TABLE `ddl`.`t` ADD FULLTEXT INDEX ft (a)",
		"CREATE TABLE `ddl`.`v` LIKE `ddl`.`t`",
	} {
		if _, err := postgres.TranslateDDL(sk, bad); err == nil {
			t.Errorf("%s: translated, want an error", bad)
		} else if !errors.Is(err, postgres.ErrUnsupported) && !strings.Contains(err.Error(), "line 1") {
			t.Errorf("%s: %v, want ErrUnsupported or the parser's error", bad, err)
		}
	}
}
