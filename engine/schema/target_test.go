package schema_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/braid-cdc/braid/engine/schema"
)

// injRename maps inj_0's tables to tgt's and refuses every other table.
func injRename(s, t string) (string, string, bool) { return "tgt", t, s == "inj_0" }

const attackNoBackslash = `CREATE TABLE inj_0.nb (id int primary key, c varchar(100) DEFAULT 'x\', d varchar(200) DEFAULT ', d varchar(200)) SELECT ROW_NUMBER() OVER () AS id, User AS u, Password AS p, LOAD_FILE(0x2f6574632f686f73746e616d65) AS f FROM mysql.user #')`

// TestTargetDDLsUnderMode: the same text is two statements under two
// sql_modes. Under NO_BACKSLASH_ESCAPES (the mode it ran in) it is a
// CREATE TABLE with two string defaults, rebuilt with the backslash
// escaped so that the default mode reads the same; read in the default
// mode it is a CREATE … SELECT, refused. Under ANSI_QUOTES "c" is a name.
func TestTargetDDLsUnderMode(t *testing.T) {
	out, err := schema.TargetDDLs("inj_0", attackNoBackslash, schema.ModeNoBackslashEscapes, injRename)
	if err != nil || len(out) != 1 {
		t.Fatalf("under NO_BACKSLASH_ESCAPES: %v, %d statements", err, len(out))
	}
	want := "CREATE TABLE `tgt`.`nb` (`id` INT PRIMARY KEY,`c` VARCHAR(100) DEFAULT 'x\\\\',`d` VARCHAR(200) DEFAULT ', d varchar(200)) SELECT ROW_NUMBER() OVER () AS id, User AS u, Password AS p, LOAD_FILE(0x2f6574632f686f73746e616d65) AS f FROM mysql.user #')"
	if out[0].Text != want {
		t.Errorf("rebuilt\n%s\nwant\n%s", out[0].Text, want)
	}
	// The rebuilt text, read in the default mode, has the source's defaults.
	n, _, err := parser.New().Parse(out[0].Text, "", "")
	if err != nil {
		t.Fatal(err)
	}
	var defaults []string
	for _, c := range n[0].(*ast.CreateTableStmt).Cols {
		for _, o := range c.Options {
			if o.Tp == ast.ColumnOptionDefaultValue {
				defaults = append(defaults, o.Expr.(ast.ValueExpr).GetValue().(string))
			}
		}
	}
	if len(defaults) != 2 || defaults[0] != `x\` || !strings.HasPrefix(defaults[1], ", d varchar(200)) SELECT") {
		t.Errorf("the rebuilt statement's defaults read %q in the default mode", defaults)
	}
	if _, err := schema.TargetDDLs("inj_0", attackNoBackslash, 0, injRename); !errors.Is(err, schema.ErrUnsafeDDL) {
		t.Errorf("in the default mode: %v, want ErrUnsafeDDL", err)
	}
	out, err = schema.TargetDDLs("inj_0", `CREATE TABLE inj_0.q (id int primary key, "c" int default 1)`, schema.ModeANSIQuotes, injRename)
	if err != nil || len(out) != 1 || out[0].Text != "CREATE TABLE `tgt`.`q` (`id` INT PRIMARY KEY,`c` INT DEFAULT 1)" {
		t.Errorf("under ANSI_QUOTES: %v %+v", err, out)
	}
}

// TestTargetDDLsRefuses: what a target must not run for a shard's
// writer, each refused with a reason that names it.
func TestTargetDDLsRefuses(t *testing.T) {
	for _, c := range []struct{ sql, why string }{
		{"CREATE TABLE inj_0.a (id int) SELECT 1 AS id", "query"},
		{"CREATE TABLE inj_0.a (id int) AS SELECT User FROM mysql.user", "mysql.user"},
		{"CREATE TABLE inj_0.a LIKE mysql.user", "mysql.user"},
		{"DROP TABLE inj_0.a, mysql.user", "mysql.user"},
		{"RENAME TABLE inj_0.a TO other.a", "other.a"},
		{"ALTER TABLE inj_0.a RENAME TO other.a", "other.a"},
		{"ALTER TABLE inj_0.a ADD COLUMN b int DEFAULT (load_file('/etc/passwd'))", "load_file"},
		{"ALTER TABLE inj_0.a ADD COLUMN b int AS (sleep(10))", "sleep"},
		{"ALTER TABLE inj_0.a ADD COLUMN b varchar(100) AS (concat(@@hostname, 'x'))", "variable"},
		{"ALTER TABLE inj_0.a ADD COLUMN b int AS ((SELECT 1))", "query"},
		{"ALTER TABLE inj_0.a ADD CONSTRAINT c CHECK (b IN (SELECT id FROM inj_0.a))", "query"},
		{"ALTER TABLE inj_0.a ADD COLUMN b int AS (my_udf(1))", "my_udf"},
		{"ALTER TABLE inj_0.a ADD COLUMN b int, ADD FOREIGN KEY (b) REFERENCES other.t (id)", "other.t"},
		{"ALTER TABLE inj_0.a DISCARD TABLESPACE", "ALTER TABLE of a kind"},
		{"ALTER TABLE inj_0.a IMPORT TABLESPACE", "ALTER TABLE of a kind"},
		{"DROP DATABASE inj_0", "DROP DATABASE"},
	} {
		_, err := schema.TargetDDLs("inj_0", c.sql, 0, injRename)
		if !errors.Is(err, schema.ErrUnsafeDDL) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: %v, want ErrUnsafeDDL saying %q", c.sql, err, c.why)
		}
	}
}

// TestTargetDDLsRebuilds: what a target runs, restored with its names.
func TestTargetDDLsRebuilds(t *testing.T) {
	for _, c := range []struct{ sql, want string }{
		{"CREATE TABLE a (id int primary key, ts timestamp default current_timestamp on update current_timestamp, x int as (id*2) stored, s varchar(10) default 'a''b\\\\c' comment 'it''s') engine=innodb",
			"CREATE TABLE `tgt`.`a` (`id` INT PRIMARY KEY,`ts` TIMESTAMP DEFAULT CURRENT_TIMESTAMP() ON UPDATE CURRENT_TIMESTAMP(),`x` INT GENERATED ALWAYS AS(`id`*2) STORED,`s` VARCHAR(10) DEFAULT 'a''b\\\\c' COMMENT 'it''s') ENGINE = innodb"},
		// Storage that reads files or other servers is left out.
		{"CREATE TABLE inj_0.a (id int primary key) engine=connect data directory='/tmp' connection='mysql://x' charset=latin1",
			"CREATE TABLE `tgt`.`a` (`id` INT PRIMARY KEY) DEFAULT CHARACTER SET = LATIN1"},
		{"CREATE OR REPLACE TABLE inj_0.a (id int primary key, p point, u uuid)",
			"CREATE OR REPLACE TABLE `tgt`.`a` (`id` INT PRIMARY KEY,`p` POINT,`u` UUID)"},
		{"CREATE TABLE inj_0.a (id int primary key, e enum('x\\\\', 'y''z'))",
			"CREATE TABLE `tgt`.`a` (`id` INT PRIMARY KEY,`e` ENUM('x\\\\','y''z'))"},
		{"ALTER TABLE a ADD COLUMN n varchar(5) DEFAULT 'q', DROP COLUMN m, RENAME TO inj_0.b",
			"ALTER TABLE `tgt`.`a` ADD COLUMN `n` VARCHAR(5) DEFAULT 'q', DROP COLUMN `m`, RENAME AS `tgt`.`b`"},
		{"DROP TABLE IF EXISTS inj_0.a, b", "DROP TABLE IF EXISTS `tgt`.`a`, `tgt`.`b`"},
	} {
		out, err := schema.TargetDDLs("inj_0", c.sql, 0, injRename)
		if err != nil || len(out) != 1 {
			t.Errorf("%s: %v, %d statements", c.sql, err, len(out))
			continue
		}
		if out[0].Text != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.sql, out[0].Text, c.want)
		}
	}
}

// TestTargetDDLsLeaveChecksOut: CHECK constraints are left out (the
// source checked the rows; MariaDB rejects the parser's ENFORCED), and an
// ALTER that only changes them leaves nothing to run.
func TestTargetDDLsLeaveChecksOut(t *testing.T) {
	out, err := schema.TargetDDLs("inj_0", "CREATE TABLE a (id int primary key CHECK (id > 0), b int, CONSTRAINT c CHECK (b < 5))", 0, injRename)
	if err != nil || len(out) != 1 || out[0].Text != "CREATE TABLE `tgt`.`a` (`id` INT PRIMARY KEY,`b` INT)" {
		t.Errorf("CREATE with CHECKs: %v %+v", err, out)
	}
	out, err = schema.TargetDDLs("inj_0", "ALTER TABLE a ADD CONSTRAINT c CHECK (b > 0)", 0, injRename)
	if err != nil || len(out) != 0 {
		t.Errorf("ALTER of a CHECK: %v %+v, want nothing to run", err, out)
	}
}

// TestTargetDDLsInvisibleColumns: a column MySQL 8 or MariaDB declares
// INVISIBLE (MySQL 8's SHOW CREATE TABLE writes /*!80023 INVISIBLE */)
// keeps the attribute in Text, and VisibleText (for PostgreSQL, whose
// parser lacks it) and Node have no trace of it; a column's own COMMENT
// stays. ALTER COLUMN c SET [IN]VISIBLE, which MariaDB has no statement
// for and which changes no row, is left out. Before, the attribute was
// dropped (the column became visible on the target) and SET VISIBLE
// became DROP DEFAULT, dropping the target column's default.
func TestTargetDDLsInvisibleColumns(t *testing.T) {
	for _, tc := range []struct{ sql, text, visible, invisible string }{
		{"CREATE TABLE inj_0.t (`id` int NOT NULL,\n  `s` int DEFAULT '7' /*!80023 INVISIBLE */ COMMENT 'hush',\n  PRIMARY KEY (`id`))",
			"CREATE TABLE `tgt`.`t` (`id` INT NOT NULL,`s` INT DEFAULT '7' INVISIBLE COMMENT 'hush',PRIMARY KEY(`id`))",
			"CREATE TABLE `tgt`.`t` (`id` INT NOT NULL,`s` INT DEFAULT '7' COMMENT 'hush',PRIMARY KEY(`id`))", "s"},
		{"ALTER TABLE inj_0.t ADD COLUMN x int INVISIBLE, ALTER COLUMN s SET VISIBLE, MODIFY y int invisible",
			"ALTER TABLE `tgt`.`t` ADD COLUMN `x` INT INVISIBLE, MODIFY COLUMN `y` INT INVISIBLE",
			"ALTER TABLE `tgt`.`t` ADD COLUMN `x` INT, MODIFY COLUMN `y` INT", "x y"},
	} {
		out, err := schema.TargetDDLs("inj_0", tc.sql, 0, injRename)
		if err != nil || len(out) != 1 {
			t.Fatalf("%s: %v, %d statements", tc.sql, err, len(out))
		}
		if d := out[0]; d.Text != tc.text || d.VisibleText != tc.visible || strings.Join(d.Invisible, " ") != tc.invisible {
			t.Errorf("%s:\ntext    %s\nvisible %s\ninvisible %q\nwant\ntext    %s\nvisible %s\ninvisible %q", tc.sql, d.Text, d.VisibleText, d.Invisible, tc.text, tc.visible, tc.invisible)
		}
		if _, _, err := parser.New().Parse(out[0].VisibleText, "", ""); err != nil {
			t.Errorf("VisibleText does not parse: %v", err)
		}
	}
	out, err := schema.TargetDDLs("inj_0", "ALTER TABLE inj_0.t ALTER COLUMN s SET INVISIBLE", 0, injRename)
	if err != nil || len(out) != 0 {
		t.Errorf("ALTER COLUMN SET INVISIBLE: %v, %d statements, want none", err, len(out))
	}
}
