package mysqlsource_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/braid-cdc/braid/internal/testutil/mysqlsource"
)

// syncer is go-mysql's replica client on s, heartbeats every 50 ms.
func syncer(t testing.TB, s *mysqlsource.Server) *replication.BinlogSyncer {
	t.Helper()
	host, port, _ := net.SplitHostPort(s.Addr())
	p, _ := strconv.Atoi(port)
	b := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{
		ServerID: 100, Flavor: mysql.MySQLFlavor, Host: host, Port: uint16(p), User: "root",
		HeartbeatPeriod: 50 * time.Millisecond, DisableRetrySync: true, Logger: slog.New(slog.DiscardHandler),
	})
	t.Cleanup(b.Close)
	return b
}

// describe names an event for comparison: its type and what identifies it.
func describe(e *replication.BinlogEvent) string {
	switch ev := e.Event.(type) {
	case *replication.RotateEvent:
		kind := "ROTATE"
		if e.Header.Flags&replication.LOG_EVENT_ARTIFICIAL_F != 0 {
			kind = "ROTATE(artificial)"
		}
		return fmt.Sprintf("%s %s:%d", kind, ev.NextLogName, ev.Position)
	case *replication.FormatDescriptionEvent:
		if ev.CreateTimestamp == 0 {
			return fmt.Sprintf("FORMAT_DESCRIPTION log_pos=%d created=0", e.Header.LogPos)
		}
		return fmt.Sprintf("FORMAT_DESCRIPTION log_pos=%d", e.Header.LogPos)
	case *replication.PreviousGTIDsEvent:
		return "PREVIOUS_GTIDS " + ev.GTIDSets
	case *replication.GTIDEvent:
		next, _ := ev.GTIDNext()
		return "GTID " + next.String()
	case *replication.GtidTaggedLogEvent:
		var u [16]byte
		copy(u[:], ev.SID)
		return fmt.Sprintf("GTID %x-%x-%x-%x-%x:%s:%d", u[:4], u[4:6], u[6:8], u[8:10], u[10:], ev.Tag, ev.GNO)
	case *replication.QueryEvent:
		return "QUERY " + string(ev.Query)
	case *replication.XIDEvent:
		return fmt.Sprintf("XID %d", ev.XID)
	case *replication.HeartbeatEvent:
		return fmt.Sprintf("HEARTBEAT %s:%d", ev.Filename, e.Header.LogPos)
	}
	return e.Header.EventType.String()
}

// read returns the next n events' descriptions (heartbeats left out).
func read(t testing.TB, st *replication.BinlogStreamer, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []string
	for len(out) < n {
		e, err := st.GetEvent(ctx)
		if err != nil {
			t.Fatalf("after %q: %v", out, err)
		}
		if _, ok := e.Event.(*replication.HeartbeatEvent); ok {
			continue
		}
		out = append(out, describe(e))
	}
	return out
}

func gtid(n int) string { return fmt.Sprintf("GTID %s:%d", sourceUUID, n) }

func sameEvents(t testing.TB, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestDumpFromPosition: from file:pos across a rotation, as MySQL's
// Binlog_sender sends it, then a heartbeat at the end of the binlog, then
// a transaction appended while the replica waits (a live tail).
func TestDumpFromPosition(t *testing.T) {
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			s, tail := startShop(t, v)
			st, err := syncer(t, s).StartSync(mysql.Position{Name: "binlog.000001", Pos: 4})
			if err != nil {
				t.Fatal(err)
			}
			sameEvents(t, read(t, st, 14), []string{
				"ROTATE(artificial) binlog.000001:4",
				"FORMAT_DESCRIPTION log_pos=126",
				"PREVIOUS_GTIDS " + sourceUUID + ":1-118",
				gtid(119), "QUERY CREATE TABLE t (id int NOT NULL, PRIMARY KEY (id))",
				gtid(120), "QUERY BEGIN", "XID 7",
				"ROTATE binlog.000002:4",
				"ROTATE(artificial) binlog.000002:4",
				"FORMAT_DESCRIPTION log_pos=126",
				"PREVIOUS_GTIDS " + sourceUUID + ":1-120",
				gtid(121), "QUERY ALTER TABLE t ADD COLUMN note varchar(20)",
			})

			// Idle: a heartbeat naming the end of the binlog.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			e, err := st.GetEvent(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := describe(e), fmt.Sprintf("HEARTBEAT binlog.000002:%d", fileSize(t, s)); got != want {
				t.Errorf("idle: %s, want %s", got, want)
			}

			// Appended while the replica waits: sent at once.
			appendTransaction(t, s, tail, 122, "shop", "DROP TABLE t")
			sameEvents(t, read(t, st, 2), []string{gtid(122), "QUERY DROP TABLE t"})
		})
	}
}

// TestDumpFromMidFile: a dump from a transaction's position inside a
// file sends the file's FORMAT_DESCRIPTION, its creation time zeroed (a
// replica would otherwise drop its temporary tables), then that
// transaction.
func TestDumpFromMidFile(t *testing.T) {
	s, _ := startShop(t, mysqlsource.Version84)
	_, _, pos120 := shopFiles(t)
	st, err := syncer(t, s).StartSync(mysql.Position{Name: "binlog.000001", Pos: pos120})
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, read(t, st, 5), []string{
		fmt.Sprintf("ROTATE(artificial) binlog.000001:%d", pos120),
		"FORMAT_DESCRIPTION log_pos=126 created=0",
		gtid(120), "QUERY BEGIN", "XID 7",
	})
}

// TestDumpFromGTIDSet: a GTID dump starts at the newest file whose
// PREVIOUS_GTIDS the replica holds and skips the transactions it has.
func TestDumpFromGTIDSet(t *testing.T) {
	for _, tc := range []struct {
		have string
		want []string
	}{
		{sourceUUID + ":1-119", []string{
			"ROTATE(artificial) binlog.000001:4", "FORMAT_DESCRIPTION log_pos=126", "PREVIOUS_GTIDS " + sourceUUID + ":1-118",
			gtid(120), "QUERY BEGIN", "XID 7", "ROTATE binlog.000002:4"}},
		{sourceUUID + ":1-120", []string{
			"ROTATE(artificial) binlog.000002:4", "FORMAT_DESCRIPTION log_pos=126", "PREVIOUS_GTIDS " + sourceUUID + ":1-120",
			gtid(121)}},
		{sourceUUID + ":1-118:120", []string{
			"ROTATE(artificial) binlog.000001:4", "FORMAT_DESCRIPTION log_pos=126", "PREVIOUS_GTIDS " + sourceUUID + ":1-118",
			gtid(119), "QUERY CREATE TABLE t (id int NOT NULL, PRIMARY KEY (id))", "ROTATE binlog.000002:4"}},
	} {
		t.Run(tc.have, func(t *testing.T) {
			s, _ := startShop(t, mysqlsource.Version80)
			set, err := mysql.ParseMysqlGTIDSet(tc.have)
			if err != nil {
				t.Fatal(err)
			}
			st, err := syncer(t, s).StartSyncGTID(set)
			if err != nil {
				t.Fatal(err)
			}
			sameEvents(t, read(t, st, len(tc.want)), tc.want)
		})
	}
}

// TestDumpTaggedGTIDSet: COM_BINLOG_DUMP_GTID with a tagged set (the
// encoding of 8.3+, which go-mysql cannot write) starts as the untagged
// part says on 8.4, and is a malformed packet to 8.0.
func TestDumpTaggedGTIDSet(t *testing.T) {
	u := mustUUID(t, sourceUUID)
	other := mustUUID(t, "896e7882-18fe-11ef-ab88-22222d34d411")
	// uuid:1-119,other:mytag:1-3, tagged format: format byte, count,
	// format byte. (A tag of the source's own uuid it never executed
	// would be refused: more GTIDs than the source has.)
	set := []byte{1, 2, 0, 0, 0, 0, 0, 1}
	set = append(set, u[:]...)
	set = append(set, 0)
	set = binary.LittleEndian.AppendUint64(set, 1)
	set = binary.LittleEndian.AppendUint64(set, 1)
	set = binary.LittleEndian.AppendUint64(set, 120)
	set = append(set, other[:]...)
	set = append(set, byte(len("mytag")<<1))
	set = append(set, "mytag"...)
	set = binary.LittleEndian.AppendUint64(set, 1)
	set = binary.LittleEndian.AppendUint64(set, 1)
	set = binary.LittleEndian.AppendUint64(set, 4)

	dump := func(t *testing.T, s *mysqlsource.Server) ([]string, error) {
		c := connect(t, s)
		exec(t, c, "SET @master_binlog_checksum='NONE', @source_binlog_checksum='NONE'")
		pkt := make([]byte, 4, 64)
		pkt = append(pkt, mysql.COM_BINLOG_DUMP_GTID, 0, 0)
		pkt = binary.LittleEndian.AppendUint32(pkt, 100)
		pkt = binary.LittleEndian.AppendUint32(pkt, 0) // no file name
		pkt = binary.LittleEndian.AppendUint64(pkt, 4)
		pkt = binary.LittleEndian.AppendUint32(pkt, uint32(len(set)))
		pkt = append(pkt, set...)
		c.ResetSequence()
		if err := c.WritePacket(pkt); err != nil {
			t.Fatal(err)
		}
		p := replication.NewBinlogParser()
		var out []string
		for len(out) < 4 {
			data, err := c.ReadPacket()
			if err != nil {
				return out, err
			}
			if data[0] == mysql.ERR_HEADER {
				return out, c.HandleErrorPacket(data)
			}
			e, err := p.Parse(data[1:])
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, describe(e))
		}
		return out, nil
	}

	s84, _ := startShop(t, mysqlsource.Version84)
	got, err := dump(t, s84)
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, got, []string{"ROTATE(artificial) binlog.000001:4", "FORMAT_DESCRIPTION log_pos=126", "PREVIOUS_GTIDS " + sourceUUID + ":1-118", gtid(120)})

	s80, _ := startShop(t, mysqlsource.Version80)
	if _, err := dump(t, s80); err == nil {
		t.Error("8.0 accepted a tagged GTID set")
	} else if code, _ := myErr(t, err); code != mysql.ER_MALFORMED_PACKET {
		t.Errorf("8.0, tagged set: error %d, want %d", code, mysql.ER_MALFORMED_PACKET)
	}
}

// TestDumpErrors: the dumps MySQL refuses, each with error 1236 and its
// wording.
func TestDumpErrors(t *testing.T) {
	first, _, _ := shopFiles(t)
	for _, tc := range []struct {
		name  string
		purge bool
		start func(*replication.BinlogSyncer) (*replication.BinlogStreamer, error)
		want  string
	}{
		{"missing file", false, func(b *replication.BinlogSyncer) (*replication.BinlogStreamer, error) {
			return b.StartSync(mysql.Position{Name: "binlog.000009", Pos: 4})
		}, "Could not find first log file name in binary log index file"},
		{"purged file", true, func(b *replication.BinlogSyncer) (*replication.BinlogStreamer, error) {
			return b.StartSync(mysql.Position{Name: "binlog.000001", Pos: 4})
		}, "Could not find first log file name in binary log index file"},
		{"inside an event", false, func(b *replication.BinlogSyncer) (*replication.BinlogStreamer, error) {
			return b.StartSync(mysql.Position{Name: "binlog.000001", Pos: 130})
		}, "Client requested source to start replication from impossible position"},
		{"past the end", false, func(b *replication.BinlogSyncer) (*replication.BinlogStreamer, error) {
			return b.StartSync(mysql.Position{Name: "binlog.000001", Pos: first.size() + 1})
		}, "Client requested source to start replication from position > file size"},
		{"purged GTIDs", true, func(b *replication.BinlogSyncer) (*replication.BinlogStreamer, error) {
			set, _ := mysql.ParseMysqlGTIDSet(sourceUUID + ":1-100")
			return b.StartSyncGTID(set)
		}, "Cannot replicate because the source purged required binary logs. Replicate the missing transactions from elsewhere, or provision a new replica from backup. " +
			"Consider increasing the source's binary log expiration period. The GTID set sent by the replica is '" + sourceUUID + ":1-100', " +
			"and the missing transactions are '" + sourceUUID + ":101-120'"},
		{"more GTIDs than the source", false, func(b *replication.BinlogSyncer) (*replication.BinlogStreamer, error) {
			set, _ := mysql.ParseMysqlGTIDSet(sourceUUID + ":1-200")
			return b.StartSyncGTID(set)
		}, "Replica has more GTIDs than the source has, using the source's SERVER_UUID."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := startShop(t, mysqlsource.Version84)
			if tc.purge {
				if err := s.PurgeTo("binlog.000002"); err != nil {
					t.Fatal(err)
				}
			}
			st, err := tc.start(syncer(t, s))
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				for err == nil {
					_, err = st.GetEvent(ctx)
				}
			}
			code, msg := myErr(t, err)
			if code != mysql.ER_MASTER_FATAL_ERROR_READING_BINLOG || !strings.HasPrefix(msg, tc.want) {
				t.Errorf("error %d %q, want 1236 %q", code, msg, tc.want)
			}
		})
	}
}

// TestDumpNeedsChecksumAwareReplica: a replica that did not say it
// handles checksums is refused a binlog with CRC32, as MySQL refuses it.
func TestDumpNeedsChecksumAwareReplica(t *testing.T) {
	s, _ := startShop(t, mysqlsource.Version80)
	c := connect(t, s)
	pkt := make([]byte, 4, 64)
	pkt = append(pkt, mysql.COM_BINLOG_DUMP)
	pkt = binary.LittleEndian.AppendUint32(pkt, 4)
	pkt = binary.LittleEndian.AppendUint16(pkt, 0)
	pkt = binary.LittleEndian.AppendUint32(pkt, 100)
	pkt = append(pkt, "binlog.000001"...)
	c.ResetSequence()
	if err := c.WritePacket(pkt); err != nil {
		t.Fatal(err)
	}
	for {
		data, err := c.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		if data[0] == mysql.ERR_HEADER {
			code, msg := myErr(t, c.HandleErrorPacket(data))
			if code != mysql.ER_MASTER_FATAL_ERROR_READING_BINLOG || !strings.HasPrefix(msg, "Slave can not handle replication events with the checksum") &&
				!strings.HasPrefix(msg, "Replica can not handle replication events with the checksum") {
				t.Errorf("error %d %q", code, msg)
			}
			return
		}
	}
}

// rawDump sends COM_BINLOG_DUMP from binlog.000001:4 with flags on a
// connection of its own, checksum-aware, and returns it.
func rawDump(t *testing.T, s *mysqlsource.Server, flags uint16) *client.Conn {
	t.Helper()
	c := connect(t, s)
	exec(t, c, "SET @master_binlog_checksum='NONE', @source_binlog_checksum='NONE', @source_heartbeat_period=20000000")
	pkt := make([]byte, 4, 64)
	pkt = append(pkt, mysql.COM_BINLOG_DUMP)
	pkt = binary.LittleEndian.AppendUint32(pkt, 4)
	pkt = binary.LittleEndian.AppendUint16(pkt, flags)
	pkt = binary.LittleEndian.AppendUint32(pkt, 100)
	pkt = append(pkt, "binlog.000002"...)
	c.ResetSequence()
	if err := c.WritePacket(pkt); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestDumpNonBlocking: BINLOG_DUMP_NON_BLOCK ends the dump with an EOF
// packet at the end of the binlog instead of waiting.
func TestDumpNonBlocking(t *testing.T) {
	s, _ := startShop(t, mysqlsource.Version84)
	c := rawDump(t, s, replication.BINLOG_DUMP_NON_BLOCK)
	p := replication.NewBinlogParser()
	var got []string
	for {
		data, err := c.ReadPacket()
		if err != nil {
			t.Fatalf("after %q: %v", got, err)
		}
		if data[0] == mysql.EOF_HEADER && len(data) < 9 {
			break
		}
		e, err := p.Parse(data[1:])
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, describe(e))
	}
	sameEvents(t, got, []string{"ROTATE(artificial) binlog.000002:4", "FORMAT_DESCRIPTION log_pos=126",
		"PREVIOUS_GTIDS " + sourceUUID + ":1-120", gtid(121), "QUERY ALTER TABLE t ADD COLUMN note varchar(20)"})
}

// TestDumpHeartbeatV2: a replica that asks for HEARTBEAT_LOG_EVENT_V2
// (USE_HEARTBEAT_EVENT_V2) gets it, naming the file and position.
func TestDumpHeartbeatV2(t *testing.T) {
	s, _ := startShop(t, mysqlsource.Version84)
	c := rawDump(t, s, replication.USE_HEARTBEAT_EVENT_V2)
	p := replication.NewBinlogParser()
	for {
		data, err := c.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		e, err := p.Parse(data[1:])
		if err != nil {
			t.Fatal(err)
		}
		if hb, ok := e.Event.(*replication.HeartbeatEvent); ok {
			if e.Header.EventType != replication.HEARTBEAT_LOG_EVENT_V2 || hb.Filename != "binlog.000002" || hb.Offset != uint64(fileSize(t, s)) {
				t.Errorf("heartbeat %v %s:%d, want v2 binlog.000002:%d", e.Header.EventType, hb.Filename, hb.Offset, fileSize(t, s))
			}
			return
		}
	}
}

// TestCloseEndsDumps: Close ends a dump waiting at the end of the binlog
// and returns; the replica sees its connection end.
func TestCloseEndsDumps(t *testing.T) {
	s, _ := startShop(t, mysqlsource.Version84)
	st, err := syncer(t, s).StartSync(mysql.Position{Name: "binlog.000002", Pos: 4})
	if err != nil {
		t.Fatal(err)
	}
	read(t, st, 5)
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return while a dump waited")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		if _, err := st.GetEvent(ctx); err != nil {
			if ctx.Err() != nil {
				t.Fatal("the replica's stream did not end")
			}
			return
		}
	}
}
