package client

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/flat"
	"github.com/braid-cdc/braid/group"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/spec"
	"github.com/braid-cdc/braid/stream"
)

// TestDecodeServerLines decodes what flat.Writer writes for the row
// changes and DDLs of a MariaDB binlog, with every column type and the
// characters that need escaping in names and values: each line decodes
// without json, exactly as json decodes it, and the same message in
// braid's binary encoding (values long and short, of one to three length
// bytes) decodes to the same view.
func TestDecodeServerLines(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE t",
		`CREATE TABLE t.all_types (
			id INT PRIMARY KEY, ti TINYINT, si SMALLINT UNSIGNED, mi MEDIUMINT, bi BIGINT UNSIGNED,
			de DECIMAL(30,10), fl FLOAT, du DOUBLE, bt BIT(10), yr YEAR, da DATE, tm TIME(3),
			dt DATETIME(6), ts TIMESTAMP(3) NULL, ch CHAR(10), vc VARCHAR(100) CHARACTER SET utf8mb4,
			tx TEXT CHARACTER SET utf8mb4, la VARCHAR(50) CHARACTER SET latin1, bn BINARY(4),
			vb VARBINARY(20), bl BLOB, js JSON, en ENUM('a','b c','"q"'), st SET('x','y','z'))`,
		"CREATE TABLE t.`wéird \"name\"\\` (`k\"ey` INT, `tab\tcol` VARCHAR(20), `ünï€` TEXT CHARACTER SET utf8mb4)",
		`INSERT INTO t.all_types VALUES
			(1, -128, 65535, -8388608, 18446744073709551615, -12345678901234567890.0123456789, 1.5e-7, -2.2250738585072014e-308,
			 b'1010101010', 2155, '2026-02-28', '-838:59:59.000', '2026-01-01 00:00:00.000001', '2038-01-19 03:14:07.999',
			 'ch"\\', 'quote " backslash \\ slash / 📦 ünïcode', CONCAT('nl\n', 'cr\r', 'tab\t', CHAR(1), CHAR(31), CHAR(127), CONVERT(0xE280A8 USING utf8mb4), ' end'),
			 CONVERT(0xE9FFA0 USING latin1), UNHEX('00FF225C'), UNHEX('0A0D09080C2F5C22E28099FFFE'), UNHEX(REPEAT('C3', 40)),
			 '{"a": "q\\"uote", "b": [1, 2.5, null, true], "c": {"d": "\\\\"}}', '"q"', 'x,z'),
			(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
			(3, 0, 0, 0, 0, 0, 0, 0, b'0', 1901, '1000-01-01', '00:00:00', '1000-01-01 00:00:00', NULL, '', '', '', '', UNHEX(''), UNHEX(''), UNHEX(''), '[]', 'b c', '')`,
		"INSERT INTO t.`wéird \"name\"\\` VALUES (1, 'a\"b', 'c\\\\d'), (NULL, NULL, NULL), (3, '', '\"\"')",
		"BEGIN",
		"UPDATE t.all_types SET vc = 'changed \"again\"', tx = NULL WHERE id IN (1, 3)",
		"UPDATE t.all_types SET ti = 1 WHERE id = 2",
		"INSERT INTO t.`wéird \"name\"\\` VALUES (4, '\\\\', '\\n')",
		"DELETE FROM t.all_types WHERE id = 3",
		"COMMIT",
		"ALTER TABLE t.all_types ADD COLUMN extra VARCHAR(5) DEFAULT 'x' COMMENT 'it''s \"quoted\" \\\\ and\\nmultiline'",
		"INSERT INTO t.all_types (id, extra) VALUES (4, 'y')",
		"INSERT INTO t.all_types (id, vc, tx, la, bl) VALUES (5, REPEAT('é', 63), REPEAT('📦', 5000), REPEAT(CONVERT(0xE9 USING latin1), 50), REPEAT(0x5C22, 9000))",
		"UPDATE t.`wéird \"name\"\\` SET `tab\tcol` = 'x' WHERE `k\"ey` IS NULL",
		"DROP TABLE t.`wéird \"name\"\\`",
		"CREATE TABLE t.done (id INT)",
	)

	spec := spec.Spec{Name: "decode", Tables: []string{`t\..*`}, Ordering: "strict",
		Sources: []spec.Source{{Name: "s0", Address: srv.Addr(), Start: spec.Start{Kind: spec.StartEarliest}}}}
	spec = spec.WithDefaults()
	d, err := group.New(group.Config{Spec: &spec, Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	store := stream.NewStore(stream.Config{})
	store.Subscribe("test")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- d.RunInto(ctx, store) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("destination: %v", err)
		}
	}()

	now := func() time.Time { return time.UnixMilli(1_700_000_000_123) }
	w, bw := flat.Writer{Now: now}, flat.Writer{Now: now, Binary: true}
	var frames [][]byte
	kinds := map[string]int{}
	lines := 0
	for finished := false; !finished; {
		b, err := store.Get(ctx, "test", 100, time.Second)
		if err != nil {
			t.Fatalf("after %d lines: %v", lines, err)
		}
		for _, ev := range b.Events {
			// The binary writer goes first: its messages wait for the lines.
			err := bw.Write(ev, func(frame []byte) error {
				frames = append(frames, slices.Clone(frame))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			err = w.Write(ev, func(line []byte) error {
				lines++
				if fast, _ := decodeBoth(t, line); !fast {
					t.Errorf("a line FlatWriter wrote went to json: %s", line)
				}
				var env envelope
				var d lineDecoder
				decodeEnvelope(&d, line, &env)
				kinds[env.Type]++
				if len(frames) == 0 {
					t.Fatalf("the binary writer wrote no message for line %.200s", line)
				}
				frame := frames[0]
				frames = frames[1:]
				var v MessageView
				if err := d.decodeBinary(frame, &v); err != nil {
					t.Fatalf("the binary message of line %.200s: %v", line, err)
				}
				if got := v.Message(); !reflect.DeepEqual(got, env.Message) {
					t.Fatalf("binary message decoded differently from its line:\nline %.300s\n got %.300s\nwant %.300s", line, dump(envelope{Message: got}), dump(envelope{Message: env.Message}))
				}
				checkView(t, &v, &env.Message, line)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(frames) > 0 {
				t.Fatalf("the binary writer wrote %d messages more than the JSON one", len(frames))
			}
			finished = finished || ev.Type == change.EventDDL && strings.Contains(ev.DDL.SQL, "t.done")
		}
	}
	t.Logf("%d lines: %v", lines, kinds)
	for _, k := range []string{"INSERT", "UPDATE", "DELETE", "CREATE", "ALTER", "ERASE"} {
		if kinds[k] == 0 {
			t.Errorf("no %s line; lines by type: %v", k, kinds)
		}
	}
}
