package canal_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	pbe "github.com/withlin/canal-go/protocol/entry"
	pbp "github.com/withlin/canal-go/protocol/packet"
	"google.golang.org/protobuf/proto"

	"github.com/braid-cdc/braid/api/canal"
	"github.com/braid-cdc/braid/engine/binlog"
	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
	"github.com/braid-cdc/braid/spec"
)

// TestMinimalImage encodes the row changes of a mariadbd with
// binlog_row_image MINIMAL: as canal's RowData, each image holds exactly
// the columns the binlog's holds (an UPDATE's before image the key, its
// after image the columns set, a DELETE's the key), a real NULL has isNull,
// an after column is updated when the before image lacks it or differs,
// and each entry decodes to what the reference mapping gives.
func TestMinimalImage(t *testing.T) {
	srv := mysqltest.Start(t, mysqltest.WithArgs("--binlog-row-image=MINIMAL"))
	srv.Exec(t, "CREATE DATABASE t",
		"CREATE TABLE t.m (id INT PRIMARY KEY, a VARCHAR(10), n INT NULL, c INT)",
		"INSERT INTO t.m VALUES (1, 'x', NULL, 5), (2, 'y', 7, 6)",
		"UPDATE t.m SET a = 'q' WHERE id = 1",
		"UPDATE t.m SET n = NULL, c = 8 WHERE id = 2",
		"UPDATE t.m SET id = 3 WHERE id = 2",
		"DELETE FROM t.m WHERE id = 1",
	)
	_, end := srv.MasterStatus(t)
	want := []string{
		"UPDATE before [id=1] after [a=q updated]",
		"UPDATE before [id=2] after [n=NULL updated, c=8 updated]",
		"UPDATE before [id=2] after [id=3 updated]",
		"DELETE before [id=1] after []",
	}

	events := readEvents(t, srv, end)
	frame, err := canal.EncodeFrame(1, events)
	if err != nil {
		t.Fatal(err)
	}
	body, err := canal.ReadFrame(bytes.NewReader(frame), len(frame))
	if err != nil {
		t.Fatal(err)
	}
	var p pbp.Packet
	var msgs pbp.Messages
	if err := proto.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(p.Body, &msgs); err != nil {
		t.Fatal(err)
	}
	var refs []*pbe.Entry
	for _, ev := range events {
		if e, ok := canal.RefEntry(ev); ok {
			refs = append(refs, e)
		}
	}
	if len(msgs.Messages) != len(refs) {
		t.Fatalf("%d entries, the reference %d", len(msgs.Messages), len(refs))
	}
	var got []string
	for i, raw := range msgs.Messages {
		var e pbe.Entry
		if err := proto.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		if e.GetEntryType() != pbe.EntryType_ROWDATA {
			continue
		}
		var rc, ref pbe.RowChange
		if err := proto.Unmarshal(e.StoreValue, &rc); err != nil {
			t.Fatal(err)
		}
		if err := proto.Unmarshal(refs[i].StoreValue, &ref); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(&rc, &ref) {
			t.Errorf("entry %d:\n got %v\nwant %v", i, &rc, &ref)
		}
		if rc.GetIsDdl() || rc.GetEventType() == pbe.EventType_INSERT {
			continue
		}
		for _, rd := range rc.RowDatas {
			got = append(got, fmt.Sprintf("%s before [%s] after [%s]", rc.GetEventType(), columnList(rd.BeforeColumns), columnList(rd.AfterColumns)))
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("row data:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// columnList shows columns as name=value (NULL for isNull), "updated"
// after those so marked.
func columnList(cols []*pbe.Column) string {
	var s []string
	for _, c := range cols {
		v := c.GetName() + "=" + c.GetValue()
		if c.GetIsNull() {
			v = c.GetName() + "=NULL"
		}
		if c.GetUpdated() {
			v += " updated"
		}
		s = append(s, v)
	}
	return strings.Join(s, ", ")
}

// readEvents reads srv's binlog from its start to the transaction ending
// at end.
func readEvents(t *testing.T, srv *mysqltest.Server, end uint32) []*change.Event {
	t.Helper()
	r, err := binlog.NewReader(binlog.Config{Destination: "test",
		Source: spec.Source{Name: "a", Address: srv.Addr(), User: "root", Start: spec.Start{Kind: spec.StartEarliest}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var evs []*change.Event
	reached := false
	err = r.Run(ctx, func(ev *change.Event) error {
		evs = append(evs, ev)
		if ev.Type == change.EventCommit && ev.Pos.Pos >= end {
			reached = true
			cancel()
		}
		return nil
	})
	if !reached {
		t.Fatalf("the reader stopped before %d: %v", end, err)
	}
	return evs
}
