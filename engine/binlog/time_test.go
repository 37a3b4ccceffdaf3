package binlog_test

import (
	"testing"
	"time"

	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
)

// TestTimeFraction: a TIME(n) value carries its n fraction digits, zero
// ones too, as MySQL prints it and canal writes it; a TIME has none.
func TestTimeFraction(t *testing.T) {
	srv := mysqltest.Start(t)
	srv.Exec(t, "CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY, t0 TIME, t3 TIME(3), t6 TIME(6))",
		"INSERT INTO d.t VALUES (1, '838:59:59', '12:00:00', '-01:02:03.5')",
		"INSERT INTO d.t VALUES (2, '-00:00:01', '-00:00:00.250', '00:00:00')")
	r := startReader(t, binlog.Config{Source: source(srv, earliest)}, nil)
	evs := r.waitFor(30*time.Second, "2 transactions with rows", func(evs []*change.Event) bool {
		return countType(evs, change.EventCommit) >= 2
	})
	rc := rows(evs)
	checkRow(t, "first", rc[0], change.Insert, nil, map[string]change.Value{"id": int64(1), "t0": "838:59:59", "t3": "12:00:00.000", "t6": "-01:02:03.500000"})
	checkRow(t, "second", rc[1], change.Insert, nil, map[string]change.Value{"id": int64(2), "t0": "-00:00:01", "t3": "-00:00:00.250", "t6": "00:00:00.000000"})
	data := flatData(t, evs)
	if len(data) != 2 || flatText(data[0]["t3"]) != "12:00:00.000" || flatText(data[1]["t6"]) != "00:00:00.000000" {
		t.Errorf("flat rows %v, want t3 12:00:00.000 and t6 00:00:00.000000", data)
	}
	if text, _ := rc[0].AppendText(nil, true, 2); string(text) != "12:00:00.000" {
		t.Errorf("canal text of t3 = %q, want 12:00:00.000", text)
	}
}
