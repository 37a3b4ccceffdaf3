package change

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/braid-cdc/braid/internal/testutil/mysqltest"
)

// TestRowImageMatchesGoMySQL splits every rows event of a binlog into raw
// images and decodes each value with braid's row-image decoder, decodes it
// with go-mysql's, and requires the same values: braid's decoder must be a
// faster go-mysql, not a different one. The workload is mysqltest.EveryFastType's.
func TestRowImageMatchesGoMySQL(t *testing.T) {
	srv := mysqltest.Start(t, mysqltest.WithArgs("--default-time-zone=-05:30"))
	srv.Exec(t, mysqltest.EveryFastType(t)...)
	tz := ServerLocation("-05:30", "", "0")
	var compared, events int
	cfg := replication.BinlogSyncerConfig{ServerID: 999, Flavor: srv.Flavor, Host: srv.Host, Port: uint16(srv.Port), User: "root",
		Logger:                  slog.New(slog.DiscardHandler),
		TimestampStringLocation: tz,
		RowsEventDecodeFunc: func(re *replication.RowsEvent, data []byte) error {
			pos, err := re.DecodeHeader(data)
			if err != nil {
				return err
			}
			shapes := TableShapes(re.Table)
			if shapes == nil {
				return fmt.Errorf("table %s is not read raw", re.Table.Table)
			}
			rr, err := SplitRows(re, shapes, pos, data)
			if err != nil {
				return err
			}
			codec := &Codec{types: re.Table.ColumnType, metas: re.Table.ColumnMeta, tz: NewZoneClock(tz)}
			cols := int(re.ColumnCount)
			var fast [][]any
			for at := rr.at; len(at) > 0; at = at[cols:] {
				fast = append(fast, codec.decodeRaw(rr.data, at[:cols]))
			}
			if err := re.DecodeData(pos, data); err != nil {
				return err
			}
			events++
			if len(fast) != len(re.Rows) {
				return fmt.Errorf("braid decoded %d images, go-mysql %d", len(fast), len(re.Rows))
			}
			for i := range fast {
				for c := range fast[i] {
					if !reflect.DeepEqual(fast[i][c], re.Rows[i][c]) {
						t.Errorf("image %d column %d: braid %#v, go-mysql %#v", i, c, fast[i][c], re.Rows[i][c])
					}
					compared++
				}
			}
			return nil
		}}
	syncer := replication.NewBinlogSyncer(cfg)
	defer syncer.Close()
	file, end := srv.MasterStatus(t)
	st, err := syncer.StartSync(mysql.Position{Name: "binlog.000001", Pos: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		e, err := st.GetEvent(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if e.Header.LogPos >= end && file == "binlog.000001" {
			break
		}
	}
	if events < 5 || compared < 1000 {
		t.Fatalf("only %d rows events, %d values compared", events, compared)
	}
	t.Logf("%d rows events, %d values identical", events, compared)
}
