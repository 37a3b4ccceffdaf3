package canal

import (
	"testing"

	pbe "github.com/withlin/canal-go/protocol/entry"
	"google.golang.org/protobuf/proto"
)

// TestRevBufColumn writes Columns field by field with revBuf and checks
// them against protobuf's own encoding: negative int32s (java.sql.Types
// codes such as TINYINT's -6), oneof fields at their zero value, empty
// strings left out, and invalid UTF-8 replaced (protobuf would refuse it).
func TestRevBufColumn(t *testing.T) {
	for _, c := range []*pbe.Column{
		{Index: 0, SqlType: -6, Name: "flag", IsNullPresent: &pbe.Column_IsNull{IsNull: false}, Value: "-1", MysqlType: "tinyint(4)"},
		{Index: 7, SqlType: 12, Name: "note", IsKey: true, Updated: true, IsNullPresent: &pbe.Column_IsNull{IsNull: true}, MysqlType: "varchar(20)"},
		{Index: 300, SqlType: -5, Name: "ñame", IsNullPresent: &pbe.Column_IsNull{IsNull: false}, Value: "ü\uFFFDx", MysqlType: "bigint(20)"},
	} {
		var r revBuf
		start := r.open()
		r.stringField(10, c.MysqlType)
		value := c.Value
		if c.Index == 300 {
			value = "ü\xffx" // invalid UTF-8 in, U+FFFD out
		}
		r.stringField(8, value)
		r.oneofInt(6, int64(b2i(c.GetIsNull())))
		r.boolField(5, c.Updated)
		r.boolField(4, c.IsKey)
		r.stringField(3, c.Name)
		if c.SqlType != 0 {
			r.oneofInt(2, int64(c.SqlType))
		}
		r.int64Field(1, int64(c.Index))
		if n := r.size() - start; n != proto.Size(c) {
			t.Errorf("column %d: %d bytes, protobuf encodes %d", c.Index, n, proto.Size(c))
		}
		var got pbe.Column
		if err := proto.Unmarshal(r.b[r.i:], &got); err != nil {
			t.Fatalf("column %d: %v", c.Index, err)
		}
		if !proto.Equal(&got, c) {
			t.Errorf("column %d:\n got %v\nwant %v", c.Index, &got, c)
		}
	}
}
