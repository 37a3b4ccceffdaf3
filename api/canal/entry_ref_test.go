package canal

import (
	"strconv"
	"strings"

	pbe "github.com/withlin/canal-go/protocol/entry"
	"google.golang.org/protobuf/proto"

	"github.com/braid-cdc/braid/engine/change"
	"github.com/braid-cdc/braid/engine/flat"
)

// refMapper maps events to canal-go's generated entry types, the plain
// way: the reference the encoder (encode.go), which writes the same
// protobuf straight into a frame, is checked against.
type refMapper struct{}

// entry maps one event to canal's Entry; ok is false for events canal has
// no entry for (progress, heartbeats).
//
// EventBegin becomes TRANSACTIONBEGIN, EventRows a ROWDATA entry whose
// RowChange holds all its rows, EventCommit TRANSACTIONEND, EventDDL a
// ROWDATA entry with isDdl set.
func (m *refMapper) entry(ev *change.Event) (e *pbe.Entry, ok bool) {
	switch ev.Type {
	case change.EventBegin:
		ms := ev.CommitTime.UnixMilli()
		h := m.header(ev, ms, "", "")
		body := &pbe.TransactionBegin{ExecuteTime: ms}
		return newEntry(h, pbe.EntryType_TRANSACTIONBEGIN, body), true
	case change.EventCommit:
		ms := ev.CommitTime.UnixMilli()
		h := m.header(ev, ms, "", "")
		body := &pbe.TransactionEnd{ExecuteTime: ms}
		return newEntry(h, pbe.EntryType_TRANSACTIONEND, body), true
	case change.EventRows:
		return m.rowsEntry(ev), true
	case change.EventDDL:
		return m.ddlEntry(ev), true
	}
	return nil, false
}

func newEntry(h *pbe.Header, t pbe.EntryType, body proto.Message) *pbe.Entry {
	v, err := proto.Marshal(body)
	if err != nil {
		// Marshalling a well-formed message built here cannot fail.
		panic("canal: marshal entry body: " + err.Error())
	}
	return &pbe.Entry{Header: h, EntryTypePresent: &pbe.Entry_EntryType{EntryType: t}, StoreValue: v}
}

// header fills canal's entry header; schema and table are origin names.
func (m *refMapper) header(ev *change.Event, ms int64, schema, table string) *pbe.Header {
	h := &pbe.Header{
		VersionPresent:    &pbe.Header_Version{Version: 1},
		LogfileName:       ev.Pos.File,
		LogfileOffset:     int64(ev.Pos.Pos),
		ServerId:          int64(ev.ServerID),
		ServerenCode:      "UTF-8",
		ExecuteTime:       ms,
		SourceTypePresent: &pbe.Header_SourceType{SourceType: pbe.Type_MYSQL},
		Gtid:              ev.GTID,
		Props: []*pbe.Pair{
			{Key: PropSource, Value: ev.Source},
			{Key: PropSeq, Value: strconv.FormatUint(ev.Seq, 10)},
		},
	}
	if ev.EndPos.File == ev.Pos.File && ev.EndPos.Pos > ev.Pos.Pos {
		h.EventLength = int64(ev.EndPos.Pos - ev.Pos.Pos)
	}
	if schema != "" || table != "" {
		h.SchemaName, h.TableName = ev.Logical()
		h.Props = append(h.Props, &pbe.Pair{Key: PropOriginSchema, Value: schema}, &pbe.Pair{Key: PropOriginTable, Value: table})
	}
	return h
}

func (m *refMapper) rowsEntry(ev *change.Event) *pbe.Entry {
	var schema, table string
	kind := pbe.EventType_UPDATE
	if len(ev.Rows) > 0 {
		t := ev.Rows[0].Table
		schema, table = t.Schema, t.Name
		kind = kindTypes[ev.Rows[0].Kind]
	}
	h := m.header(ev, ev.CommitTime.UnixMilli(), schema, table)
	h.EventTypePresent = &pbe.Header_EventType{EventType: kind}
	rc := &pbe.RowChange{
		EventTypePresent: &pbe.RowChange_EventType{EventType: kind},
		IsDdlPresent:     &pbe.RowChange_IsDdl{IsDdl: false},
		RowDatas:         make([]*pbe.RowData, len(ev.Rows)),
	}
	for i := range ev.Rows {
		rc.RowDatas[i] = rowData(&ev.Rows[i])
	}
	return newEntry(h, pbe.EntryType_ROWDATA, rc)
}

// rowData maps one row change. As canal does, an image holds only the
// columns the binlog's holds, and after-image columns are marked updated
// when the before image has no column of their index or a different value
// (every column of an INSERT); before-image columns never are.
func rowData(rc *change.RowChange) *pbe.RowData {
	rd := &pbe.RowData{}
	if rc.HasBefore() {
		rd.BeforeColumns = columns(rc, false, nil)
	}
	if rc.HasAfter() {
		rd.AfterColumns = columns(rc, true, rd.BeforeColumns)
		if !rc.HasBefore() {
			for _, c := range rd.AfterColumns {
				c.Updated = true
			}
		}
	}
	return rd
}

func columns(rc *change.RowChange, after bool, before []*pbe.Column) []*pbe.Column {
	img := rc.Before()
	if after {
		img = rc.After()
	}
	var cols []*pbe.Column
	for i := range rc.Table.Columns {
		if !rc.Present(after, i) {
			continue
		}
		c := &rc.Table.Columns[i]
		var v change.Value
		if i < len(img) {
			v = img[i]
		}
		col := &pbe.Column{
			Index:         int32(i),
			SqlType:       int32(flat.SQLType(c)),
			Name:          c.Name,
			IsKey:         c.Key,
			IsNullPresent: &pbe.Column_IsNull{IsNull: v == nil},
			Value:         change.FormatValue(v),
			MysqlType:     c.RawType,
		}
		if after && before != nil {
			col.Updated = true
			for _, b := range before {
				if b.Index == col.Index {
					col.Updated = b.GetIsNull() != col.GetIsNull() || b.Value != col.Value
				}
			}
		}
		cols = append(cols, col)
	}
	return cols
}

func (m *refMapper) ddlEntry(ev *change.Event) *pbe.Entry {
	ddl := ev.DDL
	if ddl == nil {
		ddl = &change.DDL{}
	}
	schema, table := ddl.Schema, ""
	if len(ddl.Tables) > 0 {
		schema, table, _ = strings.Cut(ddl.Tables[0], ".")
	}
	kind, ok := ddlTypes[flat.DDLKind(ddl.SQL)]
	if !ok {
		kind = pbe.EventType_QUERY
	}
	h := m.header(ev, ev.CommitTime.UnixMilli(), schema, table)
	h.EventTypePresent = &pbe.Header_EventType{EventType: kind}
	rc := &pbe.RowChange{
		EventTypePresent: &pbe.RowChange_EventType{EventType: kind},
		IsDdlPresent:     &pbe.RowChange_IsDdl{IsDdl: true},
		Sql:              ddl.SQL,
		DdlSchemaName:    ddl.Schema,
	}
	return newEntry(h, pbe.EntryType_ROWDATA, rc)
}
