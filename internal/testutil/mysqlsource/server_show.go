package mysqlsource

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// show runs the SHOW statements braid, go-mysql and MySQL's own tools
// send, each as the personality's version answers it.
func (c *session) show(stmt string) ([]string, [][]any, error) {
	t := tokens(stmt)[1:]
	s := c.s
	p := s.p
	words := func(ws ...string) bool {
		if len(t) < len(ws) {
			return false
		}
		for i, w := range ws {
			if !t[i].is(w) {
				return false
			}
		}
		return true
	}
	rest := func(from int) string { // the statement from token from on, as MySQL quotes it in a parse error
		var parts []string
		for _, tok := range t[from:] {
			parts = append(parts, tok.text)
		}
		return strings.Join(parts, " ")
	}
	switch {
	case words("MASTER", "STATUS") && len(t) == 2:
		if !p.hasShowMasterStatus() {
			return nil, nil, parseError(rest(0))
		}
		return c.binlogStatus()
	case words("BINARY", "LOG", "STATUS") && len(t) == 3:
		if !p.hasShowBinaryLogStatus() {
			return nil, nil, parseError(rest(1))
		}
		return c.binlogStatus()
	case (words("BINARY", "LOGS") || words("MASTER", "LOGS")) && len(t) == 2:
		if !s.hasPrivilege(c.conn.GetUser(), "REPLICATION CLIENT") && !s.hasPrivilege(c.conn.GetUser(), "SUPER") {
			return nil, nil, denied("SUPER, REPLICATION CLIENT")
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		var rows [][]any
		for _, f := range s.files {
			rows = append(rows, []any{f.name, int64(len(f.data)), "No"})
		}
		return []string{"Log_name", "File_size", "Encrypted"}, rows, nil
	case words("BINLOG", "EVENTS"):
		return c.binlogEvents(t[2:])
	case words("STATUS"), words("GLOBAL", "STATUS"), words("SESSION", "STATUS"), words("LOCAL", "STATUS"):
		// The server keeps no status counters: every pattern matches
		// none, as MySQL answers braid's binlog_snapshot_% (MariaDB's
		// and Percona's snapshot position, which MySQL lacks).
		i := 1
		if !t[0].is("STATUS") {
			i = 2
		}
		if len(t) != i && (len(t) != i+2 || !t[i].is("LIKE") || t[i+1].kind != tokString) {
			return nil, nil, errUnsupported
		}
		return []string{"Variable_name", "Value"}, nil, nil
	case words("VARIABLES"), words("GLOBAL", "VARIABLES"), words("SESSION", "VARIABLES"), words("LOCAL", "VARIABLES"):
		global := t[0].is("GLOBAL")
		i := 1
		if !t[0].is("VARIABLES") {
			i = 2
		}
		pattern := "%"
		var where func(name, value string) (bool, error)
		switch {
		case len(t) == i:
		case len(t) == i+2 && t[i].is("LIKE") && t[i+1].kind == tokString:
			pattern = t[i+1].text
		case len(t) > i+1 && t[i].is("WHERE"):
			var err error
			if where, err = c.showWhere(stmt); err != nil {
				return nil, nil, err
			}
		default:
			return nil, nil, errUnsupported
		}
		s.mu.Lock()
		names := make([]string, 0, len(s.vars))
		for name, def := range s.vars {
			if like(name, pattern, 0) && (!global || def.scope&scopeGlobal != 0) {
				names = append(names, name)
			}
		}
		s.mu.Unlock()
		slices.Sort(names)
		var rows [][]any
		for _, name := range names {
			v, err := c.sysvar(name, global, false)
			if err != nil {
				continue
			}
			s.mu.Lock()
			kind := s.vars[name].kind
			s.mu.Unlock()
			if kind == kindBool {
				v = map[bool]string{true: "ON", false: "OFF"}[truthy(v)]
			}
			if where != nil {
				ok, err := where(name, text(v))
				if err != nil {
					return nil, nil, err
				}
				if !ok {
					continue
				}
			}
			rows = append(rows, []any{name, text(v)})
		}
		return []string{"Variable_name", "Value"}, rows, nil
	case words("CREATE", "TABLE"):
		db, name, err := c.tableName(t[2:])
		if err != nil {
			return nil, nil, err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		sc, tbl, ok := s.tableLocked(db, name)
		if !ok {
			return nil, nil, mysql.NewDefaultError(mysql.ER_NO_SUCH_TABLE, db, name)
		}
		return []string{"Table", "Create Table"}, [][]any{{tbl.Name, tbl.CreateText(*sc)}}, nil
	case words("DATABASES") && len(t) == 1, words("SCHEMAS") && len(t) == 1:
		s.mu.Lock()
		defer s.mu.Unlock()
		_, rows, _ := s.infoSchemaLocked("SCHEMATA")
		var out [][]any
		for _, r := range rows {
			out = append(out, []any{r[1]})
		}
		slices.SortFunc(out, func(a, b []any) int { return strings.Compare(text(a[0]), text(b[0])) })
		return []string{"Database"}, out, nil
	case words("TABLES"):
		db := c.db
		if len(t) == 3 && t[1].is("FROM", "IN") {
			db = t[2].text
		} else if len(t) != 1 {
			return nil, nil, errUnsupported
		}
		if db == "" {
			return nil, nil, mysql.NewDefaultError(mysql.ER_NO_DB_ERROR)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		sc, ok := s.schemaLocked(db)
		if !ok {
			return nil, nil, mysql.NewDefaultError(mysql.ER_BAD_DB_ERROR, db)
		}
		var rows [][]any
		for _, tbl := range sc.Tables {
			rows = append(rows, []any{tbl.Name})
		}
		return []string{"Tables_in_" + db}, rows, nil
	case words("REPLICAS") && len(t) == 1 && p.atLeast(8, 0, 22):
		var rows [][]any
		for _, r := range s.Replicas() {
			rows = append(rows, []any{int64(r.ServerID), r.Host, int64(r.Port), int64(s.cfg.ServerID), r.UUID})
		}
		return []string{"Server_Id", "Host", "Port", "Source_Id", "Replica_UUID"}, rows, nil
	case words("SLAVE", "HOSTS") && len(t) == 2:
		if !p.hasShowSlaveHosts() {
			return nil, nil, parseError(rest(0))
		}
		var rows [][]any
		for _, r := range s.Replicas() {
			rows = append(rows, []any{int64(r.ServerID), r.Host, int64(r.Port), int64(s.cfg.ServerID), r.UUID})
		}
		return []string{"Server_id", "Host", "Port", "Master_id", "Slave_UUID"}, rows, nil
	case words("BINLOG", "STATUS") && len(t) == 2:
		// MariaDB's (10.5.2+) name for the binlog status: a parse
		// error on every MySQL.
		return nil, nil, parseError(rest(1))
	case words("SLAVE", "STATUS") && len(t) == 2 && !p.hasShowSlaveHosts():
		return nil, nil, parseError(rest(0))
	case words("GRANTS") && (len(t) == 1 || len(t) >= 3 && t[1].is("FOR") && t[2].is("CURRENT_USER")):
		user := c.conn.GetUser()
		s.auth.mu.Lock()
		u := s.auth.users[user]
		s.auth.mu.Unlock()
		var rows [][]any
		for _, g := range u.showGrants() {
			rows = append(rows, []any{g})
		}
		return []string{"Grants for " + user + "@%"}, rows, nil
	case words("COLUMNS"), words("FULL", "COLUMNS"), words("FIELDS"), words("FULL", "FIELDS"):
		full := t[0].is("FULL")
		i := 1
		if full {
			i = 2
		}
		return c.showColumns(t[i:], full)
	case words("INDEX"), words("INDEXES"), words("KEYS"):
		return c.showIndex(t[1:])
	case words("WARNINGS") && len(t) == 1:
		return []string{"Level", "Code", "Message"}, nil, nil
	}
	return nil, nil, errUnsupported
}

// showTable reads what follows SHOW COLUMNS or SHOW INDEX: FROM|IN
// [db.]table [FROM|IN db], and finds the table.
func (c *session) showTable(t []token) (*Schema, *Table, error) {
	if len(t) < 2 || !t[0].is("FROM", "IN") {
		return nil, nil, errUnsupported
	}
	t = t[1:]
	var from string
	if n := len(t); n >= 3 && t[n-2].is("FROM", "IN") {
		from, t = t[n-1].text, t[:n-2]
	}
	db, name, err := c.tableName(t)
	if from != "" && len(t) == 1 {
		db, name, err = from, t[0].text, nil
	}
	if err != nil {
		return nil, nil, err
	}
	sc, tbl, ok := c.s.tableLocked(db, name)
	if !ok {
		return nil, nil, mysql.NewDefaultError(mysql.ER_NO_SUCH_TABLE, db, name)
	}
	return sc, tbl, nil
}

// showColumns is SHOW [FULL] COLUMNS FROM table, as MySQL 8 answers it
// (go-mysql's schema package reads a table's columns with it).
func (c *session) showColumns(t []token, full bool) ([]string, [][]any, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	sc, tbl, err := c.showTable(t)
	if err != nil {
		return nil, nil, err
	}
	cols := []string{"Field", "Type", "Null", "Key", "Default", "Extra"}
	if full {
		cols = []string{"Field", "Type", "Collation", "Null", "Key", "Default", "Extra", "Privileges", "Comment"}
	}
	var rows [][]any
	for _, col := range tbl.Columns {
		null := "NO"
		if col.Nullable {
			null = "YES"
		}
		var def, coll any
		if col.Default != nil {
			def = *col.Default
		}
		if _, co := col.charsetIn(*tbl, *sc); co != "" {
			coll = co
		}
		key := columnKey(*tbl, col.Name)
		if full {
			rows = append(rows, []any{col.Name, col.Type, coll, null, key, def, col.Extra, "select,insert,update,references", col.Comment})
		} else {
			rows = append(rows, []any{col.Name, col.Type, null, key, def, col.Extra})
		}
	}
	return cols, rows, nil
}

// showIndex is SHOW INDEX FROM table, as MySQL 8 answers it (with its
// Visible and Expression columns; go-mysql's schema package reads a
// table's keys with it).
func (c *session) showIndex(t []token) ([]string, [][]any, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	_, tbl, err := c.showTable(t)
	if err != nil {
		return nil, nil, err
	}
	cols := []string{"Table", "Non_unique", "Key_name", "Seq_in_index", "Column_name", "Collation", "Cardinality",
		"Sub_part", "Packed", "Null", "Index_type", "Comment", "Index_comment", "Visible", "Expression"}
	var rows [][]any
	for _, r := range indexRows(tbl) {
		rows = append(rows, []any{tbl.Name, r.nonUnique, r.index, r.seq, r.column, "A", int64(0),
			r.subPart, nil, r.nullable, "BTREE", "", "", r.visible, nil})
	}
	return cols, rows, nil
}

// showWhere compiles the WHERE of SHOW VARIABLES: a condition on
// Variable_name and Value.
func (c *session) showWhere(stmt string) (func(name, value string) (bool, error), error) {
	at := -1
	for _, sep := range []string{" WHERE ", "\tWHERE ", "\nWHERE "} {
		if i := strings.Index(strings.ToUpper(stmt), sep); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	if at < 0 {
		return nil, errUnsupported
	}
	n, err := c.parse("SELECT 1 FROM t WHERE " + stmt[at+len(" WHERE "):])
	if err != nil {
		return nil, err
	}
	sel, ok := n.(*ast.SelectStmt)
	if !ok || sel.Where == nil {
		return nil, errUnsupported
	}
	rel := relation{qual: []string{"", ""}, cols: []string{"Variable_name", "Value"}}
	if err := rel.check(sel.Where, "where clause"); err != nil {
		return nil, err
	}
	return func(name, value string) (bool, error) {
		v, err := c.eval(sel.Where, &rel, []any{name, value}, "where clause")
		return truthy(v), err
	}, nil
}

// binlogStatus is SHOW MASTER STATUS / SHOW BINARY LOG STATUS.
func (c *session) binlogStatus() ([]string, [][]any, error) {
	s := c.s
	if !s.hasPrivilege(c.conn.GetUser(), "REPLICATION CLIENT") && !s.hasPrivilege(c.conn.GetUser(), "SUPER") {
		return nil, nil, denied("SUPER, REPLICATION CLIENT")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cols := []string{"File", "Position", "Binlog_Do_DB", "Binlog_Ignore_DB", "Executed_Gtid_Set"}
	if s.globals["log_bin"] != "ON" || len(s.files) == 0 {
		return cols, nil, nil
	}
	file, pos := s.endLocked()
	return cols, [][]any{{file, int64(pos), "", "", s.gtidExecutedLocked().format(",\n")}}, nil
}

// tableName reads [db.]table from tokens, the session's database by
// default.
func (c *session) tableName(t []token) (db, name string, err error) {
	switch {
	case len(t) == 1 && t[0].kind != tokPunct:
		db, name = c.db, t[0].text
	case len(t) == 3 && t[1].text == "." && t[0].kind != tokPunct && t[2].kind != tokPunct:
		db, name = t[0].text, t[2].text
	default:
		return "", "", errUnsupported
	}
	if db == "" {
		return "", "", mysql.NewDefaultError(mysql.ER_NO_DB_ERROR)
	}
	return db, name, nil
}

// binlogEvents is SHOW BINLOG EVENTS [IN 'file'] [FROM pos] [LIMIT
// [offset,] count]: one row per event, the Info of the events braid reads
// (Query's "use `db`; statement") as MySQL writes it.
func (c *session) binlogEvents(t []token) ([]string, [][]any, error) {
	cols := []string{"Log_name", "Pos", "Event_type", "Server_id", "End_log_pos", "Info"}
	var file string
	from := uint64(4)
	offset, count := int64(0), int64(-1)
	for len(t) > 0 {
		switch {
		case t[0].is("IN") && len(t) > 1 && t[1].kind == tokString:
			file, t = t[1].text, t[2:]
		case t[0].is("FROM") && len(t) > 1:
			n, err := strconv.ParseUint(t[1].text, 10, 64)
			if err != nil {
				return nil, nil, parseError(t[1].text)
			}
			from, t = n, t[2:]
		case t[0].is("LIMIT") && len(t) > 1:
			n, err := strconv.ParseInt(t[1].text, 10, 64)
			if err != nil {
				return nil, nil, parseError(t[1].text)
			}
			count, t = n, t[2:]
			if len(t) > 1 && t[0].text == "," {
				m, err := strconv.ParseInt(t[1].text, 10, 64)
				if err != nil {
					return nil, nil, parseError(t[1].text)
				}
				offset, count, t = n, m, t[2:]
			}
		default:
			return nil, nil, errUnsupported
		}
	}
	s := c.s
	s.mu.Lock()
	var f *binlogFile
	if file == "" && len(s.files) > 0 {
		f = s.files[0]
	}
	for _, x := range s.files {
		if x.name == file {
			f = x
		}
	}
	var data []byte
	var checksum bool
	if f != nil {
		data, checksum, file = f.data[:f.scanned], f.checksum, f.name
	}
	s.mu.Unlock()
	if f == nil {
		return nil, nil, mysql.NewError(mysql.ER_ERROR_WHEN_EXECUTING_COMMAND, "Error when executing command SHOW BINLOG EVENTS: Could not find target log")
	}
	var rows [][]any
	at := len(binlogMagic)
	for n := int64(0); at < len(data); {
		ev := eventAt(data, at)
		if ev == nil {
			break
		}
		pos := at
		at += len(ev)
		typ := replication.EventType(ev[offType])
		if uint64(pos) < from {
			if uint64(at) > from {
				return nil, nil, mysql.NewError(mysql.ER_ERROR_WHEN_EXECUTING_COMMAND, "Error when executing command SHOW BINLOG EVENTS: Wrong offset or I/O error")
			}
			continue
		}
		if n++; n <= offset {
			continue
		}
		if count >= 0 && int64(len(rows)) >= count {
			break
		}
		body := ev[headerLen:]
		if checksum && typ != replication.FORMAT_DESCRIPTION_EVENT {
			body = body[:len(body)-checksumLen]
		}
		flags := binary.LittleEndian.Uint16(ev[offFlags:])
		rows = append(rows, []any{file, uint64(pos), eventTypeName(typ), uint64(binary.LittleEndian.Uint32(ev[offServerID:])),
			uint64(binary.LittleEndian.Uint32(ev[offLogPos:])), eventInfo(typ, flags, body, c.s.p)})
	}
	if from > uint64(at) {
		return nil, nil, mysql.NewError(mysql.ER_ERROR_WHEN_EXECUTING_COMMAND, "Error when executing command SHOW BINLOG EVENTS: Wrong offset or I/O error")
	}
	return cols, rows, nil
}

// eventTypeName is MySQL's name of an event type in SHOW BINLOG EVENTS.
func eventTypeName(t replication.EventType) string {
	switch t {
	case replication.FORMAT_DESCRIPTION_EVENT:
		return "Format_desc"
	case replication.PREVIOUS_GTIDS_EVENT:
		return "Previous_gtids"
	case replication.GTID_EVENT:
		return "Gtid"
	case replication.GTID_TAGGED_LOG_EVENT:
		return "Gtid_tagged_log"
	case replication.ANONYMOUS_GTID_EVENT:
		return "Anonymous_Gtid"
	case replication.QUERY_EVENT:
		return "Query"
	case replication.TABLE_MAP_EVENT:
		return "Table_map"
	case replication.WRITE_ROWS_EVENTv2:
		return "Write_rows"
	case replication.UPDATE_ROWS_EVENTv2:
		return "Update_rows"
	case replication.DELETE_ROWS_EVENTv2:
		return "Delete_rows"
	case replication.PARTIAL_UPDATE_ROWS_EVENT:
		return "Update_rows_partial"
	case replication.XID_EVENT:
		return "Xid"
	case replication.ROTATE_EVENT:
		return "Rotate"
	case replication.STOP_EVENT:
		return "Stop"
	case replication.TRANSACTION_PAYLOAD_EVENT:
		return "Transaction_payload"
	case replication.ROWS_QUERY_EVENT:
		return "Rows_query"
	case replication.INTVAR_EVENT:
		return "Intvar"
	case replication.USER_VAR_EVENT:
		return "User var"
	case replication.RAND_EVENT:
		return "RAND"
	case replication.INCIDENT_EVENT:
		return "Incident"
	case replication.TRANSACTION_CONTEXT_EVENT:
		return "Transaction_context"
	case replication.VIEW_CHANGE_EVENT:
		return "View_change"
	case replication.XA_PREPARE_LOG_EVENT:
		return "XA_prepare"
	}
	return "Unknown"
}

// eventInfo is SHOW BINLOG EVENTS' Info of an event (body without header
// and checksum).
func eventInfo(typ replication.EventType, flags uint16, body []byte, p personality) string {
	switch typ {
	case replication.FORMAT_DESCRIPTION_EVENT:
		return fmt.Sprintf("Server ver: %s, Binlog ver: 4", p.version)
	case replication.PREVIOUS_GTIDS_EVENT:
		if set, err := decodeGTIDSet(body); err == nil {
			return set.format(",\n")
		}
	case replication.GTID_EVENT, replication.GTID_TAGGED_LOG_EVENT:
		if id, gno, err := eventGTID(typ, body); err == nil {
			tag := ""
			if id.tag != "" {
				tag = ":" + id.tag
			}
			return fmt.Sprintf("SET @@SESSION.GTID_NEXT= '%s%s:%d'", id.sid, tag, gno)
		}
	case replication.ANONYMOUS_GTID_EVENT:
		return "SET @@SESSION.GTID_NEXT= 'ANONYMOUS'"
	case replication.QUERY_EVENT:
		q := &replication.QueryEvent{}
		if err := q.Decode(body); err == nil {
			info := string(q.Query)
			// BEGIN is flagged LOG_EVENT_SUPPRESS_USE_F: no "use".
			if len(q.Schema) > 0 && flags&suppressUse == 0 {
				info = "use " + quoteIdent(string(q.Schema)) + "; " + info
			}
			if xid, ok := ddlXID(q.StatusVars); ok {
				info += fmt.Sprintf(" /* xid=%d */", xid)
			}
			return info
		}
	case replication.XID_EVENT:
		if len(body) >= 8 {
			return fmt.Sprintf("COMMIT /* xid=%d */", binary.LittleEndian.Uint64(body))
		}
	case replication.ROTATE_EVENT:
		if len(body) >= 8 {
			return fmt.Sprintf("%s;pos=%d", body[8:], binary.LittleEndian.Uint64(body))
		}
	case replication.TABLE_MAP_EVENT, replication.WRITE_ROWS_EVENTv2, replication.UPDATE_ROWS_EVENTv2,
		replication.DELETE_ROWS_EVENTv2, replication.PARTIAL_UPDATE_ROWS_EVENT:
		if len(body) < 8 {
			break
		}
		id := uint64(body[0]) | uint64(body[1])<<8 | uint64(body[2])<<16 | uint64(body[3])<<24 | uint64(body[4])<<32 | uint64(body[5])<<40
		flags := binary.LittleEndian.Uint16(body[6:])
		if typ == replication.TABLE_MAP_EVENT {
			b := body[8:]
			if len(b) < 1 || len(b) < 2+int(b[0]) {
				break
			}
			db := string(b[1 : 1+b[0]])
			b = b[2+b[0]:]
			if len(b) < 1 || len(b) < 1+int(b[0]) {
				break
			}
			return fmt.Sprintf("table_id: %d (%s.%s)", id, db, b[1:1+b[0]])
		}
		if flags&1 != 0 {
			return fmt.Sprintf("table_id: %d flags: STMT_END_F", id)
		}
		return fmt.Sprintf("table_id: %d", id)
	case replication.TRANSACTION_PAYLOAD_EVENT:
		return payloadInfo(body)
	}
	return ""
}

// suppressUse is LOG_EVENT_SUPPRESS_USE_F: the event's Info names no
// database.
const suppressUse = 0x8

// ddlXID finds Q_DDL_LOGGED_WITH_XID in a Query event's status
// variables: MySQL 8 logs an atomic DDL with the xid its Info shows.
func ddlXID(vars []byte) (uint64, bool) {
	for len(vars) > 0 {
		code, v := vars[0], vars[1:]
		var n int
		switch code {
		case 0, 3: // flags2; auto_increment (two uint16)
			n = 4
		case 1, 14: // sql_mode; commit_ts
			n = 8
		case 4: // charset
			n = 6
		case 7, 8, 18: // lc_time_names, charset_database, default_collation_for_utf8mb4
			n = 2
		case 9, 17: // table_map_for_update; ddl_logged_with_xid
			if code == 17 && len(v) >= 8 {
				return binary.LittleEndian.Uint64(v), true
			}
			n = 8
		case 10: // master_data_written
			n = 4
		case 13: // microseconds
			n = 3
		case 16, 19, 20: // explicit_defaults_for_timestamp, sql_require_primary_key, default_table_encryption
			n = 1
		case 2: // catalog, NUL-terminated
			if len(v) < 1 {
				return 0, false
			}
			n = 1 + int(v[0]) + 1
		case 5, 6: // time_zone, catalog_nz
			if len(v) < 1 {
				return 0, false
			}
			n = 1 + int(v[0])
		case 11: // invoker: user, host
			if len(v) < 1 || len(v) < 2+int(v[0]) {
				return 0, false
			}
			n = 1 + int(v[0]) + 1 + int(v[1+int(v[0])])
		case 12: // updated_db_names
			if len(v) < 1 {
				return 0, false
			}
			n = 1
			if count := int(v[0]); count != 254 {
				for range count {
					end := bytes.IndexByte(v[n:], 0)
					if end < 0 {
						return 0, false
					}
					n += end + 1
				}
			}
		default:
			return 0, false // a code this walk does not know: its length neither
		}
		if len(v) < n {
			return 0, false
		}
		vars = v[n:]
	}
	return 0, false
}

// payloadInfo is a TRANSACTION_PAYLOAD's Info: its compression and
// uncompressed size, from the header fields (type, length, value, each
// a packed integer) before the payload.
func payloadInfo(body []byte) string {
	compression, size := uint64(0), uint64(0)
	for len(body) > 0 {
		typ, _, n := mysql.LengthEncodedInt(body)
		body = body[n:]
		if typ == 0 || len(body) == 0 {
			break
		}
		l, _, n := mysql.LengthEncodedInt(body)
		body = body[n:]
		if uint64(len(body)) < l {
			break
		}
		v, _, _ := mysql.LengthEncodedInt(body[:l])
		switch typ {
		case 2:
			compression = v
		case 3:
			size = v
		}
		body = body[l:]
	}
	name := "ZSTD"
	if compression != 0 {
		name = "NONE"
	}
	return fmt.Sprintf("compression='%s', decompressed_size=%d bytes", name, size)
}
