package mysqlbinlog

import (
	"encoding/binary"
	"fmt"
)

// Status variable codes of a QUERY event, in the order MySQL writes them.
const (
	qFlags2Code                 = 0
	qSQLModeCode                = 1
	qAutoIncrement              = 3
	qCharsetCode                = 4
	qTimeZoneCode               = 5
	qCatalogNZCode              = 6
	qLCTimeNamesCode            = 7
	qCharsetDatabaseCode        = 8
	qTableMapForUpdateCode      = 9
	qInvoker                    = 11
	qUpdatedDBNames             = 12
	qMicroseconds               = 13
	qDDLLoggedWithXID           = 17
	qDefaultCollationForUTF8MB4 = 18
	qSQLRequirePrimaryKey       = 19
	qDefaultTableEncryption     = 20
)

// DefaultSQLMode is MySQL 8's default sql_mode (ONLY_FULL_GROUP_BY,
// STRICT_TRANS_TABLES, NO_ZERO_IN_DATE, NO_ZERO_DATE,
// ERROR_FOR_DIVISION_BY_ZERO, NO_ENGINE_SUBSTITUTION) as the bits a QUERY
// event carries.
const DefaultSQLMode uint64 = 0x45a00020

// Collation ids MySQL writes in status variables and table maps.
const (
	CollationLatin1SwedishCI  = 8
	CollationUTF8MB3GeneralCI = 33
	CollationUTF8MB4GeneralCI = 45
	CollationUTF8MB4Bin       = 46
	CollationBinary           = 63
	CollationUTF8MB4_0900AICI = 255
)

// UpdatedDBsOverMax is what MySQL 9 writes as the updated databases of a
// BEGIN: the marker "more than the event can list" (254 databases).
const updatedDBsOverMaxMarker = 254

// Query is a QUERY_EVENT: BEGIN, or a DDL statement with its session.
type Query struct {
	ThreadID      uint32
	ExecTime      uint32
	ErrorCode     uint16
	Schema        string // the current database; "" for none
	SQL           string
	Status        QueryStatus
	SuppressedUse bool // the header flag FlagSuppressUse (BEGIN)
}

// QueryStatus is the status variables of a QUERY event. Zero pointers and
// empty strings are variables the server does not write.
type QueryStatus struct {
	Flags2  uint32
	SQLMode uint64
	Catalog string // always "std" in MySQL 8
	// AutoIncrement is written only when increment or offset is not 1.
	AutoIncrementIncrement, AutoIncrementOffset uint16
	CharsetClient, CollationConnection          uint16
	CollationServer                             uint16
	TimeZone                                    string
	LCTimeNames                                 uint16 // 0 = en_US, not written
	CollationDatabase                           uint16 // 0 = not written
	TableMapForUpdate                           uint64 // 0 = not written
	InvokerUser, InvokerHost                    string // written when InvokerUser is set
	// UpdatedDBs lists the databases a DDL changes; WriteUpdatedDBs says
	// whether the variable is written at all (MySQL 9 writes it on BEGIN
	// with UpdatedDBsOverMax).
	UpdatedDBs        []string
	WriteUpdatedDBs   bool
	UpdatedDBsOverMax bool
	Microseconds      *uint32
	// DDLXid is the xid of an atomic DDL (MySQL 8.0+ writes one on each).
	DDLXid                     *uint64
	DefaultCollationForUTF8MB4 uint16 // 0 = not written; 255 in MySQL 8
	SQLRequirePrimaryKey       *uint8
	DefaultTableEncryption     *uint8
}

// BeginStatus is the status of the BEGIN of a row transaction as MySQL
// 8.0 writes it; collation is the session's (255 = utf8mb4_0900_ai_ci).
func BeginStatus(collation uint16) QueryStatus {
	return QueryStatus{
		SQLMode:                    DefaultSQLMode,
		Catalog:                    "std",
		CharsetClient:              collation,
		CollationConnection:        collation,
		CollationServer:            CollationUTF8MB4_0900AICI,
		DefaultCollationForUTF8MB4: CollationUTF8MB4_0900AICI,
	}
}

// DDLStatus is the status of a DDL statement on schema as MySQL 8.0
// writes it: the BEGIN variables plus the updated database, the DDL's xid,
// and sql_require_primary_key for CREATE/ALTER TABLE or
// default_table_encryption for CREATE/ALTER DATABASE.
func DDLStatus(collation uint16, schema string, xid uint64, isDatabaseDDL bool) QueryStatus {
	s := BeginStatus(collation)
	s.WriteUpdatedDBs = true
	if schema != "" {
		s.UpdatedDBs = []string{schema}
	}
	s.DDLXid = &xid
	zero := uint8(0)
	if isDatabaseDDL {
		s.DefaultTableEncryption = &zero
	} else {
		s.SQLRequirePrimaryKey = &zero
	}
	return s
}

func (s QueryStatus) encode() ([]byte, error) {
	b := []byte{qFlags2Code}
	b = binary.LittleEndian.AppendUint32(b, s.Flags2)
	b = append(b, qSQLModeCode)
	b = binary.LittleEndian.AppendUint64(b, s.SQLMode)
	if s.Catalog != "" {
		b = append(b, qCatalogNZCode, byte(len(s.Catalog)))
		b = append(b, s.Catalog...)
	}
	if s.AutoIncrementIncrement > 1 || s.AutoIncrementOffset > 1 {
		b = append(b, qAutoIncrement)
		b = binary.LittleEndian.AppendUint16(b, s.AutoIncrementIncrement)
		b = binary.LittleEndian.AppendUint16(b, s.AutoIncrementOffset)
	}
	b = append(b, qCharsetCode)
	b = binary.LittleEndian.AppendUint16(b, s.CharsetClient)
	b = binary.LittleEndian.AppendUint16(b, s.CollationConnection)
	b = binary.LittleEndian.AppendUint16(b, s.CollationServer)
	if s.TimeZone != "" {
		if len(s.TimeZone) > 255 {
			return nil, fmt.Errorf("mysqlbinlog: time zone name %q is longer than 255 bytes", s.TimeZone)
		}
		b = append(b, qTimeZoneCode, byte(len(s.TimeZone)))
		b = append(b, s.TimeZone...)
	}
	if s.LCTimeNames != 0 {
		b = binary.LittleEndian.AppendUint16(append(b, qLCTimeNamesCode), s.LCTimeNames)
	}
	if s.CollationDatabase != 0 {
		b = binary.LittleEndian.AppendUint16(append(b, qCharsetDatabaseCode), s.CollationDatabase)
	}
	if s.TableMapForUpdate != 0 {
		b = binary.LittleEndian.AppendUint64(append(b, qTableMapForUpdateCode), s.TableMapForUpdate)
	}
	if s.InvokerUser != "" {
		b = append(b, qInvoker, byte(len(s.InvokerUser)))
		b = append(b, s.InvokerUser...)
		b = append(b, byte(len(s.InvokerHost)))
		b = append(b, s.InvokerHost...)
	}
	if s.WriteUpdatedDBs {
		b = append(b, qUpdatedDBNames)
		if s.UpdatedDBsOverMax {
			b = append(b, updatedDBsOverMaxMarker)
		} else {
			b = append(b, byte(len(s.UpdatedDBs)))
			for _, db := range s.UpdatedDBs {
				b = append(append(b, db...), 0)
			}
		}
	}
	if s.Microseconds != nil {
		us := *s.Microseconds
		b = append(b, qMicroseconds, byte(us), byte(us>>8), byte(us>>16))
	}
	if s.DDLXid != nil {
		b = binary.LittleEndian.AppendUint64(append(b, qDDLLoggedWithXID), *s.DDLXid)
	}
	if s.DefaultCollationForUTF8MB4 != 0 {
		b = binary.LittleEndian.AppendUint16(append(b, qDefaultCollationForUTF8MB4), s.DefaultCollationForUTF8MB4)
	}
	if s.SQLRequirePrimaryKey != nil {
		b = append(b, qSQLRequirePrimaryKey, *s.SQLRequirePrimaryKey)
	}
	if s.DefaultTableEncryption != nil {
		b = append(b, qDefaultTableEncryption, *s.DefaultTableEncryption)
	}
	return b, nil
}

// Body returns the event body.
func (q Query) Body() ([]byte, error) {
	if len(q.Schema) > 255 {
		return nil, fmt.Errorf("mysqlbinlog: schema name %q is longer than 255 bytes", q.Schema)
	}
	status, err := q.Status.encode()
	if err != nil {
		return nil, err
	}
	b := binary.LittleEndian.AppendUint32(nil, q.ThreadID)
	b = binary.LittleEndian.AppendUint32(b, q.ExecTime)
	b = append(b, byte(len(q.Schema)))
	b = binary.LittleEndian.AppendUint16(b, q.ErrorCode)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(status)))
	b = append(b, status...)
	b = append(b, q.Schema...)
	b = append(b, 0)
	return append(b, q.SQL...), nil
}

// HeaderFlags returns the event header flags MySQL sets on this query.
func (q Query) HeaderFlags() uint16 {
	if q.SuppressedUse {
		return FlagSuppressUse
	}
	return 0
}
