package binlog_test

import (
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/spec"
)

// TestConvertedCharsets reads text columns of charsets other than latin1
// and utf8 (Chinese, Japanese, Korean, Cyrillic, Polish, UTF-16; MariaDB
// has no gb18030) and requires
// UTF-8 text in the Values, the flat messages and the canal text, whichever
// way braid learnt the charset: a column's CHARACTER SET, a table's
// DEFAULT CHARSET, a database's default (CREATE DATABASE in the binlog, or
// reported at the start), SHOW CREATE TABLE of a table created before the
// start, or the table map (binlog_row_metadata=FULL).
func TestConvertedCharsets(t *testing.T) {
	texts := map[string]string{
		"g": "简体中文 GBK", "b": "繁體中文", "s": "日本語のテキスト", "k": "한국어 텍스트",
		"r": "Привет, мир", "w": "utf-16 😀 ok", "e": "Zażółć gęślą jaźń",
	}
	eachRowMetadata(t, func(t *testing.T, srv *mysqltest.Server) {
		srv.Exec(t, "SET NAMES utf8mb4", "CREATE DATABASE cn CHARACTER SET gbk",
			"CREATE TABLE cn.before (id INT PRIMARY KEY, n VARCHAR(40), r VARCHAR(40) CHARACTER SET cp1251)")
		file, pos := srv.MasterStatus(t)
		srv.Exec(t, "SET NAMES utf8mb4",
			`CREATE TABLE cn.t (id INT PRIMARY KEY, g VARCHAR(40), b VARCHAR(40) CHARACTER SET big5,
				s VARCHAR(40) CHARACTER SET sjis, k TEXT CHARACTER SET euckr, r CHAR(20) CHARACTER SET cp1251,
				w VARCHAR(40) CHARACTER SET utf16, e VARCHAR(40) CHARACTER SET latin2, u VARCHAR(40) CHARACTER SET utf8mb4)`,
			"INSERT INTO cn.t VALUES (1, '"+texts["g"]+"', '"+texts["b"]+"', '"+texts["s"]+"', '"+texts["k"]+"', '"+texts["r"]+"', '"+texts["w"]+"', '"+texts["e"]+"', 'ünïcode')",
			"UPDATE cn.t SET g = '更新', w = '更新 😀' WHERE id = 1",
			"INSERT INTO cn.before VALUES (1, '"+texts["g"]+"', '"+texts["r"]+"')",
			"CREATE DATABASE ru CHARACTER SET koi8r",
			"CREATE TABLE ru.t (id INT PRIMARY KEY, n TEXT)",
			"INSERT INTO ru.t VALUES (1, '"+texts["r"]+"')",
			"CREATE TABLE cn.sj (id INT PRIMARY KEY, n VARCHAR(40)) DEFAULT CHARSET=ujis",
			"INSERT INTO cn.sj VALUES (1, '"+texts["s"]+"')")
		r := startReader(t, binlog.Config{Source: source(srv, spec.Start{Kind: spec.StartPosition, Pos: change.Position{File: file, Pos: pos}})}, nil)
		evs := r.waitFor(30*time.Second, "5 transactions with rows", func(evs []*change.Event) bool {
			return countType(evs, change.EventCommit) >= 5
		})
		rc := rows(evs)
		want := map[string]change.Value{"id": int64(1), "u": "ünïcode"}
		for col, text := range texts {
			want[col] = text
		}
		checkRow(t, "insert", rc[0], change.Insert, nil, want)
		after := clone(want)
		after["g"], after["w"] = "更新", "更新 😀"
		checkRow(t, "update", rc[1], change.Update, want, after)
		checkRow(t, "table created before the start, in a gbk database", rc[2], change.Insert, nil,
			map[string]change.Value{"id": int64(1), "n": texts["g"], "r": texts["r"]})
		checkRow(t, "table of a koi8r database created after the start", rc[3], change.Insert, nil,
			map[string]change.Value{"id": int64(1), "n": texts["r"]})
		checkRow(t, "table whose default charset is ujis", rc[4], change.Insert, nil,
			map[string]change.Value{"id": int64(1), "n": texts["s"]})

		data := flatData(t, evs)
		if len(data) != 5 {
			t.Fatalf("%d flat rows, want 5", len(data))
		}
		for col, w := range texts {
			if g := flatText(data[0][col]); g != w {
				t.Errorf("flat insert %s = %q, want %q", col, g, w)
			}
		}
		var canal []byte
		canal, null := rc[0].AppendText(canal, true, 1)
		if null || string(canal) != texts["g"] {
			t.Errorf("canal text of g = %q (null %v), want %q", canal, null, texts["g"])
		}
	})
}
