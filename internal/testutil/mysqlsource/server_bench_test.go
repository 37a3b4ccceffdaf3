package mysqlsource_test

import (
	"context"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/braid-cdc/braid/internal/testutil/mysqlsource"
)

// BenchmarkDump measures how fast the server streams a binlog to
// go-mysql's syncer: events per second of a file of small transactions
// (GTID, QUERY BEGIN, XID), the server's cost per event.
func BenchmarkDump(b *testing.B) {
	u := mustUUID(b, sourceUUID)
	f := newBinlogFile("8.4.3").previousGTIDs(classicSet(u, 0))
	const txns = 20000
	for i := range txns {
		f.transaction(int64(i+1), "", "BEGIN").xid(uint64(i))
	}
	s := mysqlsource.Start(b, mysqlsource.Config{Version: mysqlsource.Version84, ServerUUID: sourceUUID})
	if err := s.AddFile("binlog.000001", f.bytes()); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(f.bytes())))
	b.ResetTimer()
	for range b.N {
		st, err := syncer(b, s).StartSync(mysql.Position{Name: "binlog.000001", Pos: 4})
		if err != nil {
			b.Fatal(err)
		}
		for n := 0; n < 3+3*txns; n++ {
			if _, err := st.GetEvent(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(3*txns*b.N)/b.Elapsed().Seconds(), "events/s")
}
