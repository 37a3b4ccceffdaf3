package binlog

import "encoding/binary"

// Query events carry the session's state as status variables: a code
// byte and a value whose length the code fixes. The one braid reads is
// the session's sql_mode, under which the statement's text alone means
// what it meant (see change.DDL.SQLMode). Servers write the variables in
// code order, sql_mode second, so the walk stops at the first code it
// does not know.

// The status variable codes (MySQL's log_event.h, MariaDB's log_event.h).
const (
	qFlags2       = 0
	qSQLMode      = 1
	qCatalog      = 2
	qAutoIncr     = 3
	qCharset      = 4
	qTimeZone     = 5
	qCatalogNZ    = 6
	qLCTimeNames  = 7
	qCharsetDB    = 8
	qTableMapUpd  = 9
	qMasterDataWr = 10
	qInvoker      = 11
	qUpdatedDBs   = 12
	qMicroseconds = 13
)

// statusSQLMode returns the sql_mode in a query event's status
// variables; ok is false when they hold none (a server older than 5.0, or
// a code before it braid does not know).
func statusSQLMode(vars []byte) (mode uint64, ok bool) {
	for len(vars) > 0 {
		code, v := vars[0], vars[1:]
		n := -1 // the value's length
		lenByte := func(extra int) int {
			if len(v) < 1 {
				return -1
			}
			return 1 + int(v[0]) + extra
		}
		switch code {
		case qSQLMode:
			if len(v) < 8 {
				return 0, false
			}
			return binary.LittleEndian.Uint64(v), true
		case qFlags2, qAutoIncr, qMasterDataWr:
			n = 4
		case qCharset:
			n = 6
		case qLCTimeNames, qCharsetDB:
			n = 2
		case qTableMapUpd:
			n = 8
		case qMicroseconds:
			n = 3
		case qCatalog:
			n = lenByte(1) // and a NUL
		case qTimeZone, qCatalogNZ:
			n = lenByte(0)
		case qInvoker:
			if n = lenByte(0); n >= 0 && n < len(v) {
				n += 1 + int(v[n])
			} else {
				n = -1
			}
		case qUpdatedDBs:
			if len(v) < 1 {
				return 0, false
			}
			n = 1
			if count := int(v[0]); count != 254 { // 254: too many to list
				for range count {
					for n < len(v) && v[n] != 0 {
						n++
					}
					n++
				}
			}
		}
		if n < 0 || n > len(v) {
			return 0, false
		}
		vars = v[n:]
	}
	return 0, false
}
