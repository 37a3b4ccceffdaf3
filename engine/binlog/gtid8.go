package binlog

import (
	"encoding/hex"
	"strconv"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"
)

// mysqlGTID is a MySQL GTID or GTID_TAGGED_LOG event's GTID as MySQL
// writes it: "uuid:n", or "uuid:tag:n" for a tagged one (8.3+). "" for an
// anonymous transaction (gtid_mode OFF) or a malformed source id.
// (go-mysql's GTIDNext leaves the tag out.)
func mysqlGTID(ev *replication.GTIDEvent, typ replication.EventType) string {
	if typ == replication.ANONYMOUS_GTID_EVENT || len(ev.SID) != 16 {
		return ""
	}
	b := make([]byte, 0, 36+1+len(ev.Tag)+1+20)
	b = hex.AppendEncode(b, ev.SID[0:4])
	b = append(b, '-')
	b = hex.AppendEncode(b, ev.SID[4:6])
	b = append(b, '-')
	b = hex.AppendEncode(b, ev.SID[6:8])
	b = append(b, '-')
	b = hex.AppendEncode(b, ev.SID[8:10])
	b = append(b, '-')
	b = hex.AppendEncode(b, ev.SID[10:16])
	b = append(b, ':')
	if ev.Tag != "" {
		b = append(b, ev.Tag...)
		b = append(b, ':')
	}
	b = strconv.AppendInt(b, ev.GNO, 10)
	return string(b)
}

// mysqlCommitTime is a MySQL transaction's commit time: its
// original_commit_timestamp (µs, on the server the transaction was first
// committed on, and the same on every replica down the chain), else its
// immediate_commit_timestamp (a 5.7 source's transaction replicated by an
// 8.0 server carries only that), else the event header's whole second
// (5.7 and older).
func mysqlCommitTime(ev *replication.GTIDEvent, hdr *replication.EventHeader) time.Time {
	switch {
	case ev.OriginalCommitTimestamp > 0:
		return time.UnixMicro(int64(ev.OriginalCommitTimestamp))
	case ev.ImmediateCommitTimestamp > 0:
		return time.UnixMicro(int64(ev.ImmediateCommitTimestamp))
	}
	return time.Unix(int64(hdr.Timestamp), 0)
}
