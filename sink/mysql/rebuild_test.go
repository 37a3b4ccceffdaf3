package mysql_test

import (
	"strings"
	"testing"

	"github.com/braid-cdc/braid/engine/schema"
)

// TestRebuiltDDLRunsOnServer: the statements the sink rebuilds from
// common MariaDB and MySQL DDL (schema.TargetDDLs) run on the machine's
// MariaDB, and leave the table SHOW CREATE TABLE shows for the same DDL
// run as written (CHECK constraints aside, which the rebuild leaves out).
func TestRebuiltDDLRunsOnServer(t *testing.T) {
	db, name := targetDB(t)
	asIs := name + "_asis"
	t.Cleanup(func() { db.Exec("DROP DATABASE IF EXISTS " + asIs) })
	for _, q := range []string{"CREATE DATABASE " + name, "CREATE DATABASE " + asIs} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	ddl := []string{
		"CREATE TABLE t (id bigint unsigned NOT NULL AUTO_INCREMENT, code varchar(20) CHARACTER SET latin1 COLLATE latin1_swedish_ci NOT NULL DEFAULT 'a''b\\\\c', " +
			"amount decimal(10,2) DEFAULT NULL COMMENT 'it''s \\\\ money', at timestamp NOT NULL DEFAULT current_timestamp() ON UPDATE current_timestamp(), " +
			"d date DEFAULT '2000-01-01', e enum('x','y\\\\','z''') DEFAULT 'x', s set('a','b') NOT NULL DEFAULT '', j json, g decimal(12,2) GENERATED ALWAYS AS (amount * 2) VIRTUAL, " +
			"u varchar(64) AS (concat(lower(code), '-', d)) STORED, b blob, bits bit(3) DEFAULT b'101', f float DEFAULT 1.5, " +
			"PRIMARY KEY (id), UNIQUE KEY uk_code (code), KEY idx_at (at, d)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='tbl'",
		"ALTER TABLE t ADD COLUMN note varchar(30) NULL DEFAULT 'n' AFTER code, MODIFY amount decimal(12,2) NOT NULL DEFAULT 0, CHANGE d day date, ADD INDEX idx_note (note(10)), DROP KEY idx_at",
		"ALTER TABLE t RENAME COLUMN note TO remark, ALTER COLUMN f SET DEFAULT 2.5, ALGORITHM=INPLACE, LOCK=NONE",
		"CREATE UNIQUE INDEX ux ON t (remark, day)",
		"DROP INDEX ux ON t",
		"ALTER TABLE t ADD COLUMN IF NOT EXISTS v uuid, ADD COLUMN ip inet6 DEFAULT '::1', ADD COLUMN p point",
		"CREATE OR REPLACE TABLE t4 (id int primary key, w varchar(5) DEFAULT 'w') ENGINE=Aria",
		"CREATE OR REPLACE TABLE t4 (id int primary key)",
		"DROP TABLE t4",
		"CREATE TABLE t2 LIKE t",
		"RENAME TABLE t2 TO t3",
		"ALTER TABLE t3 ADD CONSTRAINT fk FOREIGN KEY (id) REFERENCES t (id) ON DELETE CASCADE",
		"DROP TABLE IF EXISTS t3",
	}
	for _, q := range ddl {
		stmts, err := schema.TargetDDLs(name, q, 0, func(s, tb string) (string, string, bool) { return name, tb, s == name })
		if err != nil || len(stmts) != 1 {
			t.Fatalf("%s: %v, %d statements", q, err, len(stmts))
		}
		if _, err := db.Exec(stmts[0].Text); err != nil {
			t.Fatalf("rebuilt %s: %v", stmts[0].Text, err)
		}
		if _, err := db.Exec("USE " + asIs); err != nil {
			t.Fatal(err)
		}
		conn, err := db.Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(t.Context(), "USE "+asIs); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("as written %s: %v", q, err)
		}
		conn.Close()
	}
	show := func(schema string) string {
		var tbl, create string
		if err := db.QueryRow("SHOW CREATE TABLE "+schema+".t").Scan(&tbl, &create); err != nil {
			t.Fatal(err)
		}
		return create
	}
	rebuilt, written := show(name), show(asIs)
	if rebuilt != written {
		t.Errorf("rebuilt DDL made\n%s\nthe DDL as written\n%s", rebuilt, written)
	}
	if !strings.Contains(rebuilt, `'a''b\\c'`) || !strings.Contains(rebuilt, `'y\\'`) {
		t.Errorf("defaults or members lost their backslashes:\n%s", rebuilt)
	}
}
