package mysqltest

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// EveryFastType is a workload on table d.t, which has a column of every type
// the raw path reads (and a JSON column, which MariaDB logs as text): rows
// at the types' limits, zero values and NULLs, random values (seed logged),
// then updates and deletes.
func EveryFastType(t testing.TB) []string {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	stmts := []string{"SET NAMES utf8mb4", "SET sql_mode=''", "CREATE DATABASE d DEFAULT CHARSET utf8mb4",
		`CREATE TABLE d.t (
			id INT PRIMARY KEY, ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
			mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED,
			d1 DECIMAL(30,10), d2 DECIMAL(5,2), d3 DECIMAL(18,0), d4 DECIMAL(10,9), d5 DECIMAL(65,30),
			f FLOAT, db DOUBLE, b1 BIT(1), b13 BIT(13), b64 BIT(64),
			dt DATE, dtm DATETIME, dtm1 DATETIME(1), dtm3 DATETIME(3), dtm6 DATETIME(6),
			ts TIMESTAMP NULL DEFAULT NULL, ts2 TIMESTAMP(2) NULL DEFAULT NULL, ts5 TIMESTAMP(5) NULL DEFAULT NULL,
			y YEAR, c CHAR(10), c300 CHAR(255), vc VARCHAR(100), vl VARCHAR(300), tx TEXT, mt MEDIUMTEXT,
			bn BINARY(4), vb VARBINARY(10), bl BLOB, lb LONGBLOB,
			e ENUM('a','b','c'), s SET('x','y','z','w'), j JSON,
			l VARCHAR(30) CHARACTER SET latin1, lt TEXT CHARACTER SET latin1,
			tm TIME, tm1 TIME(1), tm2 TIME(2), tm3 TIME(3), tm4 TIME(4), tm5 TIME(5), tm6 TIME(6))`,
		`INSERT INTO d.t VALUES (1, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295,
			9223372036854775807, 18446744073709551615, '12345678901234567890.0123456789', -999.99,
			999999999999999999, 9.999999999, '-12345678901234567890123456789012345.123456789012345678901234567891',
			3.5, 2.718281828459045, b'1', b'1010101010101', b'1111111111111111111111111111111111111111111111111111111111111111',
			'9999-12-31', '9999-12-31 23:59:59', '2026-11-29 10:11:12.1', '2026-11-29 10:11:12.345', '2026-11-29 10:11:12.123456',
			'2038-01-19 03:14:07', '1970-01-01 05:30:01.25', '2001-02-03 04:05:06.12345', 2155,
			'abc', REPEAT('z', 255), 'héllo', REPEAT('é', 300), 'text 😀', REPEAT('m', 70000),
			0x00FF1020, 0x68656c6c6f, 0xDEADBEEF, REPEAT(0x01, 70000), 'c', 'x,w', '{"a": [1, 2.5]}', 'café € ‚ƒ„ ÿ', 'naïve Œuvre',
			'838:59:59', '-838:59:59.9', '-00:00:00.01', '12:34:56.789', '-00:00:01.0001', '00:00:00.00001', '-837:01:02.999999')`,
		`INSERT INTO d.t VALUES (2, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0,
			'-0.0000000001', 0, -999999999999999999, -0.000000001, 0, -0.25, -1e-300, b'0', b'0', b'0',
			'0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00.0', '0000-00-00 00:00:00.000', '1000-01-01 00:00:00.000001',
			'0000-00-00 00:00:00', '0000-00-00 00:00:00.00', NULL, 1901,
			'', '', '', '', '', '', '', '', '', '', '', '', '[]', '', '',
			'-838:59:59', '00:00:00.0', '-00:00:00.99', '-00:00:00.001', '00:00:00', '-01:00:00.00000', '00:00:00.000000')`,
		"INSERT INTO d.t (id) VALUES (3)",
	}
	randDec := func(intDigits, scale int) string {
		var b strings.Builder
		if rng.IntN(2) == 0 {
			b.WriteByte('-')
		}
		for range 1 + rng.IntN(intDigits) {
			b.WriteByte(byte('0' + rng.IntN(10)))
		}
		if scale > 0 {
			b.WriteByte('.')
			for range scale {
				b.WriteByte(byte('0' + rng.IntN(10)))
			}
		}
		return b.String()
	}
	randTime := func(dec int) string {
		s := fmt.Sprintf("%02d:%02d:%02d", rng.IntN(839), rng.IntN(60), rng.IntN(60))
		if rng.IntN(2) == 0 {
			s = "-" + s
		}
		if dec > 0 && rng.IntN(4) > 0 {
			s += fmt.Sprintf(".%06d", rng.IntN(1000000))[:dec+1]
		}
		return s
	}
	for id := 10; id < 200; id++ {
		stmts = append(stmts, fmt.Sprintf(`INSERT INTO d.t (id, ti, iu, bi, d1, d2, d3, d4, d5, f, db, b13, dt, dtm3, dtm6, ts2, ts5, vc, e, s, l, tm, tm2, tm5, tm6)
			VALUES (%d, %d, %d, %d, '%s', '%s', '%s', '%s', '%s', %g, %g, %d,
			'%04d-%02d-%02d', '2026-%02d-%02d %02d:%02d:%02d.%03d', '1999-12-31 23:59:%02d.%06d',
			FROM_UNIXTIME(%d.%02d), FROM_UNIXTIME(%d.%05d), '%s', %d, %d, '%s', '%s', '%s', '%s', '%s')`,
			id, rng.IntN(256)-128, rng.Uint32(), rng.Int64()-rng.Int64(),
			randDec(20, 10), randDec(3, 2), randDec(18, 0), randDec(1, 9), randDec(35, 30),
			rng.Float32()*1e6, rng.NormFloat64()*1e100, rng.IntN(1<<13),
			1000+rng.IntN(9000), 1+rng.IntN(12), 1+rng.IntN(28), 1+rng.IntN(12), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60), rng.IntN(1000),
			rng.IntN(60), rng.IntN(1000000),
			1+rng.IntN(2000000000), rng.IntN(100), 1+rng.IntN(2000000000), rng.IntN(100000),
			strings.Repeat("ü", rng.IntN(100)), rng.IntN(4), rng.IntN(16), strings.Repeat("é€…", rng.IntN(10)),
			randTime(0), randTime(2), randTime(5), randTime(6)))
	}
	return append(stmts, "UPDATE d.t SET vc = CONCAT(vc, '!'), d2 = -d2, l = CONCAT(l, '€') WHERE id % 3 = 0", "DELETE FROM d.t WHERE id % 7 = 0")
}
