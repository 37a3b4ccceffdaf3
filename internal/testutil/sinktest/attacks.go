package sinktest

// The two DDL attacks of issue 39, verbatim: a shard user's DDL that ran
// on the MySQL sink's target as CREATE TABLE … SELECT … FROM mysql.user.
// Both SQL sinks' trust tests run them.
const (
	// AttackNoBackslash is, under NO_BACKSLASH_ESCAPES, a table with two
	// string defaults; read in the default mode it is a CREATE … SELECT.
	AttackNoBackslash = `CREATE TABLE inj_0.nb (id int primary key, c varchar(100) DEFAULT 'x\', d varchar(200) DEFAULT ', d varchar(200)) SELECT ROW_NUMBER() OVER () AS id, User AS u, Password AS p, LOAD_FILE(0x2f6574632f686f73746e616d65) AS f FROM mysql.user #')`
	// AttackEnum is a table the schema model cannot parse (PERIOD FOR),
	// so its columns come from FULL row metadata, with an ENUM member
	// that ends in a backslash.
	AttackEnum = `CREATE TABLE inj_0.fm1 (id int primary key, e enum('a\\', ')) SELECT 1 AS id, NULL AS e, User AS stolen_user, Password AS stolen_pw FROM mysql.user #'), d date default '2000-01-01', d2 date default '2001-01-01', PERIOD FOR p(d, d2))`
)
